"""Kernel-only sample times from CUPTI records (measure.timer=cupti), on the CPU with made-up
records: samples split at the timer's own work, a library's memset stays in its call, and a
count that does not match what the timer enqueued is an error, not a silent misattribution."""
from __future__ import annotations

import pytest

from gemmlab.measure.cupti import Record, assign, kernel_names, span_s, split_samples


def sample_spans(records, flush_bytes):
    return [span_s(s) for s in split_samples(records, flush_bytes)]

FLUSH = 1 << 27


def flush(t):
    return Record("memset", "", t, t + 50_000, FLUSH)


def spin(t):
    return Record("kernel", "gemmlab_spin", t, t + 20_000)


def kernel(name, t0, t1):
    return Record("kernel", name, t0, t1)


def test_a_sample_spans_first_kernel_start_to_last_kernel_end():
    recs = [flush(0), spin(60_000), kernel("gemm", 81_000, 109_000), kernel("reduce", 109_500, 111_000),
            flush(120_000), Record("kernel", "gemmlab_l2_discard", 171_000, 180_000),
            kernel("gemm", 200_000, 228_000)]
    assert sample_spans(recs, FLUSH) == pytest.approx([30e-6, 28e-6])


def test_each_sample_names_the_kernels_its_call_launched():
    recs = [flush(0), kernel("gemm_a", 60_000, 80_000), kernel("splitk_reduce", 80_500, 81_000), flush(90_000),
            kernel("gemm_b", 150_000, 170_000)]
    assert [kernel_names(s) for s in split_samples(recs, FLUSH)] == [["gemm_a", "splitk_reduce"], ["gemm_b"]]


def test_records_arrive_out_of_order_and_a_library_memset_stays_in_its_call():
    recs = [kernel("gemm", 200_000, 230_000), flush(120_000), flush(0),
            Record("memset", "", 70_000, 71_000, 4096), kernel("gemm", 72_000, 100_000)]
    assert sample_spans(recs, FLUSH) == pytest.approx([30e-6, 30e-6])


def test_without_a_flush_the_spin_separates_samples():
    recs = [spin(0), kernel("k", 25_000, 35_000), spin(40_000), kernel("k", 65_000, 76_000)]
    assert sample_spans(recs, None) == pytest.approx([10e-6, 11e-6])


def test_samples_go_to_their_calls_in_enqueue_order():
    assert assign([1, 2, 3, 4], [0, 0, 1, 1], 2) == [[1, 2], [3, 4]]
    with pytest.raises(RuntimeError, match="measure.timer=events"):
        assign([1, 2, 3], [0, 0, 1, 1], 2)


def test_the_timer_takes_cupti_spans_and_keeps_the_event_times():
    """The timer loop with a stand-in trace: samples are CUPTI's, per call, capped; events kept."""
    from test_timer_loop import make_timer

    timer = make_timer(min_samples=4, max_samples=6, batch=2, max_noise=0.0, max_time_s=100, min_time_s=0,
                       warmup_s=0, warmup_min_iters=1)

    class Trace:
        started = stopped = 0
        recs, t, on = [], 0, False

        def start(self):
            Trace.started += 1
            self.on = True
            timer.spin = self.spin  # every spin and call becomes a record

        def spin(self, us, out_ptr=0):
            self.recs.append(Record("kernel", "gemmlab_spin", self.t, self.t + 10))
            self.t += 10

        def call(self, dur):
            def fn():
                if self.on:
                    self.recs.append(Record("kernel", "gemm", self.t, self.t + dur))
                    self.t += dur
            return fn

        def stop(self):
            Trace.stopped += 1
            return self.recs

    trace = Trace()
    timer._trace = trace
    a, b = timer._measure([[trace.call(1000)], [trace.call(3000)]])
    assert Trace.started == Trace.stopped == 1
    assert a.times_s == pytest.approx([1e-6] * 6) and b.times_s == pytest.approx([3e-6] * 6)
    assert len(a.times_s) == 6 and len(a.event_times_s) == 6
    assert a.timer_fields(timer.m)["source"] == "cupti"
    assert a.timer_fields(timer.m)["kernels"] == ["gemm"]
