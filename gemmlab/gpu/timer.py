"""The GPU timer: cold L2 per sample, the GPU kept busy before every start event, one CUDA event
pair per sample, warm-up by time, a stopping rule, and interleaving of several calls so that a
variant and its cuBLAS baseline are measured under the same clock state.

One sample, in stream order::

    [L2 flush: memset of a buffer >= 2x the L2 size]  (cache=flush)
    [spin kernel, busy_us]      the GPU is busy while the host enqueues the next three commands,
    [start event]               so host launch latency from Python never lands between the events
    [the call under test]
    [stop event]

cache=rotate instead cycles through input sets that together exceed the L2; cache=warm does
neither (back-to-back, warm L2, as SGEMM_CUDA and fast.cu time). Samples are enqueued in batches
and the host synchronises once per batch; calls are interleaved batch by batch.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, List, Sequence

from ..stats import Summary, should_stop, summarize
from .nvml import ClockStats

SPIN_SRC = r"""
extern "C" __global__ void gemmlab_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


@dataclass
class Timed:
    summary: Summary
    clocks: ClockStats
    times_s: List[float]
    warmup_s: float
    busy_us: float


class GpuTimer:
    def __init__(self, measure, stream, l2_bytes: int, sampler_factory):
        import cupy

        self.cupy = cupy
        self.m = measure
        self.stream = stream
        self.cache = getattr(measure.cache, "value", measure.cache)
        self.l2_bytes = l2_bytes
        self.flush_bytes = 2 * l2_bytes
        self._flush = cupy.empty(self.flush_bytes, dtype=cupy.uint8) if self.cache == "flush" else None
        self._spin = cupy.RawKernel(SPIN_SRC, "gemmlab_spin")
        self._sampler_factory = sampler_factory
        self._flush_value = 0

    # -- building blocks ------------------------------------------------------------------
    def spin(self, us: float) -> None:
        """Enqueue a kernel that spins for ``us`` microseconds of GPU time (globaltimer)."""
        import numpy as np

        with self.stream:  # RawKernel launches on the current stream
            self._spin((1,), (1,), (np.uint64(max(0, int(us * 1000))),))

    def flush_l2(self) -> None:
        if self._flush is not None:
            self._flush_value = (self._flush_value + 1) & 0xFF
            self.cupy.cuda.runtime.memsetAsync(self._flush.data.ptr, self._flush_value,
                                               self.flush_bytes, self.stream.ptr)

    def capture_graph(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Capture ``fn`` into a CUDA graph once; the returned callable replays it."""
        with self.stream:
            self.stream.begin_capture()
            try:
                fn()
            except BaseException:
                try:  # end the capture so the stream stays usable, then report the failure
                    self.stream.end_capture()
                except Exception:
                    pass
                raise
            graph = self.stream.end_capture()
        if hasattr(graph, "upload"):
            graph.upload(self.stream)
        return lambda: graph.launch(self.stream)

    # -- measuring ------------------------------------------------------------------------
    def measure(self, calls: Sequence[Sequence[Callable[[], None]]]) -> List[Timed]:
        """Time several calls, interleaved batch by batch; ``calls[i]`` holds one callable per
        input set (more than one only with cache=rotate). The stopping rule follows calls[0];
        every other call gets as many batches."""
        with self.stream:
            return self._measure(calls)

    def _measure(self, calls) -> List[Timed]:
        m, cp = self.m, self.cupy
        n = len(calls)

        # Warm-up by time, all calls in turn, and learn each call's host enqueue cost so the
        # spin before the start event can cover it.
        host_s = [[] for _ in range(n)]
        t0, it = time.perf_counter(), 0
        while it < m.warmup_min_iters or time.perf_counter() - t0 < m.warmup_s:
            for i, fns in enumerate(calls):
                self.flush_l2()
                self.spin(m.busy_us)
                h = time.perf_counter()
                fns[it % len(fns)]()
                host_s[i].append(time.perf_counter() - h)
            it += 1
            self.stream.synchronize()
        warmup_s = time.perf_counter() - t0
        busy_us = [max(m.busy_us, 2e6 * sorted(h)[len(h) // 2] + 10.0) for h in host_s]

        batch = max(1, int(m.batch))
        events = [[(cp.cuda.Event(), cp.cuda.Event()) for _ in range(batch)] for _ in range(n)]
        times: List[List[float]] = [[] for _ in range(n)]
        spans: List[list] = [[] for _ in range(n)]
        sample = 0
        with self._sampler_factory() as sampler:
            start = time.perf_counter()
            while True:
                for i, fns in enumerate(calls):
                    t_enq = sampler.now()
                    for j in range(batch):
                        self.flush_l2()
                        self.spin(busy_us[i])
                        ev0, ev1 = events[i][j]
                        ev0.record(self.stream)
                        fns[(sample + j) % len(fns)]()
                        ev1.record(self.stream)
                    events[i][-1][1].synchronize()
                    spans[i].append((t_enq, sampler.now()))
                    times[i].extend(cp.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in events[i])
                sample += batch
                if should_stop(times[0], time.perf_counter() - start, m):
                    break
            clocks = [sampler.window(s) for s in spans]
        return [Timed(summarize(t), c, t, warmup_s, b) for t, c, b in zip(times, clocks, busy_us)]
