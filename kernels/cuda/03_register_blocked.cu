// Stage 3: register blocking, 8 x 8 outputs per thread on a 128 x 128 block tile (chapter 5.4).
//
// What it changes over stage 2 (smem_tiled): the block tile grows to BM x BN = 128 x 128 with a
//   K-slice of BK (8 to 32), and each of the 256 threads keeps TM x TN = 8 x 8 accumulators in
//   registers. Per k it reads TM values of A and TN values of B from shared memory (four 16-byte
//   loads) for TM * TN = 64 FMAs: 4 FMAs per shared read instead of 1 per 2.
//   Global loads are 16 bytes wide (float4). A is stored transposed in shared memory
//   (As[k][m]) so that the TM values a thread needs at one k are contiguous and come in as
//   float4; a thread's 8 rows (and 8 columns) are two runs of 4, BM/2 (BN/2) apart, so the 16
//   threads of a half-warp read 16 consecutive float4 of Bs without bank conflicts.
//   Loads and compute still alternate: stage 4 (double_buffered) overlaps them.
// Constraints: any M, N, K. The 16-byte path needs K % 4 == 0 and N % 4 == 0 (and 16-byte
//   aligned pointers); otherwise the kernel takes the scalar path at run time (same tile, one
//   element per load). Loads outside A or B fill zeros; stores outside C are skipped.
//   FP32 only. TM, TN multiples of 4; (BM / TM) * (BN / TN) threads; BK a multiple of 4.
// Modeled DRAM intensity: each block tile reads (BM + BN) * K elements for 2 BM BN K FLOPs:
//   2 BM BN / ((BM + BN) elem_bytes) = 32 FLOP/B at 128 x 128 FP32, just over the ridge.
// Run alone: python run.py variant=register_blocked precision=fp32 sizes=square
//   K-slice sweep: python run.py -m variant=register_blocked precision=fp32 'variant.register_blocked.cuda.defines.BK=8,16,32'
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

constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int AS_STRIDE = BM + 4;  // +4 floats: keeps float4 rows aligned, halves store conflicts
constexpr int M_RUN = BM / (TM / 4);  // distance between a thread's runs of 4 rows
constexpr int N_RUN = BN / (TN / 4);

static_assert(std::is_same<TIN, float>::value && std::is_same<TOUT, float>::value, "FP32 kernel");
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of float4 runs");
static_assert(BM % TM == 0 && BN % TN == 0 && BK % 4 == 0, "tile shape");
static_assert(THREADS <= 1024, "too many threads per block");
static_assert(THREADS % (BK / 4) == 0 && BM % (THREADS / (BK / 4)) == 0, "even float4 split of A");
static_assert(THREADS % (BN / 4) == 0 && BK % (THREADS / (BN / 4)) == 0, "even float4 split of B");
static_assert(THREADS % BK == 0 && BM % (THREADS / BK) == 0, "even scalar split of A");
static_assert(THREADS % BN == 0 && BK % (THREADS / BN) == 0, "even scalar split of B");
static_assert((BK * AS_STRIDE + BK * BN) * 4 <= 48 * 1024,
              "static shared memory is limited to 48 KiB");

#define FLOAT4(x) (reinterpret_cast<float4*>(&(x))[0])
#define CFLOAT4(x) (reinterpret_cast<const float4*>(&(x))[0])

