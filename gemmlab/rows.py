"""Result rows: the schema, an append-only CSV writer that survives crashes, reading and merging.

One row per measured point. The writer appends and fsyncs each row as soon as it is measured, so
a crash or Ctrl-C keeps every finished row. Analysis reads these files, never printed text.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

RESULTS_FILE = "results.csv"

# (name, meaning). Order is the column order of every results file.
COLUMNS: List[tuple] = [
    # identity
    ("run_id", "run this row belongs to (timestamp + short hash)"),
    ("timestamp", "UTC time the row was written, ISO 8601"),
    ("host", "host name"),
    ("device", "device the point ran on (GPU name or CPU model)"),
    ("backend", "cpu_blas | cublas | cublaslt | cutlass | cuda"),
    ("variant", "variant name (conf/variant/<name>.yaml)"),
    # what the variant was when it was measured (analysis reads these, never today's conf/)
    ("kind", "cpu | gpu: which executor measured it"),
    ("stage", "position on the chapter's ladder (hand-written stages)"),
    ("description", "the variant's description"),
    ("tags", "the variant's tags (ladder, simt, tensor_core, library, cutlass, probe, pitfall, ...)"),
    ("defines", "the kernel's parameters as built: cuda defines, or CUTLASS's tile, cluster and schedules"),
    ("precision", "precision name (conf/precision/<name>.yaml)"),
    ("op", "gemm (or the experiment's operation: gemv, vecadd, copy, transfer, ...)"),
    ("m", "rows of A and C"), ("n", "columns of B and C"), ("k", "inner dimension"),
    ("layout", "how A and B are stored: nn nt tn tt, A and/or B transposed (gemmlab/operands.py); "
               "C = A @ B of the logical matrices either way; rows without it are nn"),
    ("batch", "GEMMs of this shape in one strided batched call (flops and bytes_min count all); "
              "rows without it are 1"),
    ("shape_name", "the shape's name in a named shape set (llama3_70b.mlp_down.t4096); empty otherwise"),
    ("in_dtype", "storage type of A and B"), ("out_dtype", "storage type of C"),
    ("compute", "math the units do (fp64, fp32, tf32, fp16, bf16, fp8)"),
    ("point_key", "hash of the point's full config; resume and merge key"),
    # work
    ("flops", "2*batch*m*n*k"),
    ("bytes_min", "each input read once and the output written once, bytes"),
    ("intensity", "flops / bytes_min, FLOP/byte"),
    ("intensity_model", "modeled DRAM intensity of the variant, FLOP/byte"),
    # timing
    ("time_median_s", "median sample time, s"), ("time_p20_s", "20th percentile, s"),
    ("time_p80_s", "80th percentile, s"), ("time_min_s", "fastest sample, s"),
    ("samples", "timed samples"), ("noise", "(p80 - p20) / median"),
    ("median_ci", "relative half-width of the median's distribution-free 95% interval from order statistics, "
                  "(x_hi - x_lo) / (2 median); empty in rows written before it"),
    ("tflops", "flops / time_median_s / 1e12"),
    ("timer", "perf_counter | cuda_event | cuda_graph | cupti_kernel"),
    ("cache", "flush | rotate | warm"),
    ("warmup_s", "warm-up time spent before the timed samples, s"),
    ("reliable", "samples >= min_samples, no clock drift over the samples, and noise <= max_noise or "
                 "(median_ci <= max_median_ci and noise <= max_noise_hard; extra.reliability says so)"),
    ("unreliable_reason", "why reliable is false"),
    # correctness
    ("rel_error", "||C - C_ref||_F / ||C_ref||_F against an FP64 product of the same inputs"),
    ("max_abs_error", "max |C - C_ref|"),
    ("tolerance", "largest rel_error that passes, from the precision config"),
    ("check_elem_max", "largest |C - C_ref| / bound over the elements (> 1 fails; gemmlab/measure/check.py)"),
    ("check_elem_fail", "elements whose error exceeds their bound (or are NaN/Inf)"),
    ("check_reference", "what computed C_ref (independent of the point's own library)"),
    ("status", "ok | failed | skipped"),
    ("reason", "why a point failed or was skipped"),
    # a kernel's conduct outside C (issue 29)
    ("guard_bytes", "random guard bytes on each side of C, A and B, compared after the calls (0: off)"),
    ("guard_check", "clean, or what the calls wrote outside C or changed in A or B (gemmlab/measure/guards.py)"),
    ("worker", "PID of the worker process that measured the point; empty: the runner's own process"),
    ("sanitize_tool", "compute-sanitizer tool the checked call ran under (measure.sanitize)"),
    ("sanitize_errors", "errors the sanitizer reported"),
    ("sanitize_report", "its first report line, or why it did not run"),
    # the cuBLAS baseline measured adjacent in time
    ("baseline_variant", "fastest baseline measured right before this point"),
    ("baseline_time_median_s", "its median time, s"),
    ("baseline_tflops", "its TFLOP/s"),
    ("pct_of_baseline", "100 * baseline_time_median_s / time_median_s"),
    ("baseline_sm_clock_min_mhz", "SM clock range while the baseline ran"),
    ("baseline_sm_clock_max_mhz", ""),
    # device state
    ("gpu_index", "CUDA device ordinal"), ("gpu_uuid", "GPU UUID (NVML)"),
    ("sm_count", "streaming multiprocessors"), ("l2_bytes", "L2 cache size, bytes"),
    ("driver_version", "CUDA driver version"), ("cuda_runtime_version", "CUDA runtime version"),
    ("sm_clock_min_mhz", "lowest SM clock seen over the samples"),
    ("sm_clock_max_mhz", "highest SM clock seen over the samples"),
    ("sm_clock_limit_mhz", "the device's maximum SM clock"),
    ("mem_clock_min_mhz", "lowest memory clock seen over the samples (NVML)"),
    ("mem_clock_max_mhz", "highest memory clock seen over the samples"),
    ("clock_stable", "SM clock stayed within measure.clock_stable_fraction over the samples"),
    ("throttled", "SM clock fell below measure.throttle_fraction of its maximum"),
    ("power_w", "mean board power over the samples, W"),
    ("temperature_c", "max GPU temperature over the samples, C"),
    ("contended", "another process had a CUDA context on this GPU while the point ran (NVML)"),
    ("peak_at_clock_tflops", "precision's peak at the highest SM clock seen: rate/SM/clock x SMs x clock"),
    ("pct_of_peak_at_clock", "tflops as % of peak_at_clock_tflops"),
    # energy (measure.energy=true): the call back to back for measure.energy_s, NVML's energy counter
    ("energy_j", "energy per call, J (NVML total energy counter over the window / calls)"),
    ("gflops_per_joule", "flops / energy_j / 1e9"),
    ("power_avg_w", "mean board power over the energy window, W (counter energy / window time)"),
    ("power_limit_w", "the enforced power limit, W"),
    ("sm_clock_avg_mhz", "mean SM clock over the energy window (NVML polls), MHz"),
    ("throttle_reasons", "NVML clocks-event reasons seen during the energy window (sw_power_cap, ...)"),
    # host BLAS
    ("cpu_model", "host CPU model"), ("blas_vendor", "BLAS library (threadpoolctl)"),
    ("blas_arch", "BLAS kernel architecture"), ("blas_threads", "BLAS threads used"),
    # kernel build
    ("kernel_name", "the kernel or library routine that ran"),
    ("registers", "registers per thread (ptxas)"), ("smem_bytes", "shared memory per block, bytes"),
    ("spill_bytes", "spill stores + loads, bytes (ptxas)"), ("compile_s", "compile time, s (0 = cache hit)"),
    ("library_version", "version of the backend library (cuBLAS, nvmath, CUTLASS)"),
    # hardware counters (measure.counters=ncu)
    ("bytes_dram", "DRAM bytes read + written (ncu)"), ("bytes_l2", "L2 bytes (ncu)"),
    ("bytes_l1", "L1 bytes (ncu)"),
    ("intensity_dram", "flops / bytes_dram"), ("intensity_l2", "flops / bytes_l2"),
    ("intensity_l1", "flops / bytes_l1"), ("counters_reason", "why the counter columns are empty"),
    # provenance
    ("seed", "input RNG seed"), ("distribution", "normal | uniform | exact"),
    ("input_scale", "factor applied to the drawn inputs"),
    ("gemmlab_version", ""), ("git_commit", "commit of the harness (+dirty)"),
    ("python_version", ""), ("numpy_version", ""), ("cupy_version", ""),
    ("experiment", "experiment config name, if any"),
    ("extra", "JSON object of experiment-specific fields"),
]
COLUMN_NAMES = [c[0] for c in COLUMNS]
STATUSES = ("ok", "failed", "skipped")


def row_extra(row: Mapping[str, Any]) -> Dict[str, Any]:
    """A row's ``extra`` cell as a dict ({} when empty, missing or not a JSON object)."""
    extra = row.get("extra")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra) if extra else {}
        except ValueError:
            extra = {}
    return extra if isinstance(extra, dict) else {}


