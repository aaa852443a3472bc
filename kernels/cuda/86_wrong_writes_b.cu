// Conduct control: a GEMM that writes into its input B where K % 32 != 0. Wrong on purpose: it exists to show that
// the harness catches what the element-wise check cannot see (gemmlab/measure/guards.py and the worker
// process of gemmlab/measure/worker).
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body all wrong_* controls share,
//   common/wrong_gemm.cuh): where K is not a multiple of 32, thread 0 of block (0, 0) stores into B's last element
//   (row K - 1, col N - 1) once C is computed, as a kernel that used an input as scratch for a K
//   tail would. Other blocks may read that element before or after the store, so C may be wrong
//   in column N - 1 too; the harness compares A and B with their drawn bytes first and says
//   "changed B (first at row K-1, col N-1)".
// Misbehaves: K % 32 != 0 (1000, 1001); right: K % 32 == 0 (1024, 4096).
// Constraints: FP64 (computed in double), FP32, FP16, BF16 (computed in float); (BM / TM) * (BN / TN)
//   threads per block.
// Modeled DRAM intensity: 2 BM BN / ((BM + BN) elem_bytes), as the other controls.
// Run alone, with a correct kernel after it (its failure is the expected outcome):
//   python run.py variant=[wrong_writes_b,smem_tiled] precision=fp32 'sizes.square=[1000,1024,4096]' sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG writes_b
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_writes_b(const TIN* __restrict__ A, const TIN* B, TOUT* C, int M, int N, int K) {
    wrong::gemm(A, B, C, M, N, K);
}
