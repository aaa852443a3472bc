"""What each technique buys, as a table made from a define sweep's rows, so that the tables in the stage headers and the
README are the rows' and nothing typed by hand.

    python -m analysis.techniques SWEEP [--variant V]   # the table, Markdown
    python -m analysis.techniques --sync FILE ...        # rewrite the marked blocks of FILE from their rows
    python -m analysis.techniques --check FILE ...       # exit 1 where a marked block is not what its rows give

A line per configuration of the swept variant (its rows' ``defines``), in the order the sweep ran them: the first
(the sweep's first job: put the defaults first) as ``defaults``, each other by the defines it changes from the first;
a column per problem (N for an N x N x N cube, else m x n x k or the shape's name); each cell the point's
``pct_of_baseline`` (% of the faster library timed interleaved with it) to one decimal, ``*`` where the row is not
reliable (its noise or clock drift above the limits: the tables and claims leave it out), the median and a count where
a configuration measured a point more than once. A point that was not ``ok`` shows its status.

``--show pct,tflops,clock,power`` adds each point's TFLOP/s, SM clock range (MHz) and mean board power (W): under the
H200's 700 W limit a kernel that moves fewer bytes runs at a higher clock, and the % alone hides why.

A marked block in a text file is the lines between one holding ``BEGIN techniques PATH [variant=V] [show=...]`` (PATH
a sweep, run or reference folder, relative to the repository) and the next holding ``END techniques``. Whatever stands
before ``BEGIN`` on its line prefixes every line of the block: ``// `` in a kernel's header gives an aligned plain-text
table; a block whose BEGIN line is an HTML comment (``<!-- BEGIN techniques ... -->``) is a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from . import data

ROOT = Path(__file__).resolve().parent.parent
PROG = "analysis.techniques"
FIRST = "defaults"
BEGIN = re.compile(r"^(?P<prefix>.*?)BEGIN techniques (?P<path>[^\s>]+)(?P<opts>[^>]*?)\s*(?:-->)?\s*$")
END = re.compile(r"END techniques")
LIBRARY_VARIANTS = ("cublas", "cublaslt")


def _defines(value) -> Dict[str, object]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        return json.loads(value)
    return {}


def _problem(row) -> str:
    name = row.get("shape_name")
    if isinstance(name, str) and name:
        return name
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    return str(m) if m == n == k else f"{m}x{n}x{k}"


def _label(config: Dict[str, object], first: Dict[str, object]) -> str:
    changed = [f"{k} {config[k] if k in config else 'unset'}" for k in sorted(set(config) | set(first))
               if config.get(k) != first.get(k)]
    return ", ".join(changed) or "the defaults again"


def _run_configs(mine: pd.DataFrame) -> pd.Series:
    """Each row's configuration: the defines constant over its run (a sweep job), as JSON; a define a point rule
    sets per point (a tile width by M, say) is the point's, not the configuration's."""
    out = pd.Series(index=mine.index, dtype=object)
    for _, rows in mine.groupby(mine["run_id"].astype(str), sort=False):
        each = [_defines(v) for v in rows["defines"]]
        keys = set().union(*each)
        constant = {k: each[0].get(k) for k in keys if all(d.get(k) == each[0].get(k) for d in each)}
        out.loc[rows.index] = json.dumps(constant, sort_keys=True)
    return out


SHOWN = ("pct", "tflops", "clock", "power")  # what a cell may show (``show=``): the first always pct


def _median(rows: pd.DataFrame, col: str) -> float:
    v = pd.to_numeric(rows[col], errors="coerce").dropna() if col in rows else pd.Series(dtype=float)
    return float(np.median(v)) if len(v) else float("nan")


def _cell(rows: pd.DataFrame, show: Sequence[str] = ("pct",)) -> str:
    ok = rows[rows["status"].astype(str) == "ok"]
    if ok.empty:
        return "/".join(sorted(set(rows["status"].astype(str))))
    pct = pd.to_numeric(ok["pct_of_baseline"], errors="coerce").dropna()
    shaky = not ok["reliable"].fillna(False).astype(bool).all()
    text = (f"{float(np.median(pct)):.1f}" if len(pct) else "no baseline") + ("*" if shaky and len(pct) else "")
    text += f" ({len(pct)})" if len(pct) > 1 else ""
    extra = []
    if "tflops" in show and np.isfinite(_median(ok, "tflops")):
        extra.append(f"{_median(ok, 'tflops'):.0f} TFLOP/s")
    if "clock" in show and np.isfinite(_median(ok, "sm_clock_min_mhz")):
        lo, hi = _median(ok, "sm_clock_min_mhz"), _median(ok, "sm_clock_max_mhz")
        extra.append(f"{lo:.0f} MHz" if not np.isfinite(hi) or hi == lo else f"{lo:.0f}-{hi:.0f} MHz")
    if "power" in show and np.isfinite(_median(ok, "power_w")):
        extra.append(f"{_median(ok, 'power_w'):.0f} W")
    return ", ".join([text, *extra])


def table(rows: pd.DataFrame, variant: Optional[str] = None, show: Sequence[str] = ("pct",)) -> pd.DataFrame:
    """The table (index: configuration; columns: problems) of ``variant``'s rows (default: the one variant with
    defines other than the libraries); ``show`` adds each point's TFLOP/s, SM clock range and mean board power to its
    %. ValueError where there is no such variant, or more than one, or ``show`` names something else."""
    unknown = sorted(set(show) - set(SHOWN))
    if unknown:
        raise ValueError(f"show={','.join(show)}: {', '.join(unknown)} is not one of {', '.join(SHOWN)}")
    with_defines = rows[rows["defines"].map(lambda v: bool(_defines(v)))
                        & ~rows["variant"].astype(str).isin(LIBRARY_VARIANTS)]
    names = sorted(set(with_defines["variant"].astype(str)))
    if variant is None:
        if len(names) != 1:
            raise ValueError(f"the rows hold {len(names)} variants with defines ({', '.join(names) or 'none'}): "
                             f"name one with --variant")
        variant = names[0]
    mine = with_defines[with_defines["variant"].astype(str) == variant].copy()
    if mine.empty:
        raise ValueError(f"no rows of {variant} with defines here (variants with defines: "
                         f"{', '.join(names) or 'none'})")
    mine["config"] = _run_configs(mine)
    # a column a problem, and its precision / layout where the rows hold more than one (a cell never pools them)
    varied = [c for c in ("precision", "layout") if c in mine and mine[c].astype(str).nunique() > 1]
    mine["problem"] = [" ".join([_problem(r), *[str(r[c]) for c in varied]]) for _, r in mine.iterrows()]
    order = (mine.assign(t=mine["timestamp"].astype(str).replace("nan", ""), i=np.arange(len(mine)))
             .groupby("config", sort=False)[["t", "i"]].min().sort_values(["t", "i"], kind="stable"))
    configs = list(order.index)
    first = json.loads(configs[0])
    problems = (mine.drop_duplicates("problem").sort_values([*varied, "m", "n", "k", "problem"], kind="stable")
                ["problem"].tolist())
    lines = {}
    for config in configs:
        label = FIRST if config == configs[0] else _label(json.loads(config), first)
        own = mine[mine["config"] == config]
        lines[label] = {p: _cell(own[own["problem"] == p], show) if (own["problem"] == p).any() else ""
                        for p in problems}
    out = pd.DataFrame.from_dict(lines, orient="index", columns=problems)
    out.index.name = f"{variant} (its defaults: {', '.join(f'{k} {v}' for k, v in sorted(first.items()))})"
    return out


def markdown(t: pd.DataFrame) -> List[str]:
    head = ["configuration", *[str(c) for c in t.columns]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, r in t.iterrows():
        name = FIRST if label == FIRST else f"`{label}`"
        lines.append("| " + " | ".join([name, *[str(v) for v in r]]) + " |")
    return lines


def plain(t: pd.DataFrame) -> List[str]:
    """Aligned columns, the decimals of a column in line whether or not a cell carries ``*``."""
    head = ["configuration", *[str(c) for c in t.columns]]
    cols = []
    for c in t.columns:
        cells = [str(v) for v in t[c]]
        starred = any(v.endswith("*") for v in cells)
        cols.append([v if not starred or v.endswith("*") or not v else v + " " for v in cells])
    body = [[str(label), *[col[i] for col in cols]] for i, label in enumerate(t.index)]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    fmt = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
    return [fmt(head).rstrip(), *[fmt(row).rstrip() for row in body]]


def _show(text: str) -> List[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


OPTIONS = ("variant", "show")


def _options(text: str, where: str) -> Dict[str, str]:
    words = text.split()
    bad = [w for w in words if "=" not in w or w.split("=", 1)[0] not in OPTIONS]
    if bad:
        raise ValueError(f"{where}: {' '.join(bad)}: the options are {', '.join(o + '=' for o in OPTIONS)}")
    return dict(w.split("=", 1) for w in words)


def sync(text: str, root: Path = ROOT) -> str:
    """``text`` with every marked block rewritten from its rows. ValueError naming the line where a BEGIN line is
    not of the form above, a block has no END before the next BEGIN, an END has no BEGIN, or its rows give no table."""
    src = text.split("\n")
    out: List[str] = []
    i = 0
    while i < len(src):
        line = src[i]
        out.append(line)
        i += 1
        if END.search(line):
            raise ValueError(f"line {i}: END techniques without a BEGIN techniques before it")
        if "BEGIN techniques" not in line:
            continue
        m = BEGIN.match(line)
        if not m:
            raise ValueError(f"line {i}: a BEGIN techniques line is 'PREFIX BEGIN techniques PATH [variant=V] "
                             f"[show=...]' (and, in Markdown, ' -->' last): {line.strip()}")
        end = next((j for j in range(i, len(src)) if END.search(src[j]) or "BEGIN techniques" in src[j]), None)
        if end is None or not END.search(src[end]):
            raise ValueError(f"line {i}: BEGIN techniques {m['path']} has no END techniques after it"
                             + (f" before the next BEGIN (line {end + 1})" if end is not None else ""))
        opts = _options(m["opts"], f"line {i}")
        try:
            t = table(data.load(root / m["path"]), opts.get("variant"), _show(opts.get("show", "pct")))
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"line {i}: BEGIN techniques {m['path']}: {e}") from None
        prefix = m["prefix"]
        if prefix.lstrip().startswith("<!--"):
            body = markdown(t)
        else:
            body = [(prefix + row).rstrip() for row in plain(t)]
        out.extend(body)
        out.append(src[end])
        i = end + 1
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", nargs="?", type=Path, help="a sweep, run or reference folder (or results file)")
    ap.add_argument("--variant", default=None, help="the variant whose configurations make the lines")
    ap.add_argument("--show", default="pct", help=f"what a cell shows, comma separated, of {', '.join(SHOWN)} "
                                                  "(TFLOP/s, the SM clock's range, the mean board power; default pct)")
    ap.add_argument("--sync", nargs="+", type=Path, metavar="FILE", help="rewrite FILE's marked blocks from their rows")
    ap.add_argument("--check", nargs="+", type=Path, metavar="FILE",
                    help="exit 1 where FILE's marked blocks are not what their rows give")
    args = ap.parse_args(argv)
    if sum(x is not None for x in (args.sweep, args.sync, args.check)) != 1:
        print(f"{PROG}: give a SWEEP, or --sync FILE..., or --check FILE...", file=sys.stderr)
        return 2
    if args.sweep is not None:
        try:
            t = table(data.load(args.sweep), args.variant, _show(args.show))
        except (ValueError, FileNotFoundError) as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 2
        print(f"{t.index.name}: % of the faster library timed interleaved with each point (* not reliable)")
        print("\n".join(markdown(t)))
        return 0
    stale = []
    for path in args.sync or args.check:
        try:
            text = path.read_text()
            new = sync(text)
        except (ValueError, FileNotFoundError) as e:
            print(f"{PROG}: {path}: {e}", file=sys.stderr)
            return 2
        if new != text:
            if args.sync:
                path.write_text(new)
                print(f"  {path}: blocks rewritten from their rows")
            else:
                stale.append(path)
    for path in stale:
        print(f"{PROG}: {path}: a marked block is not what its rows give (python -m {PROG} --sync {path})",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
