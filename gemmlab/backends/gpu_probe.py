"""gpu_probe: measurements on the GPU that are not C = A @ B, for the chapter's claims.

A variant with ``backend: gpu_probe`` names a ``probe.kind`` (one of ``PROBES`` below) and its
``probe.params``. The GPU executor calls :meth:`GpuProbe.measure_point`, which owns the inputs,
the check and the timing of its point: timing goes through the executor's timer (cold L2, a busy
GPU before each start event, interleaving) exactly as for a GEMM, and the dict it returns
overrides the row's GEMM defaults (``op``, ``flops``, ``bytes_min``, ``intensity``, ...).

=================  ==========  ======================================================  =====
kind               op          what                                                    claim
=================  ==========  ======================================================  =====
copy               copy        device-to-device cudaMemcpy of m elements: the memory   C1
                               roof (bytes read + written / time)
vecadd             vecadd      hand-written c = a + b over m elements                  C2
gemv               gemv        cuBLAS ?gemv, y = A x with A m x k (shape [m, 1, k])    C2, C13
transfer           transfer    H2D of A and B, D2H of C for a GEMM point; pageable or  C14d
                               pinned host memory (``params.memory``)
gemm_e2e           gemm_e2e    host arrays in, host array out: H2D, cuBLAS, D2H and    C12
                               the synchronisation, timed on the host clock
first_run          first_run   the first cuBLAS call of the process, the first after   C14e
                               the GPU idled, and the settled median
smem_bandwidth     smem_bandw  conflict-free 16-byte shared-memory loads               C5
smem_bank          smem_bank   4-byte loads at lane stride ``params.stride``           C14b
smem_latency       smem_laten  a pointer chase through shared memory, SM cycles/load   C5
wmma_layout        wmma_layo   the chapter's wmma_gemm; B's layout declared wrong      C9
wmma_alignment     wmma_align  wmma_gemm on pointers shifted by a few bytes (child     C9
                               processes: a misaligned access kills the CUDA context)
sgemm32_unguarded  boundary    the chapter's sgemm32 at any size, inside padded        C14a
                               buffers whose padding is checked afterwards
=================  ==========  ======================================================  =====

Kernels live in ``kernels/cuda/probes/*.cu`` (and ``kernels/cuda/92_sgemm32_as_written.cu``);
they are compiled with nvcc (:mod:`gemmlab.backends.nvcc`) into cubins cached under ``paths.cache``/probes
and loaded with ``cupy.RawModule(path=...)``. CuPy and CUDA libraries are imported inside functions, so this
module imports on machines without a GPU.

    python -m gemmlab.backends.gpu_probe wmma-alignment '<json>'   # the alignment child process
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np

from gemmlab import cache, dtypes
from gemmlab.backends.base import Backend
from gemmlab.config import ROOT
from gemmlab.measure import check
from gemmlab.measure.cpu import host_timed
from gemmlab.measure.stats import timing_fields

KERNELS_DIR = ROOT / "kernels" / "cuda"
PROBE_SOURCES = {
    "streams": KERNELS_DIR / "probes" / "streams.cu",
    "smem": KERNELS_DIR / "probes" / "smem.cu",
    "wmma_layout": KERNELS_DIR / "probes" / "wmma_layout.cu",
    "sgemm32": KERNELS_DIR / "92_sgemm32_as_written.cu",
}
CHILD_TIMEOUT_S = 120
VECTOR_BLOCK = 256  # threads per block of the vector add
BLOCKS_PER_SM = 8  # vector add: 8 x 256 threads fill an SM (2048 threads)
SMEM_BLOCK = 1024  # threads per block of the shared-memory probes (32 KB each, 2 blocks per SM)
SMEM_BLOCKS_PER_SM = 2
WMMA_WARPS_PER_BLOCK = 4
SGEMM32_TILE = 32

CUBLAS_OP_T = 1  # cublasOperation_t


# -- building kernels ---------------------------------------------------------------------------
def compile_probe(source: Path, arch: str, cache_root: str) -> Path:
    """nvcc ``source`` into a cubin for ``arch`` through :mod:`gemmlab.backends.nvcc` (the ladder's
    compiler: cached by source, included headers, flags and nvcc version)."""
    from gemmlab.backends import nvcc

    flags = nvcc.build_flags(arch, extra=(f"-I{KERNELS_DIR}",))
    return nvcc.compile_cubin(source, flags, cache.cache_dir(cache_root, "probes")).path


def device_arch(cc: str) -> str:
    """'9.0' -> 'sm_90'."""
    major, minor = cc.split(".")
    return f"sm_{major}{minor}"


# -- small helpers --------------------------------------------------------------------------------
def tile_transpose(b, tile: int = 16):
    """B with every tile x tile block transposed in place: what a WMMA fragment declared
    col_major reads from a row-major B at row-major addresses (works for NumPy and CuPy)."""
    k, n = b.shape
    return b.reshape(k // tile, tile, n // tile, tile).transpose(0, 3, 2, 1).reshape(k, n)


def _cache_policy(ex) -> str:
    # probes do not rotate input sets: with cache=rotate their samples see whatever L2 holds
    return "flush" if ex.timer.cache == "flush" else "warm"


def _timed_fields(ex, timed, flops: int, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Row fields of one timed call: the executor's own timing-to-row path, plus ``extra``."""
    fields, timer = ex.timed_fields(timed, flops, cache=_cache_policy(ex))
    return {**fields, "extra": {**(extra or {}), "timer": timer}}


