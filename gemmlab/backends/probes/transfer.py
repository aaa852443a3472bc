"""GPU probes of what surrounds a GEMM in a program: ``transfer`` (H2D of A and B, D2H of C,
pageable or pinned), ``gemm_e2e`` (host arrays in and out, timed on the host clock) and
``first_run`` (the first cuBLAS call of the process and after the GPU idled)."""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional

import numpy as np

from gemmlab import dtypes
from gemmlab.backends.probes.common import Probe, checked, need_memory, random_array, rechecked, timed_fields
from gemmlab.measure import check
from gemmlab.measure.cpu import host_timed
from gemmlab.measure.stats import timing_fields


def _nvml_clock(ex) -> Optional[float]:
    if not ex.nvml.ok:
        return None
    try:
        return ex.nvml.read()[0]
    except Exception:  # a failed read must not lose the measurement
        return None


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
        need_memory(ha.nbytes + hb.nbytes + hc.nbytes)
        da, db = cp.empty(ha.shape, ha.dtype), cp.empty(hb.shape, hb.dtype)
        dc = random_array(cp, cp.random.default_rng(seed + 1), hc.shape, p.out_dtype, ex)

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
        return {**row, **timed_fields(ex, total, 0, extra), "status": "ok"}


class GemmEndToEnd(Probe):
    """A GEMM as a program with host arrays sees it: copy A and B in (pageable), cuBLAS, copy C
    out, wait. Timed on the host clock, back to back (what a loop of such calls costs)."""

    op = "gemm_e2e"
    precisions = ("fp32", "fp64", "tf32", "fp16", "bf16")

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        runtime, stream = cp.cuda.runtime, ex.stream.ptr
        ha, hb, hc = _host_operands(p, seed, ex, pinned=False)
        need_memory(ha.nbytes + hb.nbytes + hc.nbytes + 8 * (p.m * p.k + p.k * p.n + 3 * p.m * p.n))
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
        failed = checked(row, ref.verify(cp.asarray(hc)))
        if failed:
            return failed
        t = host_timed(fn, ex.measure)
        row.update(timing_fields(t["summary"], p.flops), timer="perf_counter", cache="warm", warmup_s=t["warmup_s"],
                   _samples=t["_samples"],
                   extra={"includes": "H2D A, B from pageable memory, cuBLAS, D2H C, stream sync",
                          "transfer_bytes": ha.nbytes + hb.nbytes + hc.nbytes})
        return rechecked(row, ref, cp.asarray(hc))


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
        need_memory(dtypes.itemsize(p.in_dtype) * (p.m * p.k + p.k * p.n) + 8 * (p.m * p.k + p.k * p.n + 4 * p.m * p.n))
        rng = cp.random.default_rng(seed)
        a = random_array(cp, rng, (p.m, p.k), p.in_dtype, ex)
        b = random_array(cp, rng, (p.k, p.n), p.in_dtype, ex)
        c = arrays.empty(cp, (p.m, p.n), p.out_dtype)
        launch = backend.gemm_launch(p, a, b, c)
        arrays.poison(cp, c)
        first = self._cold_call(ex, launch.fn, idle_s)
        ref = ex.reference(p, a, b)
        row = {**launch.info}
        failed = checked(row, ref.verify(c))
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
        row.update(timed_fields(ex, settled, p.flops, extra))
        return rechecked(row, ref, c)
