// The one kernel body of the negative controls (kernels/cuda/95_wrong_tile.cu ... 98_wrong_low_acc.cu):
// a correct shared-memory tiled SIMT GEMM with exactly one deliberate bug, chosen by the including
// file with `#define WRONG_BUG <bug>` before it includes this header:
//
//   tile      one 16 x 16 tile of C, the one at ((M/2)/16*16, (N/2)/16*16), is stored with its row
//             and column swapped (written transposed); it exists at every M, N >= 16
//   edge_row  the A loader clamps the row index to M - 2 instead of M - 1, so the last row of C is
//             computed from A's row M - 2 (M >= 2)
//   k_tail    the K loop walks full BK-slices only (`k0 + BK <= K`) and drops the last partial
//             slice; with BK = 24 (a multiple of 3) every power-of-two K has a tail
//   low_acc   the accumulators are a narrower type than the precision asks for, and every step's
//             product is rounded into them: fp64 -> float, fp32 -> bfloat16, fp16 -> half,
//             bf16 -> bfloat16
//
// Four more compute C right and misbehave around it (issue 29: the harness must catch what the
// element-wise check cannot see):
//
//   oob_row   the store guard is `row <= M` where `row < M` was meant: where M % BM != 0 the last
//             block also writes row M, the N elements right after C's end (inside the guard zone,
//             never far enough to fault); where M % BM == 0 no block holds row M and it is right
//   writes_b  where K % 32 != 0 (a K tail) thread 0 of block (0, 0) stashes a value in B's last
//             element (row K - 1, col N - 1), as a kernel that used its input as scratch would;
//             at K % 32 == 0 it leaves B alone
//   fault     where M >= FAULT_M, thread 0 of block (0, 0) stores through a wild index, 2^40
//             elements past C: an illegal address, sticky for the whole CUDA context
//   hang      where K >= HANG_K, thread 0 of block (0, 0), its stores done, waits for a flag that
//             nothing ever sets: the kernel never ends
//
// Everything else is correct at any M, N, K: loads outside A or B fill zeros, stores outside C are
// skipped, every element of C is written once, and FP64 computes in double (FP32, FP16 and BF16 in
// float), so a check that fails a control fails it for its bug alone.
//
// Layout: a block of (BM / TM) * (BN / TN) threads computes a BM x BN tile of C; per K-slice of BK
// it stages A[bm:bm+BM, k0:k0+BK] (As[m][k], padded by one against bank conflicts) and
// B[k0:k0+BK, bn:bn+BN] (Bs[k][n]) in shared memory in the compute type. Thread (tx, ty) owns the
// TM x TN outputs (ty + TY i, tx + TX j): the rows a warp reads from As are broadcasts, the columns
// it reads from Bs and writes to C are consecutive.
#pragma once

#include <type_traits>

#include "gemm_common.cuh"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 24
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef FAULT_M
#define FAULT_M 4096
#endif
#ifndef HANG_K
#define HANG_K 2048
#endif
#ifndef WRONG_BUG
#error "define WRONG_BUG (tile, edge_row, k_tail, low_acc, oob_row, writes_b, fault or hang) before including common/wrong_gemm.cuh"
#endif