def _elementwise(cp, p, r, s, k: int) -> check.Reference:
    """The reference of an element-wise probe: R (FP64) and the |terms| S behind each element."""
    return check.Reference(cp, r, s, k, check.model_of(p), "CuPy FP64", p.tolerance, p.out_dtype)


def _checked(row: Dict[str, Any], res: check.CheckResult) -> Optional[Dict[str, Any]]:
    """The row with the check's columns; a failed row if the check failed, else None."""
    row.update(res.fields())
    return {**row, "status": "failed", "reason": res.failure()} if not res.passed else None


def _rechecked(row: Dict[str, Any], reference: check.Reference, out) -> Dict[str, Any]:
    why = check.recheck(reference, out, row)
    return {**row, "status": "failed", "reason": why} if why else {**row, "status": "ok"}


def _nvml_clock(ex) -> Optional[float]:
    if not ex.nvml.ok:
        return None
    try:
        return ex.nvml.read()[0]
    except Exception:  # a failed read must not lose the measurement
        return None


class ProbeSkip(Exception):
    """The point cannot run here (memory, sizes); the message is the row's reason."""


# -- the backend ----------------------------------------------------------------------------------
class GpuProbe(Backend):
    name = "gpu_probe"
    kind = "gpu"

    def __init__(self, cfg):
        super().__init__(cfg)
        self._modules: Dict[str, Any] = {}
        self._blas_handle = None
        self._cublas = None  # gemmlab.backends.cublas.Cublas, for the GEMM of gemm_e2e / first_run

    # -- configuration ----------------------------------------------------------------------
    @staticmethod
    def _probe(point):
        probe = point.variant_cfg.get("probe")
        if probe is None:
            raise ValueError(f"variant {point.variant} (backend gpu_probe) has no `probe:` section")
        return str(probe.kind), dict(probe.params or {})

    def skip_reason(self, p) -> Optional[str]:
        kind, params = self._probe(p)
        if kind not in PROBES:
            return f"unknown gpu_probe kind {kind!r}; known: {sorted(PROBES)}"
        return PROBES[kind].skip(p, params)

    def measure_point(self, point, executor, seed: int) -> Dict[str, Any]:
        kind, params = self._probe(point)
        probe = PROBES[kind]
        try:
            fields = probe.run(self, point, executor, seed, params)
        except ProbeSkip as e:
            return {"status": "skipped", "reason": str(e), "op": probe.op}
        return {"op": probe.op, **fields}

    def release(self) -> None:
        if self._cublas is not None:
            self._cublas.release()

    # -- shared resources -------------------------------------------------------------------
    def _module(self, ex, source: str):
        """(RawModule, cubin path) of ``PROBE_SOURCES[source]``, compiled for this device once."""
        if source not in self._modules:
            import cupy

            cubin = compile_probe(PROBE_SOURCES[source], device_arch(ex.dev["cc"]), self.cfg.paths.cache)
            self._modules[source] = (cupy.RawModule(path=str(cubin)), cubin)
        return self._modules[source]

    def function(self, ex, source: str, entry: str):
        return self._module(ex, source)[0].get_function(entry)

    def cubin(self, ex, source: str) -> Path:
        return self._module(ex, source)[1]

    def blas_handle(self, ex) -> int:
        from cupy_backends.cuda.libs import cublas

        if self._blas_handle is None:
            self._blas_handle = cublas.create()
            cublas.setPointerMode(self._blas_handle, cublas.CUBLAS_POINTER_MODE_HOST)
        cublas.setStream(self._blas_handle, ex.stream.ptr)
        return self._blas_handle

    def gemm_launch(self, p, a, b, c):
        """cuBLAS C = A @ B for the point (the cublas backend's launch, on the current stream)."""
        from gemmlab.backends.cublas import Cublas

        if self._cublas is None:
            self._cublas = Cublas(self.cfg)
        reason = self._cublas.unavailable() or self._cublas.skip_reason(p)
        if reason:
            raise ProbeSkip(reason)
        return self._cublas.make_launch(p, a, b, c)


def _need_memory(nbytes: int) -> None:
    from gemmlab.gpu.device import free_bytes

    free = free_bytes()
    if nbytes > 0.9 * free:
        raise ProbeSkip(f"needs {nbytes / 2**30:.1f} GiB of device memory, {free / 2**30:.1f} GiB free")


def _random(cp, rng, shape, name: str, ex):
    """Inputs as every GPU backend draws them (measure.distribution, measure.input_scale)."""
    from gemmlab.gpu import arrays

    m = ex.measure
    return arrays.cast(cp, check.random_matrix(cp, rng, shape, m.distribution.value, m.input_scale), name)


# -- probes ---------------------------------------------------------------------------------------
class Probe:
    op: str = ""
    precisions: Sequence[str] = ("fp32",)

    def skip(self, p, params) -> Optional[str]:
        if p.compute not in self.precisions:
            return f"gpu_probe {type(self).__name__} measures {', '.join(self.precisions)}, not {p.compute}"
        return None

    def run(self, backend: GpuProbe, p, ex, seed: int, params) -> Dict[str, Any]:
        raise NotImplementedError


class VectorProbe(Probe):
    precisions = ("fp32", "fp64")

    def skip(self, p, params):
        if p.n != 1 or p.k != 1:
            return f"{self.op} is a vector probe of length m: the shape must be [m, 1, 1]"
        return super().skip(p, params)


