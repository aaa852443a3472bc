"""The paper's tables, computed from the rows and written as LaTeX (booktabs) and Markdown.

1. Measured peak per precision against the datasheet (and the copy bandwidth against the
   datasheet's), per device.
2. The chapter's intensity table (5.1, claim C2): vector add, GEMV, GEMM N = 1024; the chapter's
   formulas beside the measured row of each op (``vecadd``, ``gemv``, ``gemm``).
3. The ladder (see ``analysis.ladder``): stage, variant, TFLOP/s, % of cuBLAS, relative error; and
   its memory-bound rung (the decode stage, ``analysis.ladder.memory_rungs``): % of the copy roof
   and of the interleaved cuBLAS at its best decode shape, or "not measured".
4. What tuning buys (see ``analysis.regret``): cuBLASLt's default against its search, the CUTLASS
   search and the hand-written stages, per problem, with the regret and the searches' time.
5. Energy per GEMM at N = 8192 (see ``analysis.energy``): per precision and backend, TFLOP/s,
   GFLOP/J, J per call, power, clock, power limit and throttle reasons of its best energy row.

Each ``*_frame`` returns the numbers as a DataFrame (what tests compare with the data); ``render``
formats them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import pandas as pd

from . import data, energy, ladder, regret
from .style import format_sig

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    align: str = "r"  # l | r
    fmt: Callable[[object], str] = lambda v: format_sig(v)


@dataclass
class Table:
    name: str  # LaTeX label tab:<name>
    title: str
    columns: Sequence[Column]
    frame: pd.DataFrame
    empty: str = "no rows in the data"
    footnote: str = ""


def _text(v) -> str:
    return "–" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def _int(v) -> str:
    return "–" if v is None or pd.isna(v) else str(int(v))


def _pct(v) -> str:
    return "–" if v is None or pd.isna(v) else f"{v:.1f}"


def shape(row) -> str:
    return data.problem_text(row, cube=False)


# -- 1. peaks --------------------------------------------------------------------------------
def peak_frame(ds: data.Dataset) -> pd.DataFrame:
    """Per device and precision: the measured peak (the best GEMM evidence row,
    :func:`analysis.data.peak_rows`), where, and the datasheet peak of that device; one
    ``memory`` line per device: best copy bandwidth against the datasheet's, GB/s. A device no
    ``conf/device`` entry names has no datasheet column (a fallback config describes another
    device), and a kind without rows has no lines."""
    lines = []
    for kind in ("gpu", "cpu"):
        ceil = ds.gpu_ceilings if kind == "gpu" else ds.cpu_ceilings
        if ceil.device is None:
            continue  # no rows of this kind: a datasheet alone says nothing about this dataset
        sheet = ceil.sheet
        best = data.peak_rows(ds.rows, kind).set_index("precision")
        sheet_tflops = dict(sheet.peak_tflops) if sheet else {}
        for p in data.precision_order(set(ceil.measured_tflops) | set(sheet_tflops)):
            measured = ceil.measured_tflops.get(p)
            value = sheet_tflops.get(p)
            at = ""
            if measured is not None and p in best.index:
                r = best.loc[p]
                at = f"{r['variant']} {shape(r)}"
            lines.append({"device": ceil.label, "datasheet_config": sheet.stem if sheet else "", "ceiling": p,
                          "unit": "TFLOP/s", "measured": measured, "at": at, "datasheet": value,
                          "pct_of_datasheet": None if measured is None or not value else 100 * measured / value})
        bw = ceil.measured_bandwidth_gbs
        sheet_bw = sheet.memory_bandwidth_gbs if sheet else None
        lines.append({"device": ceil.label, "datasheet_config": sheet.stem if sheet else "", "ceiling": "memory (copy)",
                      "unit": "GB/s", "measured": bw, "at": "copy" if bw is not None else "",
                      "datasheet": sheet_bw,
                      "pct_of_datasheet": None if bw is None or not sheet_bw else 100 * bw / sheet_bw})
    return pd.DataFrame(lines, columns=["device", "datasheet_config", "ceiling", "unit", "measured", "at",
                                        "datasheet", "pct_of_datasheet"])


def peak_table(ds: data.Dataset) -> Table:
    frame = peak_frame(ds)
    unmatched = [c.device for c in (ds.gpu_ceilings, ds.cpu_ceilings) if c.device and c.sheet is None]
    return Table("peaks", "Measured peak per precision against the datasheet", [
        Column("device", "Device", "l", _text),
        Column("ceiling", "Ceiling", "l", _text),
        Column("unit", "Unit", "l", _text),
        Column("measured", "Measured", "r", lambda v: NOT_MEASURED if v is None or pd.isna(v) else format_sig(v)),
        Column("at", "At", "l", _text),
        Column("datasheet", "Datasheet", "r", format_sig),
        Column("pct_of_datasheet", "% of datasheet", "r", _pct),
    ], frame, footnote="Measured: the best GEMM row of each precision (any size, variant and run); memory: the "
                       "best copy-probe row (bytes read + written / time). Datasheet: conf/device/<config>.yaml"
                       + (f"; none names {', '.join(unmatched)}, so no datasheet is compared there" if unmatched
                          else "") + ".")


# -- 2. the chapter's intensity table --------------------------------------------------------
@dataclass(frozen=True)
class ChapterOp:
    """One line of the chapter's table: its formulas (FP32 operands), and the rows that measure it."""

    label: str
    op: str
    flops: str
    bytes_min: str
    intensity: Callable[[int, int, int], float]  # the chapter's I at a row's (m, n, k)
    square_n: Optional[int] = None  # the chapter's GEMM is N = 1024


