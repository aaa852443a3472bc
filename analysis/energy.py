"""Energy, power and clock per GEMM (issue 21): the numbers behind the energy_efficiency,
power_clock and inputs_power figures and the energy table.

Energy columns (``measure.energy=true``, :mod:`gemmlab.measure.energy`): ``energy_j`` per call,
``gflops_per_joule``, ``power_avg_w`` (counter energy / window), ``power_limit_w``,
``sm_clock_avg_mhz``, ``throttle_reasons``. A row "has energy" when ``energy_j`` > 0. Every point is
its best row (:func:`analysis.data.best_rows`, the shortest median time), and its GFLOP/J, power and
clock are that row's own, never pooled over rows.
"""
from __future__ import annotations

from typing import List

import pandas as pd

from . import data

ENERGY_COLUMNS = ("energy_j", "gflops_per_joule", "power_avg_w", "power_limit_w", "sm_clock_avg_mhz",
                  "input_scale", "warmup_s")
MEASURE_SQUARE = "python run.py +experiment=cublas_square measure.energy=true"
MEASURE_INPUTS = "python run.py -m +experiment=inputs_power"
INPUTS_EXPERIMENT = "inputs_power"
SUSTAINED_WARMUP_S = 1.0  # measure=sustained warms up 1.5 s (the default 0.5 s): the settled clock
POWER_CLOCK_PRECISIONS = ("bf16", "fp16")
TABLE_N = 8192
DISTRIBUTIONS = ("normal", "uniform", "exact", "sparse")  # inputs_power's sweep, in its order
HANDWRITTEN = "handwritten"  # the series of the best hand-written stage at each N


def text(df: pd.DataFrame, column: str) -> pd.Series:
    if column not in df.columns:
        return pd.Series("", index=df.index, dtype=object)
    c = df[column].astype(object)
    return c.where(c.notna(), "").astype(str)