class Copy(VectorProbe):
    """cudaMemcpyAsync device to device of m elements: the memory roof. bytes_min counts the
    bytes read plus the bytes written (2 x m x itemsize)."""

    op = "copy"

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        nbytes = p.m * dtypes.itemsize(p.in_dtype)
        _need_memory(2 * nbytes + 3 * 8 * p.m)
        rng = cp.random.default_rng(seed)
        src = _random(cp, rng, (p.m,), p.in_dtype, ex)
        dst = cp.empty_like(src)
        runtime, stream = cp.cuda.runtime, ex.stream.ptr

        def fn():
            runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, runtime.memcpyDeviceToDevice, stream)

        dst.fill(float("nan"))
        fn()
        ref = _elementwise(cp, p, src.astype(cp.float64), cp.zeros(p.m), 0)  # a copy is exact
        row = {"flops": 0, "bytes_min": 2 * nbytes, "intensity": None,
               "kernel_name": "cudaMemcpyAsync DeviceToDevice"}
        failed = _checked(row, ref.verify(dst))
        if failed:
            return failed
        timed = ex.timer.measure([[fn]])[0]
        row.update(_timed_fields(ex, timed, 0, {"buffer_bytes": nbytes}))
        return _rechecked(row, ref, dst)


class VecAdd(VectorProbe):
    """c = a + b over m elements, the hand-written kernel of kernels/cuda/probes/streams.cu.
    One add per element (flops = m); 3 m elements move (bytes_min = 3 m itemsize)."""

    op = "vecadd"

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        item = dtypes.itemsize(p.in_dtype)
        _need_memory(3 * p.m * item + 4 * 8 * p.m)
        kern = backend.function(ex, "streams", f"vecadd_{p.in_dtype}")
        rng = cp.random.default_rng(seed)
        a = _random(cp, rng, (p.m,), p.in_dtype, ex)
        b = _random(cp, rng, (p.m,), p.in_dtype, ex)
        c = cp.empty_like(a)
        vec = 16 // item
        blocks = max(1, min(math.ceil(p.m / vec / VECTOR_BLOCK), BLOCKS_PER_SM * ex.dev["sm_count"]))
        args = (a, b, c, np.int64(p.m))

        def fn():
            kern((blocks,), (VECTOR_BLOCK,), args)

        c.fill(float("nan"))
        fn()
        # the FP64 sum of the two inputs is exact: the error left is the output's own rounding
        a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
        ref = _elementwise(cp, p, a64 + b64, cp.abs(a64) + cp.abs(b64), 1)
        del a64, b64
        row = {"flops": p.m, "bytes_min": 3 * p.m * item,
               "intensity": p.m / (3 * p.m * item), "kernel_name": f"vecadd_{p.in_dtype}"}
        failed = _checked(row, ref.verify(c))
        if failed:
            return failed
        timed = ex.timer.measure([[fn]])[0]
        row.update(_timed_fields(ex, timed, p.m, {"blocks": blocks, "threads_per_block": VECTOR_BLOCK}))
        return _rechecked(row, ref, c)


class Gemv(Probe):
    """y = A x through cuBLAS sgemv/dgemv, A row-major m x k (the point's shape is [m, 1, k]).
    Row-major A is the column-major k x m matrix A^T, so the call is gemv(T) on it."""

    op = "gemv"
    precisions = ("fp32", "fp64")

    def skip(self, p, params):
        if p.n != 1 or p.k == 1:
            return "gemv multiplies an m x k matrix (k > 1) by a k-vector: the shape must be [m, 1, k]"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        from cupy_backends.cuda.libs import cublas

        cp = ex.cp
        item = dtypes.itemsize(p.in_dtype)
        _need_memory(item * (p.m * p.k + p.k + p.m) + 8 * (p.m * p.k + p.k + 3 * p.m))
        rng = cp.random.default_rng(seed)
        a = _random(cp, rng, (p.m, p.k), p.in_dtype, ex)
        x = _random(cp, rng, (p.k,), p.in_dtype, ex)
        y = cp.empty((p.m,), dtype=a.dtype)
        handle = backend.blas_handle(ex)
        gemv = cublas.sgemv if p.in_dtype == "float32" else cublas.dgemv
        # CuPy's binding takes alpha and beta as host pointers (pointer mode host), not values:
        # passing 1.0 itself segfaulted on the H200.
        alpha, beta = np.ones(1, dtype=a.dtype), np.zeros(1, dtype=a.dtype)
        args = (handle, CUBLAS_OP_T, p.k, p.m, alpha.ctypes.data, a.data.ptr, p.k, x.data.ptr, 1,
                beta.ctypes.data, y.data.ptr, 1)

        def fn():
            gemv(*args)

        fn.keepalive = (alpha, beta)

        y.fill(float("nan"))
        fn()
        ref = ex.reference(p, a, x[:, None])  # a GEMM with n = 1: the same reference rules
        flops, nbytes = 2 * p.m * p.k, item * (p.m * p.k + p.k + p.m)
        row = {"flops": flops, "bytes_min": nbytes, "intensity": flops / nbytes,
               "kernel_name": f"cublas{'S' if item == 4 else 'D'}gemv (T)",
               "library_version": f"cuBLAS {cublas.getVersion(handle)}"}
        failed = _checked(row, ref.verify(y))
        if failed:
            return failed
        timed = ex.timer.measure([[fn]])[0]
        row.update(_timed_fields(ex, timed, flops))
        return _rechecked(row, ref, y)