def as_float(v: Any) -> Optional[float]:
    """A cell as a float; None for a missing, non-numeric or NaN one."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


def highest_clock_mhz(row: Mapping[str, Any], limit_mhz: Optional[float] = None) -> Optional[float]:
    """The highest SM clock seen while the row's samples ran: the in-band readings and NVML's,
    or ``limit_mhz`` (the device's limit) when neither was read. The clock of a row's
    ``peak_at_clock_tflops`` and of the ladder's instruction ceilings."""
    seen = [as_float(row.get("sm_clock_max_mhz"))]
    inband = row_extra(row).get("timer", {}).get("sm_clock_inband_mhz")
    if inband:
        seen.append(as_float(inband[-1]))
    seen = [c for c in seen if c]
    return max(seen) if seen else limit_mhz


def fp8_scaling(row: Mapping[str, Any]) -> str:
    """A row's FP8 scaling mode (gemmlab/fp8.py), from ``extra.fp8_scaling.mode``: rows written
    before ``measure.fp8_scaling`` existed, and every non-fp8 row, read as ``none``."""
    fs = row_extra(row).get("fp8_scaling")
    return str(fs.get("mode") or "none") if isinstance(fs, Mapping) else "none"


class RowError(ValueError):
    pass


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str) if v else ""
    return v