def numeric(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the energy columns as floats (the reader leaves them as written)."""
    out = df.copy()
    for c in ENERGY_COLUMNS:
        out[c] = data.stable(pd.to_numeric(out[c], errors="coerce").astype("float64")) if c in out \
            else float("nan")
    return out


def has_energy(df: pd.DataFrame) -> pd.Series:
    return df["energy_j"].notna() & (df["energy_j"] > 0)


def clock_mhz(df: pd.DataFrame) -> pd.Series:
    """The SM clock a row ran at: ``sm_clock_avg_mhz`` (the energy window's mean) where present, else
    the median of the in-band clock the spin read before each sample (``extra.timer``), else the
    middle of NVML's lowest and highest clock over the samples."""
    out = df["sm_clock_avg_mhz"].copy() if "sm_clock_avg_mhz" in df else pd.Series(float("nan"), index=df.index)
    inband = []
    for e in text(df, "extra"):
        band = data.extra_of(e).get("timer", {})
        band = band.get("sm_clock_inband_mhz") if isinstance(band, dict) else None
        inband.append(float(band[1]) if isinstance(band, list) and len(band) == 3 else float("nan"))
    out = out.where(out.notna(), pd.Series(inband, index=df.index, dtype="float64"))
    lo, hi = (pd.to_numeric(df[c], errors="coerce") if c in df else pd.Series(float("nan"), index=df.index)
              for c in ("sm_clock_min_mhz", "sm_clock_max_mhz"))
    return data.stable(out.where(out.notna(), (lo + hi) / 2))


def _gpu_square(rows: pd.DataFrame) -> pd.DataFrame:
    rows = data.square(data.gemm(rows))
    return rows[rows["time_median_s"].notna() & (rows["time_median_s"] > 0)]


POINT_OUT = ["precision", "n", "series", "variant", "backend", "run_id", "tflops", "gflops_per_joule", "energy_j",
             "power_avg_w", "power_limit_w", "clock_mhz", "throttle_reasons"]


def _points(best: pd.DataFrame, series: pd.Series) -> pd.DataFrame:
    out = best.assign(series=series.to_numpy(), clock_mhz=clock_mhz(best),
                      throttle_reasons=text(best, "throttle_reasons"))
    out["n"] = out["n"].astype("int64")
    return out[POINT_OUT]


def efficiency_points(ds: data.Dataset) -> pd.DataFrame:
    """GFLOP/J against N: per precision and square N, the best evidence row with energy columns of
    cublas, of cublaslt (their default variants) and of the hand-written stages (``series`` =
    HANDWRITTEN; ``variant`` says which stage won)."""
    rows = numeric(_gpu_square(ds.gpu))
    rows = rows[has_energy(rows)]
    lib = rows[rows["backend"].isin(data.CUBLAS_BACKENDS) & rows["variant"].isin(data.CUBLAS_VARIANTS)]
    hand = rows[(rows["backend"] == data.HANDWRITTEN_BACKEND) & rows["stage"].notna()]
    parts = []
    if not lib.empty:
        b = data.best_rows(lib, ["precision", "variant", "n"])
        parts.append(_points(b, b["variant"]))
    if not hand.empty:
        b = data.best_rows(hand, ["precision", "n"])
        parts.append(_points(b, pd.Series(HANDWRITTEN, index=b.index)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=POINT_OUT)


def power_clock_points(ds: data.Dataset) -> pd.DataFrame:
    """Per variant, precision (bf16, fp16) and square N: the best sustained evidence row (warmed up
    at least SUSTAINED_WARMUP_S); its TFLOP/s, clock (:func:`clock_mhz`) and, where the row has
    energy columns, its power and power limit."""
    rows = numeric(_gpu_square(ds.gpu))
    rows = rows[rows["precision"].isin(POWER_CLOCK_PRECISIONS) & (rows["warmup_s"] >= SUSTAINED_WARMUP_S)]
    if rows.empty:
        return pd.DataFrame(columns=POINT_OUT)
    b = data.best_rows(rows, ["precision", "variant", "n"])
    return _points(b, b["variant"])


INPUT_OUT = ["distribution", "input_scale", "variant", "backend", "precision", "counts", "study", "tflops",
             "gflops_per_joule", "power_avg_w", "power_limit_w", "clock_mhz", "run_id", "why"]


def inputs_points(ds: data.Dataset) -> pd.DataFrame:
    """The inputs_power experiment: per distribution, input scale, variant and precision, the best
    measured row among those the reliability rules keep (reliable, not contended, enough samples,
    timed by events), exact and sparse inputs included (``study``: not evidence for peaks), and
    separately the best of the rows those rules drop (``counts`` False: drawn hollow, in no best)."""
    rows = ds.measured_rows("gpu")
    rows = numeric(rows[(text(rows, "experiment") == INPUTS_EXPERIMENT) & (rows["op"] == data.GEMM)])
    if rows.empty:
        return pd.DataFrame(columns=INPUT_OUT)
    rows = rows.assign(distribution=text(rows, "distribution").replace("", "normal"),
                       input_scale=rows["input_scale"].fillna(1.0))
    # the evidence rule without its inputs clause: what the figure may call a measurement
    as_normal = rows.assign(distribution="normal")
    rows = rows.assign(why=data.not_evidence_reasons(as_normal))
    kept = data.evidence_mask(as_normal).astype(bool)
    by = ["distribution", "input_scale", "variant", "precision"]
    parts = []
    for counts in (True, False):
        sub = rows[kept == counts]
        if not sub.empty:
            b = data.best_rows(sub, by)
            parts.append(b.assign(counts=counts, study=b["distribution"].isin(data.STUDY_INPUTS),
                                  clock_mhz=clock_mhz(b)))
    out = pd.concat(parts, ignore_index=True)
    rank = {d: i for i, d in enumerate(DISTRIBUTIONS)}
    out = out.assign(_d=[rank.get(d, len(rank)) for d in out["distribution"]])
    out = out.sort_values(["_d", "distribution", "input_scale", "variant", "precision", "counts"],
                          ascending=[True, True, False, True, True, False], kind="stable")
    return out[INPUT_OUT].reset_index(drop=True)


def groups(points: pd.DataFrame) -> List[tuple]:
    """The (distribution, input_scale) groups of :func:`inputs_points`, in the sweep's order."""
    return list(dict.fromkeys(zip(points["distribution"], points["input_scale"])))


def energy_table_frame(ds: data.Dataset, n: int = TABLE_N) -> pd.DataFrame:
    """Energy per GEMM at N = ``n``: per precision and backend, its best evidence row with energy
    columns (any variant of the backend; cublas and cublaslt their default variants)."""
    rows = numeric(_gpu_square(ds.gpu))
    rows = rows[has_energy(rows) & (rows["n"] == n)]
    rows = rows[~rows["backend"].isin(data.CUBLAS_BACKENDS) | rows["variant"].isin(data.CUBLAS_VARIANTS)]
    if rows.empty:
        return pd.DataFrame(columns=POINT_OUT)
    b = data.best_rows(rows, ["precision", "backend"])
    out = _points(b, b["backend"])
    rank = {p: i for i, p in enumerate(data.precision_order(out["precision"]))}
    brank = {x: i for i, x in enumerate(data.backend_order(out["backend"]))}
    order = sorted(range(len(out)), key=lambda i: (rank[out["precision"].iloc[i]], brank[out["backend"].iloc[i]]))
    return out.iloc[order].reset_index(drop=True)


def not_measured(what: str, command: str) -> str:
    return f"{what}: not measured (no rows with energy columns yet); measure with `{command}`"