# The chapter's model (5.1), not measurements: FLOPs and minimum bytes for 4-byte floats.
CHAPTER_OPS = (
    ChapterOp("vector add (N)", "vecadd", "2N", "12N", lambda m, n, k: 2 / 12),
    ChapterOp("GEMV (M×N)", "gemv", "2MN", "4MN", lambda m, n, k: 2 / 4),
    ChapterOp("GEMM (N = 1024)", data.GEMM, "2N³", "12N²", lambda m, n, k: 2 * n ** 3 / (12 * n ** 2), 1024),
)
CHAPTER_PRECISION = "fp32"  # the chapter counts 4-byte floats


def chapter_row(ds: data.Dataset, op: ChapterOp) -> Optional[pd.Series]:
    """The measured point for a chapter op: GPU rows before CPU rows, FP32 before other
    precisions, the largest problem, then the fastest variant; the point's best row
    (:func:`analysis.data.best_points`). The claims report (C2) quotes the same row."""
    rows = pd.concat([ds.gpu, ds.cpu])
    rows = rows[(rows["op"] == op.op) & rows["time_median_s"].notna()]
    if op.square_n is not None:
        rows = data.square(rows)
        rows = rows[rows["n"] == op.square_n]
    if rows.empty:
        return None
    s = data.best_points(rows, ["kind", "device", "variant", "precision", "m", "n", "k"])
    s = s.assign(gpu_first=(s["kind"] != "gpu"), fp32_first=(s["precision"] != CHAPTER_PRECISION))
    s = s.sort_values(["gpu_first", "fp32_first", "flops", "time_s", "variant"],
                      ascending=[True, True, False, True, True], kind="stable")
    return s.iloc[0]


def intensity_frame(ds: data.Dataset) -> pd.DataFrame:
    lines = []
    for op in CHAPTER_OPS:
        r = chapter_row(ds, op)
        line = {"operation": op.label, "op": op.op, "chapter_flops": op.flops, "chapter_bytes": op.bytes_min,
                "chapter_intensity": op.intensity(1, op.square_n or 1, 1)}
        if r is None:
            lines.append(line)
            continue
        ceil = ds.gpu_ceilings if r["kind"] == "gpu" else ds.cpu_ceilings
        intensity = r["flops"] / r["bytes_min"]
        sheet = ceil.sheet
        peak = ceil.measured_tflops.get(r["precision"], sheet.peak_tflops.get(r["precision"]) if sheet else None)
        bw = ceil.measured_bandwidth_gbs or (sheet.memory_bandwidth_gbs if sheet else None)
        ridge = None if peak is None or bw is None else peak * 1e12 / (bw * 1e9)
        roof = None if peak is None or bw is None else min(peak, intensity * bw / 1e3)
        line.update({"device": r["device"], "variant": r["variant"], "precision": r["precision"],
                     "m": int(r["m"]), "n": int(r["n"]), "k": int(r["k"]),
                     "flops": float(r["flops"]), "bytes_min": float(r["bytes_min"]), "intensity": intensity,
                     "tflops": float(r["tflops"]), "gbs": r["bytes_min"] / r["time_s"] / 1e9,
                     "ridge": ridge, "bound": None if ridge is None else
                     ("bandwidth" if intensity < ridge else "compute"),
                     "pct_of_roof": None if roof is None else 100 * r["tflops"] / roof})
        lines.append(line)
    cols = ["operation", "op", "chapter_flops", "chapter_bytes", "chapter_intensity", "device", "variant",
            "precision", "m", "n", "k", "flops", "bytes_min", "intensity", "tflops", "gbs", "ridge", "bound",
            "pct_of_roof"]
    return pd.DataFrame(lines, columns=cols)


