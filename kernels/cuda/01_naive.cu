// Stage 1: naive GEMM, one thread per output element (chapter 5.2).
//
// What it changes: nothing yet, it is the first rung and the baseline of the ladder. Thread
//   (row, col) walks K and accumulates A[row, k] * B[k, col] in a register, exactly the
//   chapter's loop; threadIdx.x runs along N so a warp reads one row of B and writes one row
//   of C contiguously (coalesced), while A[row, k] is one broadcast address.
// Constraints: none; any M, N, K (threads outside C return before touching memory).
//   BM x BN threads per block (defines BM, BN; BM * BN <= 1024), one output each.
// Modeled DRAM intensity: every output reads 2K elements and reuses nothing, so 2MNK FLOPs
//   over 2MNK elements: 1 / elem_bytes = 0.25 FLOP/B in FP32 (L1/L2 win part of it back).
// Run alone: python run.py variant=naive precision=fp32 sizes=odd
#include "common/gemm_common.cuh"

#ifndef BM
#define BM 8
#endif
#ifndef BN
#define BN 32
#endif

extern "C" __global__ void __launch_bounds__(BM * BN)
naive(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * BN + threadIdx.x;
    const int row = blockIdx.y * BM + threadIdx.y;
    if (row >= M || col >= N) return;
    // 64-bit offsets: M * K passes 2^31 at the sizes the harness allows (max_dim 65536).
    const TIN* a = A + static_cast<size_t>(row) * K;
    const TIN* b = B + col;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += gemm::to_float(a[k]) * gemm::to_float(*b);
        b += N;
    }
    C[static_cast<size_t>(row) * N + col] = gemm::from_float<TOUT>(acc);
}
