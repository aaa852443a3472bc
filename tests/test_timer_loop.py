"""The GPU timer's loop, run on the CPU against a stand-in for CuPy: every sample it enqueues is
collected once, the host never waits on an event it has not recorded, and the next round is
queued before the previous one is read (the GPU never drains between rounds)."""
from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

from conftest import compose_cfg

from gemmlab.measure import stats


class FakeStream:
    def __init__(self):
        self.log = []  # what was enqueued, in order
        self.ptr = 0

    def synchronize(self):
        self.log.append(("sync",))

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class FakeEvent:
    count = 0

    def __init__(self, disable_timing=False):
        self.recorded = None

    def record(self, stream):
        FakeEvent.count += 1
        self.recorded = FakeEvent.count
        self.stream = stream
        stream.log.append(("record", id(self)))

    def synchronize(self):
        assert self.recorded is not None, "waited on an event that was never recorded"
        self.stream.log.append(("wait", id(self)))


def fake_cupy():
    cp = types.SimpleNamespace()
    cuda = types.SimpleNamespace(Event=FakeEvent, get_elapsed_time=lambda a, b: 0.001 * (b.recorded - a.recorded))
    cp.cuda = cuda
    return cp


class FakeSampler:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def now(self):
        return 0.0

    def window(self, spans):
        return spans


def make_timer(**measure):
    from gemmlab.measure.timer import GpuTimer

    cfg = compose_cfg(["measure=quick", "measure.cache=warm"] + [f"measure.{k}={v}" for k, v in measure.items()])
    t = GpuTimer.__new__(GpuTimer)
    t.cupy, t.m, t.stream = fake_cupy(), cfg.measure, FakeStream()
    t.cache, t.l2_bytes, t.flush_bytes, t.spin_policy = "warm", 1 << 20, 2 << 20, "always"
    t._flush, t._sampler_factory, t._flush_value = None, FakeSampler, 0
    t._discard, t._trace, t.source = None, None, "events"
    t.spin = lambda us, out_ptr=0: t.stream.log.append(("spin", us))
    t._clock_slots = lambda n, batch: FakeClockSlots(t.stream, n, batch)
    return t


class FakeClockSlots:
    """What the spin kernels report: 1500 MHz before every sample; the copy is queued per round."""

    def __init__(self, stream, n, batch):
        self.stream, self.n, self.batch = stream, n, batch

    def ptr(self, slot, i, j):
        return 1 + slot * 1000 + i * 100 + j

    def copy_out(self, slot):
        self.stream.log.append(("clock_copy", slot))

    def read(self, slot):
        return [[1500.0] * self.batch for _ in range(self.n)]


def test_every_enqueued_sample_is_collected_and_rounds_overlap():
    timer = make_timer(min_samples=6, max_samples=9, batch=3, max_noise=0.0, max_time_s=100, min_time_s=0,
                       warmup_s=0, warmup_min_iters=1)
    calls_made = {"a": 0, "b": 0}

    def call(name):
        def fn():
            calls_made[name] += 1
            timer.stream.log.append(("call", name))
        return fn

    with contextlib.ExitStack():
        a, b = timer._measure([[call("a")], [call("b")]])
    # max_samples caps what is kept; the loop may have measured one more round than that
    assert len(a.times_s) == 9 and len(b.times_s) == 9
    assert calls_made["a"] == calls_made["b"]
    assert a.sm_clock_inband_mhz == [1500.0] * 9 and a.inband_range() == [1500.0, 1500.0, 1500.0]
    log = timer.stream.log
    assert ("sync",) not in log, "the timer drained the whole stream"
    # warm-up: one iteration of both calls, no wait; then the first wait comes only after two
    # rounds (2 calls x batch 3 each) are queued: the second round is enqueued before the first
    # is read
    waits = [i for i, x in enumerate(log) if x[0] == "wait"]
    calls = [i for i, x in enumerate(log) if x[0] == "call"]
    assert sum(1 for c in calls if c < waits[0]) == 2 + 2 * 2 * 3, log


def _noisy_events(timer, width, seed=0):
    """Event pairs that time 10 us calls spread uniformly over +-width/2 (noise = 0.6 width)."""
    rng = np.random.default_rng(seed)
    timer.cupy.cuda.get_elapsed_time = lambda a, b: 1e-2 * (1 + width * (rng.random() - 0.5))  # ms


