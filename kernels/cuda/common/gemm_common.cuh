// Shared helpers for the hand-written GEMM ladder (kernels/cuda/0*_*.cu, 9*_*.cu).
//
// Every kernel has the same ABI, so one launcher (gemmlab/backends/cuda_kernels.py) serves all:
//   extern "C" __global__ void <entry>(const TIN* A, const TIN* B, TOUT* C, int M, int N, int K)
// A is M x K, B is K x N, C = A * B is M x N, all row-major and densely packed. TIN and TOUT
// come from the point's storage types as -DTIN=... -DTOUT=...; tile parameters come as -D flags
// from the variant's YAML (`cuda.defines`).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef TIN
#define TIN float
#endif
#ifndef TOUT
#define TOUT float
#endif

namespace gemm {

__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

// ---- element conversions: every kernel accumulates in float ------------------------------
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// True when p is aligned to `bytes` (the vectorised paths also check this, not only the sizes).
__device__ __forceinline__ bool aligned(const void* p, unsigned bytes) {
    return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// ---- cp.async (sm_80+): global -> shared without a register round trip -------------------
// With src_bytes < copy size the rest of the destination is zero-filled; src_bytes = 0 reads
// nothing, which is how the loaders zero-fill the parts of a tile that lie outside the matrix
// (the source pointer is then clamped to a valid address anyway).
#if defined(GEMMLAB_HOST_EMULATION)
// Host emulation (tests/test_cuda_kernels.py runs the kernels on the CPU): synchronous copies
// that check the alignment the hardware requires.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool in_bounds) {
    gemm_host::copy_or_zero(smem, gmem, 4, in_bounds);
}
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool in_bounds) {
    gemm_host::copy_or_zero(smem, gmem, 16, in_bounds);
}
__device__ __forceinline__ void cp_async_commit() {}
template <int Pending> __device__ __forceinline__ void cp_async_wait() {}
#else
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 4-byte copy through L1 (.ca: the only cache mode allowed for 4- and 8-byte copies).
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool in_bounds) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(in_bounds ? 4 : 0));
}

// 16-byte copy that bypasses L1 (.cg): tiles are reused from shared memory, not from L1.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool in_bounds) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(in_bounds ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most `Pending` committed groups of this thread are still in flight.
template <int Pending> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}
#endif

}  // namespace gemm

// Kernels that take dynamic shared memory declare how much they need, so the launcher can
// refuse a YAML `smem_bytes` rule that gives less (an out-of-range shared access would
// otherwise poison the CUDA context for every later point of the run).
#define GEMMLAB_DECLARE_DYNAMIC_SMEM(bytes) \
    extern "C" {                             \
    __device__ int gemmlab_dynamic_smem_bytes = (bytes); \
    }

// The dynamic shared-memory array of a kernel (`extern __shared__ T name[]` on the device),
// 128-byte aligned: WMMA fragment pointers need 32 bytes, 16-byte copies 16.
#if defined(GEMMLAB_HOST_EMULATION)
#define GEMMLAB_DYNAMIC_SMEM(T, name) T* name = reinterpret_cast<T*>(gemm_host::dynamic_smem)
#else
#define GEMMLAB_DYNAMIC_SMEM(T, name) extern __shared__ __align__(128) T name[]
#endif