def _host_operands(p, seed: int, ex, pinned: bool):
    """A (m x k), B (k x n) random and C (m x n) on the host, pageable or pinned."""
    import cupyx

    rng = np.random.default_rng(seed)
    shapes = {"a": ((p.m, p.k), p.in_dtype), "b": ((p.k, p.n), p.in_dtype), "c": ((p.m, p.n), p.out_dtype)}
    out = {}
    for name, (shape, dt) in shapes.items():
        dtype = dtypes.numpy_dtype(dt)
        arr = cupyx.empty_pinned(shape, dtype=dtype) if pinned else np.empty(shape, dtype=dtype)
        if name != "c":
            m = ex.measure
            arr[...] = check.random_matrix(np, rng, shape, m.distribution.value, m.input_scale).astype(dtype)
        out[name] = arr
    return out["a"], out["b"], out["c"]


class Transfer(Probe):
    """What a GEMM's operands cost to move: A and B host to device, C device to host, on the
    executor's stream, timed with its events. ``params.memory``: pageable (NumPy arrays, what a
    program has by default) or pinned (page-locked, cupyx.empty_pinned)."""

    op = "transfer"
    precisions = ("fp32", "fp64", "tf32", "fp16", "bf16")

    def skip(self, p, params):
        if params.get("memory", "pageable") not in ("pageable", "pinned"):
            return f"transfer params.memory must be pageable or pinned, not {params.get('memory')!r}"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        runtime, stream = cp.cuda.runtime, ex.stream.ptr
        memory = params.get("memory", "pageable")
        ha, hb, hc = _host_operands(p, seed, ex, pinned=memory == "pinned")
        _need_memory(ha.nbytes + hb.nbytes + hc.nbytes)
        da, db = cp.empty(ha.shape, ha.dtype), cp.empty(hb.shape, hb.dtype)
        dc = _random(cp, cp.random.default_rng(seed + 1), hc.shape, p.out_dtype, ex)

        def h2d():
            runtime.memcpyAsync(da.data.ptr, ha.ctypes.data, ha.nbytes, runtime.memcpyHostToDevice, stream)
            runtime.memcpyAsync(db.data.ptr, hb.ctypes.data, hb.nbytes, runtime.memcpyHostToDevice, stream)

        def d2h():
            runtime.memcpyAsync(hc.ctypes.data, dc.data.ptr, hc.nbytes, runtime.memcpyDeviceToHost, stream)

        def both():
            h2d()
            d2h()

        hc[...] = np.nan
        both()
        ex.stream.synchronize()
        wrong = int((cp.asnumpy(da) != ha).sum() + (cp.asnumpy(db) != hb).sum() + (cp.asnumpy(dc) != hc).sum())
        h2d_bytes, d2h_bytes = ha.nbytes + hb.nbytes, hc.nbytes
        row = {"flops": 0, "bytes_min": h2d_bytes + d2h_bytes, "intensity": None,
               "rel_error": 0.0 if wrong == 0 else float("nan"),
               "kernel_name": f"cudaMemcpyAsync H2D A, B + D2H C ({memory} host memory)"}
        if wrong:
            return {**row, "status": "failed", "reason": f"{wrong} elements differ after the round trip"}
        total, t_h2d, t_d2h = ex.timer.measure([[both], [h2d], [d2h]])
        extra = {"memory": memory, "h2d_bytes": h2d_bytes, "d2h_bytes": d2h_bytes,
                 "h2d_s": t_h2d.summary.median_s, "d2h_s": t_d2h.summary.median_s,
                 "h2d_gbs": h2d_bytes / t_h2d.summary.median_s / 1e9,
                 "d2h_gbs": d2h_bytes / t_d2h.summary.median_s / 1e9}
        return {**row, **_timed_fields(ex, total, 0, extra), "status": "ok"}


class GemmEndToEnd(Probe):
    """A GEMM as a program with host arrays sees it: copy A and B in (pageable), cuBLAS, copy C
    out, wait. Timed on the host clock, back to back (what a loop of such calls costs)."""

    op = "gemm_e2e"
    precisions = ("fp32", "fp64", "tf32", "fp16", "bf16")

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        runtime, stream = cp.cuda.runtime, ex.stream.ptr
        ha, hb, hc = _host_operands(p, seed, ex, pinned=False)
        _need_memory(ha.nbytes + hb.nbytes + hc.nbytes + 8 * (p.m * p.k + p.k * p.n + 3 * p.m * p.n))
        da, db = cp.empty(ha.shape, ha.dtype), cp.empty(hb.shape, hb.dtype)
        dc = cp.empty(hc.shape, hc.dtype)
        launch = backend.gemm_launch(p, da, db, dc)

        def fn():
            runtime.memcpyAsync(da.data.ptr, ha.ctypes.data, ha.nbytes, runtime.memcpyHostToDevice, stream)
            runtime.memcpyAsync(db.data.ptr, hb.ctypes.data, hb.nbytes, runtime.memcpyHostToDevice, stream)
            launch.fn()
            runtime.memcpyAsync(hc.ctypes.data, dc.data.ptr, hc.nbytes, runtime.memcpyDeviceToHost, stream)
            ex.stream.synchronize()

        hc[...] = np.nan
        fn()
        ref = ex.reference(p, cp.asarray(ha), cp.asarray(hb))
        row = {**launch.info,
               "kernel_name": f"H2D A, B (pageable) + {launch.info.get('kernel_name', 'cuBLAS')} + D2H C + sync"}
        failed = _checked(row, ref.verify(cp.asarray(hc)))
        if failed:
            return failed
        t = host_timed(fn, ex.measure)
        row.update(timing_fields(t["summary"], p.flops), timer="perf_counter", cache="warm", warmup_s=t["warmup_s"],
                   _samples=t["_samples"],
                   extra={"includes": "H2D A, B from pageable memory, cuBLAS, D2H C, stream sync",
                          "transfer_bytes": ha.nbytes + hb.nbytes + hc.nbytes})
        return _rechecked(row, ref, cp.asarray(hc))


