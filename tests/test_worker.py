"""Worker isolation and the watchdog (issue 29), without a GPU.

A point whose kernel faults, dies or hangs must fail alone: the runner measures it in a worker
process, starts a fresh worker after a fault, and goes on; the next points are ok. The GPU side of
it (a real illegal address, a real hang) is tests/test_gpu_isolation.py; here the same machinery
runs with workers that misbehave on purpose (tests/worker_fakes.py): they die, segfault, hang, or
report a "sticky" fault that poisons every later call of their process, as a CUDA fault does.
Switched off (``run.isolate=none``), the sticky fault takes the later points with it: the test
``test_without_isolation_a_sticky_fault_takes_every_later_point`` shows what isolation prevents.
"""
from __future__ import annotations

import logging
import time

import pytest
from conftest import compose_cfg, run_points
from worker_fakes import MISBEHAVE, STATE, misbehave

from gemmlab.measure.worker import Worker, WorkerError
from gemmlab.measure.worker.limits import SETUP_FLOOR_S, Limits

FAKE = "worker_fakes:fake_target"


# -- the worker process itself --------------------------------------------------------------------
@pytest.fixture(scope="module")
def worker():
    w = Worker(FAKE, {"run": "test"})
    yield w
    w.close()


def test_a_worker_replies_and_keeps_its_process(worker):
    first = worker.call({"value": 1}, limit_s=60)
    second = worker.call({"value": 2}, limit_s=60)
    assert first.ok and second.ok and first.reply["value"] == 1 and second.reply["value"] == 2
    assert first.reply["pid"] == second.reply["pid"] == worker.pid
    assert first.reply["init"] == {"run": "test"}


@pytest.mark.parametrize("do, says", [("die", "exited with code 3"), ("segv", "killed by SIGSEGV")])
def test_a_worker_that_dies_fails_its_request_and_the_next_runs_in_a_fresh_one(worker, do, says):
    before, restarts = worker.call({"value": 0}, limit_s=60).reply["pid"], worker.restarts
    out = worker.call({"do": do}, limit_s=60)
    assert out.kind == "died" and says in out.fault, out
    after = worker.call({"value": 3}, limit_s=60)
    assert after.ok and after.reply["pid"] != before and worker.restarts == restarts + 1


def test_a_sticky_fault_ends_the_worker_and_the_next_request_is_healthy(worker):
    out = worker.call({"do": "sticky"}, limit_s=60)
    assert out.kind == "poisoned" and "cudaErrorIllegalAddress" in out.fault, out
    after = worker.call({"value": 4}, limit_s=60)
    assert after.ok and after.reply["value"] == 4, after  # not "cudaErrorIllegalAddress" again


def test_the_watchdog_kills_a_hang_at_its_phase_limit_and_says_so(worker):
    t0 = time.monotonic()
    out = worker.call({"do": "hang", "limit": 1.5}, limit_s=60)
    took = time.monotonic() - t0
    assert out.kind == "timeout", out
    assert out.fault.startswith("timed out after") and "in checked call" in out.fault, out.fault
    assert "expected about" in out.fault
    assert 1.4 < took < 15, took  # the phase's limit, not the request's 60 s
    assert worker.call({"value": 5}, limit_s=60).ok


def test_a_phase_sets_the_deadline_unless_the_limit_is_fixed(worker, caplog):
    with caplog.at_level(logging.DEBUG, logger="gemmlab"):
        assert worker.call({"do": "slow", "sleep": 1.5}, limit_s=0.8).ok  # the phase's 5 s covers it
        out = worker.call({"do": "slow", "sleep": 1.5}, limit_s=0.8, fixed_limit=True)
    assert out.kind == "timeout" and "in timed samples" in out.fault, out
    said = [r.getMessage() for r in caplog.records]  # each phase in the log at debug level, with its limit
    assert any(m.endswith("timed samples (limit 5 s)") for m in said), said
    assert any(m.endswith("timed samples (limit unchanged)") for m in said), said


