// Stage 4: double buffering with cp.async (chapter 5.4).
//
// What it changes over stage 3 (register_blocked): the same 128 x 128 block tile, 8 x 8
//   outputs per thread and the same inner loop, but shared memory holds two K-slices. While the
//   threads compute on one, cp.async (sm_80+) copies the next one from global memory straight
//   into the other buffer, without passing through registers; one barrier per slice then
//   swaps them. Load latency hides behind the FMAs of the current slice (a software pipeline).
//   cp.async copies bytes as they are, so it cannot transpose 16-byte vectors: A is copied
//   element by element (4-byte cp.async) into its transposed place As[k][m]; the 32 lanes of a
//   warp copy 8 consecutive k of 4 consecutive rows, which reads whole 32-byte sectors and
//   writes 32 distinct banks. B keeps 16-byte copies.
// Constraints: any M, N, K. The 16-byte copies of B need N % 4 == 0 (and a 16-byte aligned B);
//   otherwise B is copied element by element too (decided at run time). A needs nothing.
//   Parts of a slice outside A or B are zero-filled by cp.async (src-size 0); stores outside C
//   are skipped, and the float4 stores of C need N % 4 == 0. FP32 only; BK a multiple of 8.
//   Dynamic shared memory: 2 * BK * ((BM + 4) + BN) * 4 bytes (33,280 at BK = 16).
// Modeled DRAM intensity: as stage 3, 2 BM BN / ((BM + BN) elem_bytes) = 32 FLOP/B at 128 x 128.
// Run alone: python run.py variant=double_buffered precision=fp32 sizes=square
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
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif

namespace {

constexpr int STAGES = 2;
constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int AS_STRIDE = BM + 4;  // +4 floats: keeps float4 rows aligned, spreads the copies over banks
constexpr int A_STAGE = BK * AS_STRIDE;  // floats per buffer
constexpr int B_STAGE = BK * BN;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 4;
constexpr int M_RUN = BM / (TM / 4);
constexpr int N_RUN = BN / (TN / 4);

static_assert(std::is_same<TIN, float>::value && std::is_same<TOUT, float>::value, "FP32 kernel");
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of float4 runs");
static_assert(BM % TM == 0 && BN % TN == 0 && BM % 32 == 0, "tile shape");
static_assert(BK % 8 == 0, "A is copied in runs of 8 k");
static_assert(THREADS <= 1024, "too many threads per block");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
              "even copy split");

#define FLOAT4(x) (reinterpret_cast<float4*>(&(x))[0])
#define CFLOAT4(x) (reinterpret_cast<const float4*>(&(x))[0])

// Copy layout. A: 8 lanes copy 8 consecutive k of one row, so a warp reads whole 32-byte
// sectors of 4 rows and writes As[k][r] to 32 distinct banks ((4k + r) % 32, since AS_STRIDE is
// 4 mod 32); a thread copies rows r0 + j * A_ROWS_PER_PASS, k = kl + 8 h. B: 16-byte copies,
// BN / 4 lanes per row; thread copies rows rb0 + j * B_ROWS_PER_PASS.
// Each thread walks its copies with one pointer and run-time strides: per-copy 64-bit addresses
// hoisted out of the K loop would cost the registers the accumulators need and spill.
constexpr int A_ROWS_PER_PASS = THREADS / 8;
constexpr int B_ROWS_PER_PASS = THREADS / (BN / 4);
constexpr int B_ROWS_PER_PASS_SCALAR = THREADS / BN;
static_assert(BM % A_ROWS_PER_PASS == 0 && BK % B_ROWS_PER_PASS == 0, "even copy split");
static_assert(THREADS % BN == 0 && BK % B_ROWS_PER_PASS_SCALAR == 0, "even scalar copy split of B");

