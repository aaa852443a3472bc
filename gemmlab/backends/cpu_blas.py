"""cpu_blas: NumPy's matmul on the host BLAS, the CPU baseline (chapter 5.6)."""
from __future__ import annotations

import numpy as np

from gemmlab.backends.base import Backend, Launch


class CpuBlas(Backend):
    name = "cpu_blas"
    kind = "cpu"

    def make_launch(self, point, a, b, c) -> Launch:
        def fn():
            np.matmul(a, b, out=c)

        return Launch(fn, {"kernel_name": f"numpy.matmul ({a.dtype.name})",
                           "library_version": f"numpy {np.__version__}"})


BACKEND = CpuBlas
