"""cublas: cuBLAS ``cublasGemmEx`` through CuPy's thin binding, on a handle of our own.

The compute type is chosen from the precision and recorded, so the math in force is explicit:
fp32 runs CUBLAS_COMPUTE_32F with the default math mode (true FP32, no TF32), tf32 runs
CUBLAS_COMPUTE_32F_FAST_TF32 on FP32 storage, fp16/bf16 accumulate in FP32, fp64 in FP64.
Row-major C = A @ B is computed as the column-major product C^T = B^T A^T, which reads the same
buffers with no transposition.

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
CUBLAS_OP_N = 0
# cublasMath_t: no split-K reduction in a type narrower than the compute type
CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16


class Cublas(Backend):
    name = "cublas"
    kind = "gpu"

    def __init__(self, cfg):
        super().__init__(cfg)
        self._handle = None
        self._stream_ptr = None

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
        from cupy_backends.cuda.libs import cublas

        if self._handle is None:
            self._handle = cublas.create()
            cublas.setPointerMode(self._handle, cublas.CUBLAS_POINTER_MODE_HOST)
            cublas.setMathMode(self._handle, cublas.CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
        if stream_ptr != self._stream_ptr:
            cublas.setStream(self._handle, stream_ptr)
            self._stream_ptr = stream_ptr
        return self._handle

    def make_launch(self, p, a, b, c) -> Launch:
        import cupy
        from cupy_backends.cuda.libs import cublas

        handle = self._handle_for(cupy.cuda.get_current_stream().ptr)
        compute, compute_name, scale = COMPUTE[p.compute]
        # keep the scalars alive as long as the launch: cuBLAS reads them through host pointers
        alpha, beta = np.array(1, dtype=scale), np.array(0, dtype=scale)
        ta, tc = CUDA_R[p.in_dtype], CUDA_R[p.out_dtype]
        m, n, k = p.m, p.n, p.k
        args = (handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, alpha.ctypes.data, b.data.ptr, ta, n,
                a.data.ptr, ta, k, beta.ctypes.data, c.data.ptr, tc, n, compute, CUBLAS_GEMM_DEFAULT)
        gemm_ex = cublas.gemmEx

        def fn():
            gemm_ex(*args)

        fn.keepalive = (alpha, beta, a, b, c)
        info = {"kernel_name": f"cublasGemmEx {compute_name} {p.in_dtype}->{p.out_dtype} (FP32 reduction)"
                               if p.in_dtype in ("float16", "bfloat16") else
                               f"cublasGemmEx {compute_name} {p.in_dtype}->{p.out_dtype}",
                "library_version": f"cuBLAS {cublas.getVersion(handle)}"
                + (f" NVIDIA_TF32_OVERRIDE={os.environ['NVIDIA_TF32_OVERRIDE']}"
                   if "NVIDIA_TF32_OVERRIDE" in os.environ else "")}
        return Launch(fn, info)


BACKEND = Cublas
