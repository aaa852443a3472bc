// Stage 7: warp tiling with a multistage cp.async pipeline, past the chapter toward cuBLAS FP32
// (the idea of SGEMM_CUDA's kernel 10, retuned for Hopper).
//
// What it changes over stage 4 (double_buffered):
//   - Warp tiles. The BM x BN block tile is split into WM x WN warp tiles, each computed by one
//     warp as WMITER x WNITER sub-tiles of (32 lanes x TM x TN). A warp's lanes then read a
//     compact patch of shared memory (fewer distinct bytes per k than a 16 x 16 thread grid),
//     and the thread -> output mapping follows the warp, which is how the hardware schedules.
//   - STAGES shared buffers instead of two: cp.async keeps STAGES - 1 K-slices in flight while
//     one is computed, with one barrier per slice, so DRAM/L2 latency hides behind more work.
//     Hopper gives a block up to 227 KB of shared memory and 64K registers per SM, so deeper
//     pipelines and bigger tiles fit; every parameter is a -D define from the YAML so a Hydra
//     sweep can tune them (see conf/variant/warp_tiled.yaml).
//   - Shared-memory reads are 16 bytes (float4) for both operands, and a lane's rows and
//     columns are runs of 4 spread over its sub-tile so a warp's reads are consecutive float4s
//     (no bank conflicts, shared runs broadcast). A is stored transposed (As[k][m], copied
//     element by element with 4-byte cp.async, conflict-free as in stage 4).
// Constraints: any M, N, K. B is copied with 16-byte cp.async when N % 4 == 0 (and B is 16-byte
//   aligned), element by element otherwise (decided at run time); C is written with float4 when
//   N % 4 == 0, element by element otherwise; zero-fill and guards handle every edge. FP32 only.
//   THREADS == (BM / WM) * (BN / WN) * 32; (WSUBM / TM) * (WSUBN / TN) == 32 lanes per warp;
//   TM, TN multiples of 4; BK a multiple of 8; STAGES >= 2 (the YAML's `requires` skip a sweep
//   point that breaks one, with the reason). Dynamic shared memory:
//   STAGES * BK * ((BM + 4) + BN) * 4 bytes (49,920 at the defaults).
// Modeled DRAM intensity: 2 BM BN / ((BM + BN) elem_bytes) FLOP/B, 32 at 128 x 128 FP32.
// Run alone: python run.py variant=warp_tiled precision=fp32 sizes=square
//   tuning sweep (whole configurations, merged into the defaults):
//   python run.py -m variant=warp_tiled precision=fp32 'sizes.square=[4096]' \
//     'variant.warp_tiled.cuda.defines={STAGES:2},{STAGES:4},{BK:8,STAGES:4},{THREADS:128,WN:64,WNITER:4}'
#include <type_traits>

#include "common/gemm_common.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef WNITER
#define WNITER 2
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 4
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef MIN_BLOCKS  // occupancy hint for ptxas: registers per thread <= 64K / (MIN_BLOCKS * THREADS)
#define MIN_BLOCKS 2
#endif

namespace {

constexpr int WARPS_N = BN / WN;
constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);
constexpr int WSUBM = WM / WMITER;  // warp sub-tile: 32 lanes x (TM x TN)
constexpr int WSUBN = WN / WNITER;
constexpr int LANES_N = WSUBN / TN;
// A lane's TM rows (TN columns) of a sub-tile are TM / 4 (TN / 4) runs of 4, M_RUN (N_RUN) apart,
// so the 16-byte fragment reads of a warp hit consecutive float4s: conflict-free, and lanes
// that share a run share the address (broadcast).
constexpr int M_RUN = WSUBM / (TM / 4);
constexpr int N_RUN = WSUBN / (TN / 4);
constexpr int AS_STRIDE = BM + 4;  // +4 floats: float4 rows stay aligned, copies spread over banks
constexpr int A_STAGE = BK * AS_STRIDE;
constexpr int B_STAGE = BK * BN;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 4;

static_assert(std::is_same<TIN, float>::value && std::is_same<TOUT, float>::value, "FP32 kernel");
static_assert(THREADS == (BM / WM) * (BN / WN) * 32, "one warp per WM x WN warp tile");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles tile the block tile");
static_assert(WMITER >= 1 && (WM * WN) % (32 * TM * TN * WNITER) == 0 && WM % WMITER == 0 && WN % WNITER == 0,
              "warp tile splits into WMITER x WNITER sub-tiles");
