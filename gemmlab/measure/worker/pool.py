"""The parent's side of worker isolation: one worker process, one request at a time, a watchdog.

``Worker(target, init).call(request, limit_s)`` sends ``request`` to a child process (started with
multiprocessing's ``spawn``, so it shares no CUDA state with the parent) and waits for its reply.
The child may tighten or extend the deadline as it goes by reporting phases (the checked call, the
timed samples): each phase comes with the time it should take and the limit it gets. The call
ends in one of four ways (``Outcome.kind``):

- ``ok``: the reply;
- ``poisoned``: the reply, but the child says its CUDA context is lost (a sticky error): the
  worker is killed, the next call starts a fresh one;
- ``died``: the child ended without replying (a segfault, an abort, ``os._exit``);
- ``timeout``: the deadline passed: the child and everything it started are killed.

In the last three the parent learns nothing more from that child; a later ``call`` starts a new
one (``restarts`` counts them) and carries on.
"""
from __future__ import annotations

import atexit
import json
import logging
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Dict, List, Optional, Sequence

log = logging.getLogger("gemmlab")

START_LIMIT_S = 600.0  # importing CuPy and the backends, creating a context, warming up
CLOSE_WAIT_S = 10.0


class WorkerError(RuntimeError):
    """The worker could not be started (or did not say it was ready in time)."""


@dataclass
class Outcome:
    kind: str  # ok | poisoned | died | timeout
    reply: Optional[Dict[str, Any]] = None
    fault: Optional[str] = None  # why there is no (usable) reply, in words
    elapsed_s: float = 0.0
    phase: str = "setup"  # the last phase the child reported

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


@dataclass
class _Phase:
    name: str = "setup"
    expected_s: Optional[float] = None
    started: float = field(default_factory=time.monotonic)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except (ValueError, TypeError):
        return f"signal {-code}"


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "ended"
    if code < 0:
        return f"was killed by {_signal_name(code)}"
    return f"exited with code {code}"