class FirstRun(Probe):
    """Reporting without warm-up. In one process: (1) the first cuBLAS GEMM of the process after
    the GPU idled ``params.idle_s`` (module loading, clock ramp, cold L2), (2) the same call
    after idling again (clock ramp and cold L2 only), (3) the settled median of the executor's
    timer after its warm-up. Rows: timing columns = (3); ``extra`` = (1), (2) and the SM clock
    read just before each. Runs first in its process (experiment claims_first_run)."""

    op = "first_run"
    precisions = ("fp32", "fp64", "tf32", "fp16", "bf16")

    def _cold_call(self, ex, fn, idle_s: float) -> Dict[str, Any]:
        cp = ex.cp
        ex.timer.flush_l2()  # cold L2 before the idle period, so nothing warms it again
        ex.stream.synchronize()
        time.sleep(idle_s)
        clock = _nvml_clock(ex)
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        t0 = time.perf_counter()
        ev0.record(ex.stream)
        fn()
        ev1.record(ex.stream)
        ev1.synchronize()
        host_s = time.perf_counter() - t0
        return {"host_s": host_s, "event_s": cp.cuda.get_elapsed_time(ev0, ev1) * 1e-3,
                "sm_clock_before_mhz": clock, "sm_clock_after_mhz": _nvml_clock(ex)}

    def run(self, backend, p, ex, seed, params):
        from gemmlab.gpu import arrays

        cp = ex.cp
        idle_s = float(params.get("idle_s", 2.0))
        _need_memory(dtypes.itemsize(p.in_dtype) * (p.m * p.k + p.k * p.n) + 8 * (p.m * p.k + p.k * p.n + 4 * p.m * p.n))
        rng = cp.random.default_rng(seed)
        a = _random(cp, rng, (p.m, p.k), p.in_dtype, ex)
        b = _random(cp, rng, (p.k, p.n), p.in_dtype, ex)
        c = arrays.empty(cp, (p.m, p.n), p.out_dtype)
        launch = backend.gemm_launch(p, a, b, c)
        arrays.poison(cp, c)
        first = self._cold_call(ex, launch.fn, idle_s)
        ref = ex.reference(p, a, b)
        row = {**launch.info}
        failed = _checked(row, ref.verify(c))
        if failed:
            return failed
        again = self._cold_call(ex, launch.fn, idle_s)
        settled = ex.timer.measure([[launch.fn]])[0]
        extra = {"idle_s": idle_s,
                 "first_call_host_s": first["host_s"], "first_call_event_s": first["event_s"],
                 "first_call_sm_clock_before_mhz": first["sm_clock_before_mhz"],
                 "after_idle_host_s": again["host_s"], "after_idle_event_s": again["event_s"],
                 "after_idle_sm_clock_before_mhz": again["sm_clock_before_mhz"],
                 "after_idle_sm_clock_after_mhz": again["sm_clock_after_mhz"],
                 "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING", "")}
        row.update(_timed_fields(ex, settled, p.flops, extra))
        return _rechecked(row, ref, c)


class SmemProbe(Probe):
    """Shared-memory microbenchmarks (kernels/cuda/probes/smem.cu); the shape is unused, so they
    run at [1, 1, 1] (sizes=probe); the work is set by params."""

    def skip(self, p, params):
        if (p.m, p.n, p.k) != (1, 1, 1):
            return f"{self.op} sets its work by params; run it at the shape [1, 1, 1] (sizes=probe)"
        return super().skip(p, params)

    def _grid(self, ex) -> int:
        return SMEM_BLOCKS_PER_SM * ex.dev["sm_count"]


class SmemBandwidth(SmemProbe):
    """Conflict-free LDS.128 from a 32 KB array: bytes requested / time."""

    op = "smem_bandwidth"

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        iters = int(params.get("iters", 8192))
        if iters % 8:
            raise ProbeSkip(f"smem_bandwidth params.iters must be a multiple of 8, got {iters}")
        kern = backend.function(ex, "smem", "smem_read_vec4")
        grid = self._grid(ex)
        out = cp.empty(grid * SMEM_BLOCK, dtype=cp.float32)
        args = (out, np.int32(iters))

        def fn():
            kern((grid,), (SMEM_BLOCK,), args)

        nbytes = grid * SMEM_BLOCK * iters * 16
        timed = ex.timer.measure([[fn]])[0]
        extra = {"iters": iters, "blocks": grid, "threads_per_block": SMEM_BLOCK,
                 "load_bytes": 16, "smem_gbs": nbytes / timed.summary.median_s / 1e9}
        return {**_timed_fields(ex, timed, 0, extra), "flops": 0, "bytes_min": nbytes, "intensity": None,
                "kernel_name": "smem_read_vec4", "smem_bytes": 32768, "status": "ok"}


