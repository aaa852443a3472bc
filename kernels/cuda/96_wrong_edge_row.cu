// Negative control: the last row of C computed from A's row M - 2. This kernel is wrong on purpose:
// it exists to show that the element-wise check (gemmlab/check.py) fails it.
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body it shares with the other
//   wrong_* controls, common/wrong_gemm.cuh): the loader of A clamps the row index with
//   min(row, M - 2) where the last valid row is M - 1 (an off-by-one boundary clamp), so row
//   M - 1 of C repeats row M - 2; every other element is right, all are finite.
// Constraints: any M, N, K; the bug shows where M >= 2 (at M = 1 the clamp stays at row 0).
//   FP64 (computed in double), FP32, FP16, BF16 (computed in float). (BM / TM) * (BN / TN) threads
//   per block. Never timed: a failed check stops the point.
// Modeled DRAM intensity: each BM x BN block tile reads (BM + BN) K elements for 2 BM BN K FLOPs:
//   2 BM BN / ((BM + BN) elem_bytes) = 64 / elem_bytes FLOP/B at 64 x 64 (16 in FP32).
// Run alone (a failed check is its expected outcome, so no error exit):
//   python run.py variant=wrong_edge_row 'precision=[fp64,fp32,fp16,bf16]' sizes.square=[1024] sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG edge_row
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_edge_row(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N,
               int K) {
    wrong::gemm(A, B, C, M, N, K);
}
