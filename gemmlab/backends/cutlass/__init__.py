"""cutlass: CUTLASS GEMM kernels emitted from Python by ``cutlass_cppgen`` (nvidia-cutlass 4.2).

A variant's ``cutlass:`` block becomes a kernel, or a search over kernels, one module a step:

- :mod:`.options`: the block's fields, checked without importing CUTLASS (``KernelOptions``).
- :mod:`.catalog`: CUTLASS's kernel list for a point's operands in a fixed order, filtered by the
  options, and the search's candidates (``Kernel``: emitted C++, cutlass_cppgen's cache key).
- :mod:`.build`: the run's kernels compiled side by side into cutlass_cppgen's sqlite cache
  (``KernelCache``), with the compile logs.
- :mod:`.compat`: what makes cutlass_cppgen usable here (CUDA 13 bindings, nvcc, no files in the
  current directory, kernels for a compute capability without a GPU).
- :mod:`.launch`: a loaded kernel bound to its operands, arguments built once (``KernelLaunch``).
- :mod:`.search`: the candidates checked and timed, then the tile scheduler's swizzle and raster
  order tried on the fastest.
- :mod:`.backend`: the ``cutlass`` Backend that runs these steps for the runner (``Cutlass``).
"""
from gemmlab.backends.cutlass.backend import Cutlass

BACKEND = Cutlass

__all__ = ["BACKEND", "Cutlass"]
