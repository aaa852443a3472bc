"""What tuning buys (issue 18, item 5): per GEMM problem, the time a user gets by default from
cuBLASLt (its heuristic's first choice) against the best of cuBLASLt's algorithms, the CUTLASS
kernel search and the best hand-written stage, and the time the searches took.

A problem is (run, shape set, shape name, precision, layout, batch, m, n, k): the backends are
compared inside one run, as every comparison between variants is (analysis.data). Rows are
evidence rows only (:mod:`analysis.read`), each category's best row at the problem
(:func:`analysis.data.best_rows`). What a row was is read from the row itself:

- **default**: a ``cublaslt`` row that is neither a search (no ``extra.search``) nor autotuned
  (``autotuned`` not in its ``kernel_name``): the heuristic's first choice;
- **cuBLASLt search**: a ``cublaslt`` row with ``extra.search`` (variant ``cublaslt_search``);
  the best cuBLASLt time is the faster of it and the default, unless the search picked the
  default's own algorithm (``lt_search_is_default``): then the two rows time one kernel, their
  difference is drift between measurements, and the search cannot win;
- **CUTLASS search**: a ``cutlass`` row with ``extra.search`` (variant ``cutlass_search``);
- **hand-written**: the fastest ``cuda`` backend row (a stage of the ladder).

``regret`` = default time / best time - 1 (0: the default was the best there was); ``best_kind``
names the category that won and ``best_backend`` its backend. ``search_s`` is a search's wall time
(``extra.search_s``: candidates checked and ranked; CUTLASS's compile is ``cutlass_compile_s``,
not in it), and ``*_gain`` = default time / that search's time - 1: what spending it bought.
"""
from __future__ import annotations

import math
from typing import Dict, List, Tuple

import pandas as pd

from . import data

DEFAULT, LT_SEARCH, CUTLASS_SEARCH, HANDWRITTEN = "cublaslt heuristic", "cublaslt search", "cutlass search", \
    "hand-written"
KINDS = (DEFAULT, LT_SEARCH, CUTLASS_SEARCH, HANDWRITTEN)  # ties for the best go to the first
KIND_BACKEND = {DEFAULT: "cublaslt", LT_SEARCH: "cublaslt", CUTLASS_SEARCH: "cutlass", HANDWRITTEN: "cuda"}
SEARCHES = (LT_SEARCH, CUTLASS_SEARCH)
PROBLEM = ["run_id", "shape_set", "shape_name", "precision", "layout", "batch", "m", "n", "k"]
SQUARE_SET, OTHER_SET = "square", "other"
MISSING_NOTE = ("no cublaslt_search / tuning rows: no run has both cuBLASLt's default (cublaslt) and a tuned "
                "result (cublaslt_search, cutlass_search) at a problem; run python run.py +experiment=tuning_regret")
PREFIX = {DEFAULT: "default", LT_SEARCH: "lt_search", CUTLASS_SEARCH: "cutlass_search", HANDWRITTEN: "handwritten"}
COLUMNS = PROBLEM + [
    "default_time_s", "default_what", "lt_search_time_s", "lt_search_what", "lt_search_s",
    "cutlass_search_time_s", "cutlass_search_what", "cutlass_search_s", "cutlass_compile_s",
    "handwritten_time_s", "handwritten_what", "best_time_s", "best_kind", "best_backend", "best_what",
    "regret", "lt_search_gain", "cutlass_search_gain", "lt_search_is_default"]
# What names a cuBLASLt algorithm (extra.algorithm), not how it was ranked or measured
ALGORITHM_IDENTITY = ("algorithm_id", "tile", "stages", "split_k", "cluster_shape", "cta_swizzling",
                      "custom_option", "inner_shape", "reduction_scheme")


def shape_set(shape_name: str, m, n, k) -> str:
    """The model a named shape belongs to (``llama3_70b`` of ``llama3_70b.mlp_down.t4096``);
    ``square`` for an unnamed m = n = k, else ``other``."""
    name = _text(shape_name)
    if name:
        return name.split(".", 1)[0]
    return SQUARE_SET if m == n == k else OTHER_SET