@pytest.mark.parametrize("width,max_samples_ci,kept", [
    (0.02, 4000, (30, 30)),  # quiet: stops at min_samples (+ the round in flight), as it always did
    (0.15, 4000, (301, 1999)),  # noise 9%: more of the same rounds until the median is pinned to +-0.5%
    (0.15, 400, (400, 400)),  # ... up to max_samples_ci
    (0.15, 200, (200, 200)),  # max_samples_ci <= max_samples: none
    (0.50, 4000, (200, 200)),  # noise 30% > max_noise_hard: unreliable whatever the count, none
])
def test_the_loop_buys_rounds_for_a_noisy_median(width, max_samples_ci, kept):
    timer = make_timer(min_samples=20, max_samples=200, batch=10, max_noise=0.02, max_time_s=600, min_time_s=0,
                       warmup_s=0, warmup_min_iters=1, max_samples_ci=max_samples_ci, max_median_ci=0.005,
                       max_noise_hard=0.1)
    _noisy_events(timer, width)
    calls = {"a": 0, "b": 0}

    def call(name):
        return lambda: calls.__setitem__(name, calls[name] + 1)

    a, b = timer._measure([[call("a")], [call("b")]])
    assert kept[0] <= len(a.times_s) <= kept[1], len(a.times_s)
    assert len(b.times_s) == len(a.times_s) == a.summary.samples == len(a.sm_clock_inband_mhz)
    assert calls["a"] == calls["b"]  # the baseline gets every round the variant gets
    if max_samples_ci == 4000 and width == 0.15:
        assert a.summary.median_ci <= 0.005 < stats.median_ci(a.times_s[:200])


@pytest.mark.parametrize("seed", range(12))
def test_a_median_called_pinned_down_keeps_its_interval(seed):
    """The row keeps exactly the samples the stopping rule judged when it went past max_samples: the
    round still in flight when it stopped could widen the interval past max_median_ci again (on the
    H200, session9d: wgmma_ws BF16 at 1024 came out at +-0.51% on 240 samples)."""
    timer = make_timer(min_samples=20, max_samples=200, batch=10, max_noise=0.02, max_time_s=600, min_time_s=0,
                       warmup_s=0, warmup_min_iters=1, max_samples_ci=4000, max_median_ci=0.005,
                       max_noise_hard=0.1)
    _noisy_events(timer, 0.15, seed=seed)
    (a,) = timer._measure([[lambda: None]])
    assert len(a.times_s) > 200 and a.summary.median_ci <= 0.005, (len(a.times_s), a.summary.median_ci)


def test_the_spin_covers_the_host_cost_of_a_whole_sample_not_only_the_call():
    """The GPU never waits for the host only if a sample's GPU time (spin + call) outlasts the
    host's time to enqueue it: flush, spin and call. A host whose flush enqueue is slow (here 2 ms)
    must get a spin of at least twice that, though the call itself enqueues at once."""
    import time

    timer = make_timer(min_samples=3, max_samples=3, batch=1, max_noise=1.0, max_time_s=100, min_time_s=0,
                       warmup_s=0, warmup_min_iters=10, busy_us=1.0)
    timer.flush_l2 = lambda: time.sleep(0.002)
    timer._measure([[lambda: None]])
    spins = [x[1] for x in timer.stream.log if x[0] == "spin"]
    assert min(spins[-3:]) >= 2 * 2000.0, spins


def test_a_long_call_keeps_a_short_spin():
    """... but a call whose GPU time already outlasts the host's enqueue (here 10 ms on the GPU
    against a 2 ms flush enqueue) needs no more than the call's own enqueue rule: a longer spin only
    idles the GPU, and an idle GPU clocks higher than a back-to-back benchmark's (do_bench)."""
    import time

    timer = make_timer(min_samples=3, max_samples=3, batch=1, max_noise=1.0, max_time_s=100, min_time_s=0,
                       warmup_s=0, warmup_min_iters=10, busy_us=1.0)
    timer.flush_l2 = lambda: time.sleep(0.002)
    timer.cupy.cuda.get_elapsed_time = lambda a, b: 10.0  # ms: every call 10 ms on the GPU
    timer._measure([[lambda: None]])
    spins = [x[1] for x in timer.stream.log if x[0] == "spin"]
    assert max(spins[-3:]) < 1000.0, spins
