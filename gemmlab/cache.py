"""The on-disk cache for compiled kernels: a folder per kind, safe under concurrent jobs.

Compiled artefacts are written to a temporary name and renamed into place (atomic on POSIX), and
whoever compiles a given key holds an exclusive ``flock`` on ``<key>.lock`` meanwhile, so two jobs
that need the same kernel compile it once and never read a half-written file.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, os.PathLike]


def cache_dir(root: PathLike, kind: str) -> Path:
    """``<root>/<kind>``, created if needed (root is ``cfg.paths.cache``)."""
    d = Path(os.path.expanduser(str(root))) / kind
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextmanager
def locked(path: PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``<path>.lock`` (blocks until other holders release it)."""
    lock = Path(str(path) + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
