// Stage 10: mma_sync -- warp-level tensor-core MMA (mma.sync m16n8k16) fed by ldmatrix from
// XOR-swizzled shared memory, with a multistage cp.async pipeline (the sm80 "multistage" GEMM).
//
// What changes over the WMMA stage: WMMA hides the fragment layouts and loads them with ordinary
// shared-memory loads from padded tiles. Here each warp owns a WM x WN piece of a BM x BN block tile
// and drives the tensor cores with the PTX instruction itself (`mma.sync.aligned.m16n8k16`, fp32
// accumulation: a 64x64 warp tile is 4x8 MMAs = 128 accumulators per thread). Operand fragments
// come from `ldmatrix` (one instruction loads four 8x8 matrices; `.trans` turns the N-contiguous B
// rows into the K-pairs the MMA wants), so no thread unpacks a fragment by hand. Shared-memory
// tiles have no padding: 16-byte chunks are XOR-swizzled within each 128-byte line, which makes
// both the cp.async writes and the 8-row ldmatrix reads bank-conflict free (checked at compile
// time below). Copies are asynchronous (`cp.async.cg`, 16 B each): STAGES-1 k-tiles are in flight
// while the warps compute on the current one. Blocks are launched in groups of GROUP_M block-rows
// so that the blocks resident at once share A and B tiles in L2.
//
// How the main loop hides latency (after CUTLASS's sm80 MmaMultistage):
// * FRAG_PIPE=1 (default): fragments are double-buffered in registers. The ldmatrix for k16 step
//   kk+1 is issued before the MMAs of step kk, and the first step of the next k-tile is loaded
//   right after the one barrier per k-tile (at the end of step BK/16-2), so ldmatrix latency hides
//   behind MMAs even across k-tiles. The cp.async copies of the tile STAGES-1 ahead are spread
//   over the k16 steps instead of issued in one burst. FRAG_PIPE=0: the plain loop (barrier at
//   the top of each k-tile, all copies, then per k16 step: load fragments, MMAs), for comparison.
// * The copy addressing is set up once per block: each thread keeps one pointer per operand and
//   advances it by a k-tile; the rows/columns it copies differ by constants. Rows of A past M and
//   columns of B past N are clamped to the last valid one (they only feed outputs that are never
//   stored), and the partial k-tile is loaded FIRST (zero-filled past its end), as CUTLASS does, so
//   the main loop has no bounds checks and no branches around the copies.
// * MIN_BLOCKS: blocks per SM ptxas budgets registers for (__launch_bounds__); with 128x128 tiles,
//   4 warps and 3 stages (96 KB) two blocks fit in one SM, and one block's barrier waits and
//   epilogue overlap the other's MMAs.
//
// Defines: BM, BN (block tile), BK (k-tile, 32 or 64), WM, WN (warp tile; WM multiple of 16, WN in
// {16, 32, 64}), STAGES (>= 2), MIN_BLOCKS, FRAG_PIPE (0/1), GROUP_M. Threads = 32*(BM/WM)*(BN/WN).
// Constraints: TIN in {bf16, fp16}, fp32 accumulation, TOUT = TIN (16-bit). Any M, N, K: when K or
// N is not a multiple of 8 (rows not 16-byte aligned) the tiles are loaded element by element
// instead of with cp.async (slower, same results).
// Shared memory: STAGES * (BM*BK + BK*BN) * 2 bytes: 192 KB for 128x256x64 with 4 stages, 144 KB
// with 3; 96 KB for 128x128x64 with 3 stages (two blocks per SM).
//
// Modeled intensity (operand bytes per block tile, no reuse between blocks): 2*BM*BN/((BM+BN)*2 B)
// = 85 FLOP/B for 128x256, 64 FLOP/B for 128x128.
//
// Run it alone: python run.py variant=[cublas,mma_sync] precision=bf16 sizes.square=[4096,8192]
// Build alone: nvcc -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v kernels/cuda/10_mma_sync.cu
// CPU check: tests/test_hopper_kernels.py runs it through the host emulation
// (kernels/cuda/common/host_emulation; the PTX instructions it uses are emulated in
// common/host_emulation/mma_sync_ptx.h, cp.async copies land only when the thread waits for their group).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>
#if defined(GEMMLAB_HOST_EMULATION)
#include <deque>
#include <vector>
#endif

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
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef FRAG_PIPE
#define FRAG_PIPE 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

