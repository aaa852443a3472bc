// Pitfall (chapter 5.7, claim C14b): reading a shared tile by column, 32-way bank conflicts,
// and the padded twin that removes them. Not a ladder stage: left out of default sweeps.
//
// What it changes over stage 2 (smem_tiled): B's tile is stored transposed, Bt[col][k], and the
//   inner loop reads Bt[threadIdx.x][k]. The index that varies across a warp (threadIdx.x) now
//   picks the *row* of the tile: the 32 lanes read one column, 32 addresses TILE + PAD floats
//   apart. With PAD = 0 and TILE = 32 they all fall in the same bank, a 32-way conflict that
//   serialises every read (the chapter's `As[k][threadIdx.y]` example, with the thread roles
//   as CUDA lays warps out: threadIdx.x is the fast index). The transposed store into Bt has
//   the same conflict. PAD = 1 (the `[T][T+1]` twin, variant smem_tiled_colread_padded) makes
//   the row stride 33 words, so the 32 lanes hit 32 different banks: same product, same
//   global traffic, only the bank conflicts differ. Compare the two rows (and ncu's
//   l1tex__data_bank_conflicts_pipe_lsu_mem_shared) to measure the claim.
// Constraints: none; any M, N, K, guards as in stage 2. TILE * TILE threads per block.
// Modeled DRAM intensity: TILE / elem_bytes FLOP/B, as stage 2 (bank conflicts cost shared
//   memory bandwidth, not DRAM traffic).
// Run alone: python run.py variant=[smem_tiled_colread,smem_tiled_colread_padded] precision=fp32 sizes=square
#include "common/gemm_common.cuh"

#ifndef TILE
#define TILE 32
#endif
#ifndef PAD
#define PAD 0
#endif
static_assert(TILE * TILE <= 1024, "TILE * TILE threads per block must be at most 1024");

extern "C" __global__ void __launch_bounds__(TILE * TILE)
smem_tiled_colread(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bt[TILE][TILE + PAD];  // Bt[c][k] = B[k0 + k][col0 + c]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    const bool row_ok = row < M, col_ok = col < N;
    const TIN* a_row = A + static_cast<size_t>(row_ok ? row : 0) * K;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (row_ok && ka < K) ? gemm::to_float(a_row[ka]) : 0.0f;
        // coalesced global read, transposed (column) store
        Bt[tx][ty] = (kb < K && col_ok) ? gemm::to_float(B[static_cast<size_t>(kb) * N + col]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bt[tx][k];  // column read across the warp
        __syncthreads();
    }
    if (row_ok && col_ok) C[static_cast<size_t>(row) * N + col] = gemm::from_float<TOUT>(acc);
}
