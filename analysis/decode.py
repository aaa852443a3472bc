"""The memory-bound half of the roofline: decode GEMMs against the measured copy roof.

Which rows are decode points (:func:`decode_mask`): GEMM rows (``op == gemm``) of at most
DECODE_MAX_TOKENS tokens against a weight matrix, i.e.

- tokens <= 64: the token count of the row's LLM shape name (``<model>.<projection>.t<T>``, from
  gemmlab/llm_shapes.py) where it has one, else ``m`` (a routed-expert GEMM's ``m`` is tokens per
  expert: DeepSeek-V3's ``expert_down.t1024`` has m = 32 and is prefill, not decode), and
- skinny: ``8 m <= min(n, k)``, so the weights (n x k) are at least 80% of the elements moved and the
  intensity is about m FLOP/byte (2 m in FP8): a small square GEMM (16 to 64 cubed) is latency
  bound, not a stream of weights, and is no decode point.

Each point's bandwidth is ``bytes_min / time_median_s`` (every operand moved once), as % of a copy
roof (:func:`copy_roofs`): the ``copy`` evidence row of the point's own run (same ``run_id`` and
device: same clock and thermal state) where there is one (``roof == SAME_RUN``), else the best
``copy`` evidence row of the device (``roof == DEVICE_BEST``), the roofline's measured memory roof.
One point is one (variant, precision, layout, batch, m, n, k) problem; its number is its best row
(the shortest median, one row of one run, as everywhere in analysis.data), against that row's roof.
The decode figure, the roofline's decode label and the ladder's memory-bound rung read these.
"""
from __future__ import annotations

import re
from typing import Optional, Tuple

import pandas as pd

from . import data

DECODE_MAX_TOKENS = 64  # stage 14's own limit (eight n8 tiles of tokens, one warp's accumulators)
SKINNY = 8  # a decode GEMM's m is at most min(n, k) / SKINNY: the weights are >= 80% of the elements
SAME_RUN, DEVICE_BEST = "same run", "device best"
POINT_BY = ["variant", "backend", "precision", "layout", "batch", "m", "n", "k", "shape_name"]
_TOKENS = re.compile(r"\.t(\d+)$")


def tokens_of(df: pd.DataFrame) -> pd.Series:
    """Each row's token count: its LLM shape name's ``t<T>`` where it has one, else ``m``."""
    names = df["shape_name"].astype(object).where(df["shape_name"].notna(), "").astype(str) \
        if "shape_name" in df.columns else pd.Series("", index=df.index)
    named = names.str.extract(_TOKENS, expand=False)
    m = pd.to_numeric(df["m"], errors="coerce")
    return pd.to_numeric(named, errors="coerce").fillna(m).astype("Int64")


def decode_mask(df: pd.DataFrame) -> pd.Series:
    """GEMM rows that are decode points (see the module's docstring)."""
    m, n, k = (pd.to_numeric(df[c], errors="coerce") for c in ("m", "n", "k"))
    return ((df["op"] == data.GEMM) & (tokens_of(df) <= DECODE_MAX_TOKENS)
            & (SKINNY * m <= pd.concat([n, k], axis=1).min(axis=1))).fillna(False).astype(bool)


def model_and_projection(name: str) -> Tuple[str, str]:
    """(model, projection) of an LLM shape name (``llama3_8b.attn_qkv.t16``), ("", "") otherwise."""
    parts = str(name).split(".")
    return (parts[0], parts[1]) if len(parts) == 3 and _TOKENS.search(str(name)) else ("", "")


def copy_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The copy probe's evidence rows of ``rows`` (timed, bytes moved), with ``gbs``."""
    c = data.evidence(rows)
    c = c[(c["op"] == data.COPY) & (c["time_median_s"] > 0) & (c["bytes_min"] > 0)]
    return c.assign(gbs=data.stable(c["bytes_min"] / c["time_median_s"] / 1e9))


