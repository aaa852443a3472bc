"""Compiling the run's CUTLASS kernels into cutlass_cppgen's own sqlite cache, a log per compile.

Compiling (the backend's ``prepare``): the distinct kernels of a run are emitted and compiled
before any timing by nvcc processes run side by side (device cubin and host library of a kernel
in parallel, ``compile_jobs`` processes at once, 0 = one per CPU core), with ``-DNDEBUG`` added to
cutlass_cppgen's flags (see :data:`EXTRA_NVCC_FLAGS`). Results go into cutlass_cppgen's own sqlite
cache, ``<paths.cache>/cutlass/<flavor>/compiled_cache.db`` (never the current directory; the
flavor, :func:`build_flavor`, names target, nvcc and package versions and flags), under its own
keys, so its loader finds them; a per-kernel lock (:func:`gemmlab.cache.locked`) makes a kernel
that two jobs need compile once. Each compile's commands and nvcc output go to
``<run>/cutlass/logs/``; the run's compile summary to ``<run>/cutlass/compile.json``. A failed
compile becomes a failed row naming its log; the run goes on.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gemmlab.backends.cutlass.catalog import Kernel, first_line
from gemmlab.cache import locked

log = logging.getLogger("gemmlab.cutlass")

DEFAULT_TARGET_CC = 90  # emit for Hopper when no GPU says otherwise
# Added to cutlass_cppgen's nvcc options (device and host alike). Without NDEBUG, CUTLASS's device
# asserts stay in as function calls inside the mainloop, and ptxas serializes every wgmma around
# them ("C7510 Potential Performance Loss: wgmma.mma_async instructions are serialized").
EXTRA_NVCC_FLAGS = ["-DNDEBUG"]
# Architectures whose features need the arch-specific target (sm_90a: wgmma, setmaxnreg), as in
# cutlass_cppgen's CompilationOptions.
ARCH_SPECIFIC_CCS = (90, 100, 101, 103, 120, 121)


class CutlassCompileError(RuntimeError):
    """The kernel did not compile; the message names the compile log."""


@dataclass
class CompileResult:
    key_hash: str
    name: str
    status: str  # compiled | cached | failed
    compile_s: float = 0.0  # device + host nvcc seconds; 0 = taken from the cache
    device_s: Optional[float] = None
    host_s: Optional[float] = None
    log: Optional[str] = None
    error: Optional[str] = None
    spill_bytes: Optional[int] = None
    ptxas_registers: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.status != "failed"


class KernelCache:
    """cutlass_cppgen's sqlite cache in ``folder``, filled by nvcc processes that run side by side."""

    def __init__(self, folder: Path, nvcc: Path, cutlass_module, target_cc: int):
        self.folder = Path(folder)
        self.db = self.folder / "compiled_cache.db"
        self.nvcc = Path(nvcc)
        self.cutlass = cutlass_module
        self.cc = target_cc
        for sub in ("locks", "meta", "build"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)

    # -- lookups -------------------------------------------------------------------------------
    def has(self, kernel: Kernel) -> bool:
        with sqlite3.connect(self.db, timeout=60) as con:
            return con.execute("SELECT 1 FROM compiled_operations WHERE op_key = ? LIMIT 1",
                               (kernel.key,)).fetchone() is not None

    def meta(self, kernel: Kernel) -> Dict[str, Any]:
        path = self.folder / "meta" / f"{kernel.key_hash}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}

    # -- compiling -----------------------------------------------------------------------------
    def build(self, kernels: Sequence[Kernel], jobs: int, log_dir: Path) -> Dict[str, CompileResult]:
        """Make every kernel present in the cache; returns a result per key hash (never raises)."""
        jobs = jobs or os.cpu_count() or 1
        todo, results = [], {}
        for k in {k.key_hash: k for k in kernels}.values():
            if self.has(k):
                results[k.key_hash] = CompileResult(k.key_hash, k.name, "cached")
            else:
                todo.append(k)
        if not todo:
            return results
        sources = {k.key_hash: k.sources() for k in todo}  # emitted here, not in the worker threads
        # Each kernel runs its device and host compiles side by side: jobs // 2 kernels at once.
        per_time = max(1, jobs // 2)
        log.info("cutlass: compiling %d kernels (%d already cached), %d at a time", len(todo),
                 len(results), per_time)
        with ThreadPoolExecutor(max_workers=per_time, thread_name_prefix="cutlass-nvcc") as pool:
            work = pool.map(lambda k: self._compile(k, sources[k.key_hash], log_dir, jobs >= 2), todo)
            for res in work:
                results[res.key_hash] = res
                log.info("cutlass: %s %s (%.1f s)", res.status, res.name, res.compile_s)
        return results

    def commands(self, kernel: Kernel, build: Path) -> Tuple[List[str], List[str]]:
        """The nvcc commands of cutlass_cppgen's compiler (device cubin, host library), in ``build``."""
        from cutlass_cppgen.backend import compiler

        cuda_root = self.nvcc.parent.parent
        cutlass_root = Path(self.cutlass.CUTLASS_PATH)
        includes = [cuda_root / "include", cutlass_root / "include", cutlass_root / "tools/util/include",
                    cutlass_root / "python/cutlass/cpp/include"]
        flags = [part for opt in compiler._nvcc_compile_options for part in opt.split(" ")]
        flags += EXTRA_NVCC_FLAGS + [f"--include-path={p}" for p in includes]
        # One explicit target: `-arch=sm_90a` (cutlass_cppgen's flag) also runs a compute_90 device
        # pass when building the host library, which needs no device code at all.
        arch = _arch_flag(self.cc)
        device = [str(self.nvcc), *flags, arch, "-Xptxas=-v", "-cubin", str(build / "device.cu"),
                  "-o", str(build / "device.cubin")]
        host = [str(self.nvcc), "-x", "cu", "-Xcompiler=-fpermissive", "-Xcompiler=-w",
                "-Xcompiler=-fPIC", *flags, arch, "-shared", "-o", str(build / "host.so"),
                str(build / "host.cu"), "-lcudart", "-lcuda"]
        return device, host

    def _compile(self, kernel: Kernel, sources: Tuple[str, str], log_dir: Path,
                 parallel_parts: bool = True) -> CompileResult:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{kernel.file_stem}.log"
        try:
            with locked(self.folder / "locks" / kernel.key_hash):
                if self.has(kernel):  # another job compiled it while we waited for the lock
                    return CompileResult(kernel.key_hash, kernel.name, "cached")
                return self._compile_locked(kernel, sources, log_dir, log_path, parallel_parts)
        except Exception as e:  # a broken kernel must not stop the others
            _append(log_path, f"\n== error\n{type(e).__name__}: {e}\n")
            return CompileResult(kernel.key_hash, kernel.name, "failed", log=str(log_path),
                                 error=f"{type(e).__name__}: {first_line(e)}")

    def _compile_locked(self, kernel: Kernel, sources: Tuple[str, str], log_dir: Path, log_path: Path,
                        parallel_parts: bool) -> CompileResult:
        build = Path(tempfile.mkdtemp(prefix=kernel.key_hash + "-", dir=self.folder / "build"))
        try:
            device_src, host_src = sources
            (build / "device.cu").write_text(device_src)
            (build / "host.cu").write_text(host_src)
            device_cmd, host_cmd = self.commands(kernel, build)
            log_path.write_text(f"kernel {kernel.name}\nkey {kernel.key_hash}\nconfig "
                                f"{json.dumps(kernel.config)}\n\n== device\n{' '.join(device_cmd)}\n"
                                f"== host\n{' '.join(host_cmd)}\n")
            if parallel_parts:
                host_out: Dict[str, Any] = {}
                t = threading.Thread(target=lambda: host_out.update(r=_run_timed(host_cmd)))
                t.start()
                device_rc, device_s, device_text = _run_timed(device_cmd)
                t.join()
                host_rc, host_s, host_text = host_out["r"]
            else:
                device_rc, device_s, device_text = _run_timed(device_cmd)
                host_rc, host_s, host_text = _run_timed(host_cmd)
            _append(log_path, f"\n== device: exit {device_rc} after {device_s:.1f} s\n{device_text}"
                              f"\n== host: exit {host_rc} after {host_s:.1f} s\n{host_text}")
            result = CompileResult(kernel.key_hash, kernel.name, "compiled", device_s + host_s,
                                   device_s, host_s, str(log_path))
            if device_rc or host_rc:
                for part in ("device.cu", "host.cu"):  # keep what failed beside its log
                    shutil.copy(build / part, log_dir / f"{kernel.file_stem}.{part}")
                which = "device" if device_rc else "host"
                result.status = "failed"
                result.error = f"nvcc ({which} part) exited with {device_rc or host_rc}"
                return result
            result.spill_bytes, result.ptxas_registers = _ptxas_usage(device_text)
            self._insert(kernel, (build / "device.cubin").read_bytes(), build / "host.so")
            meta = {k: v for k, v in asdict(result).items() if k not in ("status", "log", "error")}
            (self.folder / "meta" / f"{kernel.key_hash}.json").write_text(json.dumps(meta))
            return result
        finally:
            shutil.rmtree(build, ignore_errors=True)

    def _insert(self, kernel: Kernel, cubin: bytes, host_lib: Path) -> None:
        """Store the kernel as cutlass_cppgen's ArtifactManager.add_module does."""
        rt = kernel.operation.rt_module
        lib = ctypes.CDLL(str(host_lib))  # host-only call: no CUDA context is made
        param_size = int(getattr(lib, f"{rt.name()}_get_param_size")())
        attrs = [param_size] + list(getattr(rt, "extra_funcs", {}) or {})
        with sqlite3.connect(self.db, timeout=60) as con:
            con.execute("INSERT OR IGNORE INTO compiled_operations (op_key, cubin, hostbin, op_name, "
                        "op_attrs) VALUES (?, ?, ?, ?, ?)",
                        (kernel.key, cubin, host_lib.read_bytes(), rt.name(), json.dumps(attrs)))


def _run_timed(cmd: List[str]) -> Tuple[int, float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    return proc.returncode, time.perf_counter() - t0, proc.stdout


def _ptxas_usage(text: str) -> Tuple[Optional[int], Optional[int]]:
    """(spill bytes = stores + loads, registers) from ``ptxas -v`` output, or Nones."""
    spills = [int(s) + int(l) for s, l in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)]
    regs = [int(r) for r in re.findall(r"Used (\d+) registers", text)]
    return (max(spills) if spills else None), (max(regs) if regs else None)


# -- the target and the cache folder's name -------------------------------------------------------
def target_cc() -> int:
    """The compute capability of the current CUDA device, or Hopper's (90) without one."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return int(cupy.cuda.Device().compute_capability)
    except Exception:  # no driver / no device: emit for the H200 this project targets
        pass
    return DEFAULT_TARGET_CC


def _arch_flag(cc: int) -> str:
    target = f"{cc}a" if cc in ARCH_SPECIFIC_CCS else str(cc)
    return f"-gencode=arch=compute_{target},code=sm_{target}"


def build_flavor(nvcc: Path, cc: int) -> str:
    """Names the cache folder: target, nvcc release, nvidia-cutlass version and our extra flags."""
    try:
        from importlib.metadata import version

        package = version("nvidia-cutlass")
    except Exception:
        package = "unknown"
    nvcc_version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout
    what = json.dumps([package, nvcc_version.strip().splitlines()[-1:], EXTRA_NVCC_FLAGS, _arch_flag(cc)])
    return f"sm{cc}-{hashlib.sha1(what.encode()).hexdigest()[:10]}"


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(text)
