// Stage 6: WMMA with shared-memory block tiles, several warps per block, a cp.async pipeline.
//
// What it changes over stage 5 (wmma): the block computes a BM x BN tile of C with
//   (BM / WM) x (BN / WN) warps, each owning a WM x WN warp tile of (WM/16) x (WN/16) fragments.
//   Per K-slice of BK the block stages BM x BK of A and BK x BN of B in shared memory with
//   16-byte cp.async, STAGES slices in flight (one barrier per slice), and every warp loads its
//   fragments from there: each element of A is reused by BN / WN warps and WN / 16 fragments
//   instead of being re-read from global memory per 16 x 16 tile.
//   Shared rows are padded by 8 elements (16 bytes): fragment pointers stay 32-byte aligned and
//   leading dimensions multiples of 8 as load_matrix_sync requires, and the 8 row addresses of
//   each ldmatrix phase fall in distinct banks.
// Constraints: any M, N, K (no multiple-of-16 requirement, unlike stage 5): copies outside A or
//   B zero-fill the tile, and fragments that cross the edge of C go through a per-warp 16 x 16
//   staging buffer in shared memory and are stored element by element with guards.
//   16-byte copies need K % 8 == 0 and N % 8 == 0 (16-byte aligned rows); otherwise the tiles
//   are filled element by element (decided at run time). FP16 or BF16 in (TIN), FP32 out.
//   Dynamic shared memory: STAGES * (BM * (BK + 8) + BK * (BN + 8)) * elem_bytes
//   (56,832 bytes at the defaults, FP16).
// Modeled DRAM intensity: 2 BM BN / ((BM + BN) elem_bytes) = 64 FLOP/B at 128 x 128 FP16.
// Run alone: python run.py variant=wmma_tiled precision=[fp16,bf16] sizes=odd
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "common/gemm_common.cuh"

using namespace nvcuda;

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef MIN_BLOCKS  // occupancy hint for ptxas: registers per thread <= 64K / (MIN_BLOCKS * THREADS)
#define MIN_BLOCKS 2
#endif

namespace {

constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
constexpr int WARPS_N = BN / WN;
constexpr int FM = WM / 16, FN = WN / 16;  // fragments per warp tile
constexpr int PAD = 8;                      // elements: 16 bytes
constexpr int AS_LD = BK + PAD, BS_LD = BN + PAD;
constexpr int A_STAGE = BM * AS_LD, B_STAGE = BK * BS_LD;  // elements per buffer
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * static_cast<int>(sizeof(TIN));
constexpr int CHUNK = 8;  // elements per 16-byte copy

static_assert((std::is_same<TIN, __half>::value || std::is_same<TIN, __nv_bfloat16>::value) &&
                  std::is_same<TOUT, float>::value,
              "FP16 or BF16 in, FP32 out");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "tile shape");
static_assert(THREADS <= 1024 && STAGES >= 2, "launch shape");
static_assert((THREADS / 32) * 256 * 4 <= SMEM_BYTES, "epilogue staging fits in the pipeline buffers");

// Copy layout: LANES consecutive threads copy the 16-byte chunks of one row; a thread copies
// rows r0 + j * ROWS and walks them with one pointer (see 04_double_buffered.cu for why).
template <int COLS, int ROWS_TOTAL>
struct TileCopy {
    static constexpr int LANES = COLS / CHUNK;
    static constexpr int ROWS = THREADS / LANES;  // rows per pass
    static constexpr int PASSES = ROWS_TOTAL / ROWS;
    static_assert(COLS % CHUNK == 0 && THREADS % LANES == 0 && ROWS_TOTAL % ROWS == 0, "even copy split");
};
using ACopy = TileCopy<BK, BM>;
using BCopy = TileCopy<BN, BK>;

// One K-slice into one buffer. src points at this thread's first chunk of the slice; rows_left
// and cols_left bound the slice (relative to its top-left corner); base is any valid address.
template <bool VEC, typename Copy, int LD>
__device__ __forceinline__ void issue_copy(const TIN* __restrict__ base, const TIN* src, size_t row_stride,
                                           int rows_left, int cols_left, TIN* tile) {
    const int c0 = (threadIdx.x % Copy::LANES) * CHUNK, r0 = threadIdx.x / Copy::LANES;
    TIN* dst = tile + r0 * LD + c0;
#pragma unroll
    for (int j = 0; j < Copy::PASSES; ++j) {
        const bool row_ok = r0 + j * Copy::ROWS < rows_left;
        if (VEC) {  // rows are 16-byte aligned: a chunk is all inside or all outside
            const bool ok = row_ok && c0 < cols_left;
            gemm::cp_async_16(dst + j * Copy::ROWS * LD, ok ? src : base, ok);
        } else {
#pragma unroll
            for (int e = 0; e < CHUNK; ++e) {
                const bool ok = row_ok && c0 + e < cols_left;
                dst[j * Copy::ROWS * LD + e] = ok ? src[e] : gemm::from_float<TIN>(0.0f);
            }
        }
        src += Copy::ROWS * row_stride;
    }
}

