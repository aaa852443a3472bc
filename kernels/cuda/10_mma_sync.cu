// Stage 10: mma_sync -- warp-level tensor-core MMA (mma.sync m16n8k16) fed by ldmatrix from
// XOR-swizzled shared memory, with a multistage cp.async pipeline.
//
// What changes over the WMMA stage: WMMA hides the fragment layouts and loads them with ordinary
// shared-memory loads from padded tiles. Here each warp owns a 64x64 piece of a 128x256 block tile
// and drives the tensor cores with the PTX instruction itself (`mma.sync.aligned.m16n8k16`, fp32
// accumulation: 4x8 MMAs = 128 accumulators per thread). Operand fragments come from `ldmatrix`
// (one instruction loads four 8x8 matrices; `.trans` turns the N-contiguous B rows into the
// K-pairs the MMA wants), so no thread unpacks a fragment by hand. Shared-memory tiles have no
// padding: the 16-byte chunk c of row r is stored at chunk c ^ (r % 8) within its 128-byte
// segment, which makes both the cp.async writes and the 8-row ldmatrix reads bank-conflict free.
// Copies are asynchronous (`cp.async.cg`, 16 B each, zero-filled outside the matrix): STAGES-1
// tiles are in flight while the warps compute on the current one. Blocks are launched in groups
// of GROUP_M block-rows so that the blocks resident at once share A and B tiles in L2.
//
// Constraints: TIN in {bf16, fp16}, fp32 accumulation, TOUT = TIN (16-bit). Any M, N, K: when K or
// N is not a multiple of 8 (rows not 16-byte aligned) the tiles are loaded element by element
// instead of with cp.async (slower, same results). BK = 64; BM, BN multiples of 64 (one
// warp per 64x64 piece: 8 warps for 128x256).
// Shared memory: STAGES * (BM*BK + BK*BN) * 2 bytes (192 KB for 128x256, 4 stages).
//
// Modeled intensity (operand bytes per block tile, no reuse between blocks): 2*BM*BN/((BM+BN)*2 B)
// = 85 FLOP/B for 128x256.
//
// Run it alone: python run.py variant=[cublas,mma_sync] precision=bf16 sizes.square=[4096,8192]
// Build alone: nvcc -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v kernels/cuda/10_mma_sync.cu
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

#ifndef TIN
#define TIN __nv_bfloat16
#endif
#ifndef TOUT
#define TOUT TIN
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

namespace {

constexpr int kWarpTileM = 64;
constexpr int kWarpTileN = 64;
constexpr int kBM = BM;
constexpr int kBN = BN;
constexpr int kWarpsN = kBN / kWarpTileN;
constexpr int kThreads = 32 * (kBM / kWarpTileM) * kWarpsN;
constexpr int kMmaM = kWarpTileM / 16;  // m16 tiles per warp
constexpr int kMmaN = kWarpTileN / 8;   // n8 tiles per warp
constexpr int kARowBytes = BK * 2;      // 128: one swizzle segment
constexpr int kBRowBytes = kBN * 2;
constexpr int kTileABytes = kBM * kARowBytes;
constexpr int kTileBBytes = BK * kBRowBytes;
constexpr int kStageBytes = kTileABytes + kTileBBytes;

static_assert(BK == 64, "A rows are one 128-byte swizzle segment");
static_assert(kBM % kWarpTileM == 0 && kBN % kWarpTileN == 0, "BM and BN are multiples of the 64x64 warp tile");
static_assert(STAGES >= 2, "a pipeline needs two stages at least");
static_assert((kBM * BK / 8) % kThreads == 0 && (BK * kBN / 8) % kThreads == 0, "whole chunks per thread");
static_assert(STAGES * kStageBytes <= 227 * 1024, "more shared memory than one sm_90 block may have");

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile whose rows are `row_bytes` long:
// the low three bits of the chunk index are XORed with the row's low three bits.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk, int row_bytes) {
  return row * row_bytes + ((chunk ^ (row & 7)) << 4);
}

