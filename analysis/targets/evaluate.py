"""One verdict per target from the rows: which rows it selects, the number each gives, and whether
the bar holds.

Which rows: the rows of the target's GPU (its ``device``, else the primary GPU) of its variants that
match its selectors, at the configuration its YAML has now (or the target's ``defines``:
:func:`analysis.ladder.current_configuration`);
for a number, only evidence rows (reliable, uncontended, checked: :func:`analysis.read.evidence_mask`);
for ``ok``, every row there, whatever its status (a failed or skipped row says why).

One number per point: a point is one problem (precision, layout, batch, m, n, k, FP8 scaling; named
by its latest LLM shape name where a row gave one), and each variant's number there is that of its **latest** run (run ids sort by
time): the state of the code as last measured, not the best of many tries. Every earlier run's
number is kept beside it (``runs``, ``held``, ``low``, ``high``), so a bar met once and missed
since shows as such. Where a target names several variants (two decode stages), a point takes
the variant whose latest number is highest.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import pandas as pd

from gemmlab.rows import fp8_scaling

from .. import data, decode, ladder
from .spec import ALL, GEOMEAN, OK, PCT_OF_BASELINE, PCT_OF_LIBRARY, PCT_OF_ROOF, Target

MET, NOT_MET, NOT_MEASURED, STATED = "met", "not met", "not measured", "stated"
POINT = ["precision", "layout", "batch", "m", "n", "k", "scaling"]  # a problem, whatever its rows called it
POINT_COLUMNS = ["target", "point", "m", "n", "k", "precision", "layout", "scaling", "variant", "value", "holds", "runs", "held",
                 "low", "high", "rel_error", "status", "reason", "run_id", "git_commit"]


@dataclass
class Result:
    target: Target
    verdict: str
    summary: str
    points: pd.DataFrame  # POINT_COLUMNS, one row per point measured
    missing: Tuple[str, ...] = ()  # the target's shapes no row measured
    device: str = ""  # the GPU whose rows were judged ("": none)


def _point_text(rows: pd.DataFrame) -> str:
    """The problem's latest LLM shape name where one of its rows has one, else m x n x k."""
    names = [n for n in rows["shape_name"] if isinstance(n, str) and n]
    last = rows.iloc[-1]
    return names[-1] if names else f"{int(last['m'])}x{int(last['n'])}x{int(last['k'])}"


def _build(row) -> str:
    """The row's kernel build (its cubin's name: a hash of the source, its headers, the defines and
    nvcc's flags and version), "" for a library's row."""
    return str(data.extra_of(row.get("extra")).get("cubin") or "")


def _num(v, metric: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3g}" if metric == OK else f"{v:.1f}"


def _on_device(ds: data.Dataset, t: Target) -> Tuple[pd.DataFrame, str, str]:
    """The GPU rows the target judges, the GPU's name, and where there are none, why (in words): the rows
    of the GPUs whose name holds the target's ``device``, else of the GPU with the most measured rows."""
    rows = ds.rows
    gpu = rows[rows["kind"] == "gpu"]
    if not t.device:
        device, _ = data.primary_device(rows, "gpu")
        return (gpu[gpu["device"] == device] if device else rows.iloc[:0]), device or "", ""
    on = gpu["device"].astype(str).str.contains(t.device, case=False, regex=False)
    device = ", ".join(sorted(set(gpu.loc[on, "device"].astype(str))))
    mine = gpu["variant"].isin(t.variants)
    others = gpu.loc[mine & ~on & (gpu["device"].astype(str) != ""), "device"].value_counts()
    if (on & mine).any() or others.empty:  # the selectors say the rest
        return gpu[on], device, ""
    variants = "/".join(t.variants)
    elsewhere = "; ".join(f"{n} rows of {variants} on {d}" for d, n in others.items())
    return rows.iloc[:0], device, (f"no rows{f' of {variants}' if on.any() else ''} on a GPU named {t.device} "
                                   f"(the bar's); {elsewhere} (--device judges those)")