def validate(row: Mapping[str, Any]) -> None:
    unknown = set(row) - set(COLUMN_NAMES)
    if unknown:
        raise RowError(f"unknown result columns {sorted(unknown)}; add them to gemmlab.rows.COLUMNS")
    if row.get("status") not in STATUSES:
        raise RowError(f"status must be one of {STATUSES}, got {row.get('status')!r}")


class RowWriter:
    """Appends rows to ``<folder>/results.csv``; every row is on disk before ``write`` returns."""

    def __init__(self, folder: os.PathLike):
        self.path = Path(folder) / RESULTS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        fields = COLUMN_NAMES
        if not new:
            _drop_torn_tail(self.path)
            fields = _upgrade_header(self.path)  # a file of an older harness: its columns, then ours
        self._f = open(self.path, "a", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=fields, extrasaction="raise")
        if new:
            self._w.writeheader()
            self._sync()

    def write(self, row: Mapping[str, Any]) -> None:
        validate(row)
        self._w.writerow({c: _cell(row.get(c)) for c in self._w.fieldnames})
        self._sync()

    def _sync(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _drop_torn_tail(path: Path) -> None:
    """A process killed mid-write can leave a partial last line: cut back to the last newline so
    the next row does not glue onto it (the torn point is simply measured again)."""
    with open(path, "rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        data = fh.read()
        fh.truncate(data.rfind(b"\n") + 1)


def _upgrade_header(path: Path) -> List[str]:
    """The columns rows appended to ``path`` are written in: its own header, with the columns it
    lacks added at the end (the file rewritten once, its rows padded with empty cells, every other
    cell as it was). Appending in today's order under an older header would shift every cell."""
    with open(path, newline="") as fh:
        raw = fh.read()
    table = list(csv.reader(io.StringIO(raw, newline="")))
    header = table[0] if table else []
    missing = [c for c in COLUMN_NAMES if c not in header]
    if not missing:
        return header
    eol = "\r\n" if raw.split("\n", 1)[0].endswith("\r") else "\n"
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator=eol).writerows([header + missing] + [r + [""] * len(missing) for r in table[1:]])
    tmp = path.with_name(path.name + ".upgrade")
    with open(tmp, "w", newline="") as fh:
        fh.write(out.getvalue())
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    return header + missing


# Columns read as text whatever they look like: identifiers and hashes ("7080e82" is not a float,
# "0123" keeps its zero), versions, names and free text. Everything else is left to pandas.
TEXT_COLUMNS = (
    "run_id", "timestamp", "host", "device", "backend", "variant", "precision", "op", "in_dtype",
    "out_dtype", "compute", "point_key", "timer", "cache", "unreliable_reason", "check_reference",
    "status", "reason", "baseline_variant", "gpu_uuid", "driver_version", "cuda_runtime_version",
    "cpu_model", "blas_vendor", "blas_arch", "kernel_name", "library_version", "counters_reason",
    "distribution", "gemmlab_version", "git_commit", "python_version", "numpy_version", "cupy_version",
    "experiment", "extra", "kind", "description", "tags", "defines", "layout", "shape_name",
)
ROW_KEY = ("run_id", "point_key")  # one point of one run: the same measurement wherever it is read


def results_files(paths: Iterable[os.PathLike] | os.PathLike) -> List[Path]:
    """The results files at ``paths`` (files, or folders searched recursively), each once; in a
    folder, the files of job subfolders come before the folder's own (a sweep's merged file)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    files: List[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = list(p.rglob(RESULTS_FILE))
            # deeper first: a job's own file before the merged copy of its rows above it
            files.extend(sorted(found, key=lambda f: (-len(f.relative_to(p).parts), str(f))))
        elif p.exists():
            files.append(p)
        else:
            raise FileNotFoundError(f"no results file or folder at {p}")
    if not files:
        raise FileNotFoundError(f"no {RESULTS_FILE} under {[str(p) for p in paths]}")
    return list(dict.fromkeys(f.resolve() for f in files))


def read_file(path: os.PathLike):
    """One results file into pandas, identifiers as text (:data:`TEXT_COLUMNS`).

    Parsed once per process for the same bytes (the cache is keyed by a hash of the content): the
    analysis reads the same reference files many times, and parsing, not rows, was its cost.
    Callers get a copy. The cache holds files up to :data:`_PARSED_MAX_BYTES` of text in all; past
    that a file is parsed and not kept, so a tree larger than the cache still finds the files read
    first cached (evicting the oldest would miss every file of every read of a tree that size)."""
    import pandas as pd

    raw = Path(path).read_bytes()
    key = hashlib.blake2b(raw, digest_size=16).digest()
    if key not in _PARSED:
        # pandas < 3 parses floats up to ULPs off unless asked for round_trip (which churned
        # generated figures); pandas 3 parses exactly and deprecates the option.
        exact = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
        # dtype names every text column; read_csv ignores the ones a file lacks
        frame = pd.read_csv(io.BytesIO(raw), dtype={c: "string" for c in TEXT_COLUMNS}, keep_default_na=True,
                            **exact)
        if _PARSED_BYTES[0] + len(raw) > _PARSED_MAX_BYTES:
            return frame
        _PARSED[key] = frame
        _PARSED_BYTES[0] += len(raw)
    return _PARSED[key].copy()


_PARSED: Dict[bytes, Any] = {}  # content hash -> parsed frame (read_file's cache)
_PARSED_BYTES = [0]  # the text of the files in _PARSED, in bytes
# 1024 files until session49, when outputs/reference passed 1024 files (1152): each read of it then evicted every
# file before its next read and parsed all again (13 s a read, 4 s with them kept; ~100 MiB of frames for 74 MiB of
# text)
_PARSED_MAX_BYTES = 512 * 2**20


def read(paths: Iterable[os.PathLike] | os.PathLike):
    """Load one or more results files (or folders holding them, searched recursively) into pandas.

    Each row once: a sweep folder holds every job's ``results.csv`` and the merged copy of their
    rows, and a tree may hold several sweeps and runs; rows with the same ``(run_id, point_key)``
    are one measurement read twice and are kept once (the job's copy). Rows without those keys
    (older files) are kept once when identical in every column. Identifiers and versions are text.
    """
    import pandas as pd

    frames = [read_file(f) for f in results_files(paths)]
    df = pd.concat(frames, ignore_index=True)
    for c in COLUMN_NAMES:  # files written by older versions may lack a column
        if c not in df.columns:
            df[c] = pd.Series(pd.NA, index=df.index, dtype="string" if c in TEXT_COLUMNS else object)
    keyed = df[list(ROW_KEY)].notna().all(axis=1) & (df["run_id"] != "") & (df["point_key"] != "")
    keyed = keyed.fillna(False).astype(bool)
    once = ~(keyed & df.duplicated(list(ROW_KEY), keep="first"))
    df = df[once]
    unkeyed = ~keyed[once]
    df = df[~(unkeyed & df.duplicated(keep="first"))]
    return df.reset_index(drop=True)


def merge(folders: Sequence[os.PathLike], out: os.PathLike) -> Optional[Path]:
    """Concatenate the results files of several job folders into ``out`` (a results.csv path).

    A point measured ok in any job wins over failed/skipped rows of the same point_key, and a
    later ok row wins over an earlier one, so merging after a resume keeps one row per point.
    """
    rows: Dict[str, Dict[str, str]] = {}
    order: List[str] = []
    out = Path(out)
    for folder in folders:
        f = Path(folder) / RESULTS_FILE
        if not f.exists() or f.resolve() == out.resolve():
            continue
        with open(f, newline="") as fh:
            for i, r in enumerate(csv.DictReader(fh)):
                key = r.get("point_key") or f"{f}:{i}"
                if key not in rows:
                    order.append(key)
                    rows[key] = r
                elif r.get("status") == "ok" or rows[key].get("status") != "ok":
                    rows[key] = r
    if not rows:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMN_NAMES, extrasaction="ignore")
        w.writeheader()
        for key in order:
            w.writerow({c: rows[key].get(c, "") for c in COLUMN_NAMES})
    os.replace(tmp, out)
    return out


def ok_keys(folder: os.PathLike) -> set:
    """point_keys already measured ok in ``folder``'s results file (for resume)."""
    return keys_with_status(folder, "ok")


def failed_keys(folder: os.PathLike) -> set:
    """point_keys with a failed row in ``folder``'s results file (resume measures them again)."""
    return keys_with_status(folder, "failed")


def keys_with_status(folder: os.PathLike, status: str) -> set:
    f = Path(folder) / RESULTS_FILE
    if not f.exists():
        return set()
    with open(f, newline="") as fh:
        return {r["point_key"] for r in csv.DictReader(fh) if r.get("status") == status and r.get("point_key")}
