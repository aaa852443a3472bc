"""Make ``cutlass_cppgen`` (nvidia-cutlass 4.2.0.0) usable on CUDA 13, and keep its files out of the cwd.

Everything the project does to CUTLASS's Python package lives here, so no user meets these edges:

1. **cuda-bindings 13 names.** cutlass_cppgen imports ``cuda.cuda``, ``cuda.cudart``, ``cuda.nvrtc``
   and reads ``cuda.__version__``; cuda-bindings 13 removed them (the modules now live in
   ``cuda.bindings.driver``, ``.runtime`` and ``.nvrtc``). :func:`apply_cuda_bindings_shim` registers
   the new modules under the old names in ``sys.modules`` and sets ``cuda.__version__``. It must run
   before cutlass_cppgen is imported; :func:`import_cutlass` does that.
2. **nvcc.** cutlass_cppgen finds nvcc with ``/usr/bin/which`` and ``nvcc --version`` on the PATH and
   fails with a bare ``Exception`` when it is missing. :func:`use_nvcc` takes the nvcc of
   :func:`gemmlab.backends.nvcc.find_nvcc` (the one the cuda backend compiles with), puts its
   toolkit on the PATH and in ``CUDA_INSTALL_PATH``, and raises :class:`NvccNotFound`, which says
   what to install or set.
3. **An import that depends on the command line.** cutlass_library does not import its kernel
   generator when ``-m`` is in ``sys.argv``, so ``pytest -m gpu`` or ``run.py -m`` (multirun) would
   find no kernels; :func:`import_cutlass` imports it explicitly.
4. **Files in the current directory.** On import it creates the sqlite cache ``compiled_cache.db``
   in the cwd, and loading a cached kernel writes a temporary ``host_func*.so`` there (through a
   process-wide ``tempfile.tempdir = "./"``). :func:`import_cutlass` imports it from inside the cache
   folder, points the cache at ``<cache folder>/compiled_cache.db`` and loads host libraries from
   ``<cache folder>/tmp``. (Compiling is done by :mod:`gemmlab.backends.cutlass.build`, in its own
   build folders, never by cutlass_cppgen's compile path, which also writes into the cwd.)
5. **No GPU needed to list and emit kernels.** cutlass_cppgen builds its kernel registry for the
   compute capability of device 0 (and for every architecture and conv too, about 9 s).
   :func:`use_target_cc` installs a registry for a given cc that generates only the GEMM kernels of an
   architecture when first asked (about 1.5 s each), so C++ for sm_90 can be emitted on a CPU machine.
"""
from __future__ import annotations

import ctypes
import importlib
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

from gemmlab.backends import nvcc

_OLD_NAMES = {"cuda.cuda": "cuda.bindings.driver",
              "cuda.cudart": "cuda.bindings.runtime",
              "cuda.nvrtc": "cuda.bindings.nvrtc"}

_lock = threading.Lock()
_state = {"cache_dir": None, "target_cc": None}


class NvccNotFound(RuntimeError):
    """nvcc is needed to compile (and to list) CUTLASS kernels and was not found."""


class CutlassUnavailable(RuntimeError):
    """The nvidia-cutlass or cuda-python packages are missing or unusable."""


# -- 1. cuda-bindings 13 -------------------------------------------------------------------------
def apply_cuda_bindings_shim() -> None:
    """Register ``cuda.bindings.{driver,runtime,nvrtc}`` as ``cuda.{cuda,cudart,nvrtc}``; idempotent."""
    try:
        import cuda
        import cuda.bindings
    except ImportError as e:
        raise CutlassUnavailable(
            "cutlass_cppgen needs the CUDA Python bindings: pip install 'cuda-python>=13,<14' "
            f"({e})") from e
    for old, new in _OLD_NAMES.items():
        if old in sys.modules:
            continue
        try:
            module = importlib.import_module(old)  # cuda-bindings 12 still ships the old names
        except ImportError:
            module = importlib.import_module(new)
        sys.modules[old] = module
        setattr(cuda, old.split(".", 1)[1], module)
    if not getattr(cuda, "__version__", None):
        cuda.__version__ = cuda.bindings.__version__


# -- 2. nvcc -------------------------------------------------------------------------------------
def use_nvcc() -> Path:
    """The nvcc to compile with, :func:`gemmlab.backends.nvcc.find_nvcc`'s (the cuda backend's too);
    also makes it the one cutlass_cppgen finds (PATH, CUDA_INSTALL_PATH)."""
    found = nvcc.find_nvcc()
    if found is None:
        looked = ", ".join(str(c) for c in nvcc.nvcc_candidates()) or "(no candidate)"
        raise NvccNotFound(
            "the cutlass backend compiles kernels with nvcc, and nvcc was not found (looked at: "
            f"{looked}). Install the CUDA toolkit 13 (nvcc) or set CUDA_INSTALL_PATH to its root.")
    found = Path(found)
    # cutlass_cppgen runs `nvcc --version` from the PATH (its kernel list follows the version):
    # that must be this nvcc, also where the PATH has another one first (a second toolkit)
    if shutil.which("nvcc") != str(found):
        os.environ["PATH"] = str(found.parent) + os.pathsep + os.environ.get("PATH", "")
    os.environ["CUDA_INSTALL_PATH"] = str(found.parent.parent)
    return found


