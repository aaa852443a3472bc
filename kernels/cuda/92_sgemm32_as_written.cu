// Pitfall (chapter 5.3 / 5.7, claim C14a): the chapter's `sgemm32`, exactly as printed; wrong on
// purpose at sizes that are not multiples of 32 (it has no bounds checks).
//
// What it is: the textbook shared-memory kernel with T = 32 (1024 threads per block) and no
//   boundary handling: "for brevity, M, N and K must be multiples of T". The only change from
//   the chapter's text is `extern "C"`, so the launcher can find the entry by name.
//   Stage 2 (02_smem_tiled.cu) is the same algorithm with the guards this one lacks.
// Constraints (the chapter's own): M, N, K multiples of 32, FP32 only, block (32, 32), grid
//   (N / 32, M / 32) as the chapter's host code computes it. With other sizes it reads past the
//   ends of A and B and leaves the last M % 32 rows and N % 32 columns of C unwritten; a grid
//   rounded up instead writes past the end of C. So the `cuda` variant (sgemm32_as_written.yaml)
//   refuses such sizes, and the probe that shows what happens (gpu_probe kind
//   sgemm32_unguarded) runs it only inside padded buffers whose padding it checks afterwards.
// Modeled DRAM intensity: T / elem_bytes = 8 FLOP/B in FP32 (the chapter's T / 4).
// Run alone: python run.py variant=sgemm32_as_written precision=fp32 sizes=square
constexpr int T = 32;
// C[M,N] = A[M,K] * B[K,N]; for brevity M, N, K must be multiples of T
extern "C" __global__ void sgemm32(const float* A, const float* B, float* C,
int M, int N, int K) {
__shared__ float As[T][T];
__shared__ float Bs[T][T];
int row = blockIdx.y * T + threadIdx.y;
int col = blockIdx.x * T + threadIdx.x;
float acc = 0.0f;
for (int k0 = 0; k0 < K; k0 += T) {
As[threadIdx.y][threadIdx.x] = A[row * K + k0 + threadIdx.x];
Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * N + col];
__syncthreads();
#pragma unroll
for (int k = 0; k < T; ++k)
acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
__syncthreads(); // every thread must finish reading before the next step overwrites shared
}
C[row * N + col] = acc;
}
