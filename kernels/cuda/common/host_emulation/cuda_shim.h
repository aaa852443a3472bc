// Host emulation of the small part of CUDA that the hand-written GEMM kernels use, so that
// tests/test_cuda_kernels.py can run them on a machine without a GPU and catch indexing, guard
// and launch-rule mistakes before any GPU time is spent. Not a simulator: every CUDA thread is
// a std::thread, blocks run one after another, __syncthreads() is a std::barrier, cp.async is
// a synchronous copy, and WMMA fragments hold whole tiles (see mma.h beside this file).
// Force-included (g++ -include cuda_shim.h) with -DGEMMLAB_HOST_EMULATION by driver.cpp's build.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Static shared arrays become function statics: one copy shared by the block's threads (blocks
// run one at a time). Dynamic shared memory goes through GEMMLAB_DYNAMIC_SMEM.
#define __shared__ static

struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
using dim3 = uint3;
// No alignas(16): the kernels reinterpret register arrays as float4, which only the device
// keeps aligned; shared and global alignment is checked where it matters (copy_or_zero, WMMA).
struct float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

extern thread_local uint3 threadIdx;
extern uint3 blockIdx, blockDim, gridDim;

namespace gemm_host {
extern unsigned char* dynamic_smem;
extern std::size_t dynamic_smem_size;  // the launch's dynamic shared memory (%dynamic_smem_size)
extern std::barrier<>* block_barrier;
extern std::vector<std::unique_ptr<std::barrier<>>>* warp_barriers;

[[noreturn]] inline void fail(const char* what, const void* p) {
    std::fprintf(stderr, "host emulation: %s (address %p)\n", what, p);
    std::abort();
}

inline void copy_or_zero(void* dst, const void* src, std::size_t bytes, bool in_bounds) {
    if ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) % bytes)
        fail("cp.async with a misaligned address", dst);
    if (in_bounds)
        std::memcpy(dst, src, bytes);
    else
        std::memset(dst, 0, bytes);
}

inline unsigned linear_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
}  // namespace gemm_host

inline void __syncthreads() { gemm_host::block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { (*gemm_host::warp_barriers)[gemm_host::linear_tid() / 32]->arrive_and_wait(); }
[[noreturn]] inline void __trap() { std::abort(); }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }
// Blocks run one after another, so a fence has nothing to order; the atomic is a real one all the same.
inline void __threadfence() {}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