// Global -> shared for one K-slice: A[bm:bm+BM, k0:k0+BK] transposed into As, B[k0:k0+BK, bn:bn+BN]
// into Bs, zeros outside the matrices. a_tile / b_tile point at the slice's top-left element;
// rows_a, k_left, cols_b say how much of it lies inside (relative to the block tile). Each
// thread walks its rows with one pointer and a run-time stride: per-load 64-bit addresses
// hoisted out of the K loop would cost the registers the accumulators need and spill.
template <bool VEC>
__device__ __forceinline__ void load_tile(const float* a_tile, const float* b_tile, int K, int N, int rows_a,
                                          int k_left, int cols_b, float (*As)[AS_STRIDE], float (*Bs)[BN]) {
    const int tid = threadIdx.x;
    if (VEC) {  // float4 along K for A and along N for B; K % 4 == 0 and N % 4 == 0
        constexpr int A_LANES = BK / 4, A_ROWS = THREADS / A_LANES;
        const int c = (tid % A_LANES) * 4, r0 = tid / A_LANES;
        const float* src = a_tile + static_cast<size_t>(r0) * K + c;
#pragma unroll
        for (int j = 0; j < BM / A_ROWS; ++j) {
            const int r = r0 + j * A_ROWS;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < rows_a && c < k_left) v = CFLOAT4(*src);
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
            src += static_cast<size_t>(A_ROWS) * K;
        }
        constexpr int B_LANES = BN / 4, B_ROWS = THREADS / B_LANES;
        const int cb = (tid % B_LANES) * 4, rb0 = tid / B_LANES;
        const float* srcb = b_tile + static_cast<size_t>(rb0) * N + cb;
#pragma unroll
        for (int j = 0; j < BK / B_ROWS; ++j) {
            const int r = rb0 + j * B_ROWS;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < k_left && cb < cols_b) v = CFLOAT4(*srcb);
            FLOAT4(Bs[r][cb]) = v;
            srcb += static_cast<size_t>(B_ROWS) * N;
        }
    } else {  // one element per load
        constexpr int A_ROWS = THREADS / BK;
        const int c = tid % BK, r0 = tid / BK;
        const float* src = a_tile + static_cast<size_t>(r0) * K + c;
#pragma unroll
        for (int j = 0; j < BM / A_ROWS; ++j) {
            const int r = r0 + j * A_ROWS;
            As[c][r] = (r < rows_a && c < k_left) ? *src : 0.f;
            src += static_cast<size_t>(A_ROWS) * K;
        }
        constexpr int B_ROWS = THREADS / BN;
        const int cb = tid % BN, rb0 = tid / BN;
        const float* srcb = b_tile + static_cast<size_t>(rb0) * N + cb;
#pragma unroll
        for (int j = 0; j < BK / B_ROWS; ++j) {
            const int r = rb0 + j * B_ROWS;
            Bs[r][cb] = (r < k_left && cb < cols_b) ? *srcb : 0.f;
            srcb += static_cast<size_t>(B_ROWS) * N;
        }
    }
}

// The whole main loop is instantiated once per load path: a run-time branch inside the loop
// would keep the addresses of both paths live across it and spill.
template <bool VEC_IN>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K,
                                          float (*As)[AS_STRIDE], float (*Bs)[BN]) {
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int trow = threadIdx.x / (BN / TN), tcol = threadIdx.x % (BN / TN);
    const bool vec_out = (N % 4 == 0) && gemm::aligned(C, 16);

    float acc[TM][TN] = {};
    float a[TM], b[TN];

    const float* a_tile = A + static_cast<size_t>(bm) * K;  // advances by BK columns per slice
    const float* b_tile = B + bn;                            // advances by BK rows per slice
    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile<VEC_IN>(a_tile + k0, b_tile + static_cast<size_t>(k0) * N, K, N, M - bm, K - k0, N - bn, As, Bs);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int v = 0; v < TM / 4; ++v) FLOAT4(a[4 * v]) = CFLOAT4(As[k][v * M_RUN + trow * 4]);
#pragma unroll
            for (int v = 0; v < TN / 4; ++v) FLOAT4(b[4 * v]) = CFLOAT4(Bs[k][v * N_RUN + tcol * 4]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();  // everybody has read the tiles before the next slice overwrites them
    }

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

extern "C" __global__ void __launch_bounds__(THREADS, 2)
register_blocked(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
    // Shared tiles live here, not in gemm_tile: each instantiation would get its own copy.
    __shared__ __align__(16) float As[BK][AS_STRIDE];
    __shared__ __align__(16) float Bs[BK][BN];
    const bool vec_in = (K % 4 == 0) && (N % 4 == 0) && gemm::aligned(A, 16) && gemm::aligned(B, 16);
    if (vec_in)
        gemm_tile<true>(A, B, C, M, N, K, As, Bs);
    else
        gemm_tile<false>(A, B, C, M, N, K, As, Bs);
}
