"""Reading result rows, and which of them count: the rules every figure, table and claim share.

- :func:`load` / :func:`normalize`: rows in (``gemmlab.rows.read``), typed columns. What a variant
  was (``kind``, ``stage``, ``description``, ``defines``) is the row's own, written when it was
  measured; rows written before those columns get them from ``python -m gemmlab.migrate`` (from
  git history), never from today's ``conf/``.
- :func:`evidence`: the rows that count; :func:`not_evidence_reasons` says why a row does not.
- The order of precisions, backends and variants (every legend's), and what the harness offers
  today (``gemmlab.variants``), for coverage notes and colours, never for a row's meaning.
"""
from __future__ import annotations

import functools
import hashlib
import os
import warnings
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import pandas as pd

from gemmlab import rows as result_rows
from gemmlab import variants as catalog

GEMM, COPY, TRANSFER, GEMM_E2E = "gemm", "copy", "transfer", "gemm_e2e"
# Ops whose TFLOP/s is a kernel's throughput at a known intensity: the roofline's points and the
# measured peaks. Other probes (copy, transfer, gemm_e2e with its transfers, first_run, the
# shared-memory and pitfall probes) measure something else.
THROUGHPUT_OPS = (GEMM, "gemv", "vecadd")
CUBLAS_BACKENDS = ("cublas", "cublaslt")  # "cuBLAS" of a point = the faster of these in its run
# ... as a user gets them by default: a searched cuBLASLt (cublaslt_search) is a tuning result,
# never the baseline a "% of cuBLAS" divides by
CUBLAS_VARIANTS = ("cublas", "cublaslt")
HANDWRITTEN_BACKEND = "cuda"  # the ladder's stages
CUTLASS_BACKEND = "cutlass"
# The usual order of precisions, widest first; names not listed follow alphabetically.
PRECISION_ORDER = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
# Backends in the order figures list them: the CPU baseline, the ladder, then the libraries.
BACKEND_ORDER = ("cpu_blas", "cuda", "cutlass", "cublas", "cublaslt", "cpu_probe", "gpu_probe")

POINT_KEYS = ["run_id", "precision", "layout", "batch", "m", "n", "k"]  # one GEMM problem within one run
NUMERIC_COLUMNS = (
    "flops", "bytes_min", "intensity", "intensity_model", "time_median_s", "time_p20_s",
    "time_p80_s", "time_min_s", "samples", "noise", "median_ci", "tflops", "rel_error", "max_abs_error",
    "tolerance", "baseline_time_median_s", "baseline_tflops", "pct_of_baseline",
    "sm_clock_min_mhz", "sm_clock_max_mhz", "mem_clock_min_mhz", "mem_clock_max_mhz", "power_w", "temperature_c",
    "bytes_dram", "bytes_l2", "bytes_l1", "intensity_dram", "intensity_l2", "intensity_l1",
)
SHAPE_COLUMNS = ("m", "n", "k")
DEFAULT_LAYOUT = "nn"  # A and B as stored by rows without a layout column
TEXT_COLUMNS = ("run_id", "device", "backend", "variant", "precision", "op", "status", "reason",
                "in_dtype", "out_dtype", "compute", "extra", "timer", "unreliable_reason")
FLAG_COLUMNS = ("reliable", "contended")  # true / false / missing (rows written before them)
CUPTI_TIMER = "cupti_kernel"
EXACT_INPUTS = "exact"  # measure.distribution=exact: small-integer inputs, for the check
# inputs unlike the chapter's data (random normal or uniform): a correctness tool (exact) and a
# power study (sparse); both change the power drawn and so the clock, so they set no peak
STUDY_INPUTS = (EXACT_INPUTS, "sparse")
# A timed row is evidence only with at least this many samples, whatever its run's own stopping
# rule asked: a run with measure=quick (3 samples, max_noise 100%, the correctness sweep's setting)
# judges its rows reliable by that lax rule. The default timing takes at least 10.
EVIDENCE_MIN_SAMPLES = 10
# Variants wrong on purpose (the check's negative controls; the conduct controls, which compute C
# right and misbehave elsewhere, and are ok where they do not): rows that show the harness catches
# them, never a measurement a figure draws
CONTROL_TAGS = ("negative_control", "conduct_control")


# -- reading ---------------------------------------------------------------------------------
STABLE_DIGITS = 12


def stable(x):
    """``x`` rounded to 12 significant digits (a float or a Series).

    CSV parsers and median implementations differ in the last bit between library versions;
    rounding every number a figure draws keeps the files byte-identical across them.
    """
    import numpy as np

    def one(v):
        return v if v is None or pd.isna(v) or not np.isfinite(v) else float(f"{v:.{STABLE_DIGITS}g}")

    if isinstance(x, pd.Series):
        return x.astype("float64").map(one).astype("float64")
    return one(x)