# -- 3. import, cache file, temporary host libraries ----------------------------------------------
def import_cutlass(cache_dir: os.PathLike):
    """cutlass_cppgen, shimmed, with its cache in ``cache_dir``; safe to call again (moves the cache)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _lock:
        apply_cuda_bindings_shim()
        use_nvcc()
        if "cutlass_cppgen" not in sys.modules:
            cwd = os.getcwd()
            os.chdir(cache_dir)  # its ArtifactManager creates compiled_cache.db in the cwd on import
            try:
                importlib.import_module("cutlass_cppgen")
            except ImportError as e:
                raise CutlassUnavailable(
                    f"pip install nvidia-cutlass==4.2.0.0 (cutlass_cppgen did not import: {e})") from e
            finally:
                os.chdir(cwd)
        cutlass_cppgen = sys.modules["cutlass_cppgen"]
        # cutlass_library skips importing its kernel generator when '-m' is in sys.argv (meant for
        # `python -m cutlass_library.generator`), which `pytest -m gpu` and `run.py -m` also trigger.
        importlib.import_module("cutlass_library.generator")
        # The module, not the ArtifactManager instance that cutlass_cppgen.backend also calls `compiler`.
        compiler_module = importlib.import_module("cutlass_cppgen.backend.compiler")

        if _state["cache_dir"] != cache_dir:
            db = cache_dir / "compiled_cache.db"
            _create_cache_table(db)
            compiler_module.CACHE_FILE = str(db)  # read on every cache lookup and insert
            compiler_module.CDLLBin = _host_library_loader(cache_dir / "tmp")
            _state["cache_dir"] = cache_dir
        if cutlass_cppgen._nvcc_version is None:
            # The kernel list depends on the toolkit version; it is otherwise set only when a GPU
            # context is first made, so a CPU machine would list another set of kernels.
            cutlass_cppgen._nvcc_version = cutlass_cppgen.nvcc_version()
        return cutlass_cppgen


def cache_file() -> Optional[Path]:
    """The sqlite file cutlass_cppgen reads and writes now (None before :func:`import_cutlass`)."""
    d = _state["cache_dir"]
    return None if d is None else Path(d) / "compiled_cache.db"


def _create_cache_table(db: Path) -> None:
    # The same table cutlass_cppgen's ArtifactManager creates, so its loader reads our rows.
    with sqlite3.connect(db, timeout=60) as con:
        con.execute("""CREATE TABLE IF NOT EXISTS compiled_operations(op_key TEXT NOT NULL UNIQUE,
                       cubin BLOB NOT NULL, hostbin BLOB NOT NULL, op_name TEXT NOT NULL,
                       op_attrs TEXT NOT NULL)""")


def _host_library_loader(tmp_dir: Path):
    """A stand-in for cutlass_cppgen's CDLLBin that writes the library under ``tmp_dir``, not ./."""
    def cdll_from_bytes(host_binary: bytes):
        tmp_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=tmp_dir, prefix="host_func", suffix=".so") as f:
            f.write(host_binary)
            f.flush()
            return ctypes.CDLL(f.name)  # the mapping outlives the unlinked file

    return cdll_from_bytes


# -- 4. kernels for a compute capability without a GPU ------------------------------------------
def use_target_cc(cc: int) -> None:
    """List and emit kernels for compute capability ``cc`` (90 = Hopper) whatever GPU is present."""
    import cutlass_cppgen
    import cutlass_library
    from cutlass_cppgen.library_defaults import ArchOptions, OptionRegistry

    with _lock:
        if _state["target_cc"] == cc and cutlass_cppgen._option_registry is not None:
            return

        class LazyGemmRegistry(OptionRegistry):
            """OptionRegistry that generates one architecture's kernels when first asked for them."""

            def __init__(self, target_cc: int):  # noqa: D401 - no eager generation, unlike the base
                self.target_cc = target_cc
                self.registry = {}
                self._gen_lock = threading.Lock()

            def options_for_cc(self, kernel_cc, op_kind=cutlass_library.OperationKind.Gemm):
                with self._gen_lock:
                    per_cc = self.registry.setdefault(kernel_cc, {})
                    if op_kind not in per_cc:
                        kinds = [cutlass_library.GemmKind.Universal, cutlass_library.GemmKind.Universal3x]
                        per_cc[op_kind] = ArchOptions(self.target_cc, kernel_cc, op_kind, kinds)
                    return per_cc[op_kind]

        cutlass_cppgen._option_registry = LazyGemmRegistry(cc)
        _state["target_cc"] = cc
