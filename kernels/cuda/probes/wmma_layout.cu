// Probe (chapter 5.5, claim C9): the chapter's `wmma_gemm` as printed, and two ways to get the
// layout of B wrong.
//
// What it is:
//   wmma_gemm            the chapter's kernel; only `extern "C"` added. One warp per 16 x 16
//                        tile of C, FP16 inputs, FP32 accumulate and output, fragments loaded
//                        straight from global memory. The probe launches exactly one warp per
//                        tile, so the chapter's missing bounds check is never needed.
//   wmma_gemm_bcol_flag  the same kernel with B's fragment declared col_major while B is
//                        row-major in memory and addressed as before: each 16 x 16 block of B
//                        is read transposed in place (C = A B~, B~ the blockwise transpose).
//   wmma_gemm_bcol       a kernel written for a column-major B (fragment col_major, address
//                        B + tile_col * K + k, leading dimension K) given the row-major B: for
//                        square matrices it computes A B^T.
//   Both wrong kernels run without any error; only comparing values shows the mistake.
//   The alignment test (gpu_probe kind wmma_alignment) runs wmma_gemm on pointers shifted by a
//   few bytes, in a child process, because a misaligned access poisons the CUDA context.
// Constraints: M, N, K multiples of 16, (M / 16) * (N / 16) warps in whole blocks;
//   wmma_gemm_bcol also needs K == N. Needs nvcc (NVRTC cannot open <mma.h>).
// Run alone: python run.py variant=[wmma_layout,wmma_alignment] precision=fp16 sizes.square=[4096]
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

extern "C" __global__ void wmma_gemm(const half* A, const half* B, float* C,
int M, int N, int K) {
wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
wmma::fill_fragment(c, 0.0f);
int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
int warpM = warp % (M / 16); // no bounds checks: M and N must be multiples of 16
int warpN = warp / (M / 16);
for (int k = 0; k < K; k += 16) {
wmma::load_matrix_sync(a, A + warpM * 16 * K + k, K);
wmma::load_matrix_sync(b, B + k * N + warpN * 16, N);
wmma::mma_sync(c, a, b, c);
}
wmma::store_matrix_sync(C + warpM * 16 * N + warpN * 16, c,
N, wmma::mem_row_major);
}

// Only the layout flag of B differs from wmma_gemm.
extern "C" __global__ void wmma_gemm_bcol_flag(const half* A, const half* B, float* C, int M, int N, int K) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int warpM = warp % (M / 16);
    int warpN = warp / (M / 16);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + warpM * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + warpN * 16, N);
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + warpM * 16 * N + warpN * 16, c, N, wmma::mem_row_major);
}

// A kernel for a column-major B (element (k, n) at B[n * K + k]), handed a row-major B.
extern "C" __global__ void wmma_gemm_bcol(const half* A, const half* B, float* C, int M, int N, int K) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int warpM = warp % (M / 16);
    int warpN = warp / (M / 16);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + warpM * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + warpN * 16 * K + k, K);
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + warpM * 16 * N + warpN * 16, c, N, wmma::mem_row_major);
}
