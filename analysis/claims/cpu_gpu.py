"""Claims measured by ``experiments/claims_cpu_gpu.yaml`` (CPU BLAS, the GPU end to end, the
transfers): the CPU's and the GPU's peaks (C11), small sizes (C12), transfers against the
kernel (C14d)."""
from __future__ import annotations

from typing import List

import pandas as pd

from .. import data
from .chapter import CHAPTER, DOMINATE_MIN, MAJORITY, SAME_NUMBER_REL, TENS_OF_TFLOPS
from .evidence import Evidence, extra, f, where
from .registry import claim
from .verdict import (
    DOES_NOT_HOLD,
    HOLDS,
    NO_PROBE,
    OTHER_NUMBER,
    RANGE_RULE,
    SAME_NUMBER_RULE,
    Part,
    in_range,
    need_rows,
    not_measured,
    same_number,
    same_orders,
)

MAX_CLOCK_SOURCE = "cpuinfo_max_freq"  # host facts whose clock is the CPU's maximum (cpufreq)


def _host_facts(ev: Evidence) -> dict:
    """The host facts a cpu_probe row carries (model, AVX-512F, FMA, cores, clock): facts of the
    machine, not timings, so any measured probe row of the CPU tells them, reliable or not."""
    rows = data.device_rows(ev.rows, "cpu", rows="measured")
    for _, r in rows[rows["backend"] == "cpu_probe"].iterrows():
        x = extra(r)
        if x.get("cpu_max_mhz"):
            return x
    return {}


@claim("C11", "5.6", "CPU: AVX-512 + FMA ≈ 32 FLOP/core/cycle; a GPU has tens of TFLOP/s FP32 and an order more "
                     "with tensor cores.", "cpu_gpu_crossover; table peaks", ("cpu", "gpu"))
def c11(ev: Evidence) -> List[Part]:
    parts = []
    per_cycle = CHAPTER.cpu_flop_per_cycle_core
    what = f"CPU: AVX-512 + FMA ≈ {f(per_cycle)} FLOP per core per cycle (FP32 peak)"
    cpu = ev.peak("fp32", "cpu")
    facts = _host_facts(ev)
    probe = (f"the per-cycle peak needs a cycle-counted FMA-throughput probe on the CPU: {NO_PROBE}; "
             f"cpu_blas bounds it from below only at the CPU's maximum clock (cpufreq {MAX_CLOCK_SOURCE})")
    if cpu is None or not facts.get("cpu_max_mhz"):
        parts.append(not_measured(what, need_rows("CPU BLAS FP32 and the host facts of a cpu_probe row",
                                              "claims_cpu_gpu") + " and +experiment=claims_memory_roof"))
    else:
        threads = int(cpu["blas_threads"]) if pd.notna(cpu.get("blas_threads")) and str(cpu["blas_threads"]).strip() \
            else facts.get("cpus_allowed")
        cores = min(threads, facts.get("physical_cores_allowed") or threads)
        ghz = facts["cpu_max_mhz"] / 1e3
        per = float(cpu["tflops"]) * 1e12 / (cores * ghz * 1e9)
        is_max = MAX_CLOCK_SOURCE in str(facts.get("cpu_mhz_source") or "")
        text = (f"{cpu['device']}: BLAS {f(cpu['tflops'] * 1e3)} GFLOP/s ({where(cpu)}, best row, {threads} threads) "
                f"/ ({cores} cores × {f(ghz)} GHz, {facts.get('cpu_mhz_source')}) = {f(per)} FLOP/cycle/core achieved; "
                f"AVX-512F: {facts.get('avx512f')}, FMA: {facts.get('fma')}")
        numbers = {"cpu_flop_per_cycle_core": per, "cpu_gflops": float(cpu["tflops"]) * 1e3}
        rule = (f"achieved BLAS rate per cycle at the maximum clock is a lower bound of the peak: above "
                f"{f(per_cycle * (1 + SAME_NUMBER_REL))} (the chapter's +{SAME_NUMBER_REL:.0%}): does not hold; "
                f"else the peak itself is not measured")
        if not (facts.get("avx512f") and facts.get("fma")):
            p = not_measured(what, f"a CPU with AVX-512F and FMA (the chapter's); {probe}. Measured: {text}", rule)
        elif is_max and per > per_cycle * (1 + SAME_NUMBER_REL):
            p = Part(what, DOES_NOT_HOLD, text + ": the peak is at least that", rule)
        else:
            bound = "a lower bound of the peak, consistent with it" if is_max else \
                "not a bound: the clock is a current reading, not the maximum"
            p = not_measured(what, f"{probe}. Measured: {text} ({bound})", rule)
        p.numbers = numbers
        parts.append(p)
    what = "one GPU has tens of TFLOP/s in FP32"
    gpu = ev.peak("fp32")
    if gpu is None:
        parts.append(not_measured(what, need_rows("FP32 GEMMs on the GPU", "cublas_square")))
    else:
        lo, hi = TENS_OF_TFLOPS
        g = float(gpu["tflops"])
        text = f"{f(g)} TFLOP/s ({where(gpu)}, best row)"
        if cpu is not None:
            text += f" = {f(g / float(cpu['tflops']))}× the CPU BLAS's {f(float(cpu['tflops']) * 1e3)} GFLOP/s (best row)"
        parts.append(Part(what, in_range(g, lo, hi), text, f"{f(lo)}–{f(hi)} TFLOP/s: " + RANGE_RULE,
                          {"gpu_fp32_tflops": g}))
    what = "an order of magnitude more with tensor cores"
    tc = [ev.peak(p) for p in ("fp16", "bf16")]
    tc = [r for r in tc if r is not None]
    if gpu is None or not tc:
        parts.append(not_measured(what, need_rows("FP16/BF16 GEMMs", "cublas_square")))
    else:
        best = max(tc, key=lambda r: float(r["tflops"]))
        ratio = float(best["tflops"]) / float(gpu["tflops"])
        parts.append(Part(what, same_orders(ratio, CHAPTER.tensor_core_orders),
                          f"{f(best['tflops'])} TFLOP/s ({where(best)}, best row) = {f(ratio)}× FP32 (both achieved)",
                          f"round(log10 ratio) == {CHAPTER.tensor_core_orders}: holds; else does not hold",
                          {"tensor_core_ratio": ratio}))
    return parts