def intensity_table(ds: data.Dataset) -> Table:
    f = intensity_frame(ds)
    f["shape"] = [("–" if pd.isna(m) else f"{int(m)}×{int(n)}×{int(k)}") for m, n, k in zip(f["m"], f["n"], f["k"])]
    return Table("intensity", "The chapter's arithmetic intensities, measured", [
        Column("operation", "Operation", "l", _text),
        Column("chapter_flops", "FLOPs", "l", _text),
        Column("chapter_bytes", "Min. bytes", "l", _text),
        Column("chapter_intensity", "I (chapter)", "r", format_sig),
        Column("variant", "Measured by", "l", lambda v: NOT_MEASURED if pd.isna(v) else str(v)),
        Column("precision", "Prec.", "l", _text),
        Column("shape", "m×n×k", "l", _text),
        Column("flops", "FLOPs", "r", format_sig),
        Column("bytes_min", "Min. bytes", "r", format_sig),
        Column("intensity", "I (FLOP/B)", "r", format_sig),
        Column("tflops", "TFLOP/s", "r", format_sig),
        Column("gbs", "GB/s", "r", format_sig),
        Column("ridge", "I*", "r", format_sig),
        Column("bound", "Bound", "l", _text),
        Column("pct_of_roof", "% of roof", "r", _pct),
    ], f, footnote="Chapter: formulas for FP32 operands (5.1). Measured: the best row of the op (the shortest "
                   "median time of any run; the claims report quotes the same row), its bytes_min and flops; "
                   "GB/s = bytes_min / median time; I* = measured peak / measured bandwidth of the device "
                   "(the device's datasheet where not measured); bound: I below or above I*; "
                   "roof = min(P, I·BW).")


# -- 3. the ladder ---------------------------------------------------------------------------
def ladder_frame(ds: data.Dataset) -> pd.DataFrame:
    return ladder.build(ds).entries


def ladder_table(ds: data.Dataset) -> Table:
    lad = ladder.build(ds)
    f = lad.entries.copy()
    f["what"] = [("stage" if g == ladder.GROUP_STAGE else "CUTLASS" if g == ladder.GROUP_CUTLASS else "cuBLAS")
                 for g in f["group"]]
    notes = [n for ns in lad.notes.values() for n in ns]
    return Table("ladder", "The ladder: each hand-written stage at one size", [
        Column("precision", "Prec.", "l", _text),
        Column("n", "N", "r", _int),
        Column("layout", "Layout", "l", _text),
        Column("what", "Kind", "l", _text),
        Column("stage", "Stage", "r", _int),
        Column("variant", "Variant", "l", _text),
        Column("tflops", "TFLOP/s", "r", format_sig),
        Column("cublas_tflops", "cuBLAS interleaved", "r", format_sig),
        Column("pct_of_cublas", "% of interleaved", "r", _pct),
        Column("standalone_tflops", "cuBLAS standalone", "r", format_sig),
        Column("pct_of_standalone", "% of standalone", "r", _pct),
        Column("ceiling_tflops", "Instr. ceiling", "r", format_sig),
        Column("ceiling_pct_of_cublas", "Ceiling % of interleaved", "r", _pct),
        Column("rel_error", "Rel. error", "r", lambda v: format_sig(v, 2)),
        Column("kernel_name", "Configuration", "l", _text),
    ], f, empty="no hand-written stage or library GEMM rows in the data",
        footnote="Each line: the variant's best row at that size (the shortest median time of any run) among "
                 "the rows of its current configuration (its YAML's defines; else of any, with a gap note); "
                 "layout nn, or for a precision no stage ran nn (FP8) the layout its stages ran. CUTLASS: its "
                 "fastest row of any configuration. cuBLAS interleaved: the faster of cublas and cublaslt timed interleaved with "
                 "that row (same run and clock state; else the same run's cuBLAS rows). cuBLAS standalone: "
                 "the best cublas or cublaslt row of its own at that size, the cuBLAS line's TFLOP/s. "
                 "A slow kernel leaves the GPU cooler for its interleaved baseline, which then runs faster "
                 "than cuBLAS alone does. Instr. ceiling (stages whose YAML names a probe of their "
                 "instruction): the probe's best TFLOP/s per MHz times the highest SM clock seen while the "
                 "row ran, the most the stage could reach at its clock; as % of its interleaved cuBLAS, the "
                 "most % it could show." + (" Gaps: " + "; ".join(dict.fromkeys(notes)) + "." if notes else ""))