def test_a_target_that_cannot_start_is_one_clear_error():
    w = Worker("worker_fakes:broken_target")
    with pytest.raises(WorkerError, match="no such backend"):
        w.call({}, limit_s=10)
    w.close()


# -- the limits the watchdog applies ----------------------------------------------------------------
def _limits(flops, **measure):
    cfg = compose_cfg([f"measure.{k}={v}" for k, v in measure.items()])
    return Limits.of(cfg.measure, flops, peak_flops=1e15, slow_flops=1e12 * 0.67)


def test_limits_grow_with_the_work_and_never_fall_below_the_floor():
    small, large = _limits(2 * 64 ** 3), _limits(2 * 16384 ** 3)
    assert small.phase("checked call")[1] == small.floor_s == 10.0
    assert large.phase("checked call")[1] > 2 * 2 * 16384 ** 3 / 0.67e12 * 0.99  # a 1%-of-FP32-peak kernel fits
    assert large.whole()[1] > small.whole()[1] > small.whole()[0]
    expected, limit = small.phase("timed samples")
    assert expected < limit and limit >= 2 * (0.5 + 5.0)  # warm-up and samples, doubled
    assert _limits(2 * 64 ** 3, point_timeout_floor_s=3).phase("checked call")[1] == 3.0
    assert _limits(2 * 64 ** 3, energy=True, energy_s=2).whole()[1] > small.whole()[1]


def test_a_search_gets_a_limit_for_its_trials_and_the_setup_after_it_its_own():
    small, large = _limits(2 * 64 ** 3), _limits(2 * 8192 ** 3)
    for lim in (small, large):
        one, many = lim.search(1), lim.search(24)
        assert one[0] < many[0] and one[1] < many[1]  # more trials, more time
        assert many[1] > 2 * 24 * lim.slow_call_s and many[1] >= lim.floor_s
        assert lim.after_search() == (0.0, SETUP_FLOOR_S + lim.floor_s)  # the setup's own limit
    # a large point's search of 24 kernels may take longer than the whole point's limit sized for one kernel, and
    # a hang in it is still not held for long: 8192^3 at a 1-PFLOP/s peak, 24 candidates, under 10 minutes
    assert large.phase("checked call")[1] < large.search(24)[1] < 600


def test_the_executor_hands_a_search_its_phase_and_takes_it_back(tmp_path):
    from gemmlab.backends.base import backend_class
    from gemmlab.measure.gpu import GpuExecutor

    cfg = compose_cfg([], tmp_path)
    ex, backend, seen = GpuExecutor(cfg), backend_class("cpu_blas")(cfg), []
    ex.watch = lambda *report: seen.append(report)
    lim = _limits(2 * 4096 ** 3)
    with ex._searches_watched(lim, [backend]):
        backend.watch_search(12)
        backend.watch_search(None)
    assert seen == [("search of 12 trials", *lim.search(12)), ("setup after the search", *lim.after_search())]
    backend.watch_search(5)  # outside the point it measures, a no-op again
    assert len(seen) == 2 and "watch_search" not in vars(backend)


def test_a_hang_in_a_search_is_named_as_the_search(worker):
    out = worker.call({"do": "hang", "phase": "search of 3 trials", "limit": 1.0}, limit_s=60)
    assert out.kind == "timeout" and "in search of 3 trials" in out.fault, out


# -- whole runs: the host BLAS misbehaving at chosen sizes, measured in workers -----------------------
SIZES = [8, *sorted(MISBEHAVE), 31]


def _run(tmp_path, name, isolate, only, extra=(), fresh_worker=False):
    from gemmlab.runner import Runner

    cfg = compose_cfg(["variant=cpu_blas", "precision=fp32", "measure=quick", "run.progress=false",
                       f"run.isolate={isolate}", "measure.point_timeout_floor_s=2",
                       "sizes.shapes=[" + ",".join(f"[{m},{m},{m}]" for m in SIZES) + "]", "sizes.square=[]",
                       *extra], tmp_path)
    Runner.worker_target, Runner.worker_init = "worker_fakes:runner_target", {"only": only}
    try:
        runner, rows = run_points(cfg, tmp_path / name, fresh_worker)
    finally:
        Runner.worker_target, Runner.worker_init = "gemmlab.measuring:worker_target", {}
    return runner, {int(r["m"]): r for r in rows}