def _best_by_n(rows: pd.DataFrame) -> pd.Series:
    """Per square N, the best row's median time (one row of one run per N)."""
    rows = data.square(rows)
    if rows.empty:
        return pd.Series(dtype=float)
    best = data.best_rows(rows, ["n"])
    return pd.Series(best["time_median_s"].astype(float).to_numpy(), index=best["n"].astype(int).to_numpy())


def _cublas_by_n(ev: Evidence, precision: str) -> pd.Series:
    """The best standalone cuBLAS row's time per square N (:func:`analysis.data.cublas_standalone`)."""
    kern = data.cublas_standalone(ev.device_rows("gpu"))
    kern = kern[(kern["precision"] == precision) & (kern["m"] == kern["n"]) & (kern["n"] == kern["k"])]
    return pd.Series(kern["cublas_time_s"].astype(float).to_numpy(), index=kern["n"].astype(int).to_numpy())


@claim("C12", "5.6", "For N < 128 the CPU is often faster: launch and transfers dominate.", "cpu_gpu_crossover",
       ("cpu", "gpu"))
def c12(ev: Evidence) -> List[Part]:
    what = f"for N < {CHAPTER.small_n} the CPU is often faster"
    cpu = _best_by_n(ev.variant("cpu_blas", "cpu", "fp32"))
    e2e = _best_by_n(ev.op("gemm_e2e", "gpu", "fp32"))
    kern = _cublas_by_n(ev, "fp32")
    common = sorted(set(cpu.index) & set(e2e.index))
    small = [n for n in common if n < CHAPTER.small_n]
    need = need_rows("CPU BLAS and the GPU end to end (gemm_e2e_gpu) at N < 128", "claims_cpu_gpu")
    if not small:
        return [not_measured(what, need), not_measured("launch and transfers dominate", need)]
    cpu_wins = [n for n in small if cpu[n] < e2e[n]]
    share = len(cpu_wins) / len(small)
    # crossover: smallest common N from which the GPU (end to end) stays faster
    gpu_faster = [e2e[n] < cpu[n] for n in common]
    cross = None
    if gpu_faster and gpu_faster[-1]:
        i = len(gpu_faster)
        while i > 0 and gpu_faster[i - 1]:
            i -= 1
        cross = common[i]
    text = (f"CPU faster at {len(cpu_wins)} of {len(small)} sizes below {CHAPTER.small_n} "
            f"({', '.join(f'N={n}: CPU {f(cpu[n] * 1e6)} µs vs GPU {f(e2e[n] * 1e6)} µs' for n in small)}; best rows)")
    text += f"; GPU (end to end) faster from N = {cross}" if cross is not None else "; the GPU never overtakes"
    if share < MAJORITY:
        v = DOES_NOT_HOLD
    elif cross is not None and CHAPTER.small_n // 2 < cross <= 2 * CHAPTER.small_n:
        v = HOLDS
    else:
        v = OTHER_NUMBER
    parts = [Part(what, v, text,
                  f"CPU faster at >= {MAJORITY:.0%} of the N < {CHAPTER.small_n}, else does not hold; crossover "
                  f"within ({CHAPTER.small_n // 2}, {2 * CHAPTER.small_n}]: holds, elsewhere: another number",
                  {"cpu_wins_small_share": share, "crossover_n": float(cross) if cross else float("nan")})]
    what = "launch and transfers dominate (most of the GPU's end-to-end time at those N)"
    overhead = {n: 1 - kern[n] / e2e[n] for n in small if n in kern.index}
    if not overhead:
        parts.append(not_measured(what, need_rows("cuBLAS FP32 at N < 128 beside gemm_e2e_gpu", "claims_cpu_gpu")))
    else:
        low = min(overhead.values())
        parts.append(Part(what, HOLDS if low > DOMINATE_MIN else DOES_NOT_HOLD,
                          "; ".join(f"N={n}: kernel (cuBLAS, best row) {f(kern[n] * 1e6)} µs of {f(e2e[n] * 1e6)} µs "
                                    f"end to end: {f(100 * o)} % overhead" for n, o in sorted(overhead.items())),
                          f"1 - kernel / end to end > {DOMINATE_MIN:.0%} at every such N: holds; else does not hold",
                          {"gpu_overhead_min": low}))
    return parts


