"""Compile a CUDA source to a cubin with nvcc, cached on disk, and read ptxas's resource report.

A build is keyed by a hash of the source text, the text of every header it includes with
``#include "..."`` (followed recursively, e.g. ``kernels/cuda/common/*.cuh``), the nvcc flags and
the nvcc version, so editing a kernel, a shared header or a define compiles anew and nothing
else does. Each key leaves three files in the cache folder (``cache_dir(cfg.paths.cache,
"cuda")``): ``<stem>-<key>.cubin``, ``<stem>-<key>.ptxas.json`` (the parsed report) and
``<stem>-<key>.log`` (the command and nvcc's output, kept on failure too, so an error names a
file to read). Concurrent jobs compile a key once (``gemmlab.cache.locked``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from gemmlab.cache import atomic_write_bytes, locked

KEY_VERSION = "1"  # bump when the flags or the cache layout change meaning
COMPILE_TIMEOUT_S = 900
BASE_FLAGS = ("-cubin", "-O3", "-lineinfo", "-std=c++17", "-Xptxas", "-v")


class NvccError(RuntimeError):
    """nvcc is missing or unusable."""


class CompileError(RuntimeError):
    """nvcc failed; ``log_path`` holds the command and its output."""

    def __init__(self, message: str, log_path: Optional[Path] = None):
        super().__init__(message)
        self.log_path = log_path


@dataclass(frozen=True)
class PtxasReport:
    """Resource use of one kernel, as ptxas -v reports it."""

    registers: int = 0
    smem_bytes: int = 0  # static shared memory
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int = 0

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


@dataclass
class Cubin:
    path: Path
    reports: Dict[str, PtxasReport]  # by kernel (entry) name
    compile_s: float  # 0.0 when it came from the cache
    log_path: Path
    key: str

    def report(self, entry: str) -> PtxasReport:
        if entry not in self.reports:
            raise KeyError(f"ptxas reported no kernel {entry!r} in {self.path} (found {sorted(self.reports)}); "
                           f"is the kernel declared extern \"C\"?")
        return self.reports[entry]


# ---- nvcc itself ----------------------------------------------------------------------------
# The one search order of every backend that compiles (cuda, cutlass): a toolkit root named in the
# environment first, as CuPy and PyTorch look, since a variable set on purpose names the toolkit
# more surely than whatever nvcc the PATH has first (a distribution's older one, say); then the
# PATH; then the usual install root. CUDA_INSTALL_PATH is cutlass_cppgen's own variable, which the
# cutlass backend sets to the nvcc it found, so every later lookup in the process agrees with it.
CUDA_ROOT_VARS = ("CUDA_INSTALL_PATH", "CUDA_HOME", "CUDA_PATH")
DEFAULT_CUDA_ROOTS = ("/usr/local/cuda",)  # where a toolkit usually lives (tests may empty this)
SEARCHED = "$CUDA_INSTALL_PATH/bin, $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda/bin"


def nvcc_candidates() -> List[Path]:
    """Where :func:`find_nvcc` looks, in order (see :data:`CUDA_ROOT_VARS`)."""
    candidates = [Path(os.environ[var]) / "bin" / "nvcc" for var in CUDA_ROOT_VARS if os.environ.get(var)]
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(Path(on_path))
    return candidates + [Path(root) / "bin" / "nvcc" for root in DEFAULT_CUDA_ROOTS]


def find_nvcc() -> Optional[str]:
    """The first executable nvcc of :func:`nvcc_candidates`; None when there is none."""
    for nvcc in nvcc_candidates():
        if nvcc.is_file() and os.access(nvcc, os.X_OK):
            return str(nvcc)
    return None


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    """'13.0.88' from nvcc --version (part of every cache key)."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise NvccError(f"cannot run {nvcc} --version: {e}") from e
    m = re.search(r"\bV(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    if not m:
        raise NvccError(f"cannot read the version from `{nvcc} --version`: {out.strip()[:200]!r}")
    return m.group(1)


# ---- flags ---------------------------------------------------------------------------------
def arch_flags(arch: str) -> List[str]:
    """sm_90 -> -arch=sm_90. Arch-specific targets (sm_90a) need -gencode: with nvcc 13,
    -arch=sm_90a also runs a plain sm_90 pass that rejects wgmma and setmaxnreg."""
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise ValueError(f"arch must look like sm_90 or sm_90a, got {arch!r}")
    if arch[-1] in "af":
        num = arch[3:]
        return [f"-gencode=arch=compute_{num},code={arch}"]
    return [f"-arch={arch}"]


def define_flags(defines: Iterable[Tuple[str, object]]) -> List[str]:
    out = []
    for name, value in defines:
        if not re.fullmatch(r"[A-Za-z_]\w*", str(name)):
            raise ValueError(f"bad define name {name!r}")
        out.append(f"-D{name}" if value is None else f"-D{name}={_define_value(value)}")
    return out


def _define_value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def build_flags(arch: str, defines: Iterable[Tuple[str, object]] = (), extra: Sequence[str] = ()) -> List[str]:
    return [*BASE_FLAGS, *arch_flags(arch), *define_flags(defines), *map(str, extra)]


# ---- sources ---------------------------------------------------------------------------------
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def source_closure(source: Path) -> List[Path]:
    """The source and every file it includes with quotes, found beside the including file."""
    seen: Dict[Path, None] = {}
    todo = [Path(source).resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        for name in _INCLUDE.findall(path.read_text(errors="replace")):
            dep = (path.parent / name).resolve()
            if dep.is_file():
                todo.append(dep)
    return list(seen)


def build_key(source: Path, flags: Sequence[str], nvcc_ver: str) -> str:
    h = hashlib.sha256()
    h.update(f"gemmlab-nvcc {KEY_VERSION}\0nvcc {nvcc_ver}\0".encode())
    h.update("\0".join(flags).encode())
    root = Path(source).resolve().parent
    for path in sorted(source_closure(source)):
        rel = os.path.relpath(path, root)  # names relative to the source: checkouts can move
        h.update(f"\0file {rel}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


# ---- ptxas report ----------------------------------------------------------------------------
_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> Dict[str, PtxasReport]:
    """Per-kernel resource use from the stderr of ``nvcc -Xptxas -v``.

    ptxas prints, per entry function: "Compiling entry function 'f' for 'sm_90'", then
    "Function properties for f" with "N bytes stack frame, S bytes spill stores, L bytes spill
    loads", then "Used R registers, used B barriers, X bytes smem, ...".
    """
    fields: Dict[str, Dict[str, int]] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        m = _FUNC.search(line) or _PROPS.search(line)
        if m:
            current = m.group(1)
            fields.setdefault(current, {})
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            f = fields[current]
            f["stack_frame_bytes"], f["spill_store_bytes"], f["spill_load_bytes"] = map(int, m.groups())
        m = _USED.search(line)
        if m:
            f = fields[current]
            f["registers"] = int(m.group(1))
            b, s = _BARRIERS.search(line), _SMEM.search(line)
            f["barriers"] = int(b.group(1)) if b else 0
            f["smem_bytes"] = int(s.group(1)) if s else 0
    return {name: PtxasReport(**f) for name, f in fields.items()}


# ---- compile -----------------------------------------------------------------------------------
def compile_cubin(source: os.PathLike, flags: Sequence[str], cache_folder: os.PathLike,
                  nvcc: Optional[str] = None) -> Cubin:
    """The cubin of ``source`` built with ``flags``, from the cache or compiled now.

    Raises NvccError without nvcc, CompileError (with the log's path) when nvcc fails.
    """
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise NvccError(f"nvcc not found (searched {SEARCHED})")
    source = Path(source).resolve()
    if not source.is_file():
        raise CompileError(f"kernel source {source} does not exist")
    key = build_key(source, flags, nvcc_version(nvcc))
    folder = Path(cache_folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{source.stem}-{key}"
    cubin, report, log = (folder / f"{stem}.cubin", folder / f"{stem}.ptxas.json", folder / f"{stem}.log")

    with locked(cubin):
        cached = _read_cached(cubin, report, log, key)
        if cached is not None:
            return cached
        tmp = folder / f"{stem}.{os.getpid()}.tmp.cubin"
        cmd = [nvcc, *flags, "-o", str(tmp), str(source)]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                                  cwd=str(source.parent))
        except subprocess.TimeoutExpired as e:
            _write_log(log, cmd, e.stdout or "", e.stderr or "", f"timed out after {COMPILE_TIMEOUT_S} s")
            raise CompileError(f"nvcc timed out on {source.name}; log: {log}", log) from None
        compile_s = time.perf_counter() - t0
        _write_log(log, cmd, proc.stdout, proc.stderr, f"exit status {proc.returncode}, {compile_s:.1f} s")
        if proc.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln.lower()), "")
            # the log's path first: the runner keeps one line of the reason, cut at 500 characters
            raise CompileError(f"nvcc failed on {source.name} (exit {proc.returncode}); log: {log}; "
                               f"{first.strip()[:300]}", log)
        reports = parse_ptxas(proc.stdout + "\n" + proc.stderr)
        atomic_write_bytes(report, json.dumps({name: asdict(r) for name, r in reports.items()},
                                              indent=1, sort_keys=True).encode())
        os.replace(tmp, cubin)  # last: a cubin on disk means its report is there too
        return Cubin(cubin, reports, compile_s, log, key)


def _read_cached(cubin: Path, report: Path, log: Path, key: str) -> Optional[Cubin]:
    if not (cubin.is_file() and report.is_file()):
        return None
    try:
        data = json.loads(report.read_text())
        reports = {name: PtxasReport(**fields) for name, fields in data.items()}
    except (ValueError, TypeError):
        return None  # a damaged report: compile again
    return Cubin(cubin, reports, 0.0, log, key)


def _write_log(log: Path, cmd: Sequence[str], stdout: str, stderr: str, status: str) -> None:
    text = (f"$ {' '.join(cmd)}\n# {status}\n\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n")
    atomic_write_bytes(log, text.encode())


def describe_defines(defines: Mapping[str, object]) -> str:
    """'TILE=32,PAD=1' for kernel names in result rows."""
    return ",".join(f"{k}={_define_value(v)}" for k, v in defines.items())
