"""Result rows in, the quantities every figure and table shares out.

Which rows count is :mod:`analysis.read`'s (re-exported here, so callers need one module); the
helpers here decide what "cuBLAS" means for a point (the faster of the
``cublas`` and ``cublaslt`` backends: timed interleaved with the point, or the best standalone
row at that size), which device config holds a device's datasheet ceilings, and what the
measured ceilings are (the best GEMM row per precision; bandwidth from the ``copy`` probe). The
claims report, the tables and the figures import them instead of re-deriving any of it.

One statistic for one point: where several rows measured the same point (several runs, or a
sweep of configurations), the point's number is its **best** row (the shortest median time),
one row of one run, never a median or a maximum pooled over runs.

Row conventions other experiments follow (see ``gemmlab/rows.py`` for every column):
- ``op == "copy"``: a device-to-device copy; ``bytes_min`` is the bytes read plus written, so
  ``bytes_min / time_median_s`` is the measured memory bandwidth.
- ``op == "transfer"``: host-device transfers of a GEMM point's operands (same ``precision``,
  ``m``, ``n``, ``k``); ``time_median_s`` is the transfer time. Rows that split the directions
  carry ``{"direction": "h2d" | "d2h"}`` in ``extra`` and are summed per point.
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from gemmlab import devices
from gemmlab.devices import DeviceConfig
from analysis.read import *  # noqa: F401,F403  (the reading and evidence rules, one namespace for callers)
from analysis.read import not_evidence_reasons  # noqa: F401
from analysis.read import (COPY, CUBLAS_BACKENDS, CUBLAS_VARIANTS, GEMM, POINT_KEYS, SHAPE_COLUMNS, TRANSFER, evidence,
                           evidence_mask, gemm, measured, measured_mask, precision_order, stable, stage_of,
                           variant_order)

# -- datasheets (gemmlab.devices reads conf/device) --------------------------------------------
FALLBACK_DEVICE_CONFIG = devices.FALLBACK
device_configs = devices.configs
match_device_config = devices.match


# -- one number per point ------------------------------------------------------------------
BEST_ORDER = ["time_median_s", "variant", "run_id"]  # the best row: shortest median time; ties by name


def best_rows(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per ``by`` group of timed rows, its best row (the shortest median time; ties to the
    variant and run that sort first): one row of one run, with ``rows`` = the group's size."""
    t = df["time_median_s"]
    timed = np.flatnonzero((t.notna() & (t > 0)).to_numpy())
    if not len(timed):
        return df.iloc[timed].assign(rows=pd.Series(dtype="int64"))
    # Filter, sort and group only the key columns, then take the chosen rows of the whole (wide)
    # frame once: reordering every column of a run's rows per call was most of the figures' time.
    keys = list(dict.fromkeys(list(by) + BEST_ORDER))
    order = df[keys].iloc[timed].reset_index(drop=True).sort_values(list(by) + BEST_ORDER, kind="stable")
    count = order.groupby(list(by), sort=True, dropna=False)["time_median_s"].transform("size")
    first = order.groupby(list(by), sort=True, dropna=False).head(1).index  # positions in timed
    return df.iloc[timed[first]].assign(rows=count.loc[first].to_numpy().astype("int64")).reset_index(drop=True)


POINT_COLUMNS = ["time_s", "time_lo_s", "time_hi_s", "flops", "bytes_min", "rel_error", "intensity",
                 "intensity_model", "rows", "run_id", "tflops", "tflops_lo", "tflops_hi"]