namespace {

constexpr int kBM = BM, kBN = BN, kBK = BK, kWM = WM, kWN = WN, kStages = STAGES;
constexpr bool kFragPipe = FRAG_PIPE != 0;
constexpr int kWarpsN = kBN / kWN;
constexpr int kWarpsM = kBM / kWM;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kMmaM = kWM / 16;  // m16 tiles per warp
constexpr int kMmaN = kWN / 8;   // n8 tiles per warp (loaded in pairs by one ldmatrix.x4.trans)
constexpr int kKSteps = kBK / 16;
constexpr int kARowBytes = kBK * 2;  // 128 (BK = 64: one swizzle line per row) or 64 (two rows per line)
constexpr int kBRowBytes = kBN * 2;
constexpr int kTileABytes = kBM * kARowBytes;
constexpr int kTileBBytes = kBK * kBRowBytes;
constexpr int kStageBytes = kTileABytes + kTileBBytes;

// Copy geometry. A: kAChunksPerRow threads copy one row; a thread copies the same chunk of
// kAPerThread rows, kARowsPerPass apart. B: eight threads copy one 128-byte segment of a row; a
// thread copies the same chunk of the same segment in kBPerThread rows, kBRowsPerPass apart.
constexpr int kAChunksPerRow = kBK / 8;
constexpr int kARowsPerPass = kThreads / kAChunksPerRow;
constexpr int kAPerThread = kBM / kARowsPerPass;
constexpr int kBSegments = kBN / 64;
constexpr int kBRowsPerPass = kThreads / 8 / kBSegments;
constexpr int kBPerThread = kBK / kBRowsPerPass;

static_assert(kBK == 32 || kBK == 64, "BK is 32 or 64 (the A swizzle assumes 64- or 128-byte rows)");
static_assert(kWM % 16 == 0 && (kWN == 16 || kWN == 32 || kWN == 64), "WM a multiple of 16, WN in {16, 32, 64}");
static_assert(kBM % kWM == 0 && kBN % kWN == 0 && kBN % 64 == 0, "BM, BN multiples of the warp tile, BN of 64");
static_assert(kThreads <= 1024, "at most 1024 threads per block");
static_assert(kStages >= 2, "a pipeline needs two stages at least");
static_assert(kKSteps % 2 == 0, "the fragment double buffer alternates over an even number of k16 steps");
static_assert(kARowsPerPass > 0 && kBM % kARowsPerPass == 0 && kBRowsPerPass > 0 && kBK % kBRowsPerPass == 0 &&
                  (kThreads / 8) % kBSegments == 0,
              "the block's threads must tile the A and B copies evenly");
static_assert(kStages * kStageBytes <= 227 * 1024, "more shared memory than one sm_90 block may have");

__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }

// ---- shared-memory layout ------------------------------------------------------------------------
// Byte offset of 16-byte chunk `chunk` of row `row` of the A tile. 128-byte rows (BK = 64): the
// chunk index is XORed with the row's low three bits. 64-byte rows (BK = 32): two rows share a
// 128-byte line, and the chunk's position in the line is XORed with the line's low three bits.
__host__ __device__ constexpr uint32_t a_offset(int row, int chunk) {
  if (kARowBytes == 128) return row * 128 + ((chunk ^ (row & 7)) << 4);
  const int line = row >> 1, pos = ((row & 1) << 2) | chunk;
  return line * 128 + ((pos ^ (line & 7)) << 4);
}

// B rows are kBN/8 chunks long: the chunk index is swizzled within each 128-byte segment.
__host__ __device__ constexpr uint32_t b_offset(int row, int chunk) {
  return row * kBRowBytes + ((chunk & ~7) << 4) + (((chunk & 7) ^ (row & 7)) << 4);
}

// ldmatrix.x4 addresses. A: lane l points at row l % 16, chunk l / 16 of an m16 x k16 piece; the
// piece for (m16 tile i, k16 step kk) is at (a_frag_offset ^ (kk << 5)) + i * 16 rows. B
// (.trans): lane l points at k row l % 16 and 8-column chunk l / 16 of a k16 x n16 piece; the
// piece for (n16 pair j, step kk) is at (b_frag_offset ^ (j << 5)) + kk * 16 rows. The XOR works
// because the step (pair) index only flips bits 5-6 of the swizzled chunk (checked below).
__host__ __device__ constexpr uint32_t a_frag_offset(int warp_m, int lane) {
  return a_offset(warp_m * kWM + (lane & 15), lane >> 4);
}
__host__ __device__ constexpr uint32_t b_frag_offset(int warp_n, int lane) {
  return b_offset(lane & 15, warp_n * kWN / 8 + (lane >> 4));
}

