"""Exclusive locks that a dying process can never leave behind: ``flock`` on a file, held while
the file stays open, dropped by the kernel when the process ends however it ends.

Used for one run per results folder, one sweep per sweep folder (``gemmlab.sweep.callbacks``)
and one measuring run per GPU (``gemmlab.sweep.pinning``). The lock file holds who took it (host,
PID, time), so whoever finds it taken can say by whom.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, Optional

# The open lock files of this process, by path: a second lock of the same path by the same
# process (a multirun's jobs run one after another in one process) reuses it.
_held: Dict[str, Any] = {}


class BusyError(RuntimeError):
    """Another process holds the lock."""


def try_lock(path: Path, what: Optional[Dict[str, Any]] = None):
    """The open, locked file at ``path``, or None when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:  # any user's processes on this host share the lock files
        os.fchmod(fd, 0o666)
    except OSError:
        pass
    fh = os.fdopen(fd, "r+")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        fh.close()
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    fh.seek(0)
    fh.truncate()
    fh.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time(), **(what or {})}))
    fh.flush()
    return fh


def holder(path: Path) -> str:
    """Who holds the lock at ``path``, as the lock file says ('pid 123 on host since 12:00:00')."""
    try:
        info = json.loads(Path(path).read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(info["since"])) if info.get("since") else "?"
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')} since {since}"


def lock_folder(folder: os.PathLike, name: str, what: str) -> Path:
    """Lock ``folder/name`` for the rest of this process; raises BusyError naming the holder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    key = str(path.resolve())
    if key in _held:
        return path
    fh = try_lock(path, {"what": what})
    if fh is None:
        raise BusyError(f"{folder} is in use by another {what} ({holder(path)}); "
                        "wait for it to end or choose another folder")
    _held[key] = fh
    return path


def release_folder(folder: os.PathLike, name: str) -> None:
    fh = _held.pop(str((Path(folder) / name).resolve()), None)
    if fh is not None:
        fh.close()