// B rows are kBN/8 chunks long: swizzle the chunk index within each 128-byte segment.
__device__ __forceinline__ uint32_t b_offset(int row, int chunk) {
  return row * kBRowBytes + ((chunk & ~7) << 4) + (((chunk & 7) ^ (row & 7)) << 4);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; bytes past `valid_bytes` (0 or 16 here) are zero-filled.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int valid_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D += A * B for one m16n8k16 tile (A row-major 16x16, B "col" 16x8, fp32 accumulators).
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<T, __half>::value) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// Slow path for rows that are not 16-byte aligned: 8 guarded element loads, one 16-byte smem store.
__device__ __forceinline__ void load_chunk_elementwise(unsigned char* dst, const TIN* row_ptr, int col, int cols,
                                                       bool row_ok) {
  union {
    uint4 v;
    TIN e[8];
  } chunk;
  chunk.v = make_uint4(0, 0, 0, 0);
  if (row_ok) {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (col + e < cols) chunk.e[e] = row_ptr[col + e];
  }
  *reinterpret_cast<uint4*>(dst) = chunk.v;
}

// The whole block's work; kVectorLoads selects cp.async (16-byte aligned rows) or the slow element
// loads. Two separate instantiations keep the slow path's registers out of the fast main loop.
template <bool kVectorLoads>
__device__ __forceinline__ void gemm_block(const TIN* __restrict__ A, const TIN* __restrict__ B,
                                           TOUT* __restrict__ C, int M, int N, int K, unsigned char* smem) {

  // Grouped launch order: consecutive blocks walk down GROUP_M block-rows before moving right.
  const int m_tiles = (M + kBM - 1) / kBM;
  const int n_tiles = (N + kBN - 1) / kBN;
  const int linear = blockIdx.y * gridDim.x + blockIdx.x;
  const int group_tiles = GROUP_M * n_tiles;
  const int first_m = (linear / group_tiles) * GROUP_M;
  const int rows = min(m_tiles - first_m, GROUP_M);
  const int local = linear % group_tiles;
  const int m0 = (first_m + local % rows) * kBM;
  const int n0 = (local / rows) * kBN;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int warp_m = warp / kWarpsN;  // warp tile row
  const int warp_n = warp % kWarpsN;  // warp tile column
  const int k_tiles = (K + BK - 1) / BK;

  // Chunk i of a tile is the 16 bytes at (row, chunk) = (idx / chunks_per_row, idx % chunks_per_row),
  // idx = tid + i * kThreads: consecutive threads copy consecutive 16-byte pieces of a row.
  auto load_tile = [&](int slot, int kt) {
    unsigned char* tile_a = smem + slot * kStageBytes;
    unsigned char* tile_b = tile_a + kTileABytes;
    const int k0 = kt * BK;
    if constexpr (kVectorLoads) {
#pragma unroll
      for (int i = 0; i < kBM * BK / 8 / kThreads; ++i) {
        const int idx = tid + i * kThreads;
        const int row = idx / (BK / 8), chunk = idx % (BK / 8);
        const int grow = m0 + row, gcol = k0 + chunk * 8;
        const bool ok = grow < M && gcol < K;  // K % 8 == 0: a chunk is all in or all out
        cp_async_16(smem_u32(tile_a + swizzled(row, chunk, kARowBytes)),
                    ok ? A + static_cast<size_t>(grow) * K + gcol : A, ok ? 16 : 0);
      }
#pragma unroll
      for (int i = 0; i < BK * kBN / 8 / kThreads; ++i) {
        const int idx = tid + i * kThreads;
        const int row = idx / (kBN / 8), chunk = idx % (kBN / 8);
        const int grow = k0 + row, gcol = n0 + chunk * 8;
        const bool ok = grow < K && gcol < N;
        cp_async_16(smem_u32(tile_b + b_offset(row, chunk)), ok ? B + static_cast<size_t>(grow) * N + gcol : B,
                    ok ? 16 : 0);
      }
    } else {
      // Not unrolled: this path is for correctness at any size, and must not steal registers.
#pragma unroll 1
      for (int i = 0; i < kBM * BK / 8 / kThreads; ++i) {
        const int idx = tid + i * kThreads;
        const int row = idx / (BK / 8), chunk = idx % (BK / 8);
        const int grow = m0 + row;
        load_chunk_elementwise(tile_a + swizzled(row, chunk, kARowBytes),
                               A + static_cast<size_t>(min(grow, M - 1)) * K, k0 + chunk * 8, K, grow < M);
      }
#pragma unroll 1
      for (int i = 0; i < BK * kBN / 8 / kThreads; ++i) {
        const int idx = tid + i * kThreads;
        const int row = idx / (kBN / 8), chunk = idx % (kBN / 8);
        const int grow = k0 + row;
        load_chunk_elementwise(tile_b + b_offset(row, chunk), B + static_cast<size_t>(min(grow, K - 1)) * N,
                               n0 + chunk * 8, N, grow < K);
      }
    }
  };

  float acc[kMmaM][kMmaN][4];
#pragma unroll
  for (int i = 0; i < kMmaM; ++i)
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_tile(s, s);
    cp_async_commit();  // empty groups keep the group count uniform
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // tile kt has landed (for this thread) ...
    __syncthreads();              // ... for every thread, and slot (kt-1) % STAGES is free again
    const int next = kt + STAGES - 1;
    if (next < k_tiles) load_tile(next % STAGES, next);
    cp_async_commit();

    const uint32_t tile_a = smem_u32(smem + (kt % STAGES) * kStageBytes);
    const uint32_t tile_b = tile_a + kTileABytes;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // A fragments for the warp's four m16 rows stay live for the whole k16 step; B fragments are
      // loaded one 16-column pair at a time just before their MMAs (keeps registers under 255).
      uint32_t a[kMmaM][4];
#pragma unroll
      for (int i = 0; i < kMmaM; ++i) {
        const int row = warp_m * kWarpTileM + i * 16 + (lane % 16);
        ldmatrix_x4(a[i], tile_a + swizzled(row, kk * 2 + lane / 16, kARowBytes));
      }
#pragma unroll
      for (int j = 0; j < kMmaN / 2; ++j) {
        const int row = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int chunk = (warp_n * kWarpTileN + j * 16) / 8 + lane / 16;
        uint32_t b[4];  // {b0, b1} of n8 tile 2j, then of n8 tile 2j+1
        ldmatrix_x4_trans(b, tile_b + b_offset(row, chunk));
#pragma unroll
        for (int i = 0; i < kMmaM; ++i) {
          mma_m16n8k16<TIN>(acc[i][2 * j], a[i], b[0], b[1]);
          mma_m16n8k16<TIN>(acc[i][2 * j + 1], a[i], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: c0,c1 at (row g, cols 2q, 2q+1), c2,c3 at row g+8, with g = lane/4, q = lane%4.
  const bool pair_ok = (N % 2 == 0);
#pragma unroll
  for (int i = 0; i < kMmaM; ++i) {
#pragma unroll
    for (int j = 0; j < kMmaN; ++j) {
      const int col = n0 + warp_n * kWarpTileN + j * 8 + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + warp_m * kWarpTileM + i * 16 + lane / 4 + 8 * h;
        if (row >= M) continue;
        TOUT* dst = C + static_cast<size_t>(row) * N + col;
        const float lo = acc[i][j][2 * h], hi = acc[i][j][2 * h + 1];
        if (pair_ok && col + 1 < N) {
          *reinterpret_cast<uint32_t*>(dst) = pack2<TOUT>(lo, hi);
        } else {
          const uint32_t packed = pack2<TOUT>(lo, hi);
          const unsigned short lo_bits = packed & 0xFFFF, hi_bits = packed >> 16;
          if (col < N) *reinterpret_cast<unsigned short*>(dst) = lo_bits;
          if (col + 1 < N) *reinterpret_cast<unsigned short*>(dst + 1) = hi_bits;
        }
      }
    }
  }
}

}  // namespace

// The dynamic shared memory this build needs; the launcher refuses a YAML rule that gives less.
extern "C" {
__device__ int gemmlab_dynamic_smem_bytes = STAGES * kStageBytes;
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    mma_sync_gemm(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
  static_assert(std::is_same<TIN, __nv_bfloat16>::value || std::is_same<TIN, __half>::value, "TIN");
  extern __shared__ __align__(128) unsigned char smem[];
  // 16-byte copies need 16-byte aligned rows; CuPy allocations are 256-byte aligned.
  const bool vector_ok = (K % 8 == 0) && (N % 8 == 0) &&
                         ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) % 16 == 0);
  if (vector_ok)
    gemm_block<true>(A, B, C, M, N, K, smem);
  else
    gemm_block<false>(A, B, C, M, N, K, smem);
}