def _pct_or_not_measured(v) -> str:
    return NOT_MEASURED if v is None or pd.isna(v) else f"{v:.1f}"


def memory_rung_table(ds: data.Dataset) -> Table:
    f = ladder.memory_rungs(ds)
    f["roof_text"] = [f"{r}, run {i}" if r else "–" for r, i in zip(f["roof"], f["roof_run_id"])]
    f["shape_text"] = [s if st == ladder.MEASURED else NOT_MEASURED for s, st in zip(f["shape"], f["status"])]
    return Table("memory_rung", "The ladder's memory-bound rung: the decode stage against the copy roof", [
        Column("precision", "Prec.", "l", _text),
        Column("stage", "Stage", "r", _int),
        Column("variant", "Variant", "l", _text),
        Column("shape_text", "Best decode shape", "l", _text),
        Column("tokens", "Tokens", "r", _int),
        Column("gbs", "GB/s", "r", format_sig),
        Column("roof_gbs", "Copy roof GB/s", "r", format_sig),
        Column("roof_text", "Copy roof from", "l", _text),
        Column("pct_of_roof", "% of copy roof", "r", _pct_or_not_measured),
        Column("cublas_variant", "cuBLAS", "l", lambda v: _text(v or None)),
        Column("pct_of_cublas", "% of interleaved cuBLAS", "r", _pct_or_not_measured),
        Column("rel_error", "Rel. error", "r", lambda v: format_sig(v, 2)),
        Column("decode_rows", "Decode points", "r", _int),
    ], f, empty=f"{NOT_MEASURED}: no memory-bound stage in the data or in this checkout",
        footnote="Each line: the stage's evidence decode point (at most 64 tokens against a weight matrix, "
                 "analysis/decode.py) closest to its copy roof. GB/s = bytes_min / median time. Copy roof: the copy "
                 "probe of the same run where the run has one (\"same run\"), else the device's best copy row "
                 "(\"device best\"). % of interleaved cuBLAS: the faster of cublas and cublaslt timed interleaved "
                 "with that row (else the same run's). Not measured: no evidence decode row of the stage at that "
                 "precision (decode points: its measured decode points, evidence or not); "
                 "measure with `python run.py +experiment=decode`.")


# -- 4. what tuning buys (analysis.regret) ------------------------------------------------------
def regret_table(ds: data.Dataset) -> Table:
    f = regret.frame(ds)
    f["shape"] = [n if n and n != "nan" else f"{int(m)}×{int(nn)}×{int(k)}"
                  for n, m, nn, k in zip(f["shape_name"], f["m"], f["n"], f["k"])]
    for p in ("default", "lt_search", "cutlass_search", "handwritten", "best"):
        f[f"{p}_us"] = f[f"{p}_time_s"].astype("float64") * 1e6
    f["regret_pct"] = f["regret"].astype("float64") * 100
    older = regret.superseded(ds)
    return Table("tuning_regret", "What tuning buys: cuBLASLt's default against the searches and the stages", [
        Column("shape", "Shape", "l", _text),
        Column("precision", "Prec.", "l", _text),
        Column("layout", "Layout", "l", _text),
        Column("default_us", "Default (heuristic)", "r", format_sig),
        Column("default_what", "Default algorithm", "l", _text),
        Column("lt_search_us", "cuBLASLt search", "r", format_sig),
        Column("lt_search_what", "cuBLASLt pick", "l", _text),
        Column("cutlass_search_us", "CUTLASS search", "r", format_sig),
        Column("cutlass_search_what", "CUTLASS kernel", "l", _text),
        Column("handwritten_us", "Hand-written", "r", format_sig),
        Column("handwritten_what", "Stage", "l", _text),
        Column("best_kind", "Best", "l", _text),
        Column("regret_pct", "Regret %", "r", _pct),
        Column("lt_search_s", "cuBLASLt search s", "r", format_sig),
        Column("cutlass_search_s", "CUTLASS search s", "r", format_sig),
    ], f, empty=f"{NOT_MEASURED}: {regret.MISSING_NOTE}",
        footnote="Times in microseconds: each kind's best evidence row at the problem, inside one run. Default: cuBLASLt's "
                 "heuristic first choice (variant cublaslt); cuBLASLt search: the fastest of its top heuristic "
                 "algorithms (cublaslt_search); CUTLASS search: cutlass_search; hand-written: the fastest stage. "
                 "Regret = default / best - 1. Search s: the search's wall time (candidates checked and ranked; "
                 "CUTLASS's compile not included)." + (
                     f" {older} problem lines of older runs are left out: each problem comes from the newest "
                     f"run that compared it." if older else ""))


