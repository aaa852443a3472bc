"""The page's sections other than the rows: what the rows say about where they came from, the
figures, the comparison of two runs, and the configuration each run saved."""
from __future__ import annotations

import io
from pathlib import Path
from typing import List, Sequence

import pandas as pd

from .. import data, style
from ..figures import FIGURES
from . import markup, provenance
from .markup import Raw, el

FIGURE_NAMES = ("roofline", "throughput_vs_size")  # the paper's builders, on this run's rows
PAGE_DPI = 200  # about 680 px per one-column figure: two side by side in 1280 px


def figure_png(fig) -> bytes:
    buf = io.BytesIO()
    with style.context():
        fig.savefig(buf, format="png", dpi=PAGE_DPI, metadata=style.PNG_METADATA)
    return buf.getvalue()


def _distinct(rows: pd.DataFrame, column: str) -> List[str]:
    if column not in rows.columns:
        return []
    return sorted({str(v) for v in rows[column].dropna() if str(v) not in ("", "nan", "<NA>")})


def _listing(values: List[str], most: int = 4) -> str:
    if len(values) <= most:
        return ", ".join(values) or "–"
    return ", ".join(values[:most]) + f" and {len(values) - most} more"


def provenance_list(rows: pd.DataFrame, folders: Sequence[provenance.RunFolder]) -> Raw:
    """Devices, hosts, commits, time span and runs, as the rows say."""
    stamps = _distinct(rows, "timestamp")
    commits = [c[:12] for c in _distinct(rows, "git_commit")]
    runs = _distinct(rows, "run_id")
    owners = [f for f in folders if f.run_ids]  # a sweep's merged copy owns none of its rows
    items = [("device", _listing(_distinct(rows, "device"))), ("host", _listing(_distinct(rows, "host"))),
             ("git commit", _listing(commits)),
             ("written", f"{stamps[0]} to {stamps[-1]}" if len(stamps) > 1 else (stamps or ["–"])[0]),
             ("runs", f"{len(runs)} run ids in {len(owners)} folders" if len(owners) > 1 else _listing(runs))]
    return el("dl", *[Raw(el("dt", k) + el("dd", v)) for k, v in items], class_="facts")


def figures(label: str, ds: data.Dataset) -> Raw:
    """The paper's roofline and throughput figures of ``ds`` (analysis.figures), each with the
    gaps it notes."""
    out = []
    for name in FIGURE_NAMES:
        try:
            fig = FIGURES[name](ds)
        except Exception as e:  # noqa: BLE001 - one figure that cannot be drawn says why, the page stays
            out.append(el("figure", el("p", f"{name}: could not be drawn from these rows "
                                             f"({type(e).__name__}: {e})", class_="note")))
            continue
        caption = f"{label}{name.replace('_', ' ')}"
        notes = style.notes_of(fig)
        alt = caption + (f": {'; '.join(notes)}" if notes else "")
        out.append(el("figure", markup.png_img(figure_png(fig), alt), el("figcaption", caption)))
    return el("div", *out, class_="figures")


def comparison(a_path: Path, b_path: Path) -> Raw:
    """B against A as analysis.compare judges it: the verdicts, the notes, the figure."""
    from ..compare import compare as run_compare
    from ..compare import report as compare_report
    from ..compare import stats
    from ..compare.core import COMPARED, NOT_EVIDENCE
    from ..compare.match import Side

    comp = run_compare(Side.load("A", a_path), Side.load("B", b_path))
    t = comp.table
    shown = t[t["status"].isin([COMPARED, NOT_EVIDENCE])]
    columns = [("point", "text", None), ("verdict", "text", None),
               ("time B / A", "num", compare_report.DIRECTION), ("95% interval", "text", None),
               ("threshold", "num", "a verdict needs the interval beyond ±threshold"),
               ("A s", "num", "A's median time"), ("B s", "num", "B's median time"), ("why", "text", None)]
    lines = []
    for _, r in shown.iterrows():
        why = "; ".join(x for x in (r["why"], r["clock_note"]) if x)
        ratio, thr = r["time_ratio"], r["threshold"]
        lines.append([
            (compare_report.point_name(r), None, None), (r["verdict"], None, f"v-{str(r['verdict']).lower()}"),
            (style.format_sig(ratio, 4) if pd.notna(ratio) else "", ratio if pd.notna(ratio) else None, "num"),
            (compare_report._interval(r), None, "num"),
            (compare_report._threshold(r), thr if pd.notna(thr) else None, "num"),
            (style.format_sig(r["time_a_s"], 4), r["time_a_s"] if pd.notna(r["time_a_s"]) else None, "num"),
            (style.format_sig(r["time_b_s"], 4), r["time_b_s"] if pd.notna(r["time_b_s"]) else None, "num"),
            (why, None, "reason")])
    meaning = el("ul", *[el("li", el("b", v), f": {m}") for v, m in compare_report.MEANING.items()], class_="notes")
    parts = [el("p", compare_report.summary(comp), class_="summary"),
             el("p", compare_report.direction(comp) + "; the interval is 95%."), meaning,
             el("ul", *[el("li", n) for n in comp.notes], class_="notes")]
    if len(shown):
        parts.append(markup.table(columns, lines, "compare-table"))
        parts.append(el("figure", markup.png_img(figure_png(compare_report.build_figure(comp)), "time B / A per point"),
                        el("figcaption", "time B / A per compared point, coloured by verdict"), class_="wide"))
    counts = comp.counts()
    parts.insert(0, el("p", *[el("span", f"{v} {counts.get(v, 0)}", class_=f"badge v-{v.lower()}")
                               for v in stats.VERDICTS]))
    return markup.join(parts)


def configuration(label: str, given: Path, folders: Sequence[provenance.RunFolder]) -> Raw:
    """Each run folder's overrides and the configuration the run or sweep saved."""
    parts = []
    with_overrides = [f for f in folders if f.overrides is not None]
    if with_overrides:
        items = [el("li", el("code", f.rel if f.rel != "." else given.name), ": ",
                    markup.join([el("code", o) for o in f.overrides], " ") if f.overrides else "(no overrides)",
                    id=f"{label.strip().lower()}{f.anchor}") for f in with_overrides]
        what = "each job's overrides" if len(with_overrides) > 1 else "overrides"
        parts += [el("h3", f"{label}{what}"), el("ul", *items, class_="overrides")]
    else:
        parts.append(el("p", f"{label}no .hydra/overrides.yaml under {given}", class_="note"))
    cfg = provenance.saved_config(given)
    if cfg is None:
        if len(folders) > 1:
            parts.append(el("p", "several runs: each run's configuration is in its own .hydra/config.yaml",
                            class_="note"))
        return markup.join(parts)
    parts.append(el("h3", f"{label}configuration as saved"))
    for name, value in cfg.items():
        parts.append(el("details", el("summary", el("b", name), " ", el("span", provenance.section_summary(name, value),
                                                                           class_="gist")),
                        el("pre", provenance.section_yaml({name: value})), open=name in ("sizes", "measure", "run")))
    return markup.join(parts)