static_assert((WSUBM / TM) * (WSUBN / TN) == 32 && WSUBM % TM == 0 && WSUBN % TN == 0,
              "a sub-tile is 32 lanes of TM x TN");
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of float4 runs");
static_assert(BK % 8 == 0 && BM % 4 == 0 && BN % 4 == 0, "copy layout");
static_assert(STAGES >= 2, "a pipeline needs two buffers at least");

#define FLOAT4(x) (reinterpret_cast<float4*>(&(x))[0])
#define CFLOAT4(x) (reinterpret_cast<const float4*>(&(x))[0])

// ---- copy layout (global -> shared, one K-slice) --------------------------------------------
// A: 8 lanes copy 8 consecutive k of one row (whole 32-byte sectors), consecutive groups of 8
// lanes take consecutive rows, so a warp writes As[k][r] to 32 distinct banks. Groups beyond BM
// rows take the next 8 k. A thread copies rows r0 + j * A_ROW_GROUPS, k = kl + 8 (kg0 + h * A_KG).
constexpr int A_ROW_GROUPS = (THREADS / 8 < BM) ? THREADS / 8 : BM;
constexpr int A_KG = (THREADS / 8) / A_ROW_GROUPS;  // groups of 8 k per pass
static_assert(THREADS % 8 == 0 && BM % A_ROW_GROUPS == 0 && (BK / 8) % A_KG == 0, "even copy split of A");

// B: chunks of W elements (W = 4 with 16-byte copies, 1 otherwise) along N; lanes take
// consecutive chunks of a row; a thread copies rows rb0 + j * rows_per_pass, chunks c0 + q * lanes.
template <int W>
struct BCopy {
    static constexpr int CHUNKS = BN / W;
    static constexpr int LANES = THREADS < CHUNKS ? THREADS : CHUNKS;  // lanes per row
    static constexpr int ROWS = THREADS / LANES;                      // rows per pass
    static constexpr int COL_PASSES = CHUNKS / LANES;
    static_assert(CHUNKS % LANES == 0 && THREADS % LANES == 0 && BK % ROWS == 0, "even copy split of B");
};

// Issue this thread's cp.async copies of one K-slice into one buffer. a_src / b_src point at the
// thread's first element of the slice; rows_a, k_left, cols_b bound the slice (relative to the
// block tile). One walking pointer per operand: per-copy 64-bit addresses hoisted out of the K
// loop would take the registers the accumulators need.
template <bool VEC_B>
__device__ __forceinline__ void issue_tile(const float* __restrict__ A, const float* __restrict__ B,
                                           const float* a_src, const float* b_src, int K, int N, int rows_a,
                                           int k_left, int cols_b, float* As, float* Bs) {
    const int tid = threadIdx.x;
    {
        const int kl = tid % 8, r0 = (tid / 8) % A_ROW_GROUPS, kg0 = (tid / 8) / A_ROW_GROUPS;
        float* dst = As + (8 * kg0 + kl) * AS_STRIDE + r0;
#pragma unroll
        for (int j = 0; j < BM / A_ROW_GROUPS; ++j) {
            const bool row_ok = r0 + j * A_ROW_GROUPS < rows_a;
#pragma unroll
            for (int h = 0; h < BK / 8 / A_KG; ++h) {
                const int dk = 8 * A_KG * h;  // relative to this thread's first k
                const bool ok = row_ok && 8 * kg0 + kl + dk < k_left;
                gemm::cp_async_4(dst + dk * AS_STRIDE + j * A_ROW_GROUPS, ok ? a_src + dk : A, ok);
            }
            a_src += static_cast<size_t>(A_ROW_GROUPS) * K;
        }
    }
    using BC = BCopy<VEC_B ? 4 : 1>;
    constexpr int W = VEC_B ? 4 : 1;
    const int c0 = (tid % BC::LANES) * W, rb0 = tid / BC::LANES;
    float* dst = Bs + rb0 * BN + c0;
#pragma unroll
    for (int j = 0; j < BK / BC::ROWS; ++j) {
        const bool row_ok = rb0 + j * BC::ROWS < k_left;
#pragma unroll
        for (int q = 0; q < BC::COL_PASSES; ++q) {
            const int dc = q * BC::LANES * W;
            const bool ok = row_ok && c0 + dc < cols_b;  // with W = 4, N % 4 == 0: all 4 or none
            if (VEC_B)
                gemm::cp_async_16(dst + j * BC::ROWS * BN + dc, ok ? b_src + dc : B, ok);
            else
                gemm::cp_async_4(dst + j * BC::ROWS * BN + dc, ok ? b_src + dc : B, ok);
        }
        b_src += static_cast<size_t>(BC::ROWS) * N;
    }
}