@pytest.mark.slow
def test_each_misbehaving_point_fails_alone_and_every_other_point_is_ok(tmp_path):
    t0 = time.monotonic()
    runner, rows = _run(tmp_path, "isolated", "all", None)
    took = time.monotonic() - t0
    expect = {13: "exited with code 3", 17: "CUDA fault in cpu_blas: illegal memory access",
              19: "timed out after", 23: "bytes after C's end (first at offset +",
              29: "changed B (first at row 1, col 2; 1 element)"}
    for m, r in rows.items():
        if m in expect:
            assert r["status"] == "failed" and expect[m] in r["reason"], (m, r["reason"])
        else:
            assert r["status"] == "ok" and r["guard_check"] == "clean", (m, r["reason"])
    assert "a fresh worker measures the next point" in rows[17]["reason"]
    assert "in checked call" in rows[19]["reason"] and "expected about" in rows[19]["reason"]
    assert rows[23]["guard_check"] == rows[23]["reason"]
    assert runner.counts["worker_restarts"] == 3  # after the death, the sticky fault and the hang
    assert len({rows[m]["worker"] for m in (8, 31)}) == 2  # the last point ran in a later worker
    assert took < 120, took  # the hang cost its limit (2 s floor), not more


def test_without_isolation_a_sticky_fault_takes_every_later_point(tmp_path, monkeypatch):
    """What isolation prevents: in the runner's own process, the "poisoned context" of the point at
    17 fails every point after it, blamed on points that did nothing wrong."""
    monkeypatch.setitem(STATE, "poisoned", None)
    misbehave(monkeypatch, only=["sticky"])
    cfg = compose_cfg(["variant=cpu_blas", "precision=fp32", "measure=quick", "run.progress=false",
                       "run.isolate=none", "sizes.shapes=[[8,8,8],[17,17,17],[31,31,31]]", "sizes.square=[]"],
                      tmp_path)
    _, rows = run_points(cfg, tmp_path / "in_process")
    status = {int(r["m"]): r["status"] for r in rows}
    assert status == {8: "ok", 17: "failed", 31: "failed"}, status
    STATE["poisoned"] = None
    # the same points in workers: only the faulting one fails
    _, rows = _run(tmp_path, "isolated_sticky", "all", ["sticky"])
    assert {m: r["status"] for m, r in rows.items() if m in (8, 17, 31)} == {8: "ok", 17: "failed", 31: "ok"}


@pytest.mark.slow
def test_a_fixed_point_timeout_applies_to_the_whole_point(tmp_path):
    _, rows = _run(tmp_path, "fixed", "all", ["hang"], ["measure.point_timeout_s=3"])
    r = rows[19]
    assert r["status"] == "failed" and r["reason"].startswith("cpu_blas timed out after 3"), r["reason"]
    assert all(rows[m]["status"] == "ok" for m in (8, 31))


@pytest.mark.parametrize("fresh", [False, True])
def test_runs_share_the_processs_worker_unless_each_asks_for_its_own(tmp_path, fresh):
    """run.fresh_worker: each run measures in a worker of its own, ended with the run (a sweep's
    job then measures as in a fresh process, the default); with false the runs of a process share
    one."""
    first, rows1 = _run(tmp_path, "first", "all", [], fresh_worker=fresh)
    second, rows2 = _run(tmp_path, "second", "all", [], fresh_worker=fresh)
    pids = {rows1[8]["worker"], rows2[8]["worker"]}
    assert len(pids) == (2 if fresh else 1), pids
    assert all(r["status"] == "ok" for r in [*rows1.values(), *rows2.values()])
    assert (first.worker._proc is None) == fresh  # its own worker ended with its run
