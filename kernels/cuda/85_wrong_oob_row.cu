// Conduct control: a GEMM that writes one row past C's end where M % BM != 0. Wrong on purpose: it exists to show that
// the harness catches what the element-wise check cannot see (gemmlab/measure/guards.py and the worker
// process of gemmlab/measure/worker).
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body all wrong_* controls share,
//   common/wrong_gemm.cuh): the store guard is `row <= M` where `row < M` was meant. Where M is not a multiple of BM the
//   last row of blocks also writes row M: the N elements right after C's end. C itself is right (the
//   element-wise check passes it), nothing faults (the row lands in the guard zone after C, or in
//   whatever the memory pool put there), and without guard zones the harness called such a kernel
//   correct (issue 29, found with a wmma_tiled copy that lost its row guard).
// Misbehaves: M % 64 != 0 (1000, 1001, 4097, 4000 x ...); right: M % 64 == 0 (1024, 4096).
// Constraints: FP64 (computed in double), FP32, FP16, BF16 (computed in float); (BM / TM) * (BN / TN)
//   threads per block.
// Modeled DRAM intensity: 2 BM BN / ((BM + BN) elem_bytes), as the other controls.
// Run alone, with a correct kernel after it (its failure is the expected outcome):
//   python run.py variant=[wrong_oob_row,smem_tiled] precision=fp32 'sizes.square=[1000,1024,4096]' sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG oob_row
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_oob_row(const TIN* __restrict__ A, const TIN* B, TOUT* C, int M, int N, int K) {
    wrong::gemm(A, B, C, M, N, K);
}
