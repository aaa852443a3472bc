// Negative control: one 16 x 16 tile of C written transposed. This kernel is wrong on purpose:
// it exists to show that the element-wise check (gemmlab/check.py) fails it.
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body it shares with the other
//   wrong_* controls, common/wrong_gemm.cuh): the store of the tile of C at rows
//   (M/2)/16*16 .. +16 and columns (N/2)/16*16 .. +16 swaps row and column within the tile (an
//   index swap), so its off-diagonal elements hold another element's value; all finite, all written.
// Constraints: any M, N, K; the tile exists (and the bug shows) where M >= 16 and N >= 16, at every
//   size >= 32 in particular. FP64 (computed in double), FP32, FP16, BF16 (computed in float).
//   (BM / TM) * (BN / TN) threads per block. Never timed: a failed check stops the point.
// Modeled DRAM intensity: each BM x BN block tile reads (BM + BN) K elements for 2 BM BN K FLOPs:
//   2 BM BN / ((BM + BN) elem_bytes) = 64 / elem_bytes FLOP/B at 64 x 64 (16 in FP32).
// Run alone (a failed check is its expected outcome, so no error exit):
//   python run.py variant=wrong_tile 'precision=[fp64,fp32,fp16,bf16]' sizes.square=[1024] sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG tile
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_tile(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N,
           int K) {
    wrong::gemm(A, B, C, M, N, K);
}