namespace wrong {

enum class Bug { tile, edge_row, k_tail, low_acc, oob_row, writes_b, fault, hang };
constexpr Bug kBug = Bug::WRONG_BUG;  // a name that is not a Bug fails to compile

constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
constexpr int MIN_BLOCKS = 4;  // __launch_bounds__: 64 registers per thread, no spills in any precision
constexpr int SWAPPED = 16;  // side of the tile wrong_tile writes transposed

static_assert(BM % TM == 0 && BN % TN == 0, "thread tile divides the block tile");
static_assert(THREADS <= 1024, "at most 1024 threads per block");

// The type the correct parts compute in: double for FP64, float for everything narrower.
using real = std::conditional_t<std::is_same<TIN, double>::value, double, float>;

// The accumulator wrong_low_acc uses instead of `real`.
template <typename T> struct low_acc_of;
template <> struct low_acc_of<double> { using type = float; };
template <> struct low_acc_of<float> { using type = __nv_bfloat16; };
template <> struct low_acc_of<__half> { using type = __half; };
template <> struct low_acc_of<__nv_bfloat16> { using type = __nv_bfloat16; };
using acc_t = std::conditional_t<kBug == Bug::low_acc, typename low_acc_of<TIN>::type, real>;

static_assert(std::is_same<real, double>::value == std::is_same<TOUT, double>::value,
              "FP64 in, FP64 out (the other precisions compute in float)");

// Storage <-> compute conversions, round to nearest.
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T narrow(real x);
template <> __device__ __forceinline__ double narrow<double>(real x) { return static_cast<double>(x); }
template <> __device__ __forceinline__ float narrow<float>(real x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ __half narrow<__half>(real x) {
    return __float2half_rn(static_cast<float>(x));
}
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(real x) {
    return __float2bfloat16_rn(static_cast<float>(x));
}

// One step of a dot product: in the compute type (an FMA), or, for wrong_low_acc, rounded into the
// narrow accumulator (the sum formed in the compute type, as `float acc; acc += a * b;` with double
// a and b does).
__device__ __forceinline__ void step(real& acc, real a, real b) { acc += a * b; }
template <typename Acc> __device__ __forceinline__ void step(Acc& acc, real a, real b) {
    acc = narrow<Acc>(widen(acc) + a * b);
}

// hang's flag: nothing ever sets it
__device__ int never_set = 0;

__device__ __forceinline__ void gemm(const TIN* __restrict__ A, const TIN* B, TOUT* C, int M, int N, int K) {
    __shared__ real As[BM][BK + 1];
    __shared__ real Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const bool first_thread = tid == 0 && blockIdx.x == 0 && blockIdx.y == 0;

    acc_t acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = narrow<acc_t>(real(0));

    // k_tail: full slices only, `k0 + BK <= K` where `k0 < K` was meant
    for (int k0 = 0; kBug == Bug::k_tail ? k0 + BK <= K : k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += THREADS) {
            const int r = e / BK, c = e % BK, row = bm + r, col = k0 + c;
            int a_row = row;
            if (kBug == Bug::edge_row) {  // meant: the last row is M - 1
                a_row = row < M - 2 ? row : M - 2;
                if (a_row < 0) a_row = 0;  // M = 1: nothing to clamp to
            }
            As[r][c] = (row < M && col < K) ? widen(A[static_cast<size_t>(a_row) * K + col]) : real(0);
        }
        for (int e = tid; e < BK * BN; e += THREADS) {
            const int r = e / BN, c = e % BN, row = k0 + r, col = bn + c;
            Bs[r][c] = (row < K && col < N) ? widen(B[static_cast<size_t>(row) * N + col]) : real(0);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            real a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[ty + TY * i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + TX * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) step(acc[i][j], a[i], b[j]);
        }
        __syncthreads();  // everybody has read the tiles before the next slice overwrites them
    }

    // wrong_tile's tile: 16-aligned, around the centre of C; present wherever M, N >= 16
    const int r0 = (M / 2) / SWAPPED * SWAPPED, c0 = (N / 2) / SWAPPED * SWAPPED;
    const bool has_tile = kBug == Bug::tile && r0 + SWAPPED <= M && c0 + SWAPPED <= N;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int row = bm + ty + TY * i, col = bn + tx + TX * j;
            if ((kBug == Bug::oob_row ? row > M : row >= M) || col >= N) continue;  // oob_row: row M too
            if (has_tile && row >= r0 && row < r0 + SWAPPED && col >= c0 && col < c0 + SWAPPED) {
                const int dr = row - r0, dc = col - c0;  // the store swaps them
                row = r0 + dc;
                col = c0 + dr;
            }
            C[static_cast<size_t>(row) * N + col] = narrow<TOUT>(widen(acc[i][j]));
        }
    }
    if (kBug == Bug::writes_b && K % 32 != 0 && first_thread) {
        TIN* last = const_cast<TIN*>(B) + (static_cast<size_t>(K) * N - 1);
        *last = narrow<TIN>(real(1) - real(2) * widen(*last));  // never its own value: x = 1/3 is not representable
    }
    if (kBug == Bug::fault && M >= FAULT_M && first_thread) {
        C[static_cast<size_t>(1) << 40] = narrow<TOUT>(real(1));
    }
    if (kBug == Bug::hang && K >= HANG_K && first_thread) {  // after its stores: the registers are free
        while (atomicAdd(&never_set, 0) == 0) __nanosleep(1000);
    }
}

}  // namespace wrong
