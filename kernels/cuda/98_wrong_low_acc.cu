// Negative control: a narrower accumulator than the precision asks for. This kernel is
// wrong on purpose: it exists to show that the element-wise check (gemmlab/check.py) fails it.
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body it shares with the other
//   wrong_* controls, common/wrong_gemm.cuh): the accumulators are FP64 -> float, FP32 ->
//   bfloat16, FP16 -> half, BF16 -> bfloat16 instead of double / float, and every step
//   acc = round(acc + a * b) rounds into them: the error grows like u_acc * sqrt(K) |partial sums|
//   against a bound built from the precision's FP32 (FP64) accumulation.
// Constraints: any M, N, K; the bug shows where K >= 2 (at K = 1 an FP16/BF16 result is rounded
//   once either way). FP64 (products in double), FP32, FP16, BF16 (products in float).
//   (BM / TM) * (BN / TN) threads per block. Never timed: a failed check stops the point.
// Modeled DRAM intensity: each BM x BN block tile reads (BM + BN) K elements for 2 BM BN K FLOPs:
//   2 BM BN / ((BM + BN) elem_bytes) = 64 / elem_bytes FLOP/B at 64 x 64 (16 in FP32).
// Run alone (a failed check is its expected outcome, so no error exit):
//   python run.py variant=wrong_low_acc 'precision=[fp64,fp32,fp16,bf16]' sizes.square=[1024] sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG low_acc
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_low_acc(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N,
              int K) {
    wrong::gemm(A, B, C, M, N, K);
}
