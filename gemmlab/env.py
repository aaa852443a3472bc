"""Facts about the machine and the software recorded with every row."""
from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
import sys
from typing import Any, Dict

import numpy as np

from gemmlab import __version__
from gemmlab.paths import ROOT


@functools.lru_cache(maxsize=None)
def git_commit() -> str:
    """The harness's commit; GEMMLAB_GIT_COMMIT wins (a copied tree without .git on a GPU host)."""
    if os.environ.get("GEMMLAB_GIT_COMMIT"):
        return os.environ["GEMMLAB_GIT_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        if not sha:
            return ""
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.lru_cache(maxsize=None)
def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_info() -> Dict[str, Any]:
    """BLAS vendor, kernel architecture and threads of NumPy's BLAS (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            return {"blas_vendor": lib.get("internal_api") or lib.get("prefix"),
                    "blas_arch": lib.get("architecture") or "",
                    "blas_threads": lib.get("num_threads")}
    return {"blas_vendor": "unknown", "blas_arch": "", "blas_threads": None}


@functools.lru_cache(maxsize=None)
def provenance() -> Dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "gemmlab_version": __version__,
        "git_commit": git_commit(),
        "python_version": platform.python_version(),
        "numpy_version": np.__version__,
        "cpu_model": cpu_model(),
    }


def python_executable() -> str:
    return sys.executable