// Rows and chunks a thread copies (pass p); the main loop relies on constant offsets between passes.
__host__ __device__ constexpr int a_copy_row(int t, int p) { return t / kAChunksPerRow + p * kARowsPerPass; }
__host__ __device__ constexpr int a_copy_chunk(int t) { return t % kAChunksPerRow; }
__host__ __device__ constexpr int b_copy_row(int t, int p) { return t / 8 / kBSegments + p * kBRowsPerPass; }
__host__ __device__ constexpr int b_copy_chunk(int t) { return (t / 8 % kBSegments) * 8 + t % 8; }
constexpr uint32_t kAPassBytes = kARowsPerPass * kARowBytes;  // shared-memory distance between passes
constexpr uint32_t kBPassBytes = kBRowsPerPass * kBRowBytes;

// ---- compile-time checks of the layout (no GPU needed to find an addressing slip) ----------------
constexpr bool fragment_addresses_match_the_layout() {
  for (int w = 0; w < kWarpsM; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < kMmaM; ++i)
        for (int kk = 0; kk < kKSteps; ++kk)
          if ((a_frag_offset(w, lane) ^ (kk << 5)) + i * 16 * kARowBytes !=
              a_offset(w * kWM + i * 16 + (lane & 15), 2 * kk + (lane >> 4)))
            return false;
  for (int w = 0; w < kWarpsN; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int j = 0; j < kMmaN / 2; ++j)
        for (int kk = 0; kk < kKSteps; ++kk)
          if ((b_frag_offset(w, lane) ^ (j << 5)) + kk * 16 * kBRowBytes !=
              b_offset(kk * 16 + (lane & 15), w * kWN / 8 + 2 * j + (lane >> 4)))
            return false;
  return true;
}

// An 8-lane phase of ldmatrix reads eight 16-byte rows: conflict free when they fall in eight
// different 16-byte bank groups of a 128-byte line.
constexpr bool ldmatrix_reads_are_conflict_free() {
  for (int w = 0; w < kWarpsM; ++w)
    for (int kk = 0; kk < kKSteps; ++kk)
      for (int q = 0; q < 4; ++q) {
        int seen = 0;
        for (int r = 0; r < 8; ++r) seen |= 1 << (((a_frag_offset(w, 8 * q + r) ^ (kk << 5)) >> 4) & 7);
        if (seen != 0xff) return false;
      }
  for (int w = 0; w < kWarpsN; ++w)
    for (int j = 0; j < kMmaN / 2; ++j)
      for (int q = 0; q < 4; ++q) {
        int seen = 0;
        for (int r = 0; r < 8; ++r) seen |= 1 << (((b_frag_offset(w, 8 * q + r) ^ (j << 5)) >> 4) & 7);
        if (seen != 0xff) return false;
      }
  return true;
}

// Every chunk of a stage is copied exactly once; eight consecutive threads (one shared-memory
// wavefront of 16-byte stores) write eight different bank groups; passes are constant offsets apart.
constexpr bool copies_cover_the_tiles_once_without_conflicts() {
  int a_count[kBM * kAChunksPerRow] = {};
  int b_count[kBK * (kBN / 8)] = {};
  for (int t = 0; t < kThreads; ++t) {
    for (int p = 0; p < kAPerThread; ++p) {
      ++a_count[a_copy_row(t, p) * kAChunksPerRow + a_copy_chunk(t)];
      if (a_offset(a_copy_row(t, p), a_copy_chunk(t)) != a_offset(a_copy_row(t, 0), a_copy_chunk(t)) + p * kAPassBytes)
        return false;
    }
    for (int p = 0; p < kBPerThread; ++p) {
      ++b_count[b_copy_row(t, p) * (kBN / 8) + b_copy_chunk(t)];
      if (b_offset(b_copy_row(t, p), b_copy_chunk(t)) != b_offset(b_copy_row(t, 0), b_copy_chunk(t)) + p * kBPassBytes)
        return false;
    }
  }
  for (int c : a_count)
    if (c != 1) return false;
  for (int c : b_count)
    if (c != 1) return false;
  for (int t0 = 0; t0 < kThreads; t0 += 8) {
    int seen_a = 0, seen_b = 0;
    for (int t = t0; t < t0 + 8; ++t) {
      seen_a |= 1 << ((a_offset(a_copy_row(t, 0), a_copy_chunk(t)) >> 4) & 7);
      seen_b |= 1 << ((b_offset(b_copy_row(t, 0), b_copy_chunk(t)) >> 4) & 7);
    }
    if (seen_a != 0xff || seen_b != 0xff) return false;
  }
  return true;
}

