"""cpu_blas: NumPy's matmul on the host BLAS, the CPU baseline (chapter 5.6).

Every layout and batch: a transposed operand is handed to ``matmul`` as the transposed view of
its stored array (no copy: NumPy passes the BLAS the transpose flag), a batch as 3-D arrays
(``matmul`` runs one GEMM per batch entry)."""
from __future__ import annotations

import numpy as np

from gemmlab import operands
from gemmlab.backends.base import Backend, Launch


class CpuBlas(Backend):
    name = "cpu_blas"
    kind = "cpu"

    def make_launch(self, point, a, b, c) -> Launch:
        ta, tb = operands.transposed(point.layout)
        a_op, b_op = operands.logical(a, ta), operands.logical(b, tb)

        def fn():
            np.matmul(a_op, b_op, out=c)

        return Launch(fn, {"kernel_name": f"numpy.matmul ({a.dtype.name}, {point.layout}"
                                          + (f", batch {point.batch})" if point.batch > 1 else ")"),
                           "library_version": f"numpy {np.__version__}"})


BACKEND = CpuBlas