template <bool VEC_B>
__device__ __forceinline__ const float* b_start(const float* B, int N, int bn) {
    using BC = BCopy<VEC_B ? 4 : 1>;
    return B + static_cast<size_t>(threadIdx.x / BC::LANES) * N + bn + (threadIdx.x % BC::LANES) * (VEC_B ? 4 : 1);
}

template <bool VEC_B>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K, float* smem) {
    float* As = smem;                     // STAGES x [BK][AS_STRIDE]
    float* Bs = smem + STAGES * A_STAGE;  // STAGES x [BK][BN]
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tiles = gemm::cdiv(K, BK);
    const int rows_a = M - bm, cols_b = N - bn;

    // this thread's first element of slice 0 in A and in B (see issue_tile)
    const int kfirst = 8 * ((threadIdx.x / 8) / A_ROW_GROUPS) + threadIdx.x % 8;
    const float* a_src = A + static_cast<size_t>(bm + (threadIdx.x / 8) % A_ROW_GROUPS) * K + kfirst;
    const float* b_src = b_start<VEC_B>(B, N, bn);

    // prologue: slices 0 .. STAGES - 2 in flight (one commit group each, empty past the end)
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles)
            issue_tile<VEC_B>(A, B, a_src + s * BK, b_src + static_cast<size_t>(s * BK) * N, K, N, rows_a,
                              K - s * BK, cols_b, As + s * A_STAGE, Bs + s * B_STAGE);
        gemm::cp_async_commit();
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int a_off = (warp / WARPS_N) * WM + (lane / LANES_N) * 4;  // row of this thread's first output
    const int b_off = (warp % WARPS_N) * WN + (lane % LANES_N) * 4;  // its first column

    float acc[WMITER * TM][WNITER * TN] = {};
    float a[WMITER * TM], b[WNITER * TN];

    for (int t = 0; t < tiles; ++t) {
        gemm::cp_async_wait<STAGES - 2>();  // this thread's copies of slice t have landed
        __syncthreads();                    // everybody's have, and everybody is done with slice t - 1
        const int next = t + STAGES - 1;    // refill the buffer slice t - 1 used
        if (next < tiles) {
            const int s = next % STAGES, k0 = next * BK;
            issue_tile<VEC_B>(A, B, a_src + k0, b_src + static_cast<size_t>(k0) * N, K, N, rows_a, K - k0, cols_b,
                              As + s * A_STAGE, Bs + s * B_STAGE);
        }
        gemm::cp_async_commit();

        const float* as = As + (t % STAGES) * A_STAGE + a_off;
        const float* bs = Bs + (t % STAGES) * B_STAGE + b_off;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
                for (int v = 0; v < TM / 4; ++v)
                    FLOAT4(a[wm * TM + 4 * v]) = CFLOAT4(as[k * AS_STRIDE + wm * WSUBM + v * M_RUN]);
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int v = 0; v < TN / 4; ++v)
                    FLOAT4(b[wn * TN + 4 * v]) = CFLOAT4(bs[k * BN + wn * WSUBN + v * N_RUN]);
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
    gemm::cp_async_wait<0>();  // no copy may still target shared memory when the block exits

    const bool vec_out = (N % 4 == 0) && gemm::aligned(C, 16);
#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int r = bm + a_off + wm * WSUBM + (i / 4) * M_RUN + i % 4;
            if (r >= M) continue;
            float* c_row = C + static_cast<size_t>(r) * N;
#pragma unroll
            for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                for (int v = 0; v < TN / 4; ++v) {
                    const int c = bn + b_off + wn * WSUBN + v * N_RUN;
                    float* out = &acc[wm * TM + i][wn * TN + 4 * v];
                    if (vec_out) {
                        if (c < N) FLOAT4(c_row[c]) = FLOAT4(*out);
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            if (c + j < N) c_row[c + j] = out[j];
                    }
                }
        }
}

}  // namespace

GEMMLAB_DECLARE_DYNAMIC_SMEM(SMEM_BYTES);

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
warp_tiled(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
    GEMMLAB_DYNAMIC_SMEM(float4, smem4);  // float4: 16-byte aligned for the 16-byte copies and reads
    float* smem = reinterpret_cast<float*>(smem4);
    if (N % 4 == 0 && gemm::aligned(B, 16))
        gemm_tile<true>(A, B, C, M, N, K, smem);
    else
        gemm_tile<false>(A, B, C, M, N, K, smem);
}