def load(paths: Iterable[os.PathLike] | os.PathLike) -> pd.DataFrame:
    """Every row of the results files at ``paths`` (files or folders), each once
    (:func:`gemmlab.rows.read`), with typed columns.

    ``kind`` (cpu | gpu), ``stage`` and ``description`` are the row's own (what the variant was
    when measured); rows written before those columns lack them until ``python -m gemmlab.migrate``
    adds them (a warning says so).

    The same files (by content) are read once per process: a test session reads the reference data
    many times (2.6 CPU-s each time for the whole of it). Each caller gets its own copy.
    """
    files = result_rows.results_files(paths)
    key = tuple(hashlib.blake2b(Path(f).read_bytes(), digest_size=16).digest() for f in files)
    if key in _LOADED:
        _LOADED[key] = _LOADED.pop(key)  # the most recently used last
    else:
        _LOADED[key] = _normalized(result_rows.read(files))
        while len(_LOADED) > 1 and sum(df.size for df, _ in _LOADED.values()) > _LOADED_MAX_CELLS:
            _LOADED.pop(next(iter(_LOADED)))  # the least recently used
    df, old = _LOADED[key]
    if old:
        _warn_unmigrated(old, stacklevel=2)
    return df.copy()


_LOADED: Dict[tuple, Tuple[pd.DataFrame, int]] = {}  # the files' contents -> (load's frame, rows before kind)
_LOADED_MAX_CELLS = 5_000_000  # about three times the reference data (1.6 M cells, 29 MB)


