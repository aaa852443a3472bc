// Pitfall (chapter 5.7, claim C14f): stage 2 without its second __syncthreads(). Wrong on purpose.
//
// What it changes over stage 2 (smem_tiled): the barrier after the inner loop is gone. A warp
//   that finishes its dot products for one K-step goes on to store the next step's tiles into
//   As/Bs while slower warps of the block are still reading the current ones, so they multiply
//   a mix of two K-steps. Which elements get mixed depends on warp scheduling, so the error
//   changes from run to run on the same inputs; compute-sanitizer --tool racecheck reports the
//   shared-memory hazard. Left out of default sweeps; its FP64 check is expected to fail.
// Constraints: none beyond stage 2's (guards for any M, N, K); TILE * TILE threads per block.
// Modeled DRAM intensity: TILE / elem_bytes FLOP/B, as stage 2.
// Run alone: python run.py variant=smem_tiled_nosync precision=fp32 sizes=square run.fail_on_error=false
#include "common/gemm_common.cuh"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "TILE * TILE threads per block must be at most 1024");

extern "C" __global__ void __launch_bounds__(TILE * TILE)
smem_tiled_nosync(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
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
        // the second __syncthreads() of stage 2 belongs here
    }
    if (row_ok && col_ok) C[static_cast<size_t>(row) * N + col] = gemm::from_float<TOUT>(acc);
}
