// Conduct control: a GEMM that stores through a wild index (illegal address) where M >= FAULT_M. Wrong on purpose: it exists to show that
// the harness catches what the element-wise check cannot see (gemmlab/measure/guards.py and the worker
// process of gemmlab/measure/worker).
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body all wrong_* controls share,
//   common/wrong_gemm.cuh): where M >= FAULT_M (4096), thread 0 of block (0, 0) stores 2^40 elements past C: an
//   illegal address. The error is sticky: the CUDA context is lost, and before the harness measured
//   GPU points in a worker process every later point of the run (and of later jobs of a sweep in the
//   same process) failed with it. Now this point fails, naming the fault, and a fresh worker measures
//   the next one.
// Misbehaves: M >= 4096; right: M < 4096.
// Constraints: FP64 (computed in double), FP32, FP16, BF16 (computed in float); (BM / TM) * (BN / TN)
//   threads per block.
// Modeled DRAM intensity: 2 BM BN / ((BM + BN) elem_bytes), as the other controls.
// Run alone, with a correct kernel after it (its failure is the expected outcome):
//   python run.py variant=[wrong_fault,smem_tiled] precision=fp32 'sizes.square=[1000,1024,4096]' sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG fault
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_fault(const TIN* __restrict__ A, const TIN* B, TOUT* C, int M, int N, int K) {
    wrong::gemm(A, B, C, M, N, K);
}
