"""The CPU executor: inputs, the FP64 check and host-clock timing for host backends."""
from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any, Dict

import numpy as np

from gemmlab import dtypes, env, operands, samples
from gemmlab.config import Distribution
from gemmlab.measure import check, footprint, guards
from gemmlab.measure.stats import should_stop, summarize, timing_fields


class CpuExecutor:
    kind = "cpu"

    def __init__(self, cfg):
        self.cfg = cfg
        self.measure = cfg.measure
        # the watchdog's phase reports (gemmlab/measure/worker): set by a worker, a no-op in process
        self.watch = lambda phase, expected_s=None, limit_s=None: None

    def limits(self, point, n_baselines: int = 0):
        """The watchdog's limits for a host point (gemmlab/measure/worker/limits.py)."""
        from gemmlab.measure.worker.limits import HOST_FLOPS, SLOW_FRACTION, Limits

        return Limits.of(self.measure, point.flops, HOST_FLOPS, SLOW_FRACTION * HOST_FLOPS)

    def report(self, limits, phase: str) -> None:
        expected_s, limit_s = limits.phase(phase)
        self.watch(phase, expected_s, limit_s)

    def unavailable(self):
        return None

    def device_fields(self) -> Dict[str, Any]:
        return {"device": env.cpu_model()}

    def _threads(self, point):
        t = point.variant_cfg.get("threads")
        return t if t is not None else self.measure.threads

    def measure_point(self, point, backend, seed: int, baselines=()) -> Dict[str, Any]:
        from threadpoolctl import threadpool_limits

        threads = self._threads(point)
        limit = threadpool_limits(limits=threads, user_api="blas") if threads else nullcontext()
        with limit:
            return self._measure(point, backend, seed)

    def _measure(self, point, backend, seed: int) -> Dict[str, Any]:
        try:
            if backend.measure_point is not None:
                return backend.measure_point(point, self, seed)
            return self._measure_gemm(point, backend, seed)
        except check.InputError as e:
            return {"status": "failed", "reason": f"inputs: {e}"}

    def random(self, rng, shape, dtype_name: str):
        """Inputs as every CPU backend draws them (measure.distribution, measure.input_scale)."""
        m = self.measure
        x = check.random_matrix(np, rng, shape, m.distribution.value, m.input_scale)
        return x.astype(dtypes.numpy_dtype(dtype_name))

    def reference(self, point, a_ref, b_ref):
        """The check's reference for a GEMM point on the host (gemmlab/measure/check.py)."""
        return check.gemm_reference(np, point, self.kind, a_ref, b_ref,
                                    self.measure.distribution == Distribution.exact)

    def _measure_gemm(self, point, backend, seed: int) -> Dict[str, Any]:
        m = self.measure
        why = footprint.too_big(footprint.point_bytes(point, m), footprint.host_free_bytes(), "host")
        if why:  # before anything is drawn: a point that cannot fit must not take the host down
            return {"status": "skipped", "reason": why}
        rng = np.random.default_rng(seed)
        shape_a, shape_b = operands.logical_shapes(point.m, point.n, point.k, point.batch)
        ta, tb = operands.transposed(point.layout)
        # the logical operands, then stored as the layout says (gemmlab/operands.py)
        a = operands.store(np, self.random(rng, shape_a, point.in_dtype), ta)
        b = operands.store(np, self.random(rng, shape_b, point.in_dtype), tb)
        a, b, a_ref, b_ref = backend.make_inputs(point, a, b)
        a_ref, b_ref = operands.logical(a_ref, ta), operands.logical(b_ref, tb)
        zones = guards.Guards(np, m.guard_bytes)  # C, A and B between guards, as on the GPU
        a, b = zones.input(a, "A"), zones.input(b, "B")
        c = zones.output(operands.output_shape(point.m, point.n, point.batch), dtypes.numpy_dtype(point.out_dtype))
        launch = backend.make_launch(point, a, b, c)
        limits = self.limits(point)
        row: Dict[str, Any] = {**env.blas_info(), **launch.info, "timer": "perf_counter", "cache": "warm",
                               **zones.fields()}

        reference = None
        if m.check:
            reference = self.reference(point, a_ref, b_ref)
            self.report(limits, "checked call")
            res, results = check.checked_calls(launch.fn, lambda: check.poison(c), lambda: reference.verify(c),
                                               m.check_repeats)
            row.update(res.fields())
            if len(results) > 1:
                row["extra"] = {**(row.get("extra") or {}), **check.spread(results)}
            why = zones.violation()
            if why or not res.passed:
                return {**row, "guard_check": why or ("clean" if zones.on else None), "status": "failed",
                        "reason": why or res.failure()}
        else:  # timed, never checked (measure.check=false): left out of the analysis's evidence
            row["extra"] = {**(row.get("extra") or {}), "check": "off"}

        self.report(limits, "timed samples")
        t = host_timed(launch.fn, m)
        row.update(timing_fields(t["summary"], point.flops), warmup_s=t["warmup_s"], _samples=t["_samples"])
        self.report(limits, "check after timing")
        guard_why = zones.violation()
        if zones.on:
            row["guard_check"] = f"after timing: {guard_why}" if guard_why else "clean"
            row["extra"] = {**(row.get("extra") or {}), "guards": zones.extra()}
        why = check.recheck(reference, c, row) if reference is not None else None
        why = f"after timing: {guard_why}" if guard_why else why
        return {**row, "status": "failed", "reason": why} if why else {**row, "status": "ok"}



def host_timed(fn, measure) -> Dict[str, Any]:
    """Host-clock timing of a call that has finished when it returns (a CPU call, or a GPU call
    that synchronises): warm-up by time, then one perf_counter sample per call until the
    stopping rule holds. Returns the summary and the warm-up seconds."""
    t0, it = time.perf_counter(), 0
    while it < measure.warmup_min_iters or time.perf_counter() - t0 < measure.warmup_s:
        fn()
        it += 1
    warmup_s = time.perf_counter() - t0
    times = []
    start = time.perf_counter()
    while not should_stop(times, time.perf_counter() - start, measure):
        s = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - s) * 1e-9)
    return {"summary": summarize(times), "warmup_s": warmup_s, "_samples": [samples.entry("", times)]}