static_assert(fragment_addresses_match_the_layout(), "ldmatrix addresses disagree with the tile layout");
static_assert(ldmatrix_reads_are_conflict_free(), "ldmatrix reads would conflict in shared-memory banks");
static_assert(copies_cover_the_tiles_once_without_conflicts(), "the copy plan misses, repeats or conflicts");

// ---- PTX wrappers (the host emulation's versions: common/host_emulation/mma_sync_ptx.h) ----------
#if !defined(GEMMLAB_HOST_EMULATION)
#include "hopper/ptx.cuh"  // smem_u32 and pack2, shared with the wgmma stages
using hopper::pack2;
using hopper::smem_u32;

// 16 bytes global -> shared, bypassing L1; bytes past `src_bytes` (0 or 16 here) are zero-filled
// and nothing is read when it is 0.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
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

__device__ __forceinline__ void store_16(unsigned char* dst, const uint32_t (&w)[4]) {
  *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}
#else
uint32_t smem_u32(const void* p);
void cp_async_16(uint32_t dst, const void* src, int src_bytes);
void cp_async_commit();
template <int Pending>
void cp_async_wait();
void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr);
void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr);
template <class T>
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <class T>
uint32_t pack2(float lo, float hi);
void store_16(unsigned char* dst, const uint32_t (&w)[4]);
#endif

// ---- tile loaders: one interface, two implementations ---------------------------------------------
// first(stage): the first k-tile into the stage at byte offset `stage`; next(stage, part, parts,
// more): part `part` of `parts` of the copies of the following k-tile (zero-filled, nothing read,
// when !more: past the last k-tile); advance(more): move on to the k-tile after it.

// 16-byte rows (K, N multiples of 8, aligned pointers): cp.async with per-block addressing.
struct VectorLoader {
  const unsigned char* a_src;  // this thread's pass-0 A chunk of the next k-tile
  const unsigned char* b_src;  // this thread's pass-0 B chunk of the next k-tile
  const TIN* a_any;            // a valid address for zero-filled copies
  const TIN* b_any;
  uint32_t a_pass_bytes[kAPerThread];  // global distance of pass p's row from pass 0's (clamped to M-1)
  uint32_t b_pass_bytes;               // kBRowsPerPass rows of B
  uint32_t b_tile_bytes;               // BK rows of B
  uint32_t smem_a, smem_b;             // shared address of this thread's pass-0 chunks in stage 0
  int k_first;                         // the first k-tile's width: K - (k_tiles - 1) * BK, in (0, BK]

  __device__ __forceinline__ VectorLoader(const TIN* A, const TIN* B, int M, int N, int K, int m0, int n0,
                                          uint32_t smem_base) {
    const int t = threadIdx.x;
    const int a_row0 = imin(m0 + a_copy_row(t, 0), M - 1);
    a_src = reinterpret_cast<const unsigned char*>(A + static_cast<size_t>(a_row0) * K + a_copy_chunk(t) * 8);
#pragma unroll
    for (int p = 0; p < kAPerThread; ++p)
      a_pass_bytes[p] = static_cast<uint32_t>(imin(m0 + a_copy_row(t, p), M - 1) - a_row0) * K * 2;
    const int b_col = imin(n0 + b_copy_chunk(t) * 8, N - 8);  // whole chunks: N % 8 == 0 here
    b_src = reinterpret_cast<const unsigned char*>(B + static_cast<size_t>(b_copy_row(t, 0)) * N + b_col);
    b_pass_bytes = static_cast<uint32_t>(kBRowsPerPass) * N * 2;
    b_tile_bytes = static_cast<uint32_t>(kBK) * N * 2;
    a_any = A;
    b_any = B;
    smem_a = smem_base + a_offset(a_copy_row(t, 0), a_copy_chunk(t));
    smem_b = smem_base + kTileABytes + b_offset(b_copy_row(t, 0), b_copy_chunk(t));
    k_first = K - ((K + kBK - 1) / kBK - 1) * kBK;
  }