def flag(values: pd.Series) -> pd.Series:
    """A true/false column as written (``true``, ``false``, ``1``, ``0``, booleans) as a nullable
    boolean; anything else (empty, a row written before the column existed) is missing."""
    def one(v):
        if isinstance(v, bool):
            return v
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            return pd.NA
        text = str(v).strip().lower()
        return True if text in ("true", "1", "1.0", "yes") else False if text in ("false", "0", "0.0", "no") \
            else pd.NA
    return pd.Series([one(v) for v in values], index=values.index, dtype="boolean")


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Typed columns and the derived ``kind``, ``stage``, ``description`` (see :func:`load`)."""
    df, old = _normalized(df)
    if old:
        _warn_unmigrated(old, stacklevel=3)
    return df


def _warn_unmigrated(rows: int, stacklevel: int) -> None:
    warnings.warn(f"{rows} rows were written before rows said what their variant was (kind, "
                  f"stage, description, tags, defines): run `python -m gemmlab.migrate <results>` to add "
                  f"them from git history; until then they have no stage or description",
                  stacklevel=stacklevel + 1)


def _normalized(df: pd.DataFrame) -> Tuple[pd.DataFrame, int]:
    """:func:`normalize`'s frame, and how many of its rows were written before rows said what their
    variant was (for the warning)."""
    missing = [c for c in result_rows.COLUMN_NAMES if c not in df.columns]
    # the columns an older file lacks, added at once (one at a time fragments the frame)
    df = pd.concat([df, pd.DataFrame(pd.NA, index=df.index, columns=missing)], axis=1) if missing else df.copy()
    for c in NUMERIC_COLUMNS:
        df[c] = stable(pd.to_numeric(df[c], errors="coerce").astype("float64"))
    for c in SHAPE_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    for c in TEXT_COLUMNS:
        df[c] = df[c].astype(object).where(df[c].notna(), "").astype(str)
    for c in FLAG_COLUMNS:
        df[c] = flag(df[c])
    df.loc[df["op"] == "", "op"] = GEMM  # rows written before the op column existed
    # the workload axes (gemmlab/operands.py): rows written before them are one nn GEMM, unnamed
    df["layout"] = _text(df, "layout").str.strip().replace("", DEFAULT_LAYOUT)
    df["batch"] = pd.to_numeric(df["batch"], errors="coerce").fillna(1).astype("Int64")
    df["shape_name"] = _text(df, "shape_name")
    # what a variant was when measured, as the row says (see load)
    kind = df["kind"].astype(object).where(df["kind"].notna(), "").astype(str).str.strip()
    df["kind"] = [k if k in ("cpu", "gpu") else catalog.backend_kind(b) for k, b in zip(kind, df["backend"])]
    df["stage"] = pd.to_numeric(df["stage"], errors="coerce").astype("Int64")
    df["description"] = df["description"].astype(object).where(df["description"].notna(), "").astype(str)
    old = (kind == "") & (df["backend"] != "")
    # a copy is consolidated, one block per dtype where the assignments above left one per column:
    # every row filter of the figures and claims (thousands per paper) takes each block in turn
    return df.reset_index(drop=True).copy(), int(old.sum())


# -- which rows are evidence -------------------------------------------------------------------
def _text(df: pd.DataFrame, column: str) -> pd.Series:
    """``column`` as text, "" where missing (a str Series)."""
    if column not in df.columns:
        return pd.Series("", index=df.index)
    c = df[column]
    # the masks below ask for the same few columns of every frame, thousands of times a paper: a
    # text column stays text (1 ms a call through Python objects, 0.03 ms so)
    if isinstance(c.dtype, pd.StringDtype):
        if c.dtype.na_value is not pd.NA and not c.hasnans:  # str, and nothing missing: as it is
            return c
        return c.fillna("").astype(str)
    return c.astype(object).where(c.notna(), "").astype(str)


def _flags(df: pd.DataFrame, column: str) -> pd.Series:
    if column not in df.columns:
        return pd.Series(pd.NA, index=df.index, dtype="boolean")
    c = df[column]
    return c if str(c.dtype) == "boolean" else flag(c)


def measured_mask(df: pd.DataFrame) -> pd.Series:
    """Rows that measured something the figures may draw: ``status == ok``, timed between CUDA
    events (or on the host), of a variant that is not a control (CONTROL_TAGS). Rows timed by
    CUPTI's kernel spans (``measure.timer=cupti``) leave out the front end's start-up (about 3.5 us
    a call on the H200), a different quantity that is never mixed with the rest; rows timed with the
    check off (:func:`unchecked_mask`) measured a kernel nothing checked."""
    return ((_text(df, "status") == "ok") & (_text(df, "timer") != CUPTI_TIMER) & ~control_mask(df)
            & ~unchecked_mask(df))


def control_mask(df: pd.DataFrame) -> pd.Series:
    """Rows of a control variant (its ``tags`` name one of CONTROL_TAGS)."""
    tags = _text(df, "tags")
    return tags.str.contains("|".join(CONTROL_TAGS), regex=True)


def evidence_mask(df: pd.DataFrame, meas: Optional[pd.Series] = None) -> pd.Series:
    """The rows a verdict, a table, a peak or a best may use: measured (:func:`measured_mask`),
    ``reliable`` not false (its stopping rule was met, no clock drift; rows written before the
    column existed lack it and count), ``contended`` not true (no other process on the GPU), and
    inputs drawn as the chapter's data are (``distribution`` not in STUDY_INPUTS: small integers are a
    correctness tool; they toggle fewer bits, draw less power and let the clock stay up, so
    cuBLAS FP16 ran 12 % faster on them on the H200; sparse inputs are a power study).
    ``meas``: :func:`measured_mask` of ``df`` where the caller has it already."""
    reliable = _flags(df, "reliable").fillna(True).astype(bool)
    contended = _flags(df, "contended").fillna(False).astype(bool)
    meas = measured_mask(df) if meas is None else meas
    return (meas & reliable & ~contended & ~_text(df, "distribution").isin(STUDY_INPUTS) & ~_few_samples(df)
            & ~unchecked_mask(df))


def unchecked_mask(df: pd.DataFrame) -> pd.Series:
    """Rows timed with the check off (``measure.check=false``: their ``extra`` says ``"check": "off"``):
    a speed nothing vouches for (a diagnostic build that is wrong by design, or a kernel under work):
    neither drawn nor evidence."""
    return _text(df, "extra").str.contains(r'"check":\s*"off"', regex=True)


def _few_samples(df: pd.DataFrame) -> pd.Series:
    """Timed rows with fewer than EVIDENCE_MIN_SAMPLES samples (untimed rows are not few)."""
    n = pd.to_numeric(df["samples"], errors="coerce") if "samples" in df else pd.Series(float("nan"), index=df.index)
    return n.notna() & (n < EVIDENCE_MIN_SAMPLES)


def measured(df: pd.DataFrame) -> pd.DataFrame:
    return df[measured_mask(df)]


def evidence(df: pd.DataFrame) -> pd.DataFrame:
    """The measurements that count (see :func:`evidence_mask`); failed and skipped rows measured
    nothing."""
    return df[evidence_mask(df)]


ok = evidence  # the name earlier callers used


def not_evidence_reasons(df: pd.DataFrame) -> pd.Series:
    """Per row, why a measured row is not evidence: "CUPTI-timed", "exact inputs", "contended",
    "fewer than 10 samples", "unreliable (<unreliable_reason>)"; "" for evidence rows and rows that
    measured nothing."""
    out = pd.Series("", index=df.index, dtype=object)
    control = (_text(df, "status") == "ok") & control_mask(df)
    ok_ = (_text(df, "status") == "ok") & ~control
    cupti = ok_ & (_text(df, "timer") == CUPTI_TIMER)
    contended = ok_ & ~cupti & _flags(df, "contended").fillna(False).astype(bool)
    unreliable = ok_ & ~cupti & ~contended & ~_flags(df, "reliable").fillna(True).astype(bool)
    why = _text(df, "unreliable_reason").str.strip()
    exact = ok_ & ~cupti & _text(df, "distribution").isin(STUDY_INPUTS)
    few = ok_ & ~cupti & ~exact & _few_samples(df)
    unchecked = ok_ & ~cupti & unchecked_mask(df)
    out[few] = f"fewer than {EVIDENCE_MIN_SAMPLES} samples"
    out[cupti] = "CUPTI-timed"
    out[exact] = [f"{d} inputs" for d in _text(df, "distribution")[exact]]
    out[contended] = "contended"
    out[unreliable] = ["unreliable" + (f" ({w})" if w and w != "nan" else "") for w in why[unreliable]]
    out[unchecked] = "unchecked (measure.check=false)"
    out[control] = "a control variant"
    return out


def gemm(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["op"] == GEMM]


def layout_of(df: pd.DataFrame) -> pd.Series:
    """Each row's layout; rows without one (older runs: every GEMM was nn) read nn."""
    if "layout" not in df.columns:
        return pd.Series("nn", index=df.index, dtype=object)
    layout = df["layout"].astype(object)
    return layout.where(layout.notna() & (layout != ""), "nn")


