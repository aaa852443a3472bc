// Probe: the tensor-core throughput the legacy warp-level path (mma.sync) reaches on this GPU, the
// ceiling of stage 10 (mma_sync) next to the wgmma stages (issue 20: is 0.70x cuBLAS reachable?).
//
// What it is:
//   mma_sync_peak   every warp issues CHAINS independent mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
//                   back to back from registers, `iters` times: no memory traffic, no address math, no
//                   ldmatrix, so the time is the tensor pipe's issue rate for this instruction alone.
//                   Each of the CHAINS accumulators depends only on itself, enough independent work to
//                   hide the MMA latency; the A and B fragments are made from threadIdx once. FLOPs =
//                   2*16*8*16 per instruction; the row's pct_of_peak_at_clock is its fraction of the
//                   device's dense bf16 rate (conf/device: the wgmma peak).
//   mma_sync_peak_fp16  the same with .f16 operands (precision=fp16): stage 10's FP16 ceiling.
// The accumulators go to `out` (one value per thread) only to keep the MMAs alive.
// Constraints: blockDim.x a multiple of 32; `out` holds gridDim.x * blockDim.x floats; iters >= 1.
// Run alone: python run.py -m variant=mma_sync_peak precision=bf16,fp16 sizes=probe
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

#ifndef CHAINS
#define CHAINS 8
#endif

template <bool F16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    if constexpr (F16)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <bool F16>
__device__ __forceinline__ void peak(float* __restrict__ out, int iters) {
    // Small values (multiples of 2^-10, exact in both types): the sums stay finite whatever iters is.
    const uint32_t seed = (threadIdx.x * 2654435761u) >> 22;
    const float x = float(seed & 7) * 0x1p-10f, y = float(seed >> 3 & 7) * 0x1p-10f;
    uint32_t word;
    if constexpr (F16) {
        const __half2 v = __floats2half2_rn(x, y);
        word = *reinterpret_cast<const uint32_t*>(&v);
    } else {
        const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
        word = *reinterpret_cast<const uint32_t*>(&v);
    }
    uint32_t a[4] = {word, word ^ 0x00010000u, word ^ 0x1u, word};
    uint32_t b[2] = {word ^ 0x00010001u, word};
    float acc[CHAINS][4];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[c][r] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) mma_16816<F16>(acc[c], a, b);
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(1024) mma_sync_peak(float* __restrict__ out, int iters) {
    peak<false>(out, iters);
}

extern "C" __global__ void __launch_bounds__(1024) mma_sync_peak_fp16(float* __restrict__ out, int iters) {
    peak<true>(out, iters);
}