def best_points(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """One line per ``by`` group: its best row (:func:`best_rows`) as ``time_s`` (median),
    ``time_lo_s`` / ``time_hi_s`` (its p20 / p80), ``tflops`` from ``time_s`` (and from p80 / p20
    for ``tflops_lo`` / ``tflops_hi``), its error, intensities and run."""
    best = best_rows(df, by)
    if best.empty:
        return pd.DataFrame(columns=list(by) + POINT_COLUMNS)
    out = best[list(by)].copy()
    out["time_s"] = best["time_median_s"]
    out["time_lo_s"] = best["time_p20_s"].where(best["time_p20_s"].notna(), best["time_median_s"])
    out["time_hi_s"] = best["time_p80_s"].where(best["time_p80_s"].notna(), best["time_median_s"])
    for c in ("flops", "bytes_min", "rel_error", "intensity", "intensity_model", "rows", "run_id"):
        out[c] = best[c]
    out["tflops"] = out["flops"] / out["time_s"] / 1e12
    out["tflops_lo"] = out["flops"] / out["time_hi_s"] / 1e12
    out["tflops_hi"] = out["flops"] / out["time_lo_s"] / 1e12
    for c in ("time_s", "tflops", "tflops_lo", "tflops_hi"):
        out[c] = stable(out[c])
    return out.reset_index(drop=True)


# -- baselines and ceilings ------------------------------------------------------------------
def _library_rows(df: pd.DataFrame) -> pd.DataFrame:
    lib = gemm(evidence(df))
    return lib[lib["backend"].isin(CUBLAS_BACKENDS) & lib["variant"].isin(CUBLAS_VARIANTS)
               & lib["time_median_s"].notna() & (lib["time_median_s"] > 0)]


def _empty_cublas(cols: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="Int64" if c in SHAPE_COLUMNS or c == "batch" else "float64"
                                      if c.endswith(("_s", "_tflops")) else object) for c in cols})


def cublas_per_run(df: pd.DataFrame) -> pd.DataFrame:
    """Per (run_id, precision, m, n, k): the faster of cublas and cublaslt in that run (the
    baseline of a point whose row has no interleaved one).

    Columns: the keys, ``cublas_variant``, ``cublas_time_s``, ``cublas_tflops``.
    """
    cols = POINT_KEYS + ["cublas_variant", "cublas_time_s", "cublas_tflops"]
    lib = _library_rows(df)
    if lib.empty:
        return _empty_cublas(cols)
    best = best_rows(lib, POINT_KEYS)[POINT_KEYS + ["variant", "time_median_s", "tflops"]]
    best.columns = cols
    return best.reset_index(drop=True)


best_cublas = cublas_per_run  # the name earlier callers used

STANDALONE_KEYS = ["precision", "layout", "batch", "m", "n", "k"]


def cublas_standalone(df: pd.DataFrame) -> pd.DataFrame:
    """Per (precision, m, n, k): the best standalone cuBLAS row, the fastest row of cublas or
    cublaslt measured as a point of its own (not the baseline column of another point), over
    every run: "cuBLAS at this size" wherever a table, a figure or a claim quotes it.

    Columns: the keys, ``cublas_variant``, ``cublas_run_id``, ``cublas_time_s``, ``cublas_tflops``.
    """
    cols = STANDALONE_KEYS + ["cublas_variant", "cublas_run_id", "cublas_time_s", "cublas_tflops"]
    lib = _library_rows(df)
    if lib.empty:
        return _empty_cublas(cols)
    best = best_rows(lib, STANDALONE_KEYS)[STANDALONE_KEYS + ["variant", "run_id", "time_median_s", "tflops"]]
    best.columns = cols
    return best.reset_index(drop=True)