def _kind(row, extra: dict) -> str:
    backend = row["backend"]
    searched = "search" in extra
    if backend == "cublaslt":
        if searched:
            return LT_SEARCH
        return "" if "autotuned" in _text(row.get("kernel_name")) else DEFAULT
    if backend == "cutlass":
        return CUTLASS_SEARCH if searched else ""
    if backend == data.HANDWRITTEN_BACKEND:
        return HANDWRITTEN
    return ""


def _what(row, extra: dict, kind: str) -> str:
    """What ran: the algorithm (cuBLASLt), the kernel (CUTLASS), the variant (a stage)."""
    if kind == HANDWRITTEN:
        return str(row["variant"])
    if kind in (DEFAULT, LT_SEARCH):
        algo = extra.get("algorithm") if isinstance(extra.get("algorithm"), dict) else {}
        if algo:
            bits = [f"algo {algo.get('algorithm_id')}"]
            for key, label in (("tile", "tile"), ("stages", "stages"), ("split_k", "split-K")):
                v = algo.get(key)
                if v is not None:
                    bits.append(f"{label} {'x'.join(map(str, v)) if isinstance(v, list) else v}")
            if kind == LT_SEARCH and algo.get("heuristic_rank") is not None:
                bits.append(f"heuristic rank {algo['heuristic_rank']}")
            return ", ".join(bits)
    name = _text(row.get("kernel_name"))
    return name or str(row["variant"])


def _text(v) -> str:
    """A text cell as a string ("" when missing: NaN, NA, None)."""
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    v = str(v).strip()
    return "" if v == "nan" else v


def categorized(ds: data.Dataset) -> pd.DataFrame:
    """The evidence GEMM rows on the primary GPU that play a part here, with ``kind``,
    ``shape_set``, ``what``, ``search_s`` (from ``extra``)."""
    rows = data.gemm(ds.gpu)
    rows = rows[rows["backend"].isin(["cublaslt", "cutlass", data.HANDWRITTEN_BACKEND])
                & rows["time_median_s"].notna() & (rows["time_median_s"] > 0)]
    if rows.empty:
        return rows.assign(kind=pd.Series(dtype=object), shape_set=pd.Series(dtype=object),
                           what=pd.Series(dtype=object), search_s=pd.Series(dtype="float64"))
    extras = [data.extra_of(e) for e in rows["extra"]]
    # plain dicts of the cells _kind and _what read: iterrows on the wide, mixed-type row frame was
    # most of the regret table's time
    records = rows[[c for c in ("backend", "kernel_name", "variant") if c in rows.columns]].to_dict("records")
    kinds = [_kind(r, e) for r, e in zip(records, extras)]
    rows = rows.assign(kind=kinds, what=[_what(r, e, k) for r, e, k in zip(records, extras, kinds)],
                       search_s=[_number(e.get("search_s")) for e in extras],
                       shape_set=[shape_set(s, m, n, k) for s, m, n, k in
                                  zip(rows["shape_name"], rows["m"], rows["n"], rows["k"])])
    return rows[rows["kind"] != ""]


