// Stage 2: shared-memory tiling with TILE x TILE tiles (chapter 5.3, `sgemm32` plus guards).
//
// What it changes over stage 1 (naive): a block of TILE x TILE threads computes a TILE x TILE
//   tile of C; per K-step of TILE it stages one tile of A and one of B in shared memory, and
//   every element staged is reused TILE times from there instead of being re-read from DRAM.
//   The first __syncthreads() waits until the tiles are stored, the second until everybody has
//   read them before the next step overwrites them (91_smem_tiled_nosync.cu drops it).
// Constraints: none; any M, N, K. The chapter's sgemm32 assumes multiples of 32; here loads
//   outside A or B fill the tile with zeros (which add nothing to the sum) and stores outside
//   C are skipped. Threads outside C still load and hit both barriers, so no early return.
//   TILE in {8, 16, 32} (TILE * TILE threads per block, at most 1024).
// Modeled DRAM intensity: 2 TILE^3 FLOPs per 2 TILE^2 staged elements: TILE / elem_bytes
//   FLOP/B, so 8 FLOP/B at TILE = 32 in FP32, still under the FP32 ridge (about 20 on H100).
// Run alone: python run.py variant=smem_tiled precision=fp32 sizes=odd
//   tile sweep: python run.py -m variant=smem_tiled precision=fp32 'variant.smem_tiled.cuda.defines.TILE=8,16,32'
#include "common/gemm_common.cuh"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "TILE * TILE threads per block must be at most 1024");

extern "C" __global__ void __launch_bounds__(TILE * TILE)
smem_tiled(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const bool row_ok = row < M, col_ok = col < N;
    const TIN* a_row = A + static_cast<size_t>(row_ok ? row : 0) * K;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (row_ok && ka < K) ? gemm::to_float(a_row[ka]) : 0.0f;
        Bs[ty][tx] = (kb < K && col_ok) ? gemm::to_float(B[static_cast<size_t>(kb) * N + col]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // everybody has read the tiles before the next step overwrites them
    }
    if (row_ok && col_ok) C[static_cast<size_t>(row) * N + col] = gemm::from_float<TOUT>(acc);
}
