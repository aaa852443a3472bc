"""cublas: cuBLAS ``cublasGemmEx`` through CuPy's thin binding, on a handle of our own (one per
device for the process).

The compute type is chosen from the precision and recorded, so the math in force is explicit:
fp32 runs CUBLAS_COMPUTE_32F with the default math mode (true FP32, no TF32), tf32 runs
CUBLAS_COMPUTE_32F_FAST_TF32 on FP32 storage, fp16/bf16 accumulate in FP32, fp64 in FP64.
Row-major C = A @ B is computed as the column-major product C^T = B^T A^T, which reads the same
buffers with no transposition. The layout axis (gemmlab/operands.py) sets the transpose flags: a
row-major k x n B read column-major is B^T (op N, ld n); a B stored transposed (row-major n x k)
read column-major is B itself, so op T with ld k; the same for A (op N, ld k; op T, ld m). A batch
is one ``cublasGemmStridedBatchedEx`` over the contiguous stack of operands (strides m*k, k*n and
m*n elements); batch 1 stays the plain ``cublasGemmEx``.

The handle disallows reduced-precision reductions (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION):
by default cuBLAS may add split-K partial sums of an FP16/BF16 GEMM in FP16/BF16, which is not the
FP32 accumulation the precision asks for. On the H200 that put FP16 and BF16 results at 4097^3 up
to 2 and 16 times outside the element-wise error bound (1.3 M elements of BF16 C off by 1-2 ulp)
and broke exact integer sums (measure.distribution=exact), while N = 1024 was unaffected.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from gemmlab import operands
from gemmlab.backends.base import Backend, Launch

# cudaDataType_t (library_types.h) and cublasComputeType_t (cublas_api.h)
CUDA_R = {"float64": 1, "float32": 0, "float16": 2, "bfloat16": 14}
COMPUTE = {  # precision compute -> (cublasComputeType_t, name, scale dtype)
    "fp64": (70, "CUBLAS_COMPUTE_64F", np.float64),
    "fp32": (68, "CUBLAS_COMPUTE_32F", np.float32),
    "tf32": (77, "CUBLAS_COMPUTE_32F_FAST_TF32", np.float32),
    "fp16": (68, "CUBLAS_COMPUTE_32F", np.float32),
    "bf16": (68, "CUBLAS_COMPUTE_32F", np.float32),
}
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1  # cublasOperation_t
# cublasMath_t: no split-K reduction in a type narrower than the compute type
CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16


# one handle per device for the process, {device: [handle, its stream]}, as cuBLASLt's
# (gemmlab/backends/cublaslt_scaled.py): a backend is made anew for each run, and a handle per
# backend, never destroyed, added one handle (and its workspace) per run to a process that serves
# many (a sweep's shared worker). It did not explain why cuBLAS ran 2-3% slower as a sweep's second
# job than in a fresh process (h100-2026-12-06/session39d; README, isolation)
_HANDLES: dict = {}


def handle_for(device: int, stream_ptr: int) -> int:
    """The process's cuBLAS handle of ``device`` (host pointer mode, FP32 reductions), bound to
    ``stream_ptr``."""
    from cupy_backends.cuda.libs import cublas

    if device not in _HANDLES:
        h = cublas.create()
        cublas.setPointerMode(h, cublas.CUBLAS_POINTER_MODE_HOST)
        cublas.setMathMode(h, cublas.CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
        _HANDLES[device] = [h, None]
    entry = _HANDLES[device]
    if entry[1] != stream_ptr:
        cublas.setStream(entry[0], stream_ptr)
        entry[1] = stream_ptr
    return entry[0]


class Cublas(Backend):
    name = "cublas"
    kind = "gpu"

    def unavailable(self) -> Optional[str]:
        try:
            from cupy_backends.cuda.libs import cublas  # noqa: F401
        except Exception as e:
            return f"cuBLAS binding unavailable: {e}"
        return None

    def skip_reason(self, p) -> Optional[str]:
        if p.compute not in COMPUTE:
            return f"cublas backend has no compute type for {p.compute}"
        if p.in_dtype not in CUDA_R or p.out_dtype not in CUDA_R:
            return f"cublas backend does not take {p.in_dtype} -> {p.out_dtype}"
        return None

    def _handle_for(self, stream_ptr: int) -> int:
        import cupy

        return handle_for(cupy.cuda.Device().id, stream_ptr)

    def make_launch(self, p, a, b, c) -> Launch:
        import cupy
        from cupy_backends.cuda.libs import cublas

        handle = self._handle_for(cupy.cuda.get_current_stream().ptr)
        compute, compute_name, scale = COMPUTE[p.compute]
        # keep the scalars alive as long as the launch: cuBLAS reads them through host pointers
        alpha, beta = np.array(1, dtype=scale), np.array(0, dtype=scale)
        args, gemm = gemm_arguments(p, handle, alpha.ctypes.data, beta.ctypes.data,
                                    a.data.ptr, b.data.ptr, c.data.ptr, compute)
        gemm_ex = getattr(cublas, gemm)

        def fn():
            gemm_ex(*args)

        fn.keepalive = (alpha, beta, a, b, c)
        call = "cublasGemmEx" if p.batch == 1 else f"cublasGemmStridedBatchedEx batch={p.batch}"
        ops = "" if p.layout == "nn" else f" {_ops(p)}"  # nn rows keep the name they had
        what = f"{call}{ops} {compute_name} {p.in_dtype}->{p.out_dtype}"
        info = {"kernel_name": what + (" (FP32 reduction)" if p.in_dtype in ("float16", "bfloat16") else ""),
                "library_version": f"cuBLAS {cublas.getVersion(handle)}"
                + (f" NVIDIA_TF32_OVERRIDE={os.environ['NVIDIA_TF32_OVERRIDE']}"
                   if "NVIDIA_TF32_OVERRIDE" in os.environ else "")}
        return Launch(fn, info)


def _ops(p) -> str:
    """cuBLAS's (transa, transb) of the column-major call, e.g. "NN" (for a row-major nn point)."""
    ta, tb = operands.transposed(p.layout)
    return ("T" if tb else "N") + ("T" if ta else "N")