class SmemBank(SmemProbe):
    """LDS.32 where lane j reads word j * stride + i: stride 32 is a 32-way bank conflict,
    strides 1 and 33 are conflict-free. Rows of the same run compare directly."""

    op = "smem_bank"

    def skip(self, p, params):
        stride = int(params.get("stride", 1))
        if not 1 <= stride <= 33:
            return f"smem_bank params.stride must be in 1..33, got {stride}"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        iters, stride = int(params.get("iters", 4096)), int(params.get("stride", 1))
        if iters % 32:
            raise ProbeSkip(f"smem_bank params.iters must be a multiple of 32, got {iters}")
        kern = backend.function(ex, "smem", "smem_read_strided")
        grid = self._grid(ex)
        out = cp.empty(grid * SMEM_BLOCK, dtype=cp.float32)
        args = (out, np.int32(iters), np.int32(stride))

        def fn():
            kern((grid,), (SMEM_BLOCK,), args)

        nbytes = grid * SMEM_BLOCK * iters * 4
        timed = ex.timer.measure([[fn]])[0]
        banks = len({(lane * stride) % 32 for lane in range(32)})
        extra = {"stride": stride, "iters": iters, "blocks": grid, "threads_per_block": SMEM_BLOCK,
                 "distinct_banks": banks, "conflict_ways": 32 // banks,
                 "smem_gbs": nbytes / timed.summary.median_s / 1e9}
        return {**_timed_fields(ex, timed, 0, extra), "flops": 0, "bytes_min": nbytes, "intensity": None,
                "kernel_name": "smem_read_strided", "smem_bytes": 32768, "status": "ok"}


class SmemLatency(SmemProbe):
    """One thread chases a chain of shared-memory addresses; clock64() around it gives SM
    cycles per dependent load (the load-to-use latency)."""

    op = "smem_latency"

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        hops, hop_words = int(params.get("hops", 65536)), int(params.get("hop_words", 33))
        if hops % 16:
            raise ProbeSkip(f"smem_latency params.hops must be a multiple of 16, got {hops}")
        kern = backend.function(ex, "smem", "smem_latency")
        cycles = cp.zeros(1, dtype=cp.uint64)
        sink = cp.zeros(1, dtype=cp.uint32)
        args = (cycles, sink, np.int32(hops), np.int32(hop_words))

        def fn():
            kern((1,), (32,), args)

        fn()
        ex.stream.synchronize()
        first_cycles = int(cycles.get()[0])
        timed = ex.timer.measure([[fn]])[0]
        last_cycles = int(cycles.get()[0])  # the chain is deterministic: both runs must agree
        per_load = last_cycles / hops
        extra = {"hops": hops, "hop_words": hop_words, "cycles_per_load": per_load,
                 "cycles_per_load_first_run": first_cycles / hops,
                 "ns_per_load_from_events": timed.summary.median_s / hops * 1e9}
        return {**_timed_fields(ex, timed, 0, extra), "flops": 0, "bytes_min": 4 * hops, "intensity": None,
                "kernel_name": "smem_latency", "smem_bytes": 32768, "status": "ok"}