def _select(t: Target, rows: pd.DataFrame) -> Tuple[pd.DataFrame, str]:
    """The target's rows (with ``evidence``) of ``rows`` (its GPU's), and where none are left, which
    selector left none (in words)."""
    if t.metric != OK:  # rows that timed something; the others are evidence or say why they are not
        rows = rows[(rows["status"] == "ok") & ~data.control_mask(rows)]
    rows = rows.assign(evidence=data.evidence_mask(rows).astype(bool) if len(rows) else pd.Series(dtype=bool))
    what = "measured rows on the GPU" if t.metric != OK else "rows on the GPU"
    if rows.empty:
        return rows, f"no {what}"
    rows = rows[(rows["op"] == data.GEMM) & rows["variant"].isin(t.variants)]
    said = f"{'/'.join(t.variants)}"
    if rows.empty:
        return rows, f"no {what} of {said}"
    rows = rows.assign(scaling=[fp8_scaling(r) for r in rows.to_dict("records")],
                       tokens=decode.tokens_of(rows),
                       shape_name=rows["shape_name"].astype(object).where(rows["shape_name"].notna(), ""))
    names = [decode.model_and_projection(s) for s in rows["shape_name"]]
    rows = rows.assign(model=[m for m, _ in names], projection=[p for _, p in names])
    steps = [
        (t.precision, lambda r: r["precision"].isin(t.precision), f"precision {'/'.join(t.precision)}"),
        (t.layout, lambda r: r["layout"].isin(t.layout), f"layout {'/'.join(t.layout)}"),
        (t.fp8_scaling, lambda r: r["scaling"].isin(t.fp8_scaling), f"FP8 scaling {'/'.join(t.fp8_scaling)}"),
        (t.models, lambda r: r["model"].isin(t.models), f"model {'/'.join(t.models)}"),
        (t.projections, lambda r: r["projection"].isin(t.projections), f"projection {'/'.join(t.projections)}"),
        (t.tokens, lambda r: r["tokens"].isin(t.tokens), f"tokens {'/'.join(map(str, t.tokens))}"),
        (t.tokens_min, lambda r: r["tokens"] >= t.tokens_min, f"tokens >= {t.tokens_min}"),
        (t.tokens_max, lambda r: r["tokens"] <= t.tokens_max, f"tokens <= {t.tokens_max}"),
        (t.shapes, lambda r: pd.Series([(int(a), int(b), int(c)) in set(t.shapes)
                                        for a, b, c in zip(r["m"], r["n"], r["k"])], index=r.index, dtype=bool),
         "the target's shapes"),
    ]
    for given, keep, words in steps:
        if given is None or (isinstance(given, tuple) and not given):
            continue
        left = rows[keep(rows).fillna(False).astype(bool)]
        if left.empty:
            return left, f"{len(rows)} {what} of {said} so far, none at {words}"
        rows, said = left, f"{said} at {words}"
    parts = [r[ladder.current_configuration(r, v, t.defines)] for v, r in rows.groupby("variant", sort=True)]
    kept = pd.concat(parts) if parts else rows.iloc[:0]
    if kept.empty:
        config = "the defines " + ", ".join(f"{k} {v}" for k, v in t.defines.items()) if t.defines \
            else "the configuration their YAML has now"
        return kept, f"{len(rows)} {what} of {said}, none at {config}"
    return kept, ""


def _gpu_evidence(ds: data.Dataset) -> pd.DataFrame:
    """The evidence rows of every GPU."""
    return ds.ok[ds.ok["kind"] == "gpu"]


def _library_pct(ds: data.Dataset, rows: pd.DataFrame) -> pd.Series:
    """100 x the fastest standalone cuBLAS/cuBLASLt time of the same run, point and FP8 scaling / the row's."""
    # what "the library" is wherever a baseline is read (data.cublas_per_run); every GPU's rows: the merge is by run,
    # and a run is on one GPU (the target's, which need not be the primary one)
    lib = data._library_rows(_gpu_evidence(ds))
    if lib.empty:
        return pd.Series(np.nan, index=rows.index)
    lib = lib.assign(scaling=[fp8_scaling(r) for r in lib.to_dict("records")])
    keys = ["run_id", "precision", "layout", "batch", "m", "n", "k", "scaling"]
    best = lib.groupby(keys, dropna=False)["time_median_s"].min().rename("lib_time").reset_index()
    merged = rows[keys].merge(best, on=keys, how="left")
    return pd.Series(100.0 * merged["lib_time"].to_numpy() / rows["time_median_s"].to_numpy(), index=rows.index)


