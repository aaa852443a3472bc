"""The worker process: build the target once, then answer one request at a time.

It leads its own process group (the parent kills the worker and whatever it started, an nvcc or
a compute-sanitizer, at once) and ignores Ctrl-C (the runner handles it, then closes the worker).
When the parent goes away the pipe closes and the worker ends.
"""
from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import traceback
from typing import Any, Callable, Dict, Sequence

LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # Hydra's job log format


def load(target: str) -> Callable:
    module, _, name = target.partition(":")
    if not name:
        raise ValueError(f"worker target {target!r} is not 'module:function'")
    return getattr(importlib.import_module(module), name)


def _logging(log_files: Sequence[str]) -> None:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for path in log_files:
        h = logging.FileHandler(path)
        h.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(h)
    err = logging.StreamHandler(sys.stderr)  # warnings reach the terminal, as in the runner
    err.setLevel(logging.WARNING)
    err.setFormatter(logging.Formatter("[worker %(process)d][%(levelname)s] %(message)s"))
    root.addHandler(err)


def main(conn, target: str, init: Any, env: Dict[str, str], log_files: Sequence[str]) -> None:
    try:
        os.setpgrp()
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(env)
    _logging(log_files)

    def phase(name: str, expected_s: float = None, limit_s: float = None) -> None:
        conn.send(("phase", name, expected_s, limit_s))

    try:
        handle = load(target)(init, phase)
    except BaseException as e:  # the parent says why no point can run in a worker
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if request is None:
            return
        try:
            reply = handle(request)
        except Exception as e:  # the target's own bug: the parent records it as the point's failure
            reply = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
                     "traceback": traceback.format_exc(limit=8)}
        conn.send(("reply", reply))
