// Probe: the FP8 wgmma rate by the instruction's N (issue 30): does m64nNk32 e4m3 cost in proportion to N?
//
// Why: stage 15's 128 x 160 tiles took about the time of 128 x 192 ones at full waves, even at the same clock
// (session21e: attn_q_b t1024, both at 1980 MHz, per tile 0.98x a 192-wide tile's time, not 160/192 = 0.83), so an
// m64n160k32 wgmma may take what an m64n192k32 does. This probe times the instruction alone at each N.
//
// What it is:
//   wgmma_peak_nN   each of the block's `warpgroups` warpgroups issues, `iters` times, one k-block of stage 15
//                   (four m64nNk32 e4m3 wgmmas, K = 128, A 64 x 128 and B N x 128 bytes K-major with the
//                   128-byte swizzle, both from shared memory, into one register accumulator) and waits for
//                   it (wait_group 0: stage 15's non-overlapped promotion, without the promotion): the tensor
//                   pipe's rate for this N with that issue pattern, no global memory, no barriers between the
//                   warpgroups. FLOPs = 2 x 64 x N x 32 per instruction. The operands are small e4m3 values
//                   (1/64 .. 7/64, by position), never zero; the accumulators go to `out` (one value per
//                   thread) only to keep the wgmmas alive.
// Constraints: sm_90a; blockDim.x = 128 x warpgroups (1..3); `out` holds gridDim.x * blockDim.x floats;
// iters >= 1. Dynamic shared memory: 1 KB alignment + 64 x 128 + 256 x 128 bytes (41984: the probe passes it).
// Run alone (N by the params): python run.py -m variant=wgmma_peak precision=fp8 sizes=probe \
//   'variant.wgmma_peak.probe.params.n=64,128,160,192,256'
#include <cuda_fp8.h>
#include <cstdint>

#include "hopper/ptx.cuh"
#include "hopper/wgmma.cuh"

namespace {

constexpr int kABytes = 64 * 128;    // one m64 slice of a k-block: 64 rows of 128 bytes
constexpr int kBBytes = 256 * 128;   // the widest B tile: 256 rows of 128 bytes

template <int N>
__device__ __forceinline__ void peak(float* __restrict__ out, int iters) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = hopper::smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  // e4m3 of 1/64 .. 7/64 by position (exponent bits 0b0001..: never zero, never large): every byte written
  for (int i = threadIdx.x; i < kABytes + kBBytes; i += blockDim.x) {
    const __nv_fp8_e4m3 v(static_cast<float>(1 + (i * 2654435761u >> 29)) * 0x1p-6f);
    smem[i] = *reinterpret_cast<const unsigned char*>(&v);
  }
  hopper::fence_proxy_async_smem();  // generic-proxy writes -> visible to the wgmmas' async proxy
  __syncthreads();
  const uint32_t a_base = hopper::smem_u32(smem), b_base = a_base + kABytes;
  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    hopper::fence_accumulators(acc);
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t desc_a = hopper::make_desc_sw128(a_base + kk * 32, 16, 1024);
      const uint64_t desc_b = hopper::make_desc_sw128(b_base + kk * 32, 16, 1024);
      wgmma_m64k32<N, __nv_fp8_e4m3>(acc, desc_a, desc_b, 1);
    }
    hopper::wgmma_commit();
    hopper::wgmma_wait<0>();
  }
  hopper::fence_accumulators(acc);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s += acc[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

}  // namespace

#define GEMMLAB_WGMMA_PEAK(N)                                                                     \
  extern "C" __global__ void __launch_bounds__(384, 1) wgmma_peak_n##N(float* __restrict__ out, int iters) { \
    peak<N>(out, iters);                                                                          \
  }
GEMMLAB_WGMMA_PEAK(64)
GEMMLAB_WGMMA_PEAK(128)
GEMMLAB_WGMMA_PEAK(160)
GEMMLAB_WGMMA_PEAK(192)
GEMMLAB_WGMMA_PEAK(256)
#undef GEMMLAB_WGMMA_PEAK
