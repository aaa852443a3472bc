"""The GPU timer: cold L2 per sample, the GPU kept busy before every start event, one CUDA event
pair per sample, warm-up by time, a stopping rule, and interleaving of several calls so that a
variant and its cuBLAS baseline are measured under the same clock state.

One sample, in stream order::

    [L2 flush: memset of a buffer >= 2x the L2 size]  (cache=flush; flush_bytes sets another size)
    [L2 discard of that buffer's lines]               (flush_discard, on by default)
    [spin kernel]               the GPU is busy while the host enqueues the next two commands,
    [start event]               so host launch latency from Python never lands between the events;
    [the call under test]       the spin also measures the SM clock (cycles / globaltimer ns)
    [stop event]

The spin lasts at least twice the host's measured enqueue cost of (start event + call), at least
busy_us, and long enough that a sample's GPU time (flush, spin, call) is twice the host's time to
enqueue it (so the GPU never catches up with the host: a short call on a slow host). With
spin=as_needed and a flush queued, the flush is itself the busy work: the spin only makes up what
the flush (timed on the GPU during warm-up) does not cover, often nothing (and then no in-band
clock is read). A spin keeps one thread busy while the rest of the GPU idles,
which lowers the average power and so raises the SM clock the call under test runs at; as_needed
keeps the duty cycle closer to a back-to-back benchmark's (triton's do_bench queues flush, call,
flush, call, ... with no gaps).

The flush is a memset, as nvbench and do_bench flush. A memset leaves the L2 full of dirty lines,
and whatever runs next pays their write-back: with the events around the call, that made the
front end's start-up jitter (2.8-4.6% noise for 20-30 us calls on the H200 while the kernels'
own spans varied by 0.5%). The discard (PTX discard.global.L2) drops those lines unwritten, so
every call starts on an L2 that holds neither its inputs nor dirty lines: 1.3-1.6%
(outputs/reference/h200-2026-11-30/noise_study). A read-bound call still runs at HBM speed after
it (tests/test_gpu_core.py). A small GEMM's cold/warm gap, once taken as proof that only a write
evicts, turned out to be mostly that write-back: with the discard it times as fast cold as warm.

measure.timer=cupti keeps the events (they drive the stopping rule) but takes each sample from
CUPTI's kernel records instead: from the call's first kernel starting to its last kernel ending,
without the front end's start-up after the start event (gemmlab/measure/cupti.py).

cache=rotate instead cycles through input sets that together exceed the L2; cache=warm does
neither (back-to-back, warm L2, as SGEMM_CUDA and fast.cu time). Samples are enqueued in batches,
calls interleaved batch by batch, and the next round of batches is always queued before the host
waits for the last one: the GPU works back to back, as under triton's do_bench, instead of idling
while Python reads events (an idle GPU runs at a higher SM clock than a busy one).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from gemmlab.measure.nvml import ClockStats
from gemmlab.measure.stats import Summary, should_stop, summarize

SPIN_SRC = r"""
extern "C" __global__ void gemmlab_spin(unsigned long long ns, unsigned long long* out) {
    unsigned long long t0, t;
    long long c0 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    long long c1 = clock64();
    if (out) { out[0] = t - t0; out[1] = (unsigned long long)(c1 - c0); }  // SM clock = cycles / ns
}
"""


DISCARD_SRC = r"""
extern "C" __global__ void gemmlab_l2_discard(char* p, unsigned long long lines) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < lines;
         i += (unsigned long long)gridDim.x * blockDim.x)
        asm volatile("discard.global.L2 [%0], 128;" :: "l"(p + i * 128) : "memory");
}
"""


SPIN_LEARN_ITERS = 8  # warm-up iterations whose enqueue cost sets the spin of the rest (and the samples')


@dataclass
class Timed:
    summary: Summary
    clocks: ClockStats
    times_s: List[float]
    warmup_s: float
    busy_us: float  # the spin queued before each start event (0: none, the flush covers it)
    flush_us: float = 0.0  # GPU time of one flush, measured during warm-up (0 without a flush)
    event_times_s: Optional[List[float]] = None  # the event pairs' times when CUPTI's are the samples
    sm_clock_inband_mhz: Optional[List[float]] = None  # per sample, from the spin before it
    kernels: Optional[List[str]] = None  # with CUPTI: the kernel sequence(s) the call launched

    def inband_range(self) -> Optional[List[float]]:
        """[min, median, max] of the SM clock the spin kernels measured before the samples."""
        k = sorted(self.sm_clock_inband_mhz or [])
        return [round(k[0], 1), round(k[len(k) // 2], 1), round(k[-1], 1)] if k else None

    def timer_fields(self, measure) -> dict:
        """What the row's extra.timer says about how this call was timed."""
        out = {"spin": measure.spin.value,
               "spin_us": round(self.busy_us, 2), "flush_us": round(self.flush_us, 2)}
        if measure.flush_discard:
            out["flush_discard"] = True
        if self.sm_clock_inband_mhz:
            out["sm_clock_inband_mhz"] = self.inband_range()
        if self.event_times_s:
            ev = summarize(self.event_times_s)
            out.update(source="cupti", event_median_s=ev.median_s, event_noise=ev.noise,
                       kernels=self.kernels)
        return out


