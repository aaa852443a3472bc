"""The ``cpu_probe`` backend (:class:`CpuProbe`): the host's side of the chapter's memory-bound
measurements (claims C2, C11, C13). A variant with ``backend: cpu_probe`` names a ``probe.kind``:
``copy``, ``vecadd`` or ``gemv`` (the table is in the package docstring, :mod:`gemmlab.backends.probes`).

NumPy's element-wise functions run on one thread, so copy and vecadd split the arrays into one
contiguous chunk per thread (NumPy releases the GIL inside them); gemv runs on the BLAS threads,
which the CPU executor limits to the variant's ``threads``. Timing is the CPU executor's: the
host clock, warm-up by time, samples until the stopping rule holds. Every row's ``extra`` also
carries the host facts that turn GFLOP/s into FLOP per core per cycle (cores, clock, AVX-512).
"""
from __future__ import annotations

import functools
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from gemmlab import dtypes, env
from gemmlab.backends.base import Backend
from gemmlab.backends.probes import probe_of
from gemmlab.measure import check
from gemmlab.measure.cpu import host_timed
from gemmlab.measure.stats import timing_fields

CHUNK_ALIGN = 4096  # elements; chunk boundaries on page multiples


@functools.lru_cache(maxsize=None)
def host_facts() -> Dict[str, Any]:
    """Cores and clock of this host, read from /proc and /sys (never assumed)."""
    facts: Dict[str, Any] = {"cpu_model": env.cpu_model(), "logical_cpus": os.cpu_count()}
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        allowed = list(range(os.cpu_count() or 1))
    facts["cpus_allowed"] = len(allowed)
    cores, flags, mhz = {}, set(), []
    try:
        block: Dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines() + [""]:
            if not line.strip():
                if "processor" in block:
                    cores[int(block["processor"])] = (block.get("physical id", "0"), block.get("core id", block["processor"]))
                    flags |= set(block.get("flags", "").split())
                    if "cpu MHz" in block:
                        mhz.append(float(block["cpu MHz"]))
                block = {}
                continue
            key, _, value = line.partition(":")
            block[key.strip()] = value.strip()
    except OSError:
        pass
    facts["physical_cores_allowed"] = len({cores[c] for c in allowed if c in cores}) or None
    facts["avx512f"] = "avx512f" in flags if flags else None
    facts["fma"] = "fma" in flags if flags else None
    max_khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        facts["cpu_max_mhz"] = int(max_khz.read_text().strip()) / 1000.0
        facts["cpu_mhz_source"] = str(max_khz)
    except (OSError, ValueError):
        facts["cpu_max_mhz"] = max(mhz) if mhz else None
        facts["cpu_mhz_source"] = "/proc/cpuinfo cpu MHz (highest current reading; no cpufreq)" if mhz else None
    if facts["cpu_max_mhz"] is None:
        m = re.search(r"@\s*([\d.]+)\s*GHz", facts["cpu_model"] or "")
        if m:
            facts["cpu_max_mhz"], facts["cpu_mhz_source"] = float(m.group(1)) * 1000, "CPU model name"
    return facts


def _threads(point, ex) -> int:
    t = point.variant_cfg.get("threads")
    if t is None:
        t = ex.measure.threads
    if t is None:
        t = host_facts()["cpus_allowed"] or 1
    return max(1, int(t))