  // The partial k-tile first: columns [0, k_first) of A and rows [0, k_first) of B, zeros after.
  __device__ __forceinline__ void first(uint32_t stage) {
    const int t = threadIdx.x;
    const bool a_ok = a_copy_chunk(t) * 8 < k_first;
#pragma unroll
    for (int p = 0; p < kAPerThread; ++p)
      cp_async_16(smem_a + stage + p * kAPassBytes, a_ok ? a_src + a_pass_bytes[p] : reinterpret_cast<const void*>(a_any),
                  a_ok ? 16 : 0);
#pragma unroll
    for (int p = 0; p < kBPerThread; ++p) {
      const bool ok = b_copy_row(t, p) < k_first;
      cp_async_16(smem_b + stage + p * kBPassBytes, ok ? b_src + p * b_pass_bytes : reinterpret_cast<const void*>(b_any),
                  ok ? 16 : 0);
    }
    a_src += k_first * 2;
    b_src += static_cast<size_t>(k_first) * (b_tile_bytes / kBK);
  }

  // Copies [part * n / parts, (part + 1) * n / parts) of each operand's n copies; full k-tiles only.
  __device__ __forceinline__ void next(uint32_t stage, int part, int parts, bool more) {
    const int src_bytes = more ? 16 : 0;
#pragma unroll
    for (int p = 0; p < kAPerThread; ++p)
      if (p >= part * kAPerThread / parts && p < (part + 1) * kAPerThread / parts)
        cp_async_16(smem_a + stage + p * kAPassBytes, a_src + a_pass_bytes[p], src_bytes);
#pragma unroll
    for (int p = 0; p < kBPerThread; ++p)
      if (p >= part * kBPerThread / parts && p < (part + 1) * kBPerThread / parts)
        cp_async_16(smem_b + stage + p * kBPassBytes, b_src + p * b_pass_bytes, src_bytes);
  }

  __device__ __forceinline__ void advance(bool more) {
    if (more) {  // past the last k-tile the pointers stay where they are (still valid)
      a_src += kBK * 2;
      b_src += b_tile_bytes;
    }
  }
};

// Rows that are not 16-byte aligned: guarded element loads and 16-byte shared stores, k-tile t at
// k = t * BK. Not unrolled: this path is for correctness at any size and must not steal registers.
struct ElementLoader {
  const uint16_t* A;
  const uint16_t* B;
  int M, N, K, m0, n0, tile;
  unsigned char* smem;

  __device__ __forceinline__ ElementLoader(const TIN* A_, const TIN* B_, int M_, int N_, int K_, int m0_, int n0_,
                                           unsigned char* smem_)
      : A(reinterpret_cast<const uint16_t*>(A_)), B(reinterpret_cast<const uint16_t*>(B_)), M(M_), N(N_), K(K_),
        m0(m0_), n0(n0_), tile(0), smem(smem_) {}

  // 8 guarded elements of row `row` (of `rows`) from column `col` (of `cols`) into one 16-byte chunk.
  __device__ __forceinline__ static void chunk(unsigned char* dst, const uint16_t* X, int row, int rows, int col,
                                               int cols) {
    uint32_t w[4] = {0, 0, 0, 0};
    if (row < rows) {
      const uint16_t* src = X + static_cast<size_t>(row) * cols;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (col + e < cols) w[e / 2] |= static_cast<uint32_t>(src[col + e]) << (16 * (e % 2));
    }
    store_16(dst, w);
  }

  __device__ __forceinline__ void load(uint32_t stage) {
    unsigned char* tile_a = smem + stage;
    unsigned char* tile_b = tile_a + kTileABytes;
    const int k0 = tile * kBK;
#pragma unroll 1
    for (int idx = threadIdx.x; idx < kBM * kAChunksPerRow; idx += kThreads) {
      const int row = idx / kAChunksPerRow, c = idx % kAChunksPerRow;
      chunk(tile_a + a_offset(row, c), A, m0 + row, M, k0 + c * 8, K);
    }
#pragma unroll 1
    for (int idx = threadIdx.x; idx < kBK * (kBN / 8); idx += kThreads) {
      const int row = idx / (kBN / 8), c = idx % (kBN / 8);
      chunk(tile_b + b_offset(row, c), B, k0 + row, K, n0 + c * 8, N);
    }
  }

