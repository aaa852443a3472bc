// Conduct control: a GEMM that never returns where K >= HANG_K. Wrong on purpose: it exists to show that
// the harness catches what the element-wise check cannot see (gemmlab/measure/guards.py and the worker
// process of gemmlab/measure/worker).
//
// What it changes over a correct shared-memory tiled SIMT GEMM (the body all wrong_* controls share,
//   common/wrong_gemm.cuh): where K >= HANG_K (2048), thread 0 of block (0, 0) waits for a flag nothing ever sets:
//   the kernel never ends. The harness's watchdog kills the worker once the checked call outlives
//   its limit (derived from the point's FLOPs and the device's peak, at least
//   measure.point_timeout_floor_s) and goes on with a fresh worker; the point fails "timed out".
// Misbehaves: K >= 2048; right: K < 2048.
// Constraints: FP64 (computed in double), FP32, FP16, BF16 (computed in float); (BM / TM) * (BN / TN)
//   threads per block.
// Modeled DRAM intensity: 2 BM BN / ((BM + BN) elem_bytes), as the other controls.
// Run alone, with a correct kernel after it (its failure is the expected outcome):
//   python run.py variant=[wrong_hang,smem_tiled] precision=fp32 'sizes.square=[1000,1024,4096]' sizes.shapes=[]
//   run.fail_on_error=false
#define WRONG_BUG hang
#include "common/wrong_gemm.cuh"

extern "C" __global__ void __launch_bounds__(wrong::THREADS, wrong::MIN_BLOCKS)
wrong_hang(const TIN* __restrict__ A, const TIN* B, TOUT* C, int M, int N, int K) {
    wrong::gemm(A, B, C, M, N, K);
}
