"""Worker targets that misbehave on purpose, for tests/test_worker.py (imported in a spawned worker
process: keep them at module level and free of test fixtures).

``fake_target`` answers requests ``{"do": ...}`` the way a GPU point can go wrong, without a GPU:

- ``ok``: replies ``{"value": ...}``
- ``die``: the process exits at once (as a host build's abort or ``__trap`` would end it)
- ``segv``: the process reads address 0 (SIGSEGV)
- ``hang``: reports the phase ``checked call`` (or the request's ``phase``) and never replies
- ``sticky``: a "CUDA fault" that, as an illegal address does, poisons the process: the reply says
  ``poisoned``, and every later request of the same process fails with the same error
- ``slow``: reports a phase whose limit covers a sleep longer than the first limit

``runner_target`` is gemmlab's own worker target with the host BLAS backend made to misbehave at
chosen sizes (``MISBEHAVE``), so that whole runs (``run.isolate=all``) show what isolation does.
"""
from __future__ import annotations

import ctypes
import os
import time

STATE = {"poisoned": None}
STICKY = "illegal memory access (cudaErrorIllegalAddress)"


def fake_target(init, phase):
    def handle(request):
        if STATE["poisoned"]:
            raise RuntimeError(f"cudaErrorIllegalAddress: {STATE['poisoned']}")
        do = request.get("do")
        if do == "die":
            os._exit(3)
        if do == "segv":
            ctypes.string_at(0)
        if do == "hang":
            phase(request.get("phase", "checked call"), 0.001, request.get("limit", 1.0))
            while True:
                time.sleep(1)
        if do == "sticky":
            STATE["poisoned"] = STICKY
            return {"poisoned": STICKY}
        if do == "slow":
            phase("timed samples", 0.5, 5.0)
            time.sleep(request.get("sleep", 1.5))
        return {"value": request.get("value"), "pid": os.getpid(), "init": init}
    return handle


def broken_target(init, phase):
    raise ImportError("no such backend")


# -- whole runs: the host BLAS backend misbehaving at chosen sizes ---------------------------------
# m -> what the launch does: die | sticky | hang | oob (writes past C) | writes_b (changes B)
MISBEHAVE = {13: "die", 17: "sticky", 19: "hang", 23: "oob", 29: "writes_b"}


def misbehave(monkeypatch=None, only=None):
    """Patch CpuBlas.make_launch so each size in MISBEHAVE (or ``only`` of them) misbehaves;
    with ``monkeypatch`` the patch is undone after the test (in process), else it stays (a worker)."""
    from gemmlab.backends import cpu_blas

    orig = cpu_blas.CpuBlas.make_launch
    what = {m: w for m, w in MISBEHAVE.items() if only is None or w in only}

    def make_launch(self, p, a, b, c):
        launch = orig(self, p, a, b, c)
        inner, how = launch.fn, what.get(p.m)

        def fn():
            if STATE["poisoned"]:  # a poisoned context: every later call fails the same way
                raise RuntimeError(f"CUDARuntimeError: cudaErrorIllegalAddress: {STATE['poisoned']}")
            if how == "die":
                os._exit(3)
            if how == "hang":
                while True:
                    time.sleep(1)
            if how == "sticky":
                STATE["poisoned"] = "an illegal memory access was encountered"
                raise RuntimeError("CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was "
                                   "encountered")
            inner()
            if how == "oob":  # 8 bytes right after C's end (inside the guard after C)
                ctypes.memset(c.ctypes.data + c.nbytes, 0x5A, 8)
            if how == "writes_b":
                b[1, 2] = b[1, 2] * 2 + 1
        launch.fn = fn
        return launch

    if monkeypatch is not None:
        monkeypatch.setattr(cpu_blas.CpuBlas, "make_launch", make_launch)
    else:
        cpu_blas.CpuBlas.make_launch = make_launch


def runner_target(init, phase):
    """gemmlab.measuring.worker_target with the host BLAS misbehaving; a "sticky" point poisons the
    worker as a CUDA fault would (the reply says so: the runner must start a fresh worker)."""
    from gemmlab.measuring import worker_target

    misbehave(only=init.get("only"))
    handle = worker_target(init, phase)

    def wrapped(request):
        reply = handle(request)
        if STATE["poisoned"]:
            reply["poisoned"] = STICKY
        return reply
    return wrapped