  __device__ __forceinline__ void first(uint32_t stage) {
    load(stage);
    tile = 1;
  }
  __device__ __forceinline__ void next(uint32_t stage, int part, int /*parts*/, bool more) {
    if (part == 0 && more) load(stage);
  }
  __device__ __forceinline__ void advance(bool more) {
    if (more) ++tile;
  }
};

// ---- the block's work ----------------------------------------------------------------------------
// Fragments of k16 step kk from the stage at shared address `stage`.
__device__ __forceinline__ void load_fragments(uint32_t (&fa)[kMmaM][4], uint32_t (&fb)[kMmaN / 2][4], uint32_t stage,
                                               uint32_t a_frag, uint32_t b_frag, int kk) {
  const uint32_t a = stage + (a_frag ^ (kk << 5));
#pragma unroll
  for (int i = 0; i < kMmaM; ++i) ldmatrix_x4(fa[i], a + i * 16 * kARowBytes);
  const uint32_t b = stage + kTileABytes + kk * 16 * kBRowBytes;
#pragma unroll
  for (int j = 0; j < kMmaN / 2; ++j) ldmatrix_x4_trans(fb[j], b + (b_frag ^ (j << 5)));
}

// All MMAs of one k16 step, in serpentine order (consecutive MMAs share an operand).
__device__ __forceinline__ void mma_step(float (&acc)[kMmaM][kMmaN][4], const uint32_t (&fa)[kMmaM][4],
                                         const uint32_t (&fb)[kMmaN / 2][4]) {
#pragma unroll
  for (int i = 0; i < kMmaM; ++i)
#pragma unroll
    for (int jj = 0; jj < kMmaN; ++jj) {
      const int j = (i % 2) ? kMmaN - 1 - jj : jj;
      mma_m16n8k16<TIN>(acc[i][j], fa[i], fb[j / 2][2 * (j % 2)], fb[j / 2][2 * (j % 2) + 1]);
    }
}

__device__ __forceinline__ uint32_t next_stage(uint32_t stage) {
  return stage + kStageBytes == kStages * kStageBytes ? 0 : stage + kStageBytes;
}

template <class Loader>
__device__ __forceinline__ void gemm_block(Loader& loader, TOUT* __restrict__ C, int M, int N, int K, int m0, int n0,
                                           uint32_t smem_base) {
  const int lane = threadIdx.x % 32;
  const int warp_m = threadIdx.x / 32 / kWarpsN;  // warp tile row
  const int warp_n = threadIdx.x / 32 % kWarpsN;  // warp tile column
  const int k_tiles = (K + kBK - 1) / kBK;
  const uint32_t a_frag = a_frag_offset(warp_m, lane);
  const uint32_t b_frag = b_frag_offset(warp_n, lane);

  float acc[kMmaM][kMmaN][4];
#pragma unroll
  for (int i = 0; i < kMmaM; ++i)
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

  // Prologue: k-tiles 0 .. STAGES-2 in flight, one commit group each (empty ones keep the count).
  if (k_tiles > 0) loader.first(0);
  cp_async_commit();
#pragma unroll
  for (int s = 1; s < kStages - 1; ++s) {
    loader.next(s * kStageBytes, 0, 1, s < k_tiles);
    loader.advance(s < k_tiles);
    cp_async_commit();
  }

  uint32_t read_stage = 0, write_stage = (kStages - 1) * kStageBytes;  // byte offsets of stages
  uint32_t fa[2][kMmaM][4], fb[2][kMmaN / 2][4];
  if constexpr (kFragPipe) {
    cp_async_wait<kStages - 2>();  // k-tile 0 has landed (for this thread) ...
    __syncthreads();               // ... for every thread
    load_fragments(fa[0], fb[0], smem_base + read_stage, a_frag, b_frag, 0);
    for (int kt = 0; kt < k_tiles; ++kt) {
      const bool more = kt + kStages - 1 < k_tiles;  // k-tile kt+STAGES-1 exists
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        // Step kk+1's fragments (the next k-tile's first after the barrier below) before step kk's MMAs.
        load_fragments(fa[(kk + 1) % 2], fb[(kk + 1) % 2], smem_base + read_stage, a_frag, b_frag,
                       (kk + 1) % kKSteps);
        // k-tile kt+STAGES-1 goes to the stage k-tile kt-1 used; every thread finished reading it
        // before the previous barrier.
        if (kk < kKSteps - 1) loader.next(write_stage, kk, kKSteps - 1, more);
        mma_step(acc, fa[kk % 2], fb[kk % 2]);
        if (kk == kKSteps - 2) {
          loader.advance(more);
          cp_async_commit();
          cp_async_wait<kStages - 2>();  // k-tile kt+1 has landed (for this thread) ...
          __syncthreads();  // ... for every thread, and every thread is done reading k-tile kt's last step
          read_stage = next_stage(read_stage);
          write_stage = next_stage(write_stage);
        }
      }
    }
  } else {
    for (int kt = 0; kt < k_tiles; ++kt) {
      const bool more = kt + kStages - 1 < k_tiles;
      cp_async_wait<kStages - 2>();  // k-tile kt has landed (for this thread) ...
      __syncthreads();               // ... for every thread, and the stage of k-tile kt-1 is free again
      loader.next(write_stage, 0, 1, more);
      loader.advance(more);
      cp_async_commit();
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        load_fragments(fa[0], fb[0], smem_base + read_stage, a_frag, b_frag, kk);
        mma_step(acc, fa[0], fb[0]);
      }
      read_stage = next_stage(read_stage);
      write_stage = next_stage(write_stage);
    }
  }
  cp_async_wait<0>();

  // Epilogue: c0,c1 at (row g, cols 2q, 2q+1), c2,c3 at row g+8, with g = lane/4, q = lane%4.
  const bool pair_ok = (N % 2 == 0);