# -- 5. energy per GEMM (analysis.energy) --------------------------------------------------------
def energy_table(ds: data.Dataset) -> Table:
    f = energy.energy_table_frame(ds)
    n = energy.TABLE_N
    return Table("energy", f"Energy per GEMM at N = {n}", [
        Column("precision", "Prec.", "l", _text),
        Column("backend", "Backend", "l", _text),
        Column("variant", "Variant", "l", _text),
        Column("tflops", "TFLOP/s", "r", format_sig),
        Column("gflops_per_joule", "GFLOP/J", "r", format_sig),
        Column("energy_j", "J per call", "r", format_sig),
        Column("power_avg_w", "Power (W)", "r", format_sig),
        Column("clock_mhz", "SM clock (MHz)", "r", format_sig),
        Column("power_limit_w", "Power limit (W)", "r", format_sig),
        Column("throttle_reasons", "Throttle reasons", "l", lambda v: _text(v) if v else "none"),
    ], f, empty=f"{NOT_MEASURED}: no rows with energy columns at N = {n}; measure with "
                f"`{energy.MEASURE_SQUARE}`",
        footnote=f"Each line: the backend's best evidence row at N = {n} that has energy columns "
                 "(measure.energy=true; the shortest median time of any run; cublas and cublaslt their default "
                 "variants). J per call: NVML's energy counter over back-to-back calls / calls; GFLOP/J = FLOPs / "
                 "J; power: that energy / the window; SM clock: the window's mean; throttle reasons: NVML's "
                 "clocks-event reasons seen in the window.")


TABLES = (peak_table, intensity_table, ladder_table, memory_rung_table, regret_table, energy_table)


# -- rendering -------------------------------------------------------------------------------
def render_markdown(tables: Sequence[Table]) -> str:
    out = ["<!-- generated by `python -m analysis.paper` from result rows; do not edit -->", ""]
    for t in tables:
        out += [f"### {t.title}", ""]
        if t.frame.empty:
            out += [f"_{t.empty}_", ""]
        else:
            out.append("| " + " | ".join(c.header for c in t.columns) + " |")
            out.append("|" + "|".join("---:" if c.align == "r" else "---" for c in t.columns) + "|")
            for _, row in t.frame.iterrows():
                out.append("| " + " | ".join(c.fmt(row[c.key]).replace("|", "\\|") for c in t.columns) + " |")
            out.append("")
        if t.footnote:
            out += [t.footnote, ""]
    return "\n".join(out)


_TEX_ESCAPE = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
               "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
               "<": r"\textless{}", ">": r"\textgreater{}", "×": r"$\times$", "–": "--", "³": r"$^3$", "²": r"$^2$", "·": r"$\cdot$"}
_EXP = re.compile(r"^(-?\d+(?:\.\d+)?)e([+-]\d+)$")


def tex(text: str) -> str:
    m = _EXP.match(text)
    if m:
        return rf"${m.group(1)}\times10^{{{int(m.group(2))}}}$"
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in text).replace("I*", r"$I^*$")


def render_latex(tables: Sequence[Table]) -> str:
    out = ["% generated by `python -m analysis.paper` from result rows; do not edit.",
           "% needs \\usepackage{booktabs} and \\usepackage{graphicx} (\\resizebox)", ""]
    for t in tables:
        out += [r"\begin{table}[t]", r"\centering", r"\footnotesize", rf"\caption{{{tex(t.title)}}}",
                rf"\label{{tab:{t.name}}}"]
        if t.frame.empty:
            out += [rf"\emph{{{tex(t.empty)}}}"]
        else:
            out.append(r"\resizebox{\linewidth}{!}{%" if len(t.columns) > 8 else "{%")
            out.append(r"\begin{tabular}{" + "".join(c.align for c in t.columns) + "}")
            out += [r"\toprule", " & ".join(tex(c.header) for c in t.columns) + r" \\", r"\midrule"]
            for _, row in t.frame.iterrows():
                out.append(" & ".join(tex(c.fmt(row[c.key])) for c in t.columns) + r" \\")
            out += [r"\bottomrule", r"\end{tabular}}"]
        if t.footnote:
            out.append(rf"\par\smallskip\emph{{{tex(t.footnote)}}}")
        out += [r"\end{table}", ""]
    return "\n".join(out)


def build(ds: data.Dataset) -> List[Table]:
    return [make(ds) for make in TABLES]