class GpuTimer:
    def __init__(self, measure, stream, l2_bytes: int, sampler_factory):
        import cupy

        self.cupy = cupy
        self.m = measure
        self.stream = stream
        self.cache = measure.cache.value
        self.l2_bytes = l2_bytes
        self.flush_bytes = int(measure.flush_bytes) or 2 * l2_bytes
        if self.cache == "flush" and self.flush_bytes < l2_bytes:
            raise ValueError(f"measure.flush_bytes={self.flush_bytes} is smaller than the L2 ({l2_bytes} B): "
                             "the flush would leave part of the inputs cached")
        self.spin_policy = measure.spin.value
        self._flush = cupy.empty(self.flush_bytes, dtype=cupy.uint8) if self.cache == "flush" else None
        self._spin = cupy.RawKernel(SPIN_SRC, "gemmlab_spin")
        self._discard = (cupy.RawKernel(DISCARD_SRC, "gemmlab_l2_discard")
                         if self._flush is not None and measure.flush_discard else None)
        if self._discard is not None:  # the launch arguments, built once rather than per sample
            import numpy as np

            self._discard_args = (self._flush, np.uint64(self.flush_bytes // 128))
        self.source = measure.timer.value
        self._trace = None
        if self.source == "cupti":
            from gemmlab.measure.cupti import KernelTrace

            self._trace = KernelTrace.get()
        self._sampler_factory = sampler_factory
        self._flush_value = 0

    # -- building blocks ------------------------------------------------------------------
    def spin(self, us: float, out_ptr: int = 0) -> None:
        """Enqueue a kernel that spins for ``us`` microseconds of GPU time (globaltimer); nothing
        for ``us <= 0``. With ``out_ptr`` it writes (ns spun, SM cycles spun) there: the SM clock
        right before the sample, measured on the GPU rather than polled."""
        import numpy as np

        if us <= 0:
            return

        with self.stream:  # RawKernel launches on the current stream
            self._spin((1,), (1,), (np.uint64(max(0, int(us * 1000))), np.uint64(out_ptr)))

    def flush_l2(self) -> None:
        if self._flush is not None:
            self._flush_value = (self._flush_value + 1) & 0xFF
            self.cupy.cuda.runtime.memsetAsync(self._flush.data.ptr, self._flush_value,
                                               self.flush_bytes, self.stream.ptr)
            if self._discard is not None:
                with self.stream:
                    self._discard((264,), (256,), self._discard_args)

    def _flush_gpu_us(self, repeats: int = 5) -> float:
        """Median GPU time of one flush (0 without a flush)."""
        if self._flush is None:
            return 0.0
        cp = self.cupy
        times = []
        for _ in range(repeats):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record(self.stream)
            self.flush_l2()
            e1.record(self.stream)
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
        return sorted(times)[len(times) // 2]

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

        # The flush's own GPU time, measured first so nothing idles the GPU between warm-up
        # and samples.
        flush_us = self._flush_gpu_us()

        # Warm-up by time, all calls in turn, and learn each call's host enqueue cost so the
        # spin before the start event can cover it. The host runs at most two iterations ahead
        # of the GPU and never drains the queue, so the GPU works back to back, as in the
        # samples, and its clock settles where it will be while they are taken. After the first
        # few iterations the warm-up spins as long as the samples will: a warm-up with shorter
        # spins than the samples runs at a higher duty cycle, so the power-capped clock settled
        # lower in it and then rose during the samples (FP16 at 4096, interleaved with cuBLASLt,
        # whose host cost sets a 100 us spin: in-band 1760 -> 1950 MHz over the samples).
        host_s = [[] for _ in range(n)]  # the host's enqueue of the call alone
        sample_s = [[] for _ in range(n)]  # ... of the whole sample: flush, spin, events, call
        call_us: List[Optional[float]] = [None] * n  # the call on the GPU (its events), once known
        ev = [[(cp.cuda.Event(), cp.cuda.Event()) for _ in range(n)] for _ in range(3)]  # per iteration, 3 deep
        spin_us = [m.busy_us] * n
        marks: List = []

        def spins():
            return [self._spin_us(_median(h), _median(w), flush_us, c) for h, w, c in zip(host_s, sample_s, call_us)]

        t0, it = time.perf_counter(), 0
        while it < m.warmup_min_iters or time.perf_counter() - t0 < m.warmup_s:
            for i, fns in enumerate(calls):
                w = time.perf_counter()
                self.flush_l2()
                self.spin(spin_us[i])
                ev[it % 3][i][0].record(self.stream)
                h = time.perf_counter()
                fns[it % len(fns)]()
                host_s[i].append(time.perf_counter() - h)
                ev[it % 3][i][1].record(self.stream)
                sample_s[i].append(time.perf_counter() - w)
            it += 1
            if it <= SPIN_LEARN_ITERS:
                spin_us = spins()
            mark = cp.cuda.Event(disable_timing=True)
            mark.record(self.stream)
            marks.append(mark)
            if len(marks) > 2:
                marks.pop(0).synchronize()  # iteration it - 3 is done: its calls' GPU times are known
                for i, (a, b) in enumerate(ev[(it - 3) % 3]):
                    call_us[i] = cp.cuda.get_elapsed_time(a, b) * 1e3
        warmup_s = time.perf_counter() - t0
        busy_us = spins()

        # Samples in rounds (a batch of every call, interleaved); the next round is enqueued
        # before the host waits for the previous one, so the GPU never idles between batches
        # while Python reads events, clocks and the stopping rule.
        batch = max(1, int(m.batch))
        events = [[[(cp.cuda.Event(), cp.cuda.Event()) for _ in range(batch)] for _ in range(n)]
                  for _ in range(2)]
        # The spin before each sample reports the SM clock it ran at: per slot, per call, per
        # sample (ns, cycles), copied to pinned memory behind the round so reading it never
        # drains the queue.
        clk = self._clock_slots(n, batch) if any(b > 0 for b in busy_us) else None
        inband: List[List[float]] = [[] for _ in range(n)]
        times: List[List[float]] = [[] for _ in range(n)]
        spans: List[list] = [[] for _ in range(n)]
        order: List[int] = []  # which call each enqueued sample belongs to, in stream order

        def enqueue(slot: int, sample: int, sampler) -> List[float]:
            starts = []
            for i, fns in enumerate(calls):
                starts.append(sampler.now())
                order.extend([i] * batch)
                for j in range(batch):
                    self.flush_l2()
                    self.spin(busy_us[i], clk.ptr(slot, i, j) if clk else 0)
                    ev0, ev1 = events[slot][i][j]
                    ev0.record(self.stream)
                    fns[(sample + j) % len(fns)]()
                    ev1.record(self.stream)
            if clk:
                clk.copy_out(slot)
            return starts

        def collect(slot: int, starts: List[float], sampler) -> None:
            for i in range(n):
                events[slot][i][-1][1].synchronize()
                spans[i].append((starts[i], sampler.now()))
                times[i].extend(cp.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in events[slot][i])
            if clk:
                for i, mhz in enumerate(clk.read(slot)):
                    if busy_us[i] > 0:
                        inband[i].extend(mhz)

        trace, records = self._trace, None
        if trace is not None:
            trace.start()
        try:
            clocks, cap = self._sample_loop(enqueue, collect, times, spans)
        finally:
            if trace is not None:
                records = trace.stop()  # also after a failure, so tracing never stays on
        event_times, kernels = [None] * n, [None] * n
        if records is not None:
            from gemmlab.measure.cupti import (
                assign,
                kernel_names,
                span_s,
                split_samples,
            )

            samples = split_samples(records, self.flush_bytes if self._flush is not None else None)
            event_times = times
            times = assign([span_s(x) for x in samples], order, n)
            for i, names in enumerate(assign([kernel_names(x) for x in samples], order, n)):
                kernels[i] = sorted({"; ".join(k) for k in names})  # more than one: it changed
        return [Timed(summarize(t[:cap]), c, t[:cap], warmup_s, b, flush_us,
                      e[:cap] if e is not None else None, k[:cap] or None, kn)
                for t, c, b, e, k, kn in zip(times, clocks, busy_us, event_times, inband, kernels)]

    def _sample_loop(self, enqueue, collect, times, spans):
        """Rounds until the stopping rule (gemmlab/measure/stats.py) holds for calls[0]; returns
        the clock windows and how many samples each call keeps: max_samples, or, where the rule went
        on past max_samples to pin a noisy call's median down, the samples it judged when it
        stopped (a row it called pinned down must not come out of the timer with a wider interval:
        session9d's wgmma_ws at 1024 did, ±0.51% on 240 samples, the round after the stop added)."""
        m = self.m
        batch = max(1, int(m.batch))
        cap = max(int(m.max_samples), 1)
        with self._sampler_factory() as sampler:
            start = time.perf_counter()
            slot, sample = 0, 0
            inflight = (slot, enqueue(slot, sample, sampler))
            while True:
                sample += batch
                slot = 1 - slot
                nxt = (slot, enqueue(slot, sample, sampler))  # keep the GPU fed ...
                collect(*inflight, sampler)  # ... while this round's events are read
                inflight = nxt
                if should_stop(times[0], time.perf_counter() - start, m):
                    if len(times[0]) > m.max_samples:  # the rule judged the median's interval on exactly
                        cap = len(times[0])  # these: the round still in flight would move it
                    break
                if len(times[0]) >= m.max_samples:  # past max_samples: the median's interval decides
                    cap = max(cap, int(m.max_samples_ci))
            collect(*inflight, sampler)  # the last round ran too: its samples count, up to the cap
            return [sampler.window(s) for s in spans], cap

    def _clock_slots(self, n_calls: int, batch: int) -> "_ClockSlots":
        return _ClockSlots(self.cupy, self.stream, n_calls, batch)

    def _spin_us(self, host_call_s: float, host_sample_s: float, flush_us: float,
                 call_us: Optional[float]) -> float:
        """The spin before a start event. Two rules, the larger wins:
        * twice the host's enqueue of the call, plus a margin, covered by busy GPU work queued ahead
          of the start event (spin=as_needed: the flush counts as that work);
        * the GPU must not catch up with the host: a sample's GPU time (flush, spin, call) at least
          twice the host's time to enqueue the whole sample. Without it (until 2026-12-03) a short
          call on a slow host drained the queue, every spin started on an idle GPU and launch
          latency landed between the events in most samples (a 2 us call timed at a median of
          8-12 us on the H200 of sessions 9e and 10, tests/test_gpu_core.py). Where the call's GPU
          time is not known yet (a warm-up too short to read it) it counts as nothing.
        Applying the second rule alone lengthened the spin of long calls too, which only idles the
        GPU: at N = 4096 the samples then ran 250-350 MHz above do_bench's (ours / do_bench 0.90-0.95,
        h200-2026-12-03/session10d/fidelity_default)."""
        call_rule = 2e6 * host_call_s + 10.0
        queue_rule = 2e6 * host_sample_s + 10.0 - flush_us - (call_us or 0.0)
        if self.spin_policy == "as_needed" and flush_us > 0:
            return max(0.0, call_rule - flush_us, queue_rule)
        return max(self.m.busy_us, call_rule, queue_rule)


def _median(xs: Sequence[float]) -> float:
    return sorted(xs)[len(xs) // 2]


class _ClockSlots:
    """Device slots the spin kernels write (ns, cycles) into, two rounds deep, and their pinned
    host copies, read once the round's events have completed."""

    def __init__(self, cp, stream, n_calls: int, batch: int):
        import cupyx
        import numpy as np

        self.cp, self.stream, self.shape = cp, stream, (n_calls, batch, 2)
        self.dev = cp.zeros((2, n_calls, batch, 2), dtype=cp.uint64)
        self.base = self.dev.data.ptr
        self.host = cupyx.empty_pinned((2, n_calls, batch, 2), dtype=np.uint64)
        self.done = [cp.cuda.Event(disable_timing=True) for _ in range(2)]

    def ptr(self, slot: int, i: int, j: int) -> int:
        """Address of one sample's (ns, cycles) pair: arithmetic, no array view per sample."""
        n_calls, batch, _ = self.shape
        return self.base + ((slot * n_calls + i) * batch + j) * 16

    def copy_out(self, slot: int) -> None:
        self.dev[slot].get(stream=self.stream, out=self.host[slot], blocking=False)
        self.done[slot].record(self.stream)

    def read(self, slot: int) -> List[List[float]]:
        """SM clock in MHz per call and sample of this round (cycles / ns * 1000)."""
        self.done[slot].synchronize()
        h = self.host[slot]
        return [[1000.0 * float(c) / float(t) for t, c in h[i] if t > 0] for i in range(self.shape[0])]

