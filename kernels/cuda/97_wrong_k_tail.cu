// Negative control: the last partial K-slice skipped. This kernel is wrong on purpose: it exists to
// show that the element-wise check (gemmlab/check.py) fails it.
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body it shares with the other
//   wrong_* controls, common/wrong_gemm.cuh): the K loop runs while k0 + BK <= K instead of
//   k0 < K, so the last K % BK products of every dot product are never added. BK = 24 is a
//   multiple of 3, so every power-of-two K (1024, 4096, 8192, 16384) has a tail (16, 16, 8, 16).
// Constraints: any M, N, K; the bug shows where K % BK != 0 (the YAML skips the other shapes,
//   where this control would pass). FP64 (computed in double), FP32, FP16, BF16 (computed in
//   float). (BM / TM) * (BN / TN) threads per block. Never timed: a failed check stops the point.
// Modeled DRAM intensity: each BM x BN block tile reads (BM + BN) K elements for 2 BM BN K FLOPs:
//   2 BM BN / ((BM + BN) elem_bytes) = 64 / elem_bytes FLOP/B at 64 x 64 (16 in FP32).
// Run alone (a failed check is its expected outcome, so no error exit):
//   python run.py variant=wrong_k_tail 'precision=[fp64,fp32,fp16,bf16]' sizes.square=[1024] sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG k_tail
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_k_tail(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N,
             int K) {
    wrong::gemm(A, B, C, M, N, K);
}
