"""One page for a run: ``python -m analysis.report RUN [RUN_B] [--out FILE]``.

A single HTML file that stands alone (figures as base64 PNG, CSS and script inline, nothing
fetched: its Content-Security-Policy forbids it) for a run, a sweep or a folder of runs (a
reference dataset): the rows' summary (ok, failed, skipped, unreliable) and the reasons grouped,
the paper's roofline and throughput figures of these rows (analysis.figures), a sortable and
filterable table of every row (variant, precision, m x n x k, layout, status, TFLOP/s, % of
baseline, error / bound, noise, reliable, and why a row failed, was skipped or does not count),
each run's Hydra overrides and the configuration it saved; given RUN_B, the verdicts of
``analysis.compare RUN RUN_B`` (B against A = RUN) and both runs' rows and figures.

Written to RUN/report.html (``--out`` elsewhere; never under outputs/reference/). ``python
run.py`` writes it at the end of every run and sweep (``run.report=false``: not).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Tuple

from .. import data

REPORT_FILE = "report.html"
MAX_REASONS = 16  # reasons listed above the table (grouped, most rows first)


def default_path(run: os.PathLike) -> Path:
    run = Path(run)
    return (run if run.is_dir() else run.parent) / REPORT_FILE


def _shown(path: Path) -> str:
    """A path as the page names it: relative to the working folder where it lies below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(path)


def _names(given: List[Path]) -> List[str]:
    """The folders' names, with as many parent folders as it takes to tell them apart."""
    paths = [p.resolve() for p in given]
    for depth in range(1, 4):
        names = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(names)) == len(names):
            break
    return names


def build(run: os.PathLike, run_b: Optional[os.PathLike] = None) -> str:
    """The page's HTML for ``run`` (and ``run_b``, compared against it)."""
    from . import markup, provenance, rows_table, sections
    from .markup import Raw, el

    given = [Path(run)] + ([Path(run_b)] if run_b is not None else [])
    two = len(given) == 2
    sides: List[Tuple[str, Path, data.Dataset, list]] = []
    for i, path in enumerate(given):
        label = ("A: ", "B: ")[i] if two else ""
        sides.append((label, path, data.Dataset.from_paths([path]), provenance.run_folders(path)))

    title = "gemmlab report: " + " vs ".join(_names(given))
    head = [el("h1", title)]
    for label, path, ds, folders in sides:
        head += [el("p", el("b", label) if label else None, el("code", _shown(path)), class_="where"),
                 el("p", rows_table.summary_line(ds.rows), class_="summary"),
                 sections.provenance_list(ds.rows, folders)]
    nav = [("figures", "Figures"), ("rows", "Rows"), ("configuration", "Configuration")]
    body = []
    if two:
        nav.insert(0, ("comparison", "Comparison"))
        try:
            compared = sections.comparison(given[0], given[1])
        except Exception as e:  # noqa: BLE001 - e.g. no shared point: say so, keep the rest
            compared = el("p", f"no comparison: {type(e).__name__}: {e}", class_="note")
        body.append(el("section", el("h2", "Comparison: B against A"), compared, id="comparison"))
    body.append(el("section", el("h2", "Figures"),
                   *[markup.join([el("h3", label.rstrip(": ")) if two else None, sections.figures(label, ds)])
                     for label, _, ds, _ in sides], id="figures"))
    groups = [(label, g) for label, _, ds, _ in sides for g in rows_table.reason_groups(ds.rows)]
    why = el("ul", *[el("li", el("span", status, class_=f"st-{status.replace(' ', '-')}"), f" {n}: {label}{gist}")
                     for label, (status, gist, n) in groups[:MAX_REASONS]],
             el("li", f"and {len(groups) - MAX_REASONS} more reasons: filter the table", class_="note")
             if len(groups) > MAX_REASONS else None, class_="reasons") if groups else None
    controls = el("div", Raw('<input type="search" placeholder="filter rows (any text)" aria-label="filter rows" '
                             'data-filter="rows-table">'),
                  *[Raw(el("label", Raw(f'<input type="checkbox" checked data-status="{s}">'), f" {s}"))
                    for s in ("ok", "failed", "skipped")],
                  el("span", "", class_="shown", data_count="rows-table"), class_="controls")
    table = rows_table.rows_table([(label.rstrip(": "), ds.rows, provenance.folder_of_run(folders))
                                   for label, _, ds, folders in sides])
    body.append(el("section", el("h2", "Rows"), why, controls, el("div", table, class_="table-wrap"), id="rows"))
    body.append(el("section", el("h2", "Configuration"),
                   *[sections.configuration(label, path, folders) for label, path, _, folders in sides],
                   id="configuration"))
    command = "python -m analysis.report " + " ".join(_shown(p) for p in given)
    page = markup.join([el("header", *head, el("nav", *[el("a", t, href=f"#{i}") for i, t in nav])),
                        el("main", *body), el("footer", f"written by {command}")])
    return markup.page(title, page)


def write(run: os.PathLike, run_b: Optional[os.PathLike] = None, out: Optional[os.PathLike] = None) -> Path:
    """Write the page (default RUN/report.html) and return its path. ValueError where it would go
    under outputs/reference/."""
    from .. import style

    path = Path(out) if out is not None else default_path(run)
    try:
        path.resolve().relative_to(data.REFERENCE)
    except ValueError:
        pass
    else:
        raise ValueError(f"{path} is inside outputs/reference/, the committed measurements; give --out elsewhere")
    path.parent.mkdir(parents=True, exist_ok=True)
    style.write_if_changed(path, build(run, run_b).encode("utf-8"))
    return path