@claim("C14d", "5.7", "Timing only the kernel misleads: a 1024³ GEMM computes in ≈ 0.3 ms, the transfers may "
                      "take longer.", "cpu_gpu_crossover")
def c14d(ev: Evidence) -> List[Part]:
    parts = []
    n = 1024
    what = f"a {n}³ GEMM computes in about {f(CHAPTER.gemm_1024_ms)} ms"
    kern = data.cublas_standalone(ev.device_rows("gpu"))
    kern = kern[(kern["precision"] == "fp32") & (kern["m"] == n) & (kern["n"] == n) & (kern["k"] == n)]
    if kern.empty:
        return [not_measured(what, need_rows(f"cuBLAS FP32 at N = {n}", "claims_cpu_gpu")),
                not_measured("the transfers may take longer", need_rows("transfer probes", "claims_cpu_gpu"))]
    k = kern.iloc[0]
    k_s = float(k["cublas_time_s"])
    parts.append(Part(what, same_number(k_s * 1e3, CHAPTER.gemm_1024_ms),
                      f"cuBLAS FP32 {n}³ (best row, {k['cublas_variant']}): {f(k_s * 1e3)} ms "
                      f"({f(k['cublas_tflops'])} TFLOP/s)", SAME_NUMBER_RULE, {"gemm_1024_ms": k_s * 1e3}))
    what = "the transfers may take longer than the kernel"
    tr = data.transfer_times(ev.device_rows("gpu"))
    tr = tr[(tr["precision"] == "fp32") & (tr["m"] == n) & (tr["n"] == n) & (tr["k"] == n)]
    if tr.empty:
        parts.append(not_measured(what, need_rows("transfer probes at N = 1024", "claims_cpu_gpu")))
        return parts
    times = dict(zip(tr["memory"], tr["transfer_s"].astype(float)))
    longer = {mem: t > k_s for mem, t in times.items()}
    text = "; ".join(f"{mem}: {f(t * 1e3)} ms = {f(t / k_s)}× the kernel" for mem, t in sorted(times.items()))
    rows = ev.op("transfer", "gpu", "fp32")
    size = rows[(rows["m"] == n) & (rows["n"] == n) & (rows["k"] == n)]["bytes_min"]
    size_text = f" ({f(size.iloc[0] / 1e6)} MB)" if not size.empty else ""
    parts.append(Part(what, HOLDS if any(longer.values()) else DOES_NOT_HOLD,
                      f"H2D A, B + D2H C{size_text}, best rows: {text}",
                      "transfer time > kernel time (pageable or pinned): holds; else does not hold",
                      {f"transfer_over_kernel_{mem}": t / k_s for mem, t in times.items()}))
    return parts