def _chunks(n: int, parts: int) -> List[slice]:
    step = max(CHUNK_ALIGN, -(-n // parts // CHUNK_ALIGN) * CHUNK_ALIGN)
    return [slice(s, min(n, s + step)) for s in range(0, n, step)]


class CpuProbe(Backend):
    name = "cpu_probe"
    kind = "cpu"
    layouts = ("nn",)
    layout_reason = "probes measure their own operation on their own operands: the layout axis does not apply"
    batched = False
    batch_reason = "probes measure their own operation: the batch axis does not apply"
    KINDS = ("copy", "vecadd", "gemv")
    PRECISIONS = ("fp32", "fp64")

    @staticmethod
    def _probe(point):
        return probe_of(point, "cpu_probe")

    def skip_reason(self, p) -> Optional[str]:
        kind, _ = self._probe(p)
        if kind not in self.KINDS:
            return f"unknown cpu_probe kind {kind!r}; known: {', '.join(self.KINDS)}"
        if p.compute not in self.PRECISIONS:
            return f"cpu_probe measures {', '.join(self.PRECISIONS)}, not {p.compute}"
        if kind == "gemv" and (p.n != 1 or p.k == 1):
            return "gemv multiplies an m x k matrix (k > 1) by a k-vector: the shape must be [m, 1, k]"
        if kind != "gemv" and (p.n, p.k) != (1, 1):
            return f"{kind} is a vector probe of length m: the shape must be [m, 1, 1]"
        return None

    def measure_point(self, point, executor, seed: int) -> Dict[str, Any]:
        kind, _ = self._probe(point)
        threads = _threads(point, executor)
        with ThreadPoolExecutor(max_workers=threads) as pool:
            fields = getattr(self, f"_{kind}")(point, executor, seed, pool, threads)
        extra = {**host_facts(), "threads": threads, **fields.pop("extra", {})}
        return {"op": kind, **env.blas_info(), **fields, "extra": extra, "timer": "perf_counter",
                "cache": "warm"}

    # -- the probes -------------------------------------------------------------------------
    def _timed(self, p, ex, fn, out, reference, flops, nbytes, kernel_name) -> Dict[str, Any]:
        """Check ``out`` against ``reference`` (gemmlab.measure.check.Reference), time, check again."""
        out[...] = np.nan
        fn()
        res = reference.verify(out)
        row = {**res.fields(), "flops": flops, "bytes_min": nbytes, "intensity": (flops / nbytes) if flops else None,
               "kernel_name": kernel_name, "library_version": f"numpy {np.__version__}"}
        if not res.passed:
            return {**row, "status": "failed", "reason": res.failure()}
        t = host_timed(fn, ex.measure)
        row.update(timing_fields(t["summary"], flops), warmup_s=t["warmup_s"], _samples=t["_samples"])
        why = check.recheck(reference, out, row)
        return {**row, "status": "failed", "reason": why} if why else {**row, "status": "ok"}

    @staticmethod
    def _elementwise(p, r, s, k):
        """The reference of an element-wise probe: R (FP64) and the |terms| S behind each element."""
        return check.Reference(np, r, s, k, check.model_of(p), "NumPy FP64 (host)", p.tolerance, p.out_dtype)

    def _copy(self, p, ex, seed, pool, threads):
        src = ex.random(np.random.default_rng(seed), (p.m,), p.in_dtype)
        dst = np.empty_like(src)
        parts = _chunks(p.m, threads)

        def fn():
            list(pool.map(lambda s: np.copyto(dst[s], src[s]), parts))

        ref = self._elementwise(p, src.astype(np.float64), np.zeros(p.m), 0)  # a copy is exact
        return self._timed(p, ex, fn, dst, ref, 0, 2 * src.nbytes, f"numpy.copyto in {len(parts)} chunks")

    def _vecadd(self, p, ex, seed, pool, threads):
        rng = np.random.default_rng(seed)
        a = ex.random(rng, (p.m,), p.in_dtype)
        b = ex.random(rng, (p.m,), p.in_dtype)
        c = np.empty_like(a)
        parts = _chunks(p.m, threads)

        def fn():
            list(pool.map(lambda s: np.add(a[s], b[s], out=c[s]), parts))

        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        ref = self._elementwise(p, a64 + b64, np.abs(a64) + np.abs(b64), 1)
        return self._timed(p, ex, fn, c, ref, p.m, 3 * a.nbytes, f"numpy.add in {len(parts)} chunks")

    def _gemv(self, p, ex, seed, pool, threads):
        rng = np.random.default_rng(seed)
        a = ex.random(rng, (p.m, p.k), p.in_dtype)
        x = ex.random(rng, (p.k,), p.in_dtype)
        y = np.empty((p.m,), dtype=a.dtype)

        def fn():
            np.matmul(a, x, out=y)

        item = dtypes.itemsize(p.in_dtype)
        ref = ex.reference(p, a, x[:, None])  # a GEMM with n = 1: the same reference rules
        return self._timed(p, ex, fn, y, ref, 2 * p.m * p.k, item * (p.m * p.k + p.k + p.m),
                           f"numpy.matmul matrix-vector ({a.dtype.name})")


BACKEND = CpuProbe