class Worker:
    """A worker process running ``target`` (``"module:function"``: ``function(init, phase)``
    returns the callable that answers each request). ``env`` is set in the child before the target
    is imported; ``log_files`` get the child's log records (as the run's own log file does)."""

    def __init__(self, target: str, init: Any = None, env: Optional[Dict[str, str]] = None,
                 log_files: Sequence[str] = (), start_limit_s: float = START_LIMIT_S):
        self.target, self.init = target, init
        self.env = dict(env or {})
        self.log_files = list(log_files)
        self.start_limit_s = float(start_limit_s)
        self.starts = 0
        self.faults: List[str] = []  # one line per fault that ended a worker
        self.pid: Optional[int] = None
        self._proc = None
        self._conn = None

    @property
    def restarts(self) -> int:
        """Workers started after the first: one per fault that ended a worker (and more was asked)."""
        return max(0, self.starts - 1)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        from gemmlab.measure.worker import child

        ctx = mp.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        env = {**self.env, "GEMMLAB_RUNNER_PID": str(os.getpid())}
        self._proc = ctx.Process(target=child.main, name="gemmlab-worker",
                                 args=(child_conn, self.target, self.init, env, self.log_files))
        self._proc.start()
        child_conn.close()
        self.starts += 1
        deadline = time.monotonic() + self.start_limit_s
        while True:
            msg = self._receive(deadline)
            if msg is None:
                code = self._proc.exitcode
                self.kill()
                raise WorkerError(f"the worker {describe_exit(code) if code is not None else 'did not start'}"
                                  f" within {self.start_limit_s:.0f} s")
            if msg[0] == "ready":
                self.pid = msg[1]
                log.info("worker %d ready (start %d)", self.pid, self.starts)
                return
            if msg[0] == "error":  # the target could not be built: no point can run in a worker
                self.kill()
                raise WorkerError(f"the worker could not start: {msg[1]}")

    def _receive(self, deadline: float):
        """The child's next message, or None when it died or the deadline passed."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready = wait([self._conn, self._proc.sentinel], timeout=left)
            if self._conn in ready or self._conn.poll():
                try:
                    return self._conn.recv()
                except (EOFError, OSError):
                    return None
            if self._proc.sentinel in ready:  # died with nothing left in the pipe
                return None

    def kill(self) -> None:
        """End the child and everything it started (it leads its own process group)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.is_alive():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.join(CLOSE_WAIT_S)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Ask the child to finish, and kill it if it does not."""
        if self._proc is None:
            return
        try:
            self._conn.send(None)
            self._proc.join(CLOSE_WAIT_S)
        except (OSError, BrokenPipeError):
            pass
        self.kill()

    # -- one request ---------------------------------------------------------------------------------
    def call(self, request: Any, limit_s: float, fixed_limit: bool = False) -> Outcome:
        """Send ``request``; wait for the reply under the watchdog. ``limit_s`` bounds the time until
        the child's first phase report; each report then sets the deadline to its own limit, unless
        ``fixed_limit`` (``measure.point_timeout_s``: one limit for the whole request)."""
        if not self.alive:
            self.kill()
            self.start()
        t0 = time.monotonic()
        phase = _Phase(started=t0)
        deadline = t0 + float(limit_s)
        self._conn.send(request)
        while True:
            msg = self._receive(deadline)
            now = time.monotonic()
            if msg is None:
                if now >= deadline:
                    return self._end("timeout", self._timeout_text(now - t0, phase), t0, phase)
                code = self._proc.exitcode if self._proc is not None else None
                if code is None and self._proc is not None:
                    self._proc.join(1.0)
                    code = self._proc.exitcode
                return self._end("died", f"the worker {describe_exit(code)} while measuring it (in {phase.name})",
                                 t0, phase)
            what = msg[0]
            if what == "phase":
                _, name, expected_s, phase_limit_s = msg
                phase = _Phase(name, expected_s, now)
                if not fixed_limit and phase_limit_s:
                    deadline = now + float(phase_limit_s)
                log.debug("worker %s: %s (limit %s)", self.pid, name,
                          _seconds(phase_limit_s) if phase_limit_s and not fixed_limit else "unchanged")
                continue
            if what == "reply":
                reply = msg[1]
                poisoned = reply.get("poisoned") if isinstance(reply, dict) else None
                if poisoned:
                    out = self._end("poisoned", f"the CUDA context was lost: {poisoned}", t0, phase)
                    out.reply = reply
                    return out
                return Outcome("ok", reply, None, now - t0, phase.name)
            log.warning("worker: unexpected message %r", what)

    def _timeout_text(self, elapsed_s: float, phase: _Phase) -> str:
        where = f" in {phase.name}" if phase.name != "setup" else " (before its first kernel call)"
        expected = f" (expected about {_seconds(phase.expected_s)})" if phase.expected_s else ""
        return f"timed out after {_seconds(elapsed_s)}{where}{expected}"

    def _end(self, kind: str, fault: str, t0: float, phase: _Phase) -> Outcome:
        self.kill()
        self.faults.append(fault)
        log.warning("worker %s: %s; a fresh worker measures the next point", self.pid, fault)
        return Outcome(kind, None, fault, time.monotonic() - t0, phase.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- one worker per process and target, shared by the runs of that process ---------------------------
# A worker's start (Python, CuPy, a CUDA context, the libraries' handles) costs seconds; with
# run.fresh_worker=false the runs of one process (a sweep's jobs under the basic launcher, a test
# session) reuse it (by default each run starts its own: gemmlab/runner.py). A fault still ends
# it, and the next point of whichever run starts a fresh one. CUDA_VISIBLE_DEVICES is part of the
# key: a job pinned to another GPU gets its own worker.
_SHARED: Dict[str, Worker] = {}


def shared_worker(target: str, init: Any = None) -> Worker:
    key = json.dumps([target, init, os.environ.get("CUDA_VISIBLE_DEVICES")], sort_keys=True, default=str)
    if key not in _SHARED:
        _SHARED[key] = Worker(target, init)
    return _SHARED[key]


@atexit.register
def close_shared() -> None:
    for w in _SHARED.values():
        w.close()
    _SHARED.clear()


def _seconds(s: Optional[float]) -> str:
    if s is None:
        return "?"
    return f"{s:.3g} s" if s < 10 else f"{s:.0f} s"