def copy_roofs(rows: pd.DataFrame) -> Tuple[pd.DataFrame, Optional[pd.Series]]:
    """The copy roofs of ``rows`` (one device's): per (run_id, device) its best copy evidence row
    (columns run_id, device, roof_gbs, roof_variant), and the device's best copy row (None
    without copy rows: then no point has a roof)."""
    c = copy_rows(rows)
    cols = ["run_id", "device", "roof_gbs", "roof_variant"]
    if c.empty:
        return pd.DataFrame(columns=cols), None
    c = c.sort_values(["gbs", "variant", "run_id"], ascending=[False, True, True], kind="stable")
    per_run = c.groupby(["run_id", "device"], sort=True).head(1)[["run_id", "device", "gbs", "variant"]]
    per_run.columns = cols
    return per_run.reset_index(drop=True), c.iloc[0]


def points(ds: data.Dataset) -> pd.DataFrame:
    """Every decode point on the primary GPU (measured rows; ``evidence`` false for the others,
    which figures draw hollow and no label, best or table uses), its best row per problem, with:
    ``tokens``, ``model``, ``projection``, ``gbs`` (bytes_min / median time), ``roof_gbs``,
    ``roof`` (SAME_RUN or DEVICE_BEST), ``roof_run_id``, ``pct_of_roof``, and both readings of
    % of cuBLAS (:func:`analysis.data.with_pct_of_cublas`: ``pct_of_cublas`` is the interleaved one)."""
    rows = ds.measured_rows("gpu")
    rows = rows[decode_mask(rows) & (rows["time_median_s"] > 0) & (rows["bytes_min"] > 0)]
    parts = [data.best_rows(rows[rows["evidence"] == e], POINT_BY).assign(evidence=e) for e in (True, False)]
    parts = [p for p in parts if not p.empty]
    extra = ["tokens", "model", "projection", "gbs", "roof_gbs", "roof", "roof_run_id", "pct_of_roof"]
    if not parts:
        return rows.iloc[:0].assign(**{c: pd.Series(dtype=object) for c in extra + ["pct_of_cublas"]})
    pts = data.with_pct_of_cublas(pd.concat(parts, ignore_index=True))
    per_run, best = copy_roofs(ds.gpu)
    pts = pts.merge(per_run, on=["run_id", "device"], how="left")
    same = pts["roof_gbs"].notna()
    pts["roof"] = [SAME_RUN if s else (DEVICE_BEST if best is not None else "") for s in same]
    pts["roof_run_id"] = pts["run_id"].where(same, best["run_id"] if best is not None else "")
    if best is not None:
        pts.loc[~same, "roof_gbs"] = float(best["gbs"])
        pts.loc[~same, "roof_variant"] = best["variant"]
    pts["tokens"] = tokens_of(pts)
    names = [model_and_projection(s) for s in pts["shape_name"]]
    pts["model"] = [m for m, _ in names]
    pts["projection"] = [p for _, p in names]
    pts["gbs"] = data.stable(pts["bytes_min"] / pts["time_median_s"] / 1e9)
    pts["roof_gbs"] = pd.to_numeric(pts["roof_gbs"], errors="coerce").astype("float64")
    pts["pct_of_roof"] = data.stable(100.0 * pts["gbs"] / pts["roof_gbs"])
    return pts.sort_values(["tokens", "bytes_min", "variant", "precision", "evidence"],
                           kind="stable").reset_index(drop=True)


def best_point(pts: pd.DataFrame) -> Optional[pd.Series]:
    """The evidence point closest to its copy roof (highest ``pct_of_roof``; ties: variant, then
    precision, then shape), None without one."""
    good = pts[pts["evidence"].astype(bool) & pts["pct_of_roof"].notna()] if not pts.empty else pts
    if good.empty:
        return None
    return good.sort_values(["pct_of_roof", "variant", "precision", "shape_name", "m", "n", "k"],
                            ascending=[False, True, True, True, True, True, True], kind="stable").iloc[0]


def shape_text(row) -> str:
    """A point's problem: its LLM shape name where it has one, else m×n×k (and the batch)."""
    name = row.get("shape_name")
    return str(name) if isinstance(name, str) and name else data.problem_text(row, cube=False)


def roof_text(row) -> str:
    """Which copy row a point's % divides by, in words."""
    gbs = f"{row['roof_gbs'] / 1e3:.3g} TB/s"
    return f"its run's copy probe ({gbs})" if row["roof"] == SAME_RUN else f"the device's best copy row ({gbs})"