def _roof_pct(ds: data.Dataset, rows: pd.DataFrame) -> pd.Series:
    """Each row's bandwidth as % of the copy probe of its own run (NaN where its run has none)."""
    per_run, _ = decode.copy_roofs(_gpu_evidence(ds))  # per run and device
    merged = rows[["run_id", "device"]].merge(per_run, on=["run_id", "device"], how="left")
    gbs = rows["bytes_min"].to_numpy() / rows["time_median_s"].to_numpy() / 1e9
    return pd.Series(100.0 * gbs / pd.to_numeric(merged["roof_gbs"], errors="coerce").to_numpy(), index=rows.index)


def _values(ds: data.Dataset, t: Target, rows: pd.DataFrame) -> pd.Series:
    if t.metric == PCT_OF_BASELINE:
        return pd.to_numeric(rows["pct_of_baseline"], errors="coerce")
    if t.metric == PCT_OF_LIBRARY:
        return _library_pct(ds, rows)
    if t.metric == PCT_OF_ROOF:
        return _roof_pct(ds, rows)
    return pd.to_numeric(rows["rel_error"], errors="coerce")


def _holds(t: Target, value: float, status: str) -> Optional[bool]:
    if t.metric == OK:
        return status == "ok"
    if t.at_least is None or math.isnan(value):
        return None
    return bool(value >= t.at_least)