// Issue the cp.async copies of one K-slice into one buffer (As: [BK][AS_STRIDE], Bs: [BK][BN]).
// a_src / b_src point at this thread's first element of the slice; rows_a, k_left, cols_b say
// how much of the slice lies inside the matrices (rows/cols relative to the block tile).
template <bool VEC_B>
__device__ __forceinline__ void issue_tile(const float* __restrict__ A, const float* __restrict__ B,
                                           const float* a_src, const float* b_src, int K, int N,
                                           int rows_a, int k_left, int cols_b, float* As, float* Bs) {
    const int tid = threadIdx.x;
    {
        const int kl = tid % 8, r0 = tid / 8;
        float* dst = As + kl * AS_STRIDE + r0;
#pragma unroll
        for (int j = 0; j < BM / A_ROWS_PER_PASS; ++j) {
            const bool row_ok = r0 + j * A_ROWS_PER_PASS < rows_a;
#pragma unroll
            for (int h = 0; h < BK / 8; ++h) {
                const bool ok = row_ok && kl + 8 * h < k_left;
                gemm::cp_async_4(dst + (8 * h) * AS_STRIDE + j * A_ROWS_PER_PASS, ok ? a_src + 8 * h : A, ok);
            }
            a_src += static_cast<size_t>(A_ROWS_PER_PASS) * K;
        }
    }
    if (VEC_B) {
        const int c = (tid % (BN / 4)) * 4, r0 = tid / (BN / 4);
        const bool col_ok = c < cols_b;  // N % 4 == 0: the whole float4 is inside or outside
        float* dst = Bs + r0 * BN + c;
#pragma unroll
        for (int j = 0; j < BK / B_ROWS_PER_PASS; ++j) {
            const bool ok = col_ok && r0 + j * B_ROWS_PER_PASS < k_left;
            gemm::cp_async_16(dst + j * B_ROWS_PER_PASS * BN, ok ? b_src : B, ok);
            b_src += static_cast<size_t>(B_ROWS_PER_PASS) * N;
        }
    } else {
        const int c = tid % BN, r0 = tid / BN;
        const bool col_ok = c < cols_b;
        float* dst = Bs + r0 * BN + c;
#pragma unroll
        for (int j = 0; j < BK / B_ROWS_PER_PASS_SCALAR; ++j) {
            const bool ok = col_ok && r0 + j * B_ROWS_PER_PASS_SCALAR < k_left;
            gemm::cp_async_4(dst + j * B_ROWS_PER_PASS_SCALAR * BN, ok ? b_src : B, ok);
            b_src += static_cast<size_t>(B_ROWS_PER_PASS_SCALAR) * N;
        }
    }
}

template <bool VEC_B>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K, float* smem) {
    float* As = smem;                    // STAGES x [BK][AS_STRIDE]
    float* Bs = smem + STAGES * A_STAGE;  // STAGES x [BK][BN]
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int trow = threadIdx.x / (BN / TN), tcol = threadIdx.x % (BN / TN);
    const int tiles = gemm::cdiv(K, BK);

    float acc[TM][TN] = {};
    float a[TM], b[TN];

    // This thread's first element of slice 0 in A and in B (see issue_tile for the layout).
    const float* a_src = A + static_cast<size_t>(bm + threadIdx.x / 8) * K + threadIdx.x % 8;
    const float* b_src = VEC_B ? B + static_cast<size_t>(threadIdx.x / (BN / 4)) * N + bn + (threadIdx.x % (BN / 4)) * 4
                               : B + static_cast<size_t>(threadIdx.x / BN) * N + bn + threadIdx.x % BN;
    const int rows_a = M - bm, cols_b = N - bn;
    issue_tile<VEC_B>(A, B, a_src, b_src, K, N, rows_a, K, cols_b, As, Bs);
    gemm::cp_async_commit();
    for (int t = 0; t < tiles; ++t) {
        gemm::cp_async_wait<0>();  // this thread's copies of slice t have landed
        __syncthreads();           // everybody's have, and everybody is done with slice t - 1
        if (t + 1 < tiles) {       // refill the buffer slice t - 1 used, while slice t is computed
            const int s = (t + 1) % STAGES, k0 = (t + 1) * BK;
            issue_tile<VEC_B>(A, B, a_src + k0, b_src + static_cast<size_t>(k0) * N, K, N, rows_a, K - k0,
                              cols_b, As + s * A_STAGE, Bs + s * B_STAGE);
        }
        gemm::cp_async_commit();
        const float* as = As + (t % STAGES) * A_STAGE;
        const float* bs = Bs + (t % STAGES) * B_STAGE;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int v = 0; v < TM / 4; ++v) FLOAT4(a[4 * v]) = CFLOAT4(as[k * AS_STRIDE + v * M_RUN + trow * 4]);
#pragma unroll
            for (int v = 0; v < TN / 4; ++v) FLOAT4(b[4 * v]) = CFLOAT4(bs[k * BN + v * N_RUN + tcol * 4]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }

    const bool vec_out = (N % 4 == 0) && gemm::aligned(C, 16);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = bm + (i / 4) * M_RUN + trow * 4 + (i % 4);
        if (r >= M) continue;
        float* c_row = C + static_cast<size_t>(r) * N;
#pragma unroll
        for (int v = 0; v < TN / 4; ++v) {
            const int c = bn + v * N_RUN + tcol * 4;
            if (vec_out) {
                if (c < N) FLOAT4(c_row[c]) = FLOAT4(acc[i][4 * v]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (c + j < N) c_row[c + j] = acc[i][4 * v + j];
            }
        }
    }
}

}  // namespace

GEMMLAB_DECLARE_DYNAMIC_SMEM(SMEM_BYTES);

extern "C" __global__ void __launch_bounds__(THREADS, 2)
double_buffered(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
    GEMMLAB_DYNAMIC_SMEM(float4, smem4);  // float4: 16-byte aligned for the 16-byte copies and reads
    float* smem = reinterpret_cast<float*>(smem4);
    if (N % 4 == 0 && gemm::aligned(B, 16))
        gemm_tile<true>(A, B, C, M, N, K, smem);
    else
        gemm_tile<false>(A, B, C, M, N, K, smem);
}
