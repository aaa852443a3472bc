"""Memory-bound GPU probes: ``copy`` (the memory roof), ``vecadd`` (the hand-written vector add of
the variant's ``probe.source``, kernels/cuda/probes/streams.cu) and ``gemv`` (cuBLAS ?gemv)."""
from __future__ import annotations

import math

import numpy as np

from gemmlab import dtypes
from gemmlab.backends.probes.common import (Probe, checked, elementwise, need_memory, random_array, rechecked,
                                            timed_fields)

VECTOR_BLOCK = 256  # threads per block of the vector add
BLOCKS_PER_SM = 8  # vector add: 8 x 256 threads fill an SM (2048 threads)
CUBLAS_OP_T = 1  # cublasOperation_t


class VectorProbe(Probe):
    precisions = ("fp32", "fp64")

    def skip(self, p, params):
        if p.n != 1 or p.k != 1:
            return f"{self.op} is a vector probe of length m: the shape must be [m, 1, 1]"
        return super().skip(p, params)


class Copy(VectorProbe):
    """cudaMemcpyAsync device to device of m elements: the memory roof. bytes_min counts the
    bytes read plus the bytes written (2 x m x itemsize)."""

    op = "copy"

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        nbytes = p.m * dtypes.itemsize(p.in_dtype)
        need_memory(2 * nbytes + 3 * 8 * p.m)
        rng = cp.random.default_rng(seed)
        src = random_array(cp, rng, (p.m,), p.in_dtype, ex)
        dst = cp.empty_like(src)
        runtime, stream = cp.cuda.runtime, ex.stream.ptr

        def fn():
            runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, runtime.memcpyDeviceToDevice, stream)

        dst.fill(float("nan"))
        fn()
        ref = elementwise(cp, p, src.astype(cp.float64), cp.zeros(p.m), 0)  # a copy is exact
        row = {"flops": 0, "bytes_min": 2 * nbytes, "intensity": None,
               "kernel_name": "cudaMemcpyAsync DeviceToDevice"}
        failed = checked(row, ref.verify(dst))
        if failed:
            return failed
        timed = ex.timer.measure([[fn]])[0]
        row.update(timed_fields(ex, timed, 0, {"buffer_bytes": nbytes}))
        return rechecked(row, ref, dst)


class VecAdd(VectorProbe):
    """c = a + b over m elements, the hand-written kernel of kernels/cuda/probes/streams.cu.
    One add per element (flops = m); 3 m elements move (bytes_min = 3 m itemsize)."""

    op = "vecadd"
    compiles = True

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        item = dtypes.itemsize(p.in_dtype)
        need_memory(3 * p.m * item + 4 * 8 * p.m)
        kern = backend.function(ex, p, f"vecadd_{p.in_dtype}")
        rng = cp.random.default_rng(seed)
        a = random_array(cp, rng, (p.m,), p.in_dtype, ex)
        b = random_array(cp, rng, (p.m,), p.in_dtype, ex)
        c = cp.empty_like(a)
        vec = 16 // item
        blocks = max(1, min(math.ceil(p.m / vec / VECTOR_BLOCK), BLOCKS_PER_SM * ex.dev["sm_count"]))
        args = (a, b, c, np.int64(p.m))

        def fn():
            kern((blocks,), (VECTOR_BLOCK,), args)

        c.fill(float("nan"))
        fn()
        # the FP64 sum of the two inputs is exact: the error left is the output's own rounding
        a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
        ref = elementwise(cp, p, a64 + b64, cp.abs(a64) + cp.abs(b64), 1)
        del a64, b64
        row = {"flops": p.m, "bytes_min": 3 * p.m * item,
               "intensity": p.m / (3 * p.m * item), "kernel_name": f"vecadd_{p.in_dtype}"}
        failed = checked(row, ref.verify(c))
        if failed:
            return failed
        timed = ex.timer.measure([[fn]])[0]
        row.update(timed_fields(ex, timed, p.m, {"blocks": blocks, "threads_per_block": VECTOR_BLOCK}))
        return rechecked(row, ref, c)


class Gemv(Probe):
    """y = A x through cuBLAS sgemv/dgemv, A row-major m x k (the point's shape is [m, 1, k]).
    Row-major A is the column-major k x m matrix A^T, so the call is gemv(T) on it."""

    op = "gemv"
    precisions = ("fp32", "fp64")

    def skip(self, p, params):
        if p.n != 1 or p.k == 1:
            return "gemv multiplies an m x k matrix (k > 1) by a k-vector: the shape must be [m, 1, k]"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        from cupy_backends.cuda.libs import cublas

        cp = ex.cp
        item = dtypes.itemsize(p.in_dtype)
        need_memory(item * (p.m * p.k + p.k + p.m) + 8 * (p.m * p.k + p.k + 3 * p.m))
        rng = cp.random.default_rng(seed)
        a = random_array(cp, rng, (p.m, p.k), p.in_dtype, ex)
        x = random_array(cp, rng, (p.k,), p.in_dtype, ex)
        y = cp.empty((p.m,), dtype=a.dtype)
        handle = backend.blas_handle(ex)
        gemv = cublas.sgemv if p.in_dtype == "float32" else cublas.dgemv
        # CuPy's binding takes alpha and beta as host pointers (pointer mode host), not values:
        # passing 1.0 itself segfaulted on the H200.
        alpha, beta = np.ones(1, dtype=a.dtype), np.zeros(1, dtype=a.dtype)
        args = (handle, CUBLAS_OP_T, p.k, p.m, alpha.ctypes.data, a.data.ptr, p.k, x.data.ptr, 1,
                beta.ctypes.data, y.data.ptr, 1)

        def fn():
            gemv(*args)

        fn.keepalive = (alpha, beta)

        y.fill(float("nan"))
        fn()
        ref = ex.reference(p, a, x[:, None])  # a GEMM with n = 1: the same reference rules
        flops, nbytes = 2 * p.m * p.k, item * (p.m * p.k + p.k + p.m)
        row = {"flops": flops, "bytes_min": nbytes, "intensity": flops / nbytes,
               "kernel_name": f"cublas{'S' if item == 4 else 'D'}gemv (T)",
               "library_version": f"cuBLAS {cublas.getVersion(handle)}"}
        failed = checked(row, ref.verify(y))
        if failed:
            return failed
        timed = ex.timer.measure([[fn]])[0]
        row.update(timed_fields(ex, timed, flops))
        return rechecked(row, ref, y)