def _number(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def frame(ds: data.Dataset, every_run: bool = False) -> pd.DataFrame:
    """One line per problem that has the default and at least one search (columns: COLUMNS); a
    problem several runs compared comes from the newest of them (:func:`newest`) unless
    ``every_run``."""
    rows = categorized(ds)
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = rows.assign(shape_name=rows["shape_name"].astype(str))
    best = data.best_rows(rows, PROBLEM + ["kind"])
    best = best[[c for c in PROBLEM + ["kind", "time_median_s", "what", "search_s", "compile_s", "extra"]
                 if c in best.columns]]
    # one pass over plain dicts, grouped by the problem's group number (to_dict per group, or
    # iterrows, cost seconds per call on the reference data)
    keys = best.groupby(PROBLEM, sort=True, dropna=False).ngroup().to_numpy()
    groups: Dict[int, List[Tuple[tuple, dict]]] = {}
    for gid, key, r in zip(keys, best[PROBLEM].itertuples(index=False, name=None), best.to_dict("records")):
        groups.setdefault(int(gid), []).append((key, r))
    lines: List[Dict[str, object]] = []
    for gid in sorted(groups):
        key = groups[gid][0][0]
        by = {r["kind"]: r for _, r in groups[gid]}
        if DEFAULT not in by or not any(s in by for s in SEARCHES):
            continue
        line: Dict[str, object] = dict(zip(PROBLEM, key))
        for kind in KINDS:
            p = PREFIX[kind]
            r = by.get(kind)
            line[f"{p}_time_s"] = data.stable(float(r["time_median_s"])) if r is not None else math.nan
            line[f"{p}_what"] = r["what"] if r is not None else ""
            if kind in SEARCHES:
                line[f"{p}_s"] = data.stable(float(r["search_s"])) if r is not None else math.nan
        cut = by.get(CUTLASS_SEARCH)
        line["cutlass_compile_s"] = _number(cut["compile_s"]) if cut is not None and "compile_s" in cut else math.nan
        # the search's pick is the heuristic's first choice itself: the two rows time one kernel, and
        # their difference is the drift between two measurements, not something tuning bought
        same = LT_SEARCH in by and same_algorithm(by[DEFAULT], by[LT_SEARCH])
        line["lt_search_is_default"] = same
        present = [k for k in KINDS if k in by and not (same and k == LT_SEARCH)]
        winner = min(present, key=lambda k: (float(by[k]["time_median_s"]), KINDS.index(k)))
        line.update(best_time_s=data.stable(float(by[winner]["time_median_s"])), best_kind=winner,
                    best_backend=KIND_BACKEND[winner], best_what=by[winner]["what"])
        default = float(by[DEFAULT]["time_median_s"])
        line["regret"] = data.stable(default / float(by[winner]["time_median_s"]) - 1)
        for kind in SEARCHES:
            r = by.get(kind)
            line[f"{PREFIX[kind]}_gain"] = (data.stable(default / float(r["time_median_s"]) - 1)
                                            if r is not None else math.nan)
        lines.append(line)
    out = pd.DataFrame(lines, columns=COLUMNS)
    out = out if every_run else newest(out)
    return out.sort_values(["shape_set", "precision", "m", "n", "k", "layout", "batch", "shape_name", "run_id"],
                           kind="stable").reset_index(drop=True)


def same_algorithm(a, b) -> bool:
    """Whether two cuBLASLt rows ran the same algorithm (ALGORITHM_IDENTITY of extra.algorithm)."""
    x, y = (data.extra_of(r.get("extra", "")).get("algorithm") for r in (a, b))
    if not isinstance(x, dict) or not isinstance(y, dict) or "algorithm_id" not in x:
        return False
    return all(x.get(k) == y.get(k) for k in ALGORITHM_IDENTITY)


def newest(f: pd.DataFrame) -> pd.DataFrame:
    """One line per problem: where several runs compared the same problem (a tuning_regret run
    repeated with a newer method), the newest run's line (run ids begin with their UTC start
    time, so they sort by it); counting both would weigh a shape twice."""
    if f.empty:
        return f
    same = [c for c in PROBLEM if c != "run_id"]
    keyed = f.assign(**{c: f[c].astype(str) for c in same})
    keep = keyed.sort_values("run_id", kind="stable").drop_duplicates(same, keep="last").index
    return f.loc[sorted(keep)]


def superseded(ds: data.Dataset) -> int:
    """How many problem lines of older runs :func:`newest` leaves out."""
    every = frame(ds, every_run=True)
    return len(every) - len(newest(every))


def notes(ds: data.Dataset, f: pd.DataFrame) -> List[str]:
    """What the figure and the table say when rows are missing."""
    if not f.empty:
        return []
    rows = categorized(ds)
    counts = ", ".join(f"{int((rows['kind'] == k).sum())} {k}" for k in KINDS)
    return [MISSING_NOTE, f"(evidence rows here: {counts})"]