def square(df: pd.DataFrame, layouts: Optional[Sequence[str]] = ("nn",)) -> pd.DataFrame:
    """Square N x N x N problems as the chapter means them: one GEMM (batch 1) with A and B
    row-major as stored (layout nn). Rows of other layouts or batched rows at m = n = k are other
    problems (the layouts and batched experiments): they would stack several points at one N.
    ``layouts``: the layouts kept (rows without one count as nn); None keeps every layout, for a
    caller that picks one per precision (the ladder: FP8 wgmma reads both operands K-major, nt)."""
    same = (df["m"] == df["n"]) & (df["n"] == df["k"])
    if "layout" in df.columns and layouts is not None:
        same &= layout_of(df).isin(list(layouts))
    if "batch" in df.columns:
        batch = pd.to_numeric(df["batch"], errors="coerce")
        same &= batch.isna() | (batch <= 1)
    return df[same]


# -- order ----------------------------------------------------------------------------------
def _ordered(names: Iterable[str], order: Sequence[str]) -> List[str]:
    names = sorted({n for n in names if n})
    rank = {n: i for i, n in enumerate(order)}
    return sorted(names, key=lambda n: (rank.get(n, len(order)), n))


def precision_order(names: Iterable[str]) -> List[str]:
    return _ordered(names, PRECISION_ORDER)


def backend_order(names: Iterable[str]) -> List[str]:
    return _ordered(names, BACKEND_ORDER)


def stage_of(df: pd.DataFrame) -> dict:
    """Each variant's stage as its rows say (None for variants without one)."""
    if df.empty or "stage" not in df.columns:
        return {}
    s = df.groupby("variant", sort=True)["stage"].min()
    return {v: (None if pd.isna(x) else int(x)) for v, x in s.items()}


def stage_key(stages: dict):
    """A sort key for variant names: stages in order, then the unstaged, each by name."""
    return lambda v: (stages.get(v) is None, stages.get(v) or 0, v)


def variant_order(df: pd.DataFrame, stages: Optional[dict] = None) -> List[str]:
    """Variants of ``df`` by backend, then stage, then name: every legend's order. Stages as the
    rows say: ``stages`` (e.g. ``Dataset.stages``) for frames without a stage column."""
    pairs = df[["backend", "variant"]].drop_duplicates()
    b_rank = {b: i for i, b in enumerate(backend_order(pairs["backend"]))}
    key = stage_key(stage_of(df) if stages is None else stages)
    return list(dict.fromkeys(v for b, v in sorted(map(tuple, pairs.to_numpy()),
                                                   key=lambda p: (b_rank.get(p[0], len(b_rank)), *key(p[1])))))


# -- what the harness offers today: coverage notes ("no cuBLASLt rows") and colours only ----------
@functools.lru_cache(maxsize=None)
def configured_backends() -> Tuple[str, ...]:
    """Backends of today's GEMM variants (probes left out): the backends a complete dataset of
    GEMM rows covers."""
    return tuple(backend_order(i.backend for i in catalog.all_info() if i.probe is None))


@functools.lru_cache(maxsize=None)
def configured_precisions(kind: Optional[str] = None) -> Tuple[str, ...]:
    """Precisions that some GEMM variant of today (of backends of ``kind``, if given) supports."""
    supported = {p for i in catalog.all_info() if i.probe is None and (kind is None or i.kind == kind)
                 for p in i.precisions}
    return tuple(precision_order(supported))


def backend_kind(backend: str) -> str:
    return catalog.backend_kind(backend)


def missing(present: Iterable[str], expected: Iterable[str]) -> List[str]:
    present = set(present)
    return [e for e in expected if e not in present]
