"""References that share no rounding with the FP64 GEMM they check (gemmlab/measure/check.py's
``gemm_reference`` picks one where the default FP64 reference would be the point's own library call):
the error-free split product (Ozaki's scheme) on the CPU, the host's BLAS for cuBLAS's FP64."""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple


def split_product(xp, a64, b64, bits: int = 53):
    """A @ B from error-free pieces (Ozaki's scheme): each row of A and column of B is cut into
    integer slices small enough that every slice product and its K-long sum is exact in FP64, so
    the BLAS that multiplies them only moves exact integers; the slice products are then summed
    from the smallest up. The result is within a few units of FP64 rounding of the exact product
    and shares no rounding with a plain FP64 GEMM of A and B."""
    k = a64.shape[1]
    t = max(1, (53 - math.ceil(math.log2(max(k, 2)))) // 2)  # slice bits: 2t + log2(K) <= 53
    n = math.ceil((bits + 8) / t)  # slices: every bit down to 2^-(53+8) of a row's largest value
    pa, ea = _slices(xp, a64, n, t, axis=1)
    pb, eb = _slices(xp, b64.T, n, t, axis=1)
    terms = []
    for s in range(n):
        for q in range(n - s):  # s + q < n: the cross terms below keep FP64 accuracy
            terms.append((s + q, s, q))
    terms.sort(reverse=True)  # smallest pieces first
    out = xp.zeros((a64.shape[0], b64.shape[1]), dtype=xp.float64)
    for _, s, q in terms:
        prod = xp.matmul(pa[s], pb[q].T)  # exact: integers below 2^53
        out += prod * xp.ldexp(1.0, -(t * (s + q + 2)))
    return out * xp.ldexp(1.0, ea)[:, None] * xp.ldexp(1.0, eb)[None, :]


def batched(xp, product, a64, b64):
    """``product`` (of two matrices) applied to each GEMM of a batch: 3-D operands, or one of them
    2-D and shared by every GEMM (as matmul broadcasts it)."""
    if a64.ndim == 2 and b64.ndim == 2:
        return product(xp, a64, b64)
    counts = {x.shape[0] for x in (a64, b64) if x.ndim == 3}
    if len(counts) > 1:
        raise ValueError(f"batches of {a64.shape[0]} and {b64.shape[0]} GEMMs")
    (n,) = counts
    a3, b3 = (x if x.ndim == 3 else [x] * n for x in (a64, b64))
    return xp.stack([product(xp, a3[i], b3[i]) for i in range(n)])


def _slices(xp, x, n: int, t: int, axis: int):
    """x (rows x K) as n integer matrices P_s with x = 2^e * sum_s P_s 2^(-t (s+1)) (+ a tail
    below 2^(e - n t)); e per row."""
    amax = xp.abs(x).max(axis=axis)
    e = xp.where(amax > 0, xp.ceil(xp.log2(xp.where(amax > 0, amax, 1.0))), 0).astype(xp.int64)
    v = x * xp.ldexp(1.0, -e)[:, None]  # |v| <= 1, exact
    pieces, prev = [], xp.zeros_like(v)
    for s in range(1, n + 1):
        q = xp.trunc(v * float(2.0 ** (t * s)))
        pieces.append(q - prev * float(2.0 ** t))
        prev = q
    return pieces, e


def independent_reference(kind: str, backend: str, compute: str) -> Optional[Tuple[str, Any]]:
    """(name, reference function) where the default FP64 reference would be the point's own
    library call, else None. GPU: cuBLAS FP64 (through CuPy) checks everything but cuBLAS's own
    FP64 (and the probes that call it), which the host BLAS checks instead. CPU: NumPy's FP64 BLAS
    checks everything but its own FP64, which the error-free split product checks."""
    if compute != "fp64":
        return None
    if kind == "gpu" and backend in ("cublas", "cublaslt", "gpu_probe"):
        return "NumPy FP64 on the host (host BLAS, not cuBLAS)", _host_matmul
    if kind == "cpu":
        return "error-free split product (Ozaki slices, exact in FP64)", None
    return None


def _host_matmul(a64, b64):
    import cupy
    import numpy as np

    return cupy.asarray(np.matmul(cupy.asnumpy(a64), cupy.asnumpy(b64)))