def with_pct_of_cublas(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` plus both readings of "% of cuBLAS":

    - interleaved: ``cublas_variant``, ``cublas_tflops``, ``pct_of_cublas`` = 100 x cuBLAS time /
      time, against the row's own baseline, timed interleaved with it (``baseline_*``, same
      clock state), else the faster library of the same run (:func:`cublas_per_run`);
    - standalone: ``standalone_variant``, ``standalone_tflops``, ``pct_of_standalone`` against the
      best standalone cuBLAS row at that size (:func:`cublas_standalone`).

    NaN where there is no such baseline.
    """
    base = cublas_per_run(df)
    out = df.merge(base, on=POINT_KEYS, how="left")
    if "baseline_time_median_s" in out:
        own = pd.to_numeric(out["baseline_time_median_s"], errors="coerce")
        has = own.notna()
        out.loc[has, "cublas_variant"] = out.loc[has, "baseline_variant"]
        out.loc[has, "cublas_time_s"] = own[has]
        out.loc[has, "cublas_tflops"] = pd.to_numeric(out.loc[has, "baseline_tflops"], errors="coerce")
    out["pct_of_cublas"] = stable(100.0 * out["cublas_time_s"] / out["time_median_s"])
    alone = cublas_standalone(df).rename(columns={"cublas_variant": "standalone_variant",
                                                  "cublas_run_id": "standalone_run_id",
                                                  "cublas_time_s": "standalone_time_s",
                                                  "cublas_tflops": "standalone_tflops"})
    out = out.merge(alone, on=STANDALONE_KEYS, how="left")
    out["pct_of_standalone"] = stable(100.0 * out["standalone_time_s"] / out["time_median_s"])
    out.index = df.index
    return out


@dataclass(frozen=True)
class Ceilings:
    """Datasheet and measured ceilings of one device (the rows' device of one kind)."""

    kind: str  # gpu | cpu
    device: Optional[str]  # the device named in the rows; None when no row of this kind
    config: DeviceConfig  # the datasheet config chosen for it
    matched: bool  # config's name matched the rows' device (False: fallback)
    measured_tflops: Mapping[str, float]  # best GEMM evidence row per precision
    measured_bandwidth_gbs: Optional[float]  # best copy-probe bandwidth; None without copy rows
    other_devices: Tuple[str, ...] = field(default=())  # devices of this kind left out

    @property
    def datasheet_tflops(self) -> Mapping[str, float]:
        return self.config.peak_tflops

    @property
    def datasheet_bandwidth_gbs(self) -> float:
        return self.config.memory_bandwidth_gbs

    @property
    def sheet(self) -> Optional[DeviceConfig]:
        """The datasheet of this device, None when no conf/device entry names it (a fallback
        config describes another device: nothing to compare this one with)."""
        return self.config if self.matched else None

    @property
    def bandwidth_gbs(self) -> float:
        """The memory roof: measured where the copy probe ran, else the datasheet's."""
        m = self.measured_bandwidth_gbs
        return m if m is not None else self.datasheet_bandwidth_gbs

    def ridge(self, precision: str, measured: bool = True) -> Optional[float]:
        """I* = P / BW in FLOP/byte, from measured ceilings (or the datasheet's)."""
        if measured:
            p, bw = self.measured_tflops.get(precision), self.bandwidth_gbs
        else:
            p, bw = self.datasheet_tflops.get(precision), self.datasheet_bandwidth_gbs
        return None if p is None else p * 1e12 / (bw * 1e9)

    @property
    def label(self) -> str:
        return self.device or self.config.name


def primary_device(df: pd.DataFrame, kind: str, meas: Optional[pd.Series] = None
                   ) -> Tuple[Optional[str], Tuple[str, ...]]:
    """The device with the most measured rows of ``kind`` (ties by name), and the others
    (``meas``: :func:`measured_mask` of ``df`` where the caller has it already)."""
    meas = measured_mask(df) if meas is None else meas
    mask = meas & (df["kind"] == kind) & (df["device"] != "")
    devices = df.loc[mask, "device"]  # one column: filtering the whole frame cost most of this
    if devices.empty:
        return None, ()
    counts = devices.value_counts()
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[0][0], tuple(d for d, _ in ranked[1:])


def device_rows(df: pd.DataFrame, kind: str, rows: str = "evidence") -> pd.DataFrame:
    """Evidence rows of ``kind`` on its primary device (what one roofline can show);
    ``rows="measured"``: every measured row there, evidence or not (figures that draw every
    point draw the others hollow)."""
    meas = measured_mask(df)
    device, _ = primary_device(df, kind, meas)
    if not device:
        return df.iloc[:0]
    pick = evidence_mask(df, meas) if rows == "evidence" else meas
    return df[pick & (df["kind"] == kind) & (df["device"] == device)]


def problem_text(row, cube: bool = True) -> str:
    """A row's problem as text: ``m×n×k`` (``N³`` for a cube when ``cube``), prefixed by the batch
    count when it is above 1 and followed by the layout when it is not nn: ``128 × 1×7168×2048 nt``."""
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    text = f"{m}³" if cube and m == n == k else f"{m}×{n}×{k}"
    batch, layout = row.get("batch"), row.get("layout")
    if batch is not None and not pd.isna(batch) and int(batch) > 1:
        text = f"{int(batch)} × {text}"
    if isinstance(layout, str) and layout not in ("", "nn"):
        text += f" {layout}"
    return text


def copy_bandwidth_gbs(df: pd.DataFrame) -> Optional[float]:
    """Best bandwidth of the ``copy`` evidence rows in ``df`` (bytes read + written / time), GB/s."""
    c = evidence(df)
    c = c[(c["op"] == COPY) & (c["time_median_s"] > 0) & (c["bytes_min"] > 0)]
    if c.empty:
        return None
    return stable(float((c["bytes_min"] / c["time_median_s"]).max() / 1e9))


def copy_row(df: pd.DataFrame) -> Optional[pd.Series]:
    """The copy row that set :func:`copy_bandwidth_gbs`."""
    c = evidence(df)
    c = c[(c["op"] == COPY) & (c["time_median_s"] > 0) & (c["bytes_min"] > 0)]
    if c.empty:
        return None
    return c.assign(_gbs=c["bytes_min"] / c["time_median_s"]).sort_values(
        ["_gbs", "variant", "run_id"], ascending=[False, True, True], kind="stable").iloc[0]


def peak_rows(df: pd.DataFrame, kind: str = "gpu") -> pd.DataFrame:
    """The measured peak of each precision on the primary device of ``kind``: its best GEMM
    evidence row (the highest TFLOP/s of any size, variant and run; a probe's FLOP count is not
    a GEMM's)."""
    rows = device_rows(df, kind)
    rows = rows[(rows["op"] == GEMM) & (rows["tflops"] > 0)]
    if rows.empty:
        return rows
    rows = rows.sort_values(["precision", "tflops", "variant", "run_id"], ascending=[True, False, True, True],
                            kind="stable")
    return rows.groupby("precision", sort=True).head(1)


def device_ceilings(df: pd.DataFrame, kind: str = "gpu") -> Ceilings:
    """Ceilings of the primary device of ``kind`` in ``df``: datasheet from ``conf/device``,
    measured from the rows (:func:`peak_rows`; copy-probe bandwidth)."""
    device, others = primary_device(df, kind)
    config, matched = match_device_config(device, kind)
    best = peak_rows(df, kind)
    measured_ = {p: float(best.loc[best["precision"] == p, "tflops"].iloc[0])
                 for p in precision_order(best["precision"])}
    return Ceilings(kind, device, config, matched, measured_, copy_bandwidth_gbs(device_rows(df, kind)),
                    others)


def transfer_times(df: pd.DataFrame) -> pd.DataFrame:
    """Host-device transfer time per GEMM point and transfer variant (pageable, pinned, ...), s:
    ``op == transfer`` evidence rows, the best row per direction, summed over directions.
    Columns: precision, m, n, k, variant, ``memory`` (the row's ``extra.memory``, else the
    variant), ``transfer_s``."""
    cols = ["precision", "m", "n", "k", "variant"]
    t = evidence(df)
    t = t[(t["op"] == TRANSFER) & t["time_median_s"].notna()]
    if t.empty:
        return pd.DataFrame({"precision": pd.Series(dtype=object),
                             **{c: pd.Series(dtype="Int64") for c in "mnk"},
                             "variant": pd.Series(dtype=object), "memory": pd.Series(dtype=object),
                             "transfer_s": pd.Series(dtype="float64")})
    extra = [extra_of(e) for e in t["extra"]]
    t = t.assign(direction=[e.get("direction", "total") for e in extra],
                 memory=[str(e.get("memory") or v) for e, v in zip(extra, t["variant"])])
    per = best_rows(t, cols + ["memory", "direction"])
    total = per.groupby(cols + ["memory"], sort=True)["time_median_s"].sum().rename("transfer_s").reset_index()
    total["transfer_s"] = stable(total["transfer_s"])
    return total


def extra_of(text) -> dict:
    """A row's JSON cell (``extra``, ``defines``) as a dict ({} when empty, missing or not a JSON
    object)."""
    if isinstance(text, dict):
        return text
    try:
        v = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


# -- one object for the whole paper ----------------------------------------------------------
class Dataset:
    """The rows of one paper build and what every figure derives from them (computed once)."""

    def __init__(self, rows: pd.DataFrame, sources: Sequence[str] = ()):
        self.rows = normalize(rows) if "kind" not in rows.columns else rows
        self.sources = list(sources)

    @classmethod
    def from_paths(cls, paths: Sequence[os.PathLike]) -> "Dataset":
        return cls(load(paths), [str(p) for p in paths])

    @functools.cached_property
    def ok(self) -> pd.DataFrame:
        """Every evidence row (:func:`evidence`)."""
        return evidence(self.rows)

    @functools.cached_property
    def gpu(self) -> pd.DataFrame:
        """Evidence rows on the primary GPU device."""
        return device_rows(self.rows, "gpu")

    @functools.cached_property
    def cpu(self) -> pd.DataFrame:
        return device_rows(self.rows, "cpu")

    def measured_rows(self, kind: str) -> pd.DataFrame:
        """Every measured row on the primary device of ``kind``, with ``evidence`` (bool)."""
        rows = device_rows(self.rows, kind, rows="measured")
        return rows.assign(evidence=evidence_mask(rows).astype(bool))

    def left_out(self, kind: Optional[str] = None, op: str = GEMM, precision: Optional[str] = None,
                 backends: Optional[Sequence[str]] = None) -> str:
        """Why measured rows of ``kind`` (both kinds if None) are missing from a figure that draws
        the rows that count: "" when none were left out, else " that count (3 left out: fewer than
        10 samples)". For notes like "no CPU BLAS rows at fp32", which would mislead otherwise."""
        kinds = ("cpu", "gpu") if kind is None else (kind,)
        rows = pd.concat([device_rows(self.rows, k, rows="measured") for k in kinds])
        rows = rows[rows["op"] == op]
        if precision is not None:
            rows = rows[rows["precision"] == precision]
        if backends is not None:
            rows = rows[rows["backend"].isin(backends)]
        why = not_evidence_reasons(rows)
        why = why[why != ""]
        if why.empty:
            return ""
        counts = ", ".join(f"{r}: {n}" for r, n in sorted(why.value_counts().items()))
        return f" that count ({len(why)} left out: {counts})"

    @functools.cached_property
    def gpu_ceilings(self) -> Ceilings:
        return device_ceilings(self.rows, "gpu")

    @functools.cached_property
    def cpu_ceilings(self) -> Ceilings:
        return device_ceilings(self.rows, "cpu")

    @functools.cached_property
    def stages(self) -> dict:
        """Each variant's stage, as its rows say."""
        return stage_of(self.rows)

    @functools.cached_property
    def variants(self) -> List[str]:
        """Every variant with an ok row, in legend order (fixes each variant's colour)."""
        return variant_order(self.ok)


def dataset_from_cli(prog: str, results) -> "Dataset | None":
    """The Dataset of the command line's RESULTS (default: the reference data), or None after
    printing why there is none (the command then exits 2)."""
    import sys

    try:
        return Dataset.from_paths(results)
    except FileNotFoundError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None


REFERENCE = Path(__file__).resolve().parent.parent / "outputs" / "reference"  # committed measurements
OUT_SUBFOLDER = "paper"


def output_folder(prog: str, results: Sequence[os.PathLike], out: Optional[os.PathLike],
                  subfolder: str = OUT_SUBFOLDER) -> Optional[Path]:
    """Where a command that writes files from RESULTS writes them: ``--out`` when given, else
    ``RESULTS/<subfolder>/`` (beside a results file given alone; ``paper`` by default). Only an explicit ``--out`` rewrites
    the committed ``outputs/paper/``; without RESULTS (the reference data) ``--out`` is required,
    and nothing is ever written under ``outputs/reference/``. None after printing why not."""
    import sys

    if out is not None:
        folder = Path(out)
    elif not results:
        print(f"{prog}: reading the reference data needs --out (--out outputs/paper rewrites the committed "
              f"outputs; any other folder leaves them alone)", file=sys.stderr)
        return None
    elif len(results) > 1:
        print(f"{prog}: several RESULTS: say where the files go with --out", file=sys.stderr)
        return None
    else:
        given = Path(results[0])
        folder = (given if given.is_dir() else given.parent) / subfolder
    try:
        Path(folder).resolve().relative_to(REFERENCE)
    except ValueError:
        return folder
    print(f"{prog}: {folder} is inside outputs/reference/, the committed measurements; give --out elsewhere",
          file=sys.stderr)
    return None