template <bool VEC>
__device__ __forceinline__ void gemm_tile(const TIN* __restrict__ A, const TIN* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K, TIN* smem) {
    TIN* As = smem;                     // STAGES x [BM][AS_LD]
    TIN* Bs = smem + STAGES * A_STAGE;  // STAGES x [BK][BS_LD]
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tiles = gemm::cdiv(K, BK);
    const int rows_a = M - bm, cols_b = N - bn;
    const TIN* a_src = A + static_cast<size_t>(bm + threadIdx.x / ACopy::LANES) * K + (threadIdx.x % ACopy::LANES) * CHUNK;
    const TIN* b_src = B + static_cast<size_t>(threadIdx.x / BCopy::LANES) * N + bn + (threadIdx.x % BCopy::LANES) * CHUNK;

    auto issue = [&](int slice) {
        const int s = slice % STAGES, k0 = slice * BK;
        issue_copy<VEC, ACopy, AS_LD>(A, a_src + k0, K, rows_a, K - k0, As + s * A_STAGE);
        issue_copy<VEC, BCopy, BS_LD>(B, b_src + static_cast<size_t>(k0) * N, N, K - k0, cols_b, Bs + s * B_STAGE);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {  // prologue: slices 0 .. STAGES - 2 in flight
        if (s < tiles) issue(s);
        gemm::cp_async_commit();
    }

    const int warp = threadIdx.x / 32;
    const int wr = warp / WARPS_N, wc = warp % WARPS_N;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, TIN, wmma::row_major> af[FM];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, TIN, wmma::row_major> bf[FN];

    for (int t = 0; t < tiles; ++t) {
        gemm::cp_async_wait<STAGES - 2>();  // this thread's copies of slice t have landed
        __syncthreads();                    // everybody's have, and everybody is done with slice t - 1
        if (t + STAGES - 1 < tiles) issue(t + STAGES - 1);  // refill the buffer slice t - 1 used
        gemm::cp_async_commit();

        const TIN* as = As + (t % STAGES) * A_STAGE + (wr * WM) * AS_LD;
        const TIN* bs = Bs + (t % STAGES) * B_STAGE + wc * WN;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
#pragma unroll
            for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(af[i], as + i * 16 * AS_LD + kk, AS_LD);
#pragma unroll
            for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(bf[j], bs + kk * BS_LD + j * 16, BS_LD);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }
    }
    gemm::cp_async_wait<0>();
    __syncthreads();  // the pipeline buffers become the epilogue's staging area

    // Fragments wholly inside C are stored directly (needs 32-byte aligned rows: N % 8 == 0);
    // the others go through this warp's 16 x 16 staging tile, element by element with guards.
    const bool direct = (N % 8 == 0) && gemm::aligned(C, 32);
    float* stage = reinterpret_cast<float*>(smem) + warp * 256;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            const int r0 = bm + wr * WM + i * 16, c0 = bn + wc * WN + j * 16;
            if (r0 >= M || c0 >= N) continue;
            if (direct && r0 + 16 <= M && c0 + 16 <= N) {
                wmma::store_matrix_sync(C + static_cast<size_t>(r0) * N + c0, acc[i][j], N, wmma::mem_row_major);
            } else {
                wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32) {
                    const int r = r0 + e / 16, c = c0 + e % 16;
                    if (r < M && c < N) C[static_cast<size_t>(r) * N + c] = stage[e];
                }
                __syncwarp();  // the next fragment reuses the staging tile
            }
        }
}

}  // namespace

GEMMLAB_DECLARE_DYNAMIC_SMEM(SMEM_BYTES);

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
wmma_tiled(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
    GEMMLAB_DYNAMIC_SMEM(float4, smem4);  // 16-byte aligned for the 16-byte copies
    TIN* smem = reinterpret_cast<TIN*>(smem4);
    if (K % 8 == 0 && N % 8 == 0 && gemm::aligned(A, 16) && gemm::aligned(B, 16))
        gemm_tile<true>(A, B, C, M, N, K, smem);
    else
        gemm_tile<false>(A, B, C, M, N, K, smem);
}
