// Stage 5: the chapter's `wmma_gemm`, as written (chapter 5.5): tensor cores through WMMA.
//
// What it changes over the SIMT stages: the math moves to tensor cores. One warp owns one
//   16 x 16 tile of C and walks K in steps of 16 with 16 x 16 x 16 fragments: FP16 inputs,
//   FP32 accumulation and output. It reads its fragments straight from global memory (no
//   shared-memory tiling, no reuse between warps): stage 6 (wmma_tiled) adds that.
//   The only change from the chapter's text is `if (warpN >= N / 16) return;`: the grid is
//   rounded up to whole blocks of WARPS warps, and a warp past the last tile must not run.
// Constraints (the chapter's own): M, N and K multiples of 16 (no bounds checks), which also
//   makes every fragment pointer 32-byte aligned and every leading dimension a multiple of 8
//   halves as load_matrix_sync requires. The YAML's `requires` skip other sizes with that
//   reason. FP16 in, FP32 out (the variant sets out_dtype: float32).
// Modeled DRAM intensity: each warp reads 16 K + 16 K halves for 2 * 16 * 16 * K FLOPs,
//   16 / elem_bytes = 8 FLOP/B with FP16 inputs (the 16 x 16 tile formula T / elem_bytes).
// Run alone: python run.py variant=wmma precision=fp16 sizes=square
#include <type_traits>

#include <cuda_fp16.h>
#include <mma.h>

#include "common/gemm_common.cuh"

using namespace nvcuda;

#ifndef WARPS
#define WARPS 4  // warps per block; the chapter leaves the launch to the reader
#endif

static_assert(std::is_same<TIN, half>::value && std::is_same<TOUT, float>::value,
              "the chapter's wmma_gemm takes half inputs and writes float");

extern "C" __global__ void __launch_bounds__(32 * WARPS)
wmma_gemm(const half* A, const half* B, float* C, int M, int N, int K) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int warpM = warp % (M / 16);  // no bounds checks: M and N must be multiples of 16
    int warpN = warp / (M / 16);
    if (warpN >= N / 16) return;  // added: the last block may hold warps past the last tile
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + warpM * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + warpN * 16, N);
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + warpM * 16 * N + warpN * 16, c, N, wmma::mem_row_major);
}