class WmmaProbe(Probe):
    precisions = ("fp16",)

    def skip(self, p, params):
        if p.m % 16 or p.n % 16 or p.k % 16:
            return "the chapter's wmma_gemm needs M, N, K multiples of 16 (no bounds checks)"
        if (p.m // 16) * (p.n // 16) % WMMA_WARPS_PER_BLOCK:
            return f"one warp per 16 x 16 tile in whole blocks of {WMMA_WARPS_PER_BLOCK} warps"
        return super().skip(p, params)

    @staticmethod
    def grid(p) -> int:
        return (p.m // 16) * (p.n // 16) // WMMA_WARPS_PER_BLOCK


class WmmaLayout(WmmaProbe):
    """The chapter's wmma_gemm, its error against the FP32 data the halves were rounded from,
    and two kernels that declare B col_major while B is row-major (see wmma_layout.cu)."""

    op = "wmma_layout"

    def skip(self, p, params):
        if p.n != p.k:
            return "wmma_layout compares a col-major reading of B with A @ B^T: needs N == K"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        _need_memory(8 * (3 * p.m * p.k + 3 * p.k * p.n + 6 * p.m * p.n))
        rng = cp.random.default_rng(seed)
        m = ex.measure
        a32 = check.random_matrix(cp, rng, (p.m, p.k), m.distribution.value, m.input_scale)
        b32 = check.random_matrix(cp, rng, (p.k, p.n), m.distribution.value, m.input_scale)
        a16, b16 = a32.astype(cp.float16), b32.astype(cp.float16)
        c = cp.empty((p.m, p.n), dtype=cp.float32)
        grid, block = (self.grid(p),), (32 * WMMA_WARPS_PER_BLOCK,)
        dims = (np.int32(p.m), np.int32(p.n), np.int32(p.k))
        a64, b64 = a16.astype(cp.float64), b16.astype(cp.float64)
        ref = a64 @ b64  # the exact product of the halves the kernel multiplies
        ref_fp32_data = a32.astype(cp.float64) @ b32.astype(cp.float64)

        def run_kernel(entry):
            c.fill(float("nan"))
            backend.function(ex, "wmma_layout", entry)(grid, block, (a16, b16, c, *dims))
            ex.stream.synchronize()
            return c.copy()

        right = run_kernel("wmma_gemm")
        same = ex.reference(p, a16, b16).verify(right)  # the verdict: the exact product of the halves
        vs_fp32 = check.relative_error(cp, right, ref_fp32_data)
        # cuBLAS in true FP32 on the FP32 data, for scale: what "against FP32" means without halves
        c32 = cp.empty((p.m, p.n), dtype=cp.float32)
        from dataclasses import replace

        p32 = replace(p, precision="fp32", in_dtype="float32", out_dtype="float32", compute="fp32")
        backend.gemm_launch(p32, a32, b32, c32).fn()
        ex.stream.synchronize()
        fp32_sgemm = check.relative_error(cp, c32, ref_fp32_data)
        del ref_fp32_data, c32

        extra: Dict[str, Any] = {
            "rel_error_vs_fp64_of_fp16_inputs": same.rel_error,
            "rel_error_vs_fp64_of_fp32_data": vs_fp32,
            "rel_error_fp32_sgemm_vs_fp64_of_fp32_data": fp32_sgemm,
        }
        for entry, wrong_ref_name, wrong_ref in (
                ("wmma_gemm_bcol_flag", "a_times_tile_transposed_b", lambda: a64 @ tile_transpose(b64)),
                ("wmma_gemm_bcol", "a_times_b_transposed", lambda: a64 @ b64.T)):
            out = run_kernel(entry)
            other = wrong_ref()
            extra[entry] = {"ran_without_error": True, "nonfinite": int((~cp.isfinite(out)).sum()),
                            "rel_error_vs_a_times_b": check.relative_error(cp, out, ref),
                            f"rel_error_vs_{wrong_ref_name}": check.relative_error(cp, out, other),
                            "std_ratio_to_right_result": float(out.std() / right.std())}
            del other
        row = {"flops": p.flops, "kernel_name": "wmma_gemm (chapter 5.5, as printed)", "extra": extra}
        failed = _checked(row, same)
        return failed or {**row, "status": "ok"}


class WmmaAlignment(WmmaProbe):
    """wmma_gemm on A and B shifted by ``params.offsets_bytes`` (default 2 and 16 bytes) from
    their 256-byte aligned allocations, each in a child process: a misaligned access is a sticky
    CUDA error that would end every later point of this run. Per offset: crashed, wrong, or
    correct and how fast against the aligned call measured in the same child."""

    op = "wmma_alignment"

    def run(self, backend, p, ex, seed, params):
        offsets = [int(o) for o in params.get("offsets_bytes", [2, 16])]
        if any(o % 2 for o in offsets):
            raise ProbeSkip("offsets_bytes must be whole halves (multiples of 2)")
        cubin = backend.cubin(ex, "wmma_layout")
        results: Dict[str, Any] = {}
        for off in offsets:
            args = {"cubin": str(cubin), "device": int(ex.dev["ordinal"]), "m": p.m, "n": p.n, "k": p.k,
                    "offset_bytes": off, "seed": seed, "tolerance": p.tolerance,
                    "warps_per_block": WMMA_WARPS_PER_BLOCK}
            results[str(off)] = _run_child("wmma-alignment", args)
        aligned = [r.get("aligned_s") for r in results.values() if r.get("aligned_s")]
        row = {"flops": p.flops, "kernel_name": "wmma_gemm (chapter 5.5) on shifted pointers",
               "timer": "cuda_event", "cache": "warm", "extra": {"offsets": results}}
        if aligned:
            row.update(time_median_s=float(np.median(aligned)), tflops=p.flops / float(np.median(aligned)) / 1e12)
        return {**row, "status": "ok"}


class Sgemm32Unguarded(Probe):
    """The chapter's sgemm32 (kernels/cuda/92_sgemm32_as_written.cu) at any size, with the grid
    the chapter computes (``params.grid: floor``, N / 32 x M / 32) or rounded up (``ceil``, the
    obvious fix without guards). A, B and C sit inside buffers padded by 32 * max(M, N, K) + 32
    elements, enough for every out-of-range index the kernel can form: A and B's padding holds
    other random values (what memory past an array holds), C's buffer is NaN before the run.
    Afterwards: elements of C never written, elements written past C, and the error."""

    op = "boundary"

    def skip(self, p, params):
        if params.get("grid", "floor") not in ("floor", "ceil"):
            return f"sgemm32_unguarded params.grid must be floor or ceil, not {params.get('grid')!r}"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        t = SGEMM32_TILE
        pad = t * max(p.m, p.n, p.k) + t
        _need_memory(4 * (p.m * p.k + p.k * p.n + p.m * p.n + 3 * pad) + 8 * (p.m * p.k + p.k * p.n + 3 * p.m * p.n))
        rng = cp.random.default_rng(seed)
        m = ex.measure
        a_buf = check.random_matrix(cp, rng, (p.m * p.k + pad,), m.distribution.value, m.input_scale)
        b_buf = check.random_matrix(cp, rng, (p.k * p.n + pad,), m.distribution.value, m.input_scale)
        c_buf = cp.full((p.m * p.n + pad,), float("nan"), dtype=cp.float32)
        a = a_buf[: p.m * p.k].reshape(p.m, p.k)
        b = b_buf[: p.k * p.n].reshape(p.k, p.n)
        grid_rule = params.get("grid", "floor")
        gx, gy = (p.n // t, p.m // t) if grid_rule == "floor" else (-(-p.n // t), -(-p.m // t))
        kern = backend.function(ex, "sgemm32", "sgemm32")
        if gx and gy:
            kern((gx, gy), (t, t), (a_buf, b_buf, c_buf, np.int32(p.m), np.int32(p.n), np.int32(p.k)))
        ex.stream.synchronize()
        c = c_buf[: p.m * p.n].reshape(p.m, p.n)
        reference = ex.reference(p, a, b)
        res = reference.verify(c)
        ref = reference.r
        written = cp.isfinite(c)
        unwritten = int(c.size - int(written.sum()))
        oob_writes = int(cp.isfinite(c_buf[p.m * p.n:]).sum())
        diff = cp.where(written, c.astype(cp.float64) - ref, 0.0)
        ref_norm = float(cp.linalg.norm(cp.where(written, ref, 0.0)))
        err_written = float(cp.linalg.norm(diff)) / ref_norm if ref_norm > 0 else float("nan")
        extra = {"grid_rule": grid_rule, "grid": [gx, gy], "unwritten_elements": unwritten,
                 "writes_past_c": oob_writes, "rel_error_of_written_elements": err_written,
                 "padding_elements": pad}
        row = {**res.fields(), "rel_error": res.rel_error if not unwritten else float("nan"), "flops": p.flops,
               "kernel_name": f"sgemm32 (chapter 5.3, as printed), grid {grid_rule}", "extra": extra}
        problems = []
        if unwritten:
            problems.append(f"{unwritten} elements of C never written")
        if oob_writes:
            problems.append(f"{oob_writes} elements written past the end of C")
        if not unwritten and not res.passed:
            problems.append(res.failure())
        elif unwritten and err_written > p.tolerance:
            problems.append(f"rel_error of the written elements {err_written:.3e}")
        if problems:
            return {**row, "status": "failed", "reason": "; ".join(problems)}
        return {**row, "status": "ok"}


PROBES: Dict[str, Probe] = {
    "copy": Copy(), "vecadd": VecAdd(), "gemv": Gemv(), "transfer": Transfer(),
    "gemm_e2e": GemmEndToEnd(), "first_run": FirstRun(), "smem_bandwidth": SmemBandwidth(),
    "smem_bank": SmemBank(), "smem_latency": SmemLatency(), "wmma_layout": WmmaLayout(),
    "wmma_alignment": WmmaAlignment(), "sgemm32_unguarded": Sgemm32Unguarded(),
}
# params that set a probe's size (tests shrink them for a smoke run)
SIZE_PARAMS = ("iters", "hops", "idle_s")


# -- child processes ------------------------------------------------------------------------------
def _run_child(command: str, args: Dict[str, Any]) -> Dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run([sys.executable, "-m", "gemmlab.backends.gpu_probe", command, json.dumps(args)],
                              capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=str(ROOT), env=env)
    except subprocess.TimeoutExpired:
        return {"outcome": "unknown", "error": f"child process timed out after {CHILD_TIMEOUT_S} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"outcome": "unknown", "error": f"child exit {proc.returncode}: {(proc.stderr or '')[-500:]}"}
    return json.loads(lines[-1])


def _child_wmma_alignment(args: Dict[str, Any]) -> Dict[str, Any]:
    """In a fresh process: time the aligned call, then run the shifted one; report first, so a
    crash (sticky error) still leaves the aligned numbers."""
    import cupy as cp

    cp.cuda.Device(args["device"]).use()
    m, n, k, off = args["m"], args["n"], args["k"], args["offset_bytes"] // 2
    kern = cp.RawModule(path=args["cubin"]).get_function("wmma_gemm")
    rng = cp.random.default_rng(args["seed"])
    spare = 256  # halves past each matrix, so a shifted view stays inside its allocation
    a_buf = rng.standard_normal(m * k + spare, dtype=cp.float32).astype(cp.float16)
    b_buf = rng.standard_normal(k * n + spare, dtype=cp.float32).astype(cp.float16)
    c = cp.empty((m, n), dtype=cp.float32)
    grid = ((m // 16) * (n // 16) // args["warps_per_block"],)
    block = (32 * args["warps_per_block"],)
    dims = (np.int32(m), np.int32(n), np.int32(k))

    def views(o):
        return a_buf[o:o + m * k], b_buf[o:o + k * n]

    def timed(o, reps=10):
        a, b = views(o)
        kern(grid, block, (a, b, c, *dims))  # warm
        ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
        for e0, e1 in ev:
            e0.record()
            kern(grid, block, (a, b, c, *dims))
            e1.record()
        ev[-1][1].synchronize()
        return float(np.median([cp.cuda.get_elapsed_time(e0, e1) * 1e-3 for e0, e1 in ev]))

    def error(o):
        a, b = views(o)
        c.fill(float("nan"))
        kern(grid, block, (a, b, c, *dims))
        cp.cuda.Device().synchronize()
        model = check.error_model("fp16", "float32")  # FP16 inputs, FP32 accumulation and output
        ref = check.Reference.gemm(cp, a.reshape(m, k), b.reshape(k, n), model, args["tolerance"], "float32")
        return ref.verify(c)

    out: Dict[str, Any] = {"offset_bytes": args["offset_bytes"],
                           "pointer_mod_32": int(views(off)[0].data.ptr % 32)}
    aligned = error(0)
    out.update(aligned_rel_error=aligned.rel_error, aligned_s=timed(0))
    try:
        res = error(off)
        out.update(rel_error=res.rel_error, nonfinite=res.nonfinite)
        if not res.passed:
            out["outcome"] = "wrong"
        else:
            out["shifted_s"] = timed(off)
            out["slowdown"] = out["shifted_s"] / out["aligned_s"]
            out["outcome"] = "correct"
    except Exception as e:  # cudaErrorMisalignedAddress and friends: the context is gone now
        out.update(outcome="error", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return out


CHILDREN = {"wmma-alignment": _child_wmma_alignment}


def _child_main(argv: Sequence[str]) -> None:
    command, payload = argv[0], json.loads(argv[1])
    try:
        result = CHILDREN[command](payload)
    except Exception as e:
        result = {"outcome": "unknown", "error": f"{type(e).__name__}: {e}"[:500]}
    print(json.dumps(result, default=float), flush=True)
    os._exit(0)  # skip CuPy's teardown: after a sticky error it can hang or raise again


BACKEND = GpuProbe

if __name__ == "__main__":
    _child_main(sys.argv[1:])