def _points(ds: data.Dataset, t: Target, rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.assign(value=_values(ds, t, rows).astype("float64"))
    if t.metric != OK:
        rows = rows[rows["value"].notna()]
    out = []
    for _, group in rows.groupby(POINT, sort=False, dropna=False):
        per_variant = []
        for variant, runs in group.groupby("variant", sort=True):
            runs = runs.sort_values(["run_id", "timestamp"], kind="stable")
            last = runs.iloc[-1]
            build = _build(last)
            if build:  # the history of this build only: an older kernel's numbers say nothing of this one's
                runs = runs[[_build(r) == build for _, r in runs.iterrows()]]
            holds = [_holds(t, float(v), str(s)) for v, s in zip(runs["value"], runs["status"])]
            vals = runs["value"].dropna()
            per_variant.append({
                "target": t.id, "point": _point_text(group.sort_values("run_id", kind="stable")), "m": int(last["m"]), "n": int(last["n"]),
                "k": int(last["k"]), "precision": last["precision"],
                "layout": last["layout"], "scaling": last["scaling"], "variant": variant,
                "value": float(last["value"]), "holds": holds[-1], "runs": len(runs),
                "held": sum(1 for h in holds if h), "low": float(vals.min()) if len(vals) else np.nan,
                "high": float(vals.max()) if len(vals) else np.nan,
                "rel_error": pd.to_numeric(pd.Series([last["rel_error"]]), errors="coerce").iloc[0],
                "status": last["status"], "reason": last.get("reason") if last["status"] != "ok" else "",
                "run_id": last["run_id"], "git_commit": last.get("git_commit")})
        if t.metric == OK:
            best = max(per_variant, key=lambda p: (bool(p["holds"]), p["variant"]))
        else:
            best = max(per_variant, key=lambda p: (p["value"], p["variant"]))
        out.append(best)
    if not out:
        return pd.DataFrame(columns=POINT_COLUMNS)
    pts = pd.DataFrame(out).sort_values(["precision", "m", "n", "k", "point", "layout", "scaling"], kind="stable")
    return pts[POINT_COLUMNS].reset_index(drop=True)


def _missing(t: Target, pts: pd.DataFrame, elsewhere=frozenset()) -> Tuple[str, ...]:
    """The target's shapes that no row measured (``elsewhere``: those that rows not evidence measured)."""
    got = set(zip(pts["m"], pts["n"], pts["k"])) | set(elsewhere)
    return tuple(f"{m}x{n}x{k}" for m, n, k in t.shapes if (m, n, k) not in got)


def _range(values: pd.Series, metric: str = "") -> str:
    lo, hi = float(values.min()), float(values.max())
    return _num(lo, metric) if lo == hi else f"{_num(lo, metric)}-{_num(hi, metric)}"


def _judge(t: Target, pts: pd.DataFrame, missing: Tuple[str, ...], lacking: Tuple[str, ...] = ()
           ) -> Tuple[str, str]:
    """``missing``: the target's shapes no row measured; ``lacking``: points only non-evidence rows measured."""
    n = len(pts)
    tail = (f"; not measured: {', '.join(missing)}" if missing else "") + \
           (f"; no evidence row at: {', '.join(lacking)}" if lacking else "")
    missing = missing + lacking
    if t.metric == OK:
        good = int(pts["holds"].astype(bool).sum())
        errs = pd.to_numeric(pts.loc[pts["holds"].astype(bool), "rel_error"], errors="coerce").dropna()
        err = f"; rel. error {_range(errs, OK)}" if len(errs) else ""
        text = f"{good} of {n} points ok{err}{tail}"
        if good >= (n if t.need == ALL else t.need) and (t.need != ALL or not missing):
            return MET, text
        if t.need == ALL and good == n:
            return NOT_MEASURED, text
        bad = pts[~pts["holds"].astype(bool)].iloc[0]
        return NOT_MET, text + f"; not ok: {bad['point']} ({bad['status']}: {bad['reason']})"
    vals = pts["value"]
    if t.stated:
        return STATED, f"{n} points: {_range(vals)} (median {_num(float(vals.median()))}){tail}"
    if t.need == GEOMEAN:
        g = float(np.exp(np.log(vals.clip(lower=1e-12) / 100.0).mean()) * 100.0)
        text = f"geomean {_num(g)} over {n} points ({_range(vals)}){tail}"
        if g < t.at_least:
            return NOT_MET, text
        return (NOT_MEASURED if missing else MET), text
    good = int(pts["holds"].astype(bool).sum())
    low = pts.loc[vals.idxmin()]
    text = f"{good} of {n} points >= {t.at_least:g}; lowest {_num(float(low['value']))} at {low['point']} " \
           f"({low['variant']}){tail}"
    if t.need == ALL:
        if good < n:
            return NOT_MET, text
        return (NOT_MEASURED if missing else MET), text
    if good >= t.need:
        return MET, text + f" ({t.need} needed)"
    # what would count next: the best points below the bar, as many as are missing (at most 3)
    below = pts[~pts["holds"].astype(bool)].sort_values("value", ascending=False).head(min(3, t.need - good))
    nearest = ", ".join(f"{_num(float(r['value']))} at {r['point']}" for _, r in below.iterrows())
    return NOT_MET, text + f" ({t.need} needed)" + (f"; nearest below: {nearest}" if nearest else "")


def _not_evidence(t: Target, rows: pd.DataFrame, pts: pd.DataFrame) -> List[Tuple[Tuple[int, int, int], str]]:
    """The points only rows that are not evidence measured: (m, n, k), and the point with why (their
    commonest reason)."""
    if t.metric == OK:
        return []
    got = set(zip(pts["m"], pts["n"], pts["k"], pts["precision"], pts["layout"]))
    out = []
    for key, group in rows[~rows["evidence"]].groupby(["m", "n", "k", "precision", "layout"], sort=True):
        if tuple(key) in got:
            continue
        why = data.not_evidence_reasons(group)
        why = why[why != ""]
        reason = why.value_counts().index[0] if len(why) else "not evidence"
        layout = f" {key[4]}" if rows["layout"].nunique() > 1 else ""  # where the target spans layouts
        text = f"{_point_text(group.sort_values('run_id', kind='stable'))}{layout} ({reason})"
        out.append(((int(key[0]), int(key[1]), int(key[2])), text))
    return out


def evaluate(ds: data.Dataset, t: Target) -> Result:
    """The verdict of ``t`` on the rows of ``ds``."""
    rows, device, why = _on_device(ds, t)
    if not why:
        rows, why = _select(t, rows)
    if rows.empty:
        return Result(t, NOT_MEASURED, why, pd.DataFrame(columns=POINT_COLUMNS), tuple(
            f"{m}x{n}x{k}" for m, n, k in t.shapes), device)
    pts = _points(ds, t, rows if t.metric == OK else rows[rows["evidence"]])
    lacking = _not_evidence(t, rows, pts)
    if pts.empty:
        return Result(t, NOT_MEASURED, f"{len(rows)} rows selected, none evidence with a {t.metric} number"
                      + (f": {'; '.join(text for _, text in lacking)}" if lacking else ""), pts,
                      tuple(text for _, text in lacking), device)
    missing = _missing(t, pts, {mnk for mnk, _ in lacking})
    verdict, summary = _judge(t, pts, missing, tuple(text for _, text in lacking))
    return Result(t, verdict, summary, pts, missing + tuple(text for _, text in lacking), device)


def evaluate_all(ds: data.Dataset, targets) -> List[Result]:
    return [evaluate(ds, t) for t in targets]
