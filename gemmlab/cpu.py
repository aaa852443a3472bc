"""The CPU executor: inputs, the FP64 check and host-clock timing for host backends."""
from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any, Dict

import numpy as np

from . import check, dtypes, env
from .stats import should_stop, summarize, timing_fields


class CpuExecutor:
    kind = "cpu"

    def __init__(self, cfg):
        self.cfg = cfg
        self.measure = cfg.measure

    def unavailable(self):
        return None

    def device_fields(self) -> Dict[str, Any]:
        return {"device": env.cpu_model()}

    def _threads(self, point):
        t = point.variant_cfg.get("threads")
        return t if t is not None else self.measure.threads

    def measure_point(self, point, backend, seed: int) -> Dict[str, Any]:
        from threadpoolctl import threadpool_limits

        threads = self._threads(point)
        limit = threadpool_limits(limits=threads, user_api="blas") if threads else nullcontext()
        with limit:
            return self._measure(point, backend, seed)

    def _measure(self, point, backend, seed: int) -> Dict[str, Any]:
        if backend.measure_point is not None:
            return backend.measure_point(point, self, seed)
        m = self.measure
        rng = np.random.default_rng(seed)
        dist = getattr(m.distribution, "value", m.distribution)
        in_dt, out_dt = dtypes.numpy_dtype(point.in_dtype), dtypes.numpy_dtype(point.out_dtype)
        a = check.random_matrix(np, rng, (point.m, point.k), dist).astype(in_dt)
        b = check.random_matrix(np, rng, (point.k, point.n), dist).astype(in_dt)
        a, b, a_ref, b_ref = backend.make_inputs(point, a, b)
        c = np.empty((point.m, point.n), dtype=out_dt)
        launch = backend.make_launch(point, a, b, c)
        row: Dict[str, Any] = {**env.blas_info(), **launch.info, "timer": "perf_counter", "cache": "warm"}

        if m.check:
            check.poison(c)
            launch.fn()
            ref = check.fp64_reference(np, a_ref.astype(np.float64), b_ref.astype(np.float64))
            res = check.compare(np, c.astype(np.float64), ref, point.tolerance)
            row.update(rel_error=res.rel_error, max_abs_error=res.max_abs_error)
            if not res.passed:
                return {**row, "status": "failed", "reason": res.failure()}

        t = host_timed(launch.fn, m)
        return {**row, **timing_fields(t["summary"], point.flops), "warmup_s": t["warmup_s"], "status": "ok"}



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
    return {"summary": summarize(times), "warmup_s": warmup_s}
