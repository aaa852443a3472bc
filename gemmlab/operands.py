"""How a point's A and B are stored: the layout axis (``nn nt tn tt``) and the batch axis.

The product is always C = A @ B of the *logical* A (m x k) and B (k x n), batch of them when
``batch > 1``; the layout says how each operand sits in memory, BLAS-style, from the row-major
point of view of the rest of the harness:

- first letter A, second letter B; ``n``: stored as it is (A row-major m x k, B row-major k x n);
  ``t``: stored transposed (A as a row-major k x m array, B as a row-major n x k array), i.e. the
  logical operand is ``stored.T``, which is the same memory as the operand in column-major order.
- ``nt`` is what a linear layer with PyTorch's weight layout computes: X (T x in) times W^T, with
  W kept as (out, in): B = W^T is stored transposed.
- a batch of ``batch`` GEMMs is strided: each operand is one contiguous array of ``batch`` equal
  matrices, the batch index first (stride m*k, k*n, m*n elements), as cuBLAS's strided batched
  GEMM and NumPy's 3-D matmul read it. C is always row-major (batch, m, n).

The executors draw the logical operands (the same random values whatever the layout, so the
inputs of an ``nn`` point are those of every other layout of it), store them with :func:`store`,
and check C against the FP64 product of the logical ones.
"""
from __future__ import annotations

from typing import Tuple

LAYOUTS = ("nn", "nt", "tn", "tt")
DEFAULT_LAYOUT = "nn"


def transposed(layout: str) -> Tuple[bool, bool]:
    """(A stored transposed, B stored transposed) for a layout name."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r} (one of {', '.join(LAYOUTS)})")
    return layout[0] == "t", layout[1] == "t"


def logical_shapes(m: int, n: int, k: int, batch: int = 1):
    """Shapes of the logical A and B (a leading batch dimension only when batch > 1)."""
    lead = (batch,) if batch > 1 else ()
    return lead + (m, k), lead + (k, n)


def stored_shapes(m: int, n: int, k: int, layout: str = DEFAULT_LAYOUT):
    """Shapes of A and B as the layout stores them (one GEMM): (m, k) or (k, m), (k, n) or (n, k)."""
    ta, tb = transposed(layout)
    return ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))


def output_shape(m: int, n: int, batch: int = 1):
    return ((batch,) if batch > 1 else ()) + (m, n)


def store(xp, x, transpose: bool):
    """The operand as it is stored: ``x`` itself, or a contiguous copy of its transpose (the last
    two axes swapped)."""
    return xp.ascontiguousarray(xp.swapaxes(x, -1, -2)) if transpose else x


def logical(x, transpose: bool):
    """The logical operand of a stored one (a view, no copy): works for NumPy, CuPy and torch."""
    return x.swapaxes(-1, -2) if transpose else x