#pragma unroll
  for (int i = 0; i < kMmaM; ++i) {
#pragma unroll
    for (int j = 0; j < kMmaN; ++j) {
      const int col = n0 + warp_n * kWN + j * 8 + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + warp_m * kWM + i * 16 + lane / 4 + 8 * h;
        if (row >= M) continue;
        TOUT* dst = C + static_cast<size_t>(row) * N + col;
        const uint32_t packed = pack2<TOUT>(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        if (pair_ok && col + 1 < N) {
          *reinterpret_cast<uint32_t*>(dst) = packed;
        } else {
          if (col < N) *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(packed & 0xFFFF);
          if (col + 1 < N) *reinterpret_cast<uint16_t*>(dst + 1) = static_cast<uint16_t>(packed >> 16);
        }
      }
    }
  }
}

}  // namespace

// The dynamic shared memory this build needs; the launcher refuses a YAML rule that gives less.
extern "C" {
__device__ int gemmlab_dynamic_smem_bytes = kStages * kStageBytes;
}

extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
    mma_sync_gemm(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K) {
  static_assert(std::is_same<TIN, __nv_bfloat16>::value || std::is_same<TIN, __half>::value, "TIN");
  static_assert(sizeof(TOUT) == 2, "TOUT is a 16-bit type");
#if defined(GEMMLAB_HOST_EMULATION)
  unsigned char* smem = gemm_host::dynamic_smem;
#else
  extern __shared__ __align__(128) unsigned char smem[];
#endif
  // Grouped launch order: consecutive blocks walk down GROUP_M block-rows before moving right.
  const int m_tiles = (M + kBM - 1) / kBM;
  const int n_tiles = (N + kBN - 1) / kBN;
  const int linear = blockIdx.y * gridDim.x + blockIdx.x;
  const int group_tiles = GROUP_M * n_tiles;
  const int first_m = (linear / group_tiles) * GROUP_M;
  const int rows = imin(m_tiles - first_m, GROUP_M);
  const int local = linear % group_tiles;
  const int m0 = (first_m + local % rows) * kBM;
  const int n0 = (local / rows) * kBN;

  const uint32_t smem_base = smem_u32(smem);
  // 16-byte copies need 16-byte aligned rows; CuPy allocations are 256-byte aligned.
  const bool vector_ok = (K % 8 == 0) && (N % 8 == 0) &&
                         ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) % 16 == 0);
  if (vector_ok) {
    VectorLoader loader(A, B, M, N, K, m0, n0, smem_base);
    gemm_block(loader, C, M, N, K, m0, n0, smem_base);
  } else {
    ElementLoader loader(A, B, M, N, K, m0, n0, smem);
    gemm_block(loader, C, M, N, K, m0, n0, smem_base);
  }
}

#include "common/host_emulation/mma_sync_ptx.h"  // the PTX above, emulated on the host (CPU tests)