def gemm_arguments(p, handle: int, alpha: int, beta: int, a: int, b: int, c: int, compute: int):
    """The arguments of the cuBLAS call for point ``p`` on device pointers a, b, c, and the
    CuPy binding's name (``gemmEx``, or ``gemmStridedBatchedEx`` for a batch).

    Column-major, cuBLAS computes C^T (n x m, ld n) = op(X) op(Y) with X the buffer of B and Y
    that of A: a B stored as it is (row-major k x n) is B^T column-major (op N, ld n), one stored
    transposed (row-major n x k) is B column-major (op T, ld k); A likewise (op N with ld k, op T
    with ld m)."""
    ta, tb = operands.transposed(p.layout)
    m, n, k = p.m, p.n, p.k
    dtype_in, dtype_out = CUDA_R[p.in_dtype], CUDA_R[p.out_dtype]
    op_x, ld_x = (CUBLAS_OP_T, k) if tb else (CUBLAS_OP_N, n)
    op_y, ld_y = (CUBLAS_OP_T, m) if ta else (CUBLAS_OP_N, k)
    if p.batch == 1:
        return ((handle, op_x, op_y, n, m, k, alpha, b, dtype_in, ld_x, a, dtype_in, ld_y, beta,
                 c, dtype_out, n, compute, CUBLAS_GEMM_DEFAULT), "gemmEx")
    return ((handle, op_x, op_y, n, m, k, alpha, b, dtype_in, ld_x, k * n, a, dtype_in, ld_y, m * k,
             beta, c, dtype_out, n, m * n, p.batch, compute, CUBLAS_GEMM_DEFAULT), "gemmStridedBatchedEx")


BACKEND = Cublas
