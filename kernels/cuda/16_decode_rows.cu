// Stage 16: decode_rows -- the decode GEMM (M = 1..64 tokens against a weight matrix, layout nt) with
// the weights read as the copy kernel reads memory: whole 512-byte pieces of one row per warp load.
//
// What changes over stage 14 (and why): stage 14 loads the weights straight into mma.sync fragments, so one warp load
// covers 8 rows x 64 bytes, and it runs one CTA of 8 warps per SM (255 registers). The H200 read only
// 53-67% of the copy probe's bandwidth that way at M = 1. gemmlab/bench/read_patterns.py timed the
// access patterns alone (outputs/reference/h200-2026-12-03/session10b/logs/read_patterns.jsonl):
// stage 14's pattern reached 45-86% of a copy-like read (91% at best), a warp per row with 512
// contiguous bytes per load 96-99.7% once 16 warps ran per SM (78-80% with 8). So here:
// * Rows, not fragments: a warp owns a unit of 16 weight rows (one m16 tile) and a step is 512 bytes
//   of each of them. Lane l loads bytes [16 l, 16 l + 16) of the step of each row: 16 loads of 512
//   contiguous bytes, 8 KB per warp in flight (ld.global.nc.L1::no_allocate.L2::256B, W_HINT).
// * Through shared memory into mma.sync: the warp stores the 16 x 512-byte step into its own 8 KB
//   tile (16-byte chunks XOR-swizzled by row parity: conflict-free both ways), then lane (g, c) reads
//   chunks 4i + c of rows g and g + 8 (i = 0..7) with ld.shared.v4: stage 14's fragment mapping (the
//   order of a dot product's k terms is free, so those 16 bytes ARE the A fragment's words; the same
//   16 bytes of token g's activations are the B fragment's). C^T = W X^T: weight rows are the m16
//   side, tokens the n8 side (NT n-tiles of 8 tokens).
// * Software pipeline (PREFETCH 1): right after the step is in shared memory, the next step's 16
//   loads go out, and the MMAs of this step run while they are in flight; only 64 registers of W.
// * Activations through L1 (ld.global.nc, 16 bytes a lane: the X of a step is 512 bytes a token, read
//   by every warp that works at that K).
// * Work split, stream-K over every warp of the grid: the items (unit, step) in unit-major order are
//   cut into equal contiguous ranges, one per warp (a grid of MIN_BLOCKS CTAs per SM); every warp
//   streams the same number of bytes (+-one step) whatever N and K. A unit inside one range is
//   written to C at once; a unit split between warps leaves each warp's partial in the workspace
//   (two slots per warp: its first and its last unit), and the warp whose arrival completes the
//   unit's count (an acq_rel atomic after __syncwarp, as stage 14) sums the partials in warp order
//   (deterministic), writes C and resets the counter for the next launch. No float atomics, no memset.
// * fp8 (e4m3, per-tensor scales): the same bytes, 512 elements a step; each 16-byte chunk converted
//   to f16 pairs (cvt.f16x2.e4m3x2, exact) for four f16 m16n8k16 MMAs, as stage 14's FP8_F16_MMA.
//
// Defines (each switchable; the decode_rows sweep of .ci/h200-session.sh):
//   WARPS       warps per CTA (8)
//   MIN_BLOCKS  CTAs per SM the registers are bounded for and the grid's CTAs per SM, from the point
//               (point_defines): BLOCKS_SMALL where 128 registers hold the step (bf16 up to 16 tokens,
//               fp8 up to 8), else BLOCKS_LARGE (1). The read probe lost ~20% at 8 warps per SM, yet
//               BLOCKS_SMALL 2 (16 warps, 128 registers) was the slower on the H200: 58-68% of the faster
//               library at 16 tokens against 68-83% with 1 CTA (255 registers), and 75-98% against
//               77-100% at 1 token (session10c decode_rows_sweep): the default is 1
//   W_HINT      L1::no_allocate + L2::256B on the weight loads (0: plain ld.global.nc)
//   SWIZZLE     1: 16-byte chunks XOR (row parity << 2) in the tile (0: 2-way bank conflicts on reads)
//   PREFETCH    1: the next step's loads before this step's MMAs (0: after them: one step in flight)
//   XSHARE      1 (the YAML's default since session13b): stream-K over CTAs, whose warps take WARPS
//               neighbouring units side by side at the same step (a step's X, M x 512 bytes, read from L2
//               once per CTA: with XSTAGE into the CTA's shared tiles, else through L1); 0: over warps,
//               each on its own units and steps (X from L2 by every warp: 4x the weight bytes at M = 64).
//               Measured (session13b, XSTAGE 1, bf16, % of cuBLAS interleaved): 16 tokens 98.1-104.8
//               against 86.8-94.6 at the large shapes, 1 token 97.0 / 98.2 against 95.4 / 95.7
//   DEFER       1: a warp's first unit, when another warp holds its start, arrives at its counter at the
//               end of the warp's range (its partial stored when the warp leaves it; one fence and two
//               atomics in flight together at the end) instead of when the warp leaves it (a fence and an
//               atomic round trip in the middle of the stream, the warp's loads waiting behind them).
//               MIN_BLOCKS 1 builds only: at 128 registers the deferred state spills. Measured
//               (session12): -3.5 to +3.1 points of the faster library, about 1 us slower at 470 MB: off
//   TRACE       1: lane 0 of every warp stamps %globaltimer at its start, its first step's weights in
//               registers, its last MMA and its end, and its SM (%smid), into the workspace after the
//               partials (40 bytes a warp): gemmlab/bench/decode_trace.py reads them (0: none, the default)
//   RING        2..4: the weights copied by cp.async.cg straight into a ring of RING tiles per warp (RING - 1
//               steps in flight, no registers or shared-memory stores for them); 0: through registers.
//               Measured (session12b/12c): no better at 1 token (the warps' stream ends spread wider:
//               warps 0-1 of a CTA 14 us behind warps 6-7 at 8192 x 28672), mixed at 16
//   BALANCE     1 (the YAML's BAL, for at most 16 tokens): stream-K over CTAs; a CTA's range is cut into
//               WARPS static chunks (3/32 of it each) and guided dynamic ones (1/16 of what remains, down to
//               one step) that its warps claim from a shared-memory counter as they finish; a chunk's
//               partials go to the CTA's slots in the workspace (two a chunk; in shared memory they took the
//               L1 that holds X: session12d), summed per unit in chunk order at the CTA's end
//               (deterministic), units shared with a neighbouring CTA through the counters as above.
//               Why: with static ranges the warps of one SM ended 3-6 us apart (session12b's stamps:
//               within-SM spread 2-3x the spread of the SMs' means). Measured (session12e): the SM's warps
//               end 1.5 us apart instead of 6.3, but a unit cut into ~60 guided chunks is summed one L2
//               round trip per chunk (up to 21 us at the CTA's end) and 16 tokens stream slower: 69-96%
//               of cuBLAS at 1 token against 72-100%, off by default. Next: sum a unit's slots spread
//               over the CTA's warps in a fixed tree, and find why 16 tokens stream slower
//   XSTAGE      1 (the YAML's XS, the default, at most 16 tokens, RING 0, PREFETCH 1, MIN_BLOCKS 1): a
//               step's activations copied by cp.async.cg into one of two shared-memory tiles per warp
//               (NT x 8 tokens x 512 bytes, swizzled as the weight tile), issued one step ahead with the weights' loads; the
//               MMAs read them with ld.shared. 0: ld.global.nc inside the step, an L2 round trip on
//               every step's critical path (session12f's ncu at 16 tokens: L1 hit rate 5.9%, DRAM 68.7%).
//               Measured (session13, bf16, % of cuBLAS interleaved): 16 tokens 70.3-93.1 against
//               66.0-89.0 (16 x 57344 x 8192: 93.1 against 81.6), 1 token unchanged (91.9-93.3 against
//               92.2-93.1); fp8 -0.7 to +7.3% in GB/s. With XSHARE 1 (each warp its own copies): no
//               better. Since then, XSTAGE with XSHARE shares two tiles among the CTA's warps (all at
//               the same step): its threads copy a step's activations together, a barrier a step
//               (__syncthreads: the copies visible, the other tile free), the activations' L2 reads / 8
//               XS_WIDE 1 (the YAML's; -1 by default: 1 past 16 tokens) takes XSTAGE past 16 tokens (NT 4, 8) with
//               the CTA's tiles only (XSHARE 1: 2 x NT x 4 KB, 64 KB at 64 tokens beside the weights' 64 KB;
//               a warp's own would be 512 KB). Why: at 64 tokens every chunk of every n-tile is an L2 round
//               trip inside the step (ld.global.nc, 4x the weight bytes per warp), and the H200 rows put
//               stage 16 at 20-47% of the copy probe there (bf16) against 94-97% at 16 tokens. Measured
//               (session28 decode_rows_wide, GB/s against XS_WIDE 0): bf16 64 tokens -14 to -27%, 32 tokens
//               -4%, fp8 -14 to -28%, while every activation read was a branch (XPAD 0). With XPAD, AFRAG and
//               CVT_H1 (session28b decode_rows_frag, against the previous defaults): 64 tokens bf16 +29 to
//               +43%, fp8 +27 to +48%: on past 16 tokens since
//   XF16        1 (fp8, with XSTAGE and XSHARE): the CTA's threads load a step's e4m3 activations into
//               registers one step ahead, convert them to f16 once and store them in the shared tiles
//               (twice the bytes; the halves of odd rows swapped); the MMAs then convert only the
//               weights (0, the default: every warp converts the activations too, 8 of the 24
//               conversions of a chunk at 16 tokens). Measured (session13d, fp8, GB/s): 16 tokens
//               -10.3 to -14.4% (the loads wait in registers for the barrier, where cp.async did not),
//               1 token -0.3 / -1.4%: off.
//               XF16 2: the same f16 tiles, filled one step ahead without waiting in registers: a step's e4m3
//               activations land by cp.async in a staging tile (NT x 8 tokens x 512 bytes) a step before
//               they are converted; after the step's barrier each thread converts the chunks it copied
//               itself (visible to it after cp.async.wait_group: no barrier between copy and conversion)
//               into the f16 tile the next step reads, then copies the step after into the staging tile.
//               Why: at 16 tokens the warps convert the activations as often as the weights (128 e4m3x2
//               conversions a lane a step each), at 64 tokens four times as often (session14's ncu at 16
//               tokens: ALU the busiest pipe, 50%); XF16 1 removed them but its loads waited in registers
//               for the barrier. Shared memory: two f16 tiles and one staging tile (224 KB at 64 tokens).
//               Measured (session28 decode_rows_xf16, fp8 GB/s against XF16 0): 16 tokens -16 to -18%,
//               1 token -0.5%: off; the conversions are not what limits 16 tokens
//   AFRAG       1 (bf16 and fp8; RING 0, ignored with RING): the weight tile stored in the mma.sync A fragment's order: pair-row p
//               holds rows p and p + 8 interleaved by 4-byte words, so one ld.shared.v4 is an MMA's A operand
//               (a.x, b.x, a.y, b.y) as it stands. 0: rows as loaded; the compiler then builds each operand
//               from two loads with register moves, again for every n-tile (SASS at 64 tokens, bf16: 78
//               IMAD.MOV a 32 HMMA of the loop, 113 instructions in all). The lane interleaves its 16 rows'
//               words when it stores the step (once a step, not once an MMA); 16-byte halves swizzled by
//               pair-row and chunk parity (conflict-free stores and loads)
//   XPAD        1 (XSTAGE): the activation tiles' rows of tokens past M zeroed once at the start, and every
//               token's chunk read without a test (0: token < M ? ld.shared : zeros, which at 32-64 tokens
//               (XS_WIDE) compiles to a branch around each read: BSSY/BSYNC 15 times in the loop's body,
//               397 instructions a 32 HMMA)
//   CVT_H1      1 (fp8): a word's high two e4m3 converted from the register's high half (F2FP .H1) instead of
//               shifted down first (0: SHF then F2FP; the fp8 loop's SASS at 1 token: 88 SHF beside 176 F2FP
//               and 32 HMMA)
//               Measured (session28b decode_rows_frag, GB/s, each against the previous defaults in one sweep):
//               all three with XS_WIDE past 16 tokens, the defaults since: 64 tokens bf16 +29 to +43%, fp8 +27
//               to +48%, fp8 16 tokens +10%, 1 token and bf16 16 tokens -1.8 to +0.4%. Alone: AFRAG -2% (bf16
//               64, fp8 16), CVT_H1 +6 to +7% at fp8 16 tokens
// NT (n8 tiles of tokens: 1, 2, 4, 8) comes from the point (point_defines): one build per tile count,
// so M <= 16 is not held to M = 64's registers.
//
// Constraints: layout nt; TIN __nv_bfloat16 or __nv_fp8_e4m3 (TOUT bf16; fp8 takes scale_a, scale_b);
// M <= 8 NT; K * elem_bytes % 16 == 0 (16-byte chunks: a chunk is entirely inside a row or past it);
// any N; block 32 WARPS; dynamic shared memory WARPS x 8 KB (+ XSTAGE: WARPS x 2 x NT x 4 KB); workspace (last argument): one int
// counter per unit (rounded to 256 bytes) + 2 slots x NT x 512 bytes per warp of the grid (+ TRACE:
// 5 x 8 bytes per warp).
//
// Modeled intensity: the algorithmic one (every weight byte once from DRAM; X from L2/L1).
// Run it beside the libraries and the copy probe: python run.py +experiment=decode
//   'variant=[decode_rows,decode_splitk,cublas,cublaslt,copy_gpu]'
// CPU check: tests/test_decode_rows.py (the host emulation: mma.sync, shared memory, the counters).
#include <cuda_bf16.h>
#include <cstdint>

#include "hopper/ptx.cuh"  // HOPPER_DYNAMIC_SMEM, smem_u32 (the host emulation's: hopper_emu.h)

#ifndef TIN
#define TIN __nv_bfloat16
#endif
#ifndef TOUT
#define TOUT __nv_bfloat16
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2
#endif
#ifndef NT
#define NT 1
#endif
#ifndef W_HINT
#define W_HINT 1
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef PREFETCH
#define PREFETCH 1
#endif
#ifndef XSHARE
#define XSHARE 0
#endif
#ifndef DEFER
#define DEFER 0
#endif
// at 128 registers (MIN_BLOCKS 2) the deferred arrival's live state spills: there it stays in the stream
#define DROWS_DEFER (DEFER && MIN_BLOCKS == 1)
#ifndef TRACE
#define TRACE 0
#endif
#ifndef RING
#define RING 0
#endif
#ifndef BALANCE
#define BALANCE 0
#endif
#ifndef XSTAGE
#define XSTAGE 0
#endif
#ifndef XF16
#define XF16 0
#endif
#ifndef AFRAG
#define AFRAG 0
#endif
#ifndef XPAD
#define XPAD 0
#endif
#ifndef CVT_H1
#define CVT_H1 0
#endif

// fp8 builds take the per-tensor scales: e4m3 detected from the TIN token (as stage 14 does)
#define DROWS_IS_FP8___nv_fp8_e4m3 1
#define DROWS_CAT2(a, b) a##b
#define DROWS_CAT(a, b) DROWS_CAT2(a, b)
#if DROWS_CAT(DROWS_IS_FP8_, TIN)
#define DROWS_FP8 1
#include <cuda_fp8.h>
#else
#define DROWS_FP8 0
#endif

namespace decode {
struct U4 {
  uint32_t x, y, z, w;
};
}  // namespace decode

#include "common/decode_ptx.cuh"  // ld/st wrappers, mma.sync, e4m3 -> f16, the split-K atomic

// fp8: the low / high two e4m3 of a word to f16x2 (CVT_H1: the high ones without a shift)
#if CVT_H1
#define DROWS_CVT_LO(w) e4m3x2_lo_to_f16x2(w)
#define DROWS_CVT_HI(w) e4m3x2_hi_to_f16x2(w)
#else
#define DROWS_CVT_LO(w) e4m3x2_to_f16x2((w) & 0xffffu)
#define DROWS_CVT_HI(w) e4m3x2_to_f16x2((w) >> 16)
#endif

namespace drows {

using decode::U4;
constexpr int kWarps = WARPS;
constexpr int kThreads = 32 * WARPS;
constexpr int kStep = 512;                 // bytes of one row per warp load (32 lanes x 16 bytes)
constexpr int kRows = 16;                  // rows of a unit: one m16 tile
constexpr int kTile = kRows * kStep;       // a warp's staging tile in shared memory
static_assert(NT == 1 || NT == 2 || NT == 4 || NT == 8, "NT: 1, 2, 4 or 8 n8 tiles of tokens");
static_assert(RING == 0 || (RING >= 2 && RING <= 4), "RING: 0 (registers) or 2..4 shared-memory stages");
// AFRAG on the register path only: there the lane interleaves its rows' words when it stores them (the ring
// copies rows as they are, and keeps the row order)
#define DROWS_AFRAG (AFRAG && !RING)
constexpr int kStages = RING ? RING : 1;     // a warp's tiles in shared memory
static_assert(!BALANCE || (!RING && !XSHARE && NT <= 2), "BALANCE: the register path, XSHARE 0, at most 16 tokens");
static_assert(!XSTAGE || (!RING && PREFETCH && !BALANCE && (NT <= 2 || XSHARE) && MIN_BLOCKS == 1),
              "XSTAGE: the register path with PREFETCH, BALANCE 0, one CTA a SM; past 16 tokens only the CTA's tiles (XSHARE)");
// BALANCE: a CTA's chunks (WARPS static, at most kDynMax claimed) and their partial slots (two each:
// the chunk's first and last unit) in the workspace, after the trace
constexpr int kDynMax = 64;
constexpr int kChunks = kWarps + kDynMax;
constexpr int kSlots = 2 * kChunks;
constexpr int kSlotBytes = NT * 32 * 16;
constexpr int kBalanceBytes = BALANCE ? 16 : 0;  // the claim counter (the slots are in the workspace)
// XSTAGE: two tiles of a step's activations (NT x 8 tokens x 512 bytes each) after the weight tiles: a
// warp's own, or with XSHARE (the CTA's warps at the same step) the CTA's, each thread copying its part
#define DROWS_XCTA (XSTAGE && XSHARE)
// XF16 (fp8, the CTA's tiles): a step's activations converted to f16 once, by the thread that loads them,
// into tiles of twice the bytes; the MMAs read f16 (no conversion of X by every warp at every chunk)
#define DROWS_XF16 (XF16 && DROWS_FP8 && DROWS_XCTA)
// XF16 2: converted one step ahead from a staging tile the thread's own cp.async filled
#define DROWS_XF16P (DROWS_XF16 && XF16 == 2)
static_assert(XF16 >= 0 && XF16 <= 2, "XF16: 0, 1 or 2");
constexpr int kXRow = DROWS_XF16 ? 2 * kStep : kStep;  // bytes of a token's step in the tile
constexpr int kXTile = NT * 8 * kXRow;
constexpr int kXStage = DROWS_XF16P ? NT * 8 * kStep : 0;  // XF16 2: the e4m3 staging tile after the two f16 tiles
constexpr int kXBytes = XSTAGE ? 2 * kXTile + kXStage : 0;  // per warp, or per CTA (DROWS_XCTA)
constexpr int kSmemBytes = kWarps * kStages * kTile + (DROWS_XCTA ? 1 : kWarps) * kXBytes + kBalanceBytes;
static_assert(kSmemBytes <= 232448, "WARPS x RING tiles of 8 KB (+ BALANCE's slots) past the H100/H200's 227 KB a block");
static_assert(sizeof(TIN) == 2 || DROWS_FP8, "bf16 or e4m3 operands");
static_assert(sizeof(TOUT) == 2, "the result is bf16");

// the 16-byte chunk position of chunk q of a tile row: conflict-free stores (a row by 32 lanes) and
// loads (rows g and g + 1 of a quarter warp take opposite halves of the 8 bank groups)
__device__ __forceinline__ int swz(int row, int q) { return SWIZZLE ? (q ^ ((row & 1) << 2)) : q; }

// AFRAG: the byte offset of half h (0: words x, y of rows p and p + 8; 1: words z, w) of 32-byte chunk q of
// pair-row p (1 KB each); the halves swapped where pair-row and chunk / 4 differ in parity: a store (one p,
// 32 lanes' q) and a quarter warp's load (p = g, g + 1 at one q) both reach 8 different 16-byte bank groups
__device__ __forceinline__ int afrag_at(int p, int q, int h) { return p * 2 * kStep + q * 32 + ((h ^ (q >> 2) ^ p) & 1) * 16; }

struct Job {
  const unsigned char* X;  // activations, M rows of row_bytes
  const unsigned char* W;  // weights, N rows of row_bytes
  TOUT* C;
  int M, N;
  long long row_bytes;  // K * elem_bytes
  int P;                // steps per row
  int units;            // of 16 rows
  // the stream-K split: `parts` participants each take a contiguous range of a sequence of `len`
  // positions. XSHARE 0: every warp a participant, a position one (unit, step), unit-major. XSHARE 1:
  // every CTA a participant, a position one (block of WARPS units, step): the CTA's warps take the
  // block's units side by side at the same step, so a step's activations come from L2 once per CTA
  long long len;
  int parts;
  int warps;            // of the grid
  float scale;          // scale_a * scale_b (fp8), 1 (bf16)
  int* counters;        // one per unit
  float4* partials;     // [warp][slot 2][NT][32 lanes]
  unsigned long long* trace;  // TRACE 1: [warp][5] globaltimer ns x 4, the SM (after the partials)
  unsigned char* bslots;      // BALANCE: [CTA][kSlots][NT][32 lanes] float4 (after the trace)
};

__device__ __forceinline__ long long range_start(const Job& j, int p) { return static_cast<long long>(p) * j.len / j.parts; }
// the participant whose range holds position i (the largest p with range_start(p) <= i)
__device__ __forceinline__ int owner(const Job& j, long long i) {
  return static_cast<int>(((i + 1) * j.parts - 1) / j.len);
}
constexpr int kUnitsPerPos = XSHARE ? kWarps : 1;  // units a position spans (a block's with XSHARE)

// the 16 loads of step s of unit u (zeros past N and past the row)
__device__ __forceinline__ void load_step(U4 (&w)[kRows], const Job& j, int u, int s, int lane) {
  const long long off = static_cast<long long>(s) * kStep + 16 * lane;
  const bool in_k = off < j.row_bytes;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = u * kRows + r;
    w[r] = ldg_stream(j.W + static_cast<long long>(row) * j.row_bytes + off, in_k && row < j.N);
  }
}

__device__ __forceinline__ void store_step(const U4 (&w)[kRows], uint32_t tile, int lane) {
#if DROWS_AFRAG
#pragma unroll
  for (int p = 0; p < kRows / 2; ++p) {  // rows p and p + 8 interleaved by words: two A operands
    sts16(tile + afrag_at(p, lane, 0), U4{w[p].x, w[p + 8].x, w[p].y, w[p + 8].y});
    sts16(tile + afrag_at(p, lane, 1), U4{w[p].z, w[p + 8].z, w[p].w, w[p + 8].w});
  }
#else
#pragma unroll
  for (int r = 0; r < kRows; ++r) sts16(tile + r * kStep + swz(r, lane) * 16, w[r]);
#endif
}

// RING: the 16 pieces of step s of unit u straight into a tile (cp.async, no registers), where
// store_step would put them; zeros past N and past the row
__device__ __forceinline__ void copy_step(uint32_t tile, const Job& j, int u, int s, int lane) {
  const long long off = static_cast<long long>(s) * kStep + 16 * lane;
  const bool in_k = off < j.row_bytes;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = u * kRows + r;
    const bool ok = in_k && row < j.N;
    cp_async_16(tile + r * kStep + swz(r, lane) * 16, ok ? j.W + static_cast<long long>(row) * j.row_bytes + off : j.W,
                ok ? 16 : 0);
  }
}

// XSTAGE: step s's activations (tokens below M) copied into the tile xt as the weight tile holds its rows
// (cp.async.cg, no registers; zeros past the row; tokens past M are never read), by `threads` threads
// together, thread t taking chunks t, t + threads, ... (chunk c: token c / 32, bytes 16 (c % 32)): a warp
// copying its own tile (t the lane, 32 threads), or the CTA's threads the CTA's (XSHARE)
template <int kBy>
__device__ __forceinline__ void copy_x(uint32_t xt, const Job& j, int s, int t) {
  // (a last pass part-empty where kBy does not divide the chunks: WARPS 12; its chunks' tokens are past M)
#pragma unroll
  for (int i = 0; i < (NT * 8 * 32 + kBy - 1) / kBy; ++i) {
    const int c = i * kBy + t, r = c / 32, l = c % 32;
    const long long off = static_cast<long long>(s) * kStep + 16 * l;
    const bool in_k = off < j.row_bytes;
    if (r < j.M) cp_async_16(xt + r * kStep + swz(r, l) * 16, in_k ? j.X + r * j.row_bytes + off : j.X, in_k ? 16 : 0);
  }
}

// XF16: step s's activations, the thread's 16-byte chunks (NT of them), into registers (zeros past M and
// past the row); then, converted to f16, into the tile xt: chunk l of token r is 32 bytes, the 16-byte
// halves 2l and 2l + 1 swapped in odd rows (a quarter warp reads rows g, g + 1 conflict-free)
#if DROWS_XF16
__device__ __forceinline__ void load_x_regs(U4 (&xr)[NT], const Job& j, int s) {
  static_assert(NT * 8 * 32 == NT * kThreads, "a chunk per thread per n8 tile (8 warps)");
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int c = i * kThreads + static_cast<int>(threadIdx.x), r = c / 32, l = c % 32;
    const long long off = static_cast<long long>(s) * kStep + 16 * l;
    xr[i] = ldg_cached(j.X + static_cast<long long>(r) * j.row_bytes + off, off < j.row_bytes && r < j.M);
  }
}
#if DROWS_XF16P
// XF16 2: the thread's chunks of a step from the staging tile (where its own copy_x put them; tokens past M
// are neither copied nor read)
__device__ __forceinline__ void load_x_staged(U4 (&xr)[NT], uint32_t st, const Job& j) {
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int c = i * kThreads + static_cast<int>(threadIdx.x), r = c / 32, l = c % 32;
    xr[i] = r < j.M ? lds16(st + r * kStep + swz(r, l) * 16) : U4{0, 0, 0, 0};
  }
}
#endif
__device__ __forceinline__ int xhalf(int r, int h) { return h ^ (r & 1); }
__device__ __forceinline__ void store_x_f16(uint32_t xt, const U4 (&xr)[NT], const Job& j) {
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int c = i * kThreads + static_cast<int>(threadIdx.x), r = c / 32, l = c % 32;
    if (r >= j.M) continue;
    const uint32_t w[4] = {xr[i].x, xr[i].y, xr[i].z, xr[i].w};
    uint32_t f[8];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      f[2 * h] = DROWS_CVT_LO(w[h]);
      f[2 * h + 1] = DROWS_CVT_HI(w[h]);
    }
    sts16(xt + r * kXRow + xhalf(r, 2 * l) * 16, U4{f[0], f[1], f[2], f[3]});
    sts16(xt + r * kXRow + xhalf(r, 2 * l + 1) * 16, U4{f[4], f[5], f[6], f[7]});
  }
}
#endif

#if XPAD && XSTAGE
__device__ __forceinline__ void zero_pad(uint32_t xt, const Job& j, int t, int by) {
  const int chunks = (NT * 8 - j.M) * (kXRow / 16);  // of one tile: rows M .. NT x 8 - 1
  for (int c = t; c < 2 * chunks; c += by) {
    const int tile = c / chunks, r = j.M + (c % chunks) / (kXRow / 16), q = (c % chunks) % (kXRow / 16);
    sts16(xt + tile * kXTile + r * kXRow + q * 16, U4{0, 0, 0, 0});
  }
}
#endif

// the MMAs of step s (its 16 rows in the warp's tile; XSTAGE: its activations in the tile xt) into acc
__device__ __forceinline__ void mma_step(float (&acc)[NT][4], const Job& j, uint32_t tile, int s, int lane,
                                         uint32_t xt = 0) {
  const int g = lane / 4, c = lane % 4;
  // unrolled in full up to two n-tiles; at four and eight the compiler would hoist every chunk's X
  // loads (8 x NT x 4 registers) and spill
  constexpr int kUnroll = NT <= 2 ? 8 : 2;
#pragma unroll kUnroll
  for (int i = 0; i < 8; ++i) {
    const int q = 4 * i + c;
#if DROWS_AFRAG
    const U4 f0 = lds16(tile + afrag_at(g, q, 0)), f1 = lds16(tile + afrag_at(g, q, 1));  // the two A operands
    const U4 a{f0.x, f0.z, f1.x, f1.z}, b{f0.y, f0.w, f1.y, f1.w};  // rows g and g + 8 (fp8's conversions)
#else
    const U4 a = lds16(tile + g * kStep + swz(g, q) * 16);
    const U4 b = lds16(tile + (g + 8) * kStep + swz(g + 8, q) * 16);
#endif
    const long long off = static_cast<long long>(s) * kStep + 16 * q;
    const bool in_k = off < j.row_bytes;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int token = 8 * t + g;
#if DROWS_XF16
      (void)in_k;
      const U4 z{0, 0, 0, 0};
      const U4 xlo = XPAD || token < j.M ? lds16(xt + token * kXRow + xhalf(token, 2 * q) * 16) : z;
      const U4 xhi = XPAD || token < j.M ? lds16(xt + token * kXRow + xhalf(token, 2 * q + 1) * 16) : z;
      const uint32_t xf[8] = {xlo.x, xlo.y, xlo.z, xlo.w, xhi.x, xhi.y, xhi.z, xhi.w};
#elif XSTAGE
      (void)in_k;
      const U4 x = XPAD || token < j.M ? lds16(xt + token * kStep + swz(token, q) * 16) : U4{0, 0, 0, 0};
#else
      const U4 x = ldg_cached(j.X + static_cast<long long>(token) * j.row_bytes + off, in_k && token < j.M);
#endif
#if DROWS_XF16
      const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int h = 0; h < 4; ++h)  // the weights converted here, the activations already f16
        mma_f16(acc[t], DROWS_CVT_LO(aw[h]), DROWS_CVT_LO(bw[h]), DROWS_CVT_HI(aw[h]), DROWS_CVT_HI(bw[h]), xf[2 * h],
                xf[2 * h + 1]);
#elif DROWS_FP8
      const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w}, xw[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int h = 0; h < 4; ++h) {  // 4 e4m3 a word -> two f16x2: one MMA's two k-pairs
        mma_f16(acc[t], DROWS_CVT_LO(aw[h]), DROWS_CVT_LO(bw[h]), DROWS_CVT_HI(aw[h]), DROWS_CVT_HI(bw[h]),
                DROWS_CVT_LO(xw[h]), DROWS_CVT_HI(xw[h]));
      }
#else
      mma_bf16(acc[t], a.x, b.x, a.y, b.y, x.x, x.y);
      mma_bf16(acc[t], a.z, b.z, a.w, b.w, x.z, x.w);
#endif
    }
  }
}

// C[token][row] from the fragments: lane (g, c) holds rows g, g + 8 and tokens 8t + 2c, 8t + 2c + 1
__device__ __forceinline__ void write_c(const float (&v)[NT][4], const Job& j, int u, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = u * kRows + g + 8 * (e / 2), token = 8 * t + 2 * c + e % 2;
      if (row < j.N && token < j.M)
        j.C[static_cast<long long>(token) * j.N + row] = __float2bfloat16_rn(v[t][e] * j.scale);
    }
}

// the slot of warp w's partial of a unit: 0 its first unit, 1 its last
__device__ __forceinline__ float4* slot_of(const Job& j, int w, bool first_unit) {
  return j.partials + (static_cast<long long>(w) * 2 + (first_unit ? 0 : 1)) * NT * 32;
}

__device__ __forceinline__ void store_partial(const float (&acc)[NT][4], float4* mine, int lane) {
#pragma unroll
  for (int t = 0; t < NT; ++t) st_f4(mine + t * 32 + lane, make_float4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]));
}

// tot += a partial (NT x 32 lanes of float4, from the L2)
__device__ __forceinline__ void add_partial(float (&tot)[NT][4], const float4* src, int lane) {
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float4 v = ldcg_f4(src + t * 32 + lane);
    tot[t][0] += v.x;
    tot[t][1] += v.y;
    tot[t][2] += v.z;
    tot[t][3] += v.w;
  }
}

// Unit u complete (this warp's arrival was the last): the sum of every participant's partial in
// participant order (deterministic), written to C; the counter reset for the next launch.
__device__ __forceinline__ void reduce_unit(const Job& j, int u, int lane) {
  __threadfence();
  float tot[NT][4] = {};
  const int blk = u / kUnitsPerPos;  // the position block of u's steps
  const long long a = static_cast<long long>(blk) * j.P;
  const int p0 = owner(j, a), p1 = owner(j, a + j.P - 1);
  for (int p = p0; p <= p1; ++p) {
    const long long ps = range_start(j, p);
    if (ps == range_start(j, p + 1)) continue;  // an empty range (more participants than positions)
    const int v = p * kUnitsPerPos + u % kUnitsPerPos;  // the warp of participant p that took unit u
    add_partial(tot, slot_of(j, v, ps / j.P == blk), lane);
  }
  write_c(tot, j, u, lane);
  if (lane == 0) j.counters[u] = 0;  // the next launch finds it zero
}

// The end of this warp's segment [first, last] of unit u's steps: C at once if the segment is the
// whole unit; else its partial into the workspace and, by the arrival that completes the unit, the
// sum of every warp's partial in warp order. With DEFER, the warp's first unit, when split, arrives
// here too (pend_u, its steps pend_cov; its partial stored when the warp left it): one fence and two
// atomics in flight together at the end of the range, instead of a fence and an atomic round trip in
// the middle of the stream (the warp's loads stall behind them).
__device__ __forceinline__ void finish_unit(float (&acc)[NT][4], const Job& j, int w, int u, int first, int last,
                                            bool first_unit, int lane, int pend_u = -1, int pend_cov = 0) {
  const bool own = u < j.units;  // XSHARE: not for a warp past the last block's units
  const int covered = last - first + 1;
  const bool split = own && covered != j.P;
  if (own && !split) write_c(acc, j, u, lane);
  if (!split && pend_u < 0) return;
  if (split) store_partial(acc, slot_of(j, w, first_unit), lane);
  __syncwarp();
  int old = 0, old_p = 0;
  if (lane == 0) {
    __threadfence();
    if (split) old = atomic_add_acq_rel_gpu(j.counters + u, covered);
    if (pend_u >= 0) old_p = atomic_add_acq_rel_gpu(j.counters + pend_u, pend_cov);
  }
  old = shfl_idx(old, 0);
  old_p = shfl_idx(old_p, 0);
  if (split && old + covered == j.P) reduce_unit(j, u, lane);
  if (pend_u >= 0 && old_p + pend_cov == j.P) reduce_unit(j, pend_u, lane);
}

#if TRACE
__device__ __forceinline__ void trace_at(const Job& j, int w, int i, int lane) {
  const unsigned long long t = hopper::globaltimer_ns();
  if (lane == 0) j.trace[5 * w + i] = t;
  if (lane == 0 && i == 0) j.trace[5 * w + 4] = hopper::sm_id();
}
#define DROWS_TRACE_AT(i) trace_at(j, w, i, lane)
#else
#define DROWS_TRACE_AT(i)
#endif

__device__ void run_warp(const Job& j, unsigned char* smem) {
  const int lane = threadIdx.x % 32, wib = threadIdx.x / 32;
  const int w = blockIdx.x * kWarps + wib;
  const int me = XSHARE ? blockIdx.x : w;
  const long long i0 = range_start(j, me), i1 = range_start(j, me + 1);
  DROWS_TRACE_AT(0);  // TRACE: 0 start, 1 the first step's weights in registers, 2 the last MMA, 3 done
  if (i0 >= i1) {
    DROWS_TRACE_AT(1);
    DROWS_TRACE_AT(2);
    DROWS_TRACE_AT(3);
    return;
  }
  const uint32_t tiles = hopper::smem_u32(smem) + wib * kStages * kTile;
  // XSTAGE: step it's activations are in tile (it - i0) % 2, copied one step ahead with the weights' loads
  const uint32_t xtiles = hopper::smem_u32(smem) + kWarps * kStages * kTile + (DROWS_XCTA ? 0 : wib * kXBytes);
  (void)xtiles;
#if XPAD && XSTAGE
  // the rows of tokens past M in both activation tiles, zeroed once (no copy ever writes them): the MMAs read
  // every token's chunk without a test. The CTA's threads (or the warp's lanes) together; the loop's first
  // barrier (__syncthreads, or __syncwarp) shows them to every reader. (C does not need it: a token's column
  // of the MMA reaches only that token's outputs, never written past M; it keeps the split units' partials
  // free of whatever the shared memory held)
  zero_pad(xtiles, j, DROWS_XCTA ? static_cast<int>(threadIdx.x) : lane, DROWS_XCTA ? kThreads : 32);
#endif
  int u = static_cast<int>(i0 / j.P) * kUnitsPerPos + (XSHARE ? wib : 0), s = static_cast<int>(i0 % j.P), first = s;
  const int u0 = u;
  bool pend = false;  // DEFER: the first unit (u0, steps i0 % P .. P - 1), split, waiting for the end of the range
  float acc[NT][4] = {};
#if RING
  // RING - 1 steps in flight ahead of the one multiplied: step it's tile is stage (it - i0) % RING
  int iu = u, is = s;  // the next step to copy
  auto advance = [&](int& uu, int& ss) {
    if (++ss == j.P) {
      ss = 0;
      uu += kUnitsPerPos;
    }
  };
#pragma unroll
  for (int q = 0; q < RING - 1; ++q) {
    if (i0 + q < i1) {
      copy_step(tiles + q * kTile, j, iu, is, lane);
      advance(iu, is);
    }
    cp_async_commit();  // empty groups past the range keep the count uniform
  }
  int stage = 0;
#else
  U4 wr[kRows];
  load_step(wr, j, u, s, lane);
#if DROWS_XF16P
  // the first step's activations converted now (the loop's first barrier shows them to every warp), the
  // second's copy in flight
  const uint32_t xstage = xtiles + 2 * kXTile;
  U4 xr[NT];
  copy_x<kThreads>(xstage, j, s, static_cast<int>(threadIdx.x));
  cp_async_commit();
  cp_async_wait<0>();
  load_x_staged(xr, xstage, j);
  store_x_f16(xtiles, xr, j);
  if (i0 + 1 < i1) copy_x<kThreads>(xstage, j, s + 1 == j.P ? 0 : s + 1, static_cast<int>(threadIdx.x));
  cp_async_commit();
#elif DROWS_XF16
  U4 xr[NT];
  load_x_regs(xr, j, s);
#elif DROWS_XCTA
  copy_x<kThreads>(xtiles, j, s, static_cast<int>(threadIdx.x));
  cp_async_commit();
#elif XSTAGE
  copy_x<32>(xtiles, j, s, lane);
  cp_async_commit();
#endif
#endif
  for (long long it = i0; it < i1; ++it) {
    __syncwarp();  // the previous step's shared-memory reads are done
#if RING
    const int ahead = stage == 0 ? RING - 1 : stage - 1;  // the stage the previous step was multiplied from
    if (it + RING - 1 < i1) {
      copy_step(tiles + ahead * kTile, j, iu, is, lane);
      advance(iu, is);
    }
    cp_async_commit();
    cp_async_wait<RING - 1>();  // this thread's copies of step it have landed
    __syncwarp();               // and every lane's
    const uint32_t tile = tiles + stage * kTile;
    stage = stage + 1 == RING ? 0 : stage + 1;
#else
    const uint32_t tile = tiles;
    store_step(wr, tile, lane);
    __syncwarp();
#endif
#if TRACE
    if (it == i0) DROWS_TRACE_AT(1);
#endif
    const bool more = it + 1 < i1;
    const int un = s + 1 == j.P ? u + kUnitsPerPos : u, sn = s + 1 == j.P ? 0 : s + 1;
#if RING
    mma_step(acc, j, tile, s, lane);
#elif DROWS_XF16P
    // the barrier: this step's f16 tile complete (converted in the previous iteration by every thread),
    // every warp done with the previous step's (into which the next step's conversions go). Then the next
    // weights' loads; the next step's activations (copied a step ago by this thread) converted; the step
    // after copied into the staging tile this thread has just read
    __syncthreads();
    if (more) {
      load_step(wr, j, un, sn, lane);
      cp_async_wait<0>();
      load_x_staged(xr, xstage, j);
      store_x_f16(xtiles + ((it - i0 + 1) & 1) * kXTile, xr, j);
      if (it + 2 < i1) copy_x<kThreads>(xstage, j, sn + 1 == j.P ? 0 : sn + 1, static_cast<int>(threadIdx.x));
      cp_async_commit();
    }
    mma_step(acc, j, tile, s, lane, xtiles + ((it - i0) & 1) * kXTile);
#elif DROWS_XF16
    // as below, the activations through registers: this step's converted into its tile (last read two
    // steps ago: every warp passed the previous barrier since), the barrier, then the next step's loads
    store_x_f16(xtiles + ((it - i0) & 1) * kXTile, xr, j);
    __syncthreads();
    if (more) {
      load_step(wr, j, un, sn, lane);
      load_x_regs(xr, j, sn);
    }
    mma_step(acc, j, tile, s, lane, xtiles + ((it - i0) & 1) * kXTile);
#elif DROWS_XCTA
    // every warp of the CTA at the same position (XSHARE): this step's activations, copied by all of its
    // threads, waited for and shared by a barrier, which also says every warp is done with the other
    // tile (step it - 1's), into which the next step's copies go, with the next weights' loads
    cp_async_wait<0>();
    __syncthreads();
    if (more) {
      load_step(wr, j, un, sn, lane);
      copy_x<kThreads>(xtiles + ((it - i0 + 1) & 1) * kXTile, j, sn, static_cast<int>(threadIdx.x));
    }
    cp_async_commit();
    mma_step(acc, j, tile, s, lane, xtiles + ((it - i0) & 1) * kXTile);
#elif XSTAGE
    // the next step's weights and activations in flight, then this step's activations waited for
    if (more) {
      load_step(wr, j, un, sn, lane);
      copy_x<32>(xtiles + ((it - i0 + 1) & 1) * kXTile, j, sn, lane);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncwarp();
    mma_step(acc, j, tile, s, lane, xtiles + ((it - i0) & 1) * kXTile);
#else
    if (PREFETCH && more) load_step(wr, j, un, sn, lane);
    mma_step(acc, j, tile, s, lane);
    if (!PREFETCH && more) load_step(wr, j, un, sn, lane);
#endif
    if (s == j.P - 1 || !more) {
      if (!more) DROWS_TRACE_AT(2);
      if (DROWS_DEFER && more && u == u0 && s - first + 1 != j.P && u < j.units) {
        store_partial(acc, slot_of(j, w, true), lane);  // its arrival waits for the end of the range
        pend = true;
      } else {
        finish_unit(acc, j, w, u, first, s, u == u0, lane, !more && pend ? u0 : -1, j.P - static_cast<int>(i0 % j.P));
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
      first = 0;
    }
    u = un;
    s = sn;
  }
  DROWS_TRACE_AT(3);
}

#if BALANCE
// A CTA's range [c0, c0 + L) of positions (unit, step), unit-major: WARPS static chunks of F = 3L/32
// steps (warp w takes chunk w), then the rest, R = L - 8F, in dynamic chunks the warps claim from a
// shared counter as they finish, guided: each takes 1/16 of what remains (R (15/16)^d left after d of
// them), down to single steps. The boundaries are a function of the chunk index alone, so each
// chunk's partial has its place whichever warp computed it, and a unit's partials are summed in
// position order: deterministic. A warp that finishes early takes more chunks; the last ones are one
// step long, so the CTA's warps end within about a step of each other (session12b's traces: up to 6 us
// apart with static ranges, warps 0-1 of every CTA the last).
struct Chunks {
  long long c0;  // the CTA's first position
  int L, F, R;   // its positions, a static chunk's, the dynamic region's
  int dstar;     // dynamic chunks of the geometric part
  int gstar;     // positions left after them (< 16): one-step chunks
  int D;         // dynamic chunks in all (<= kDynMax: the last one takes what remains)
};
constexpr float kLog2Keep = -0.0931094044f;  // log2(15/16)

// positions left after d guided chunks of R
__device__ __forceinline__ int guided_left(int R, int d) {
  return static_cast<int>(floorf(static_cast<float>(R) * exp2f(static_cast<float>(d) * kLog2Keep)));
}

__device__ __forceinline__ Chunks make_chunks(const Job& j, int b) {
  Chunks c;
  c.c0 = range_start(j, b);
  c.L = static_cast<int>(range_start(j, b + 1) - c.c0);
  c.F = 3 * c.L / 32;
  c.R = c.L - kWarps * c.F;
  int d = 0;
  if (c.R >= 16) {  // the first d with fewer than 16 left, from the closed form, then exactly
    d = max(0, static_cast<int>(ceilf(log2f(16.0f / static_cast<float>(c.R)) / kLog2Keep)));
    while (d > 0 && guided_left(c.R, d - 1) < 16) --d;
    while (guided_left(c.R, d) >= 16) ++d;
  }
  c.dstar = d;
  c.gstar = d ? guided_left(c.R, d) : c.R;
  c.D = min(kDynMax, c.dstar + c.gstar);
  return c;
}

// chunk q's first position, relative to c0 (q = WARPS + D: the range's end)
__device__ __forceinline__ int chunk_start(const Chunks& c, int q) {
  if (q <= kWarps) return q * c.F;
  const int d = q - kWarps;
  if (d >= c.D) return c.L;
  const int left = d <= c.dstar ? (d ? guided_left(c.R, d) : c.R) : c.gstar - (d - c.dstar);
  return kWarps * c.F + c.R - left;
}

__device__ __forceinline__ int claim(int* next, int lane) {
  int q = 0;
  if (lane == 0) q = atomicAdd(next, 1);
  return kWarps + shfl_idx(q, 0);
}

// a segment's partial (acc) into its slot of the CTA's slots (in the workspace: the L1 stays free for X)
__device__ __forceinline__ void to_slot(const float (&acc)[NT][4], unsigned char* slots, int slot, int lane) {
  float4* dst = reinterpret_cast<float4*>(slots + static_cast<long long>(slot) * kSlotBytes);
#pragma unroll
  for (int t = 0; t < NT; ++t) st_f4(dst + t * 32 + lane, make_float4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]));
}

// the chunk holding relative position x: the last q < total with chunk_start(q) <= x (empty chunks share
// their start with the next one, so the one found is never empty)
__device__ __forceinline__ int chunk_of(const Chunks& c, int total, int x) {
  int lo = 0, hi = total - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (chunk_start(c, mid) <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__device__ void run_cta_balanced(const Job& j, unsigned char* smem) {
  const int lane = threadIdx.x % 32, wib = threadIdx.x / 32;
  const int w = blockIdx.x * kWarps + wib;
  unsigned char* slots = j.bslots + static_cast<long long>(blockIdx.x) * kSlots * kSlotBytes;
  int* next = reinterpret_cast<int*>(smem + kWarps * kTile);
  DROWS_TRACE_AT(0);
  if (threadIdx.x == 0) *next = 0;
  const Chunks c = make_chunks(j, blockIdx.x);
  __syncthreads();
  const int total = kWarps + c.D;
  const uint32_t tile = hopper::smem_u32(smem) + wib * kTile;
  // the chunk this warp works on, [a, e) relative to c0: its static one, then claimed ones (a chunk
  // is claimed when the warp needs its first position: nothing is held in reserve)
  int q = wib, a = chunk_start(c, q), e = chunk_start(c, q + 1);
  while (a == e && q < total) {  // empty (a static chunk when F = 0; a guided one of 0 steps)
    q = claim(next, lane);
    a = q < total ? chunk_start(c, q) : c.L;
    e = q < total ? chunk_start(c, q + 1) : c.L;
  }
  float acc[NT][4] = {};
  bool traced = false;
  (void)traced;
  if (q < total) {
    long long pos = c.c0 + a;
    int u = static_cast<int>(pos / j.P), s = static_cast<int>(pos % j.P);
    int first = s;        // the segment's first step
    bool first_seg = true;  // the chunk's first segment (slot 2q) or its last (slot 2q + 1)
    U4 wr[kRows];
    load_step(wr, j, u, s, lane);
    while (true) {
      __syncwarp();
      store_step(wr, tile, lane);
      __syncwarp();
#if TRACE
      if (!traced) {
        DROWS_TRACE_AT(1);
        traced = true;
      }
#endif
      // the next position: in this chunk, or the first of the next non-empty one
      int nq = q, na = a, ne = e;
      long long npos = pos + 1;
      if (npos == c.c0 + e) {
        do {
          nq = claim(next, lane);
          na = nq < total ? chunk_start(c, nq) : c.L;
          ne = nq < total ? chunk_start(c, nq + 1) : c.L;
        } while (na == ne && nq < total);
        npos = c.c0 + na;
      }
      const bool more = nq < total;
      const int un = static_cast<int>(npos / j.P), sn = static_cast<int>(npos % j.P);
      if (more) load_step(wr, j, un, sn, lane);
      mma_step(acc, j, tile, s, lane);
      const bool chunk_end = nq != q || !more;
      if (s == j.P - 1 || chunk_end) {  // the segment ends: a whole unit to C, else to its slot
        if (first == 0 && s == j.P - 1) {
          write_c(acc, j, u, lane);
        } else {
          to_slot(acc, slots, 2 * q + (first_seg ? 0 : 1), lane);
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
        first = 0;
        first_seg = false;
      }
      if (!more) break;
      if (chunk_end) {
        q = nq;
        a = na;
        e = ne;
        first = sn;
        first_seg = true;
      }
      pos = npos;
      u = un;
      s = sn;
    }
  }
  if (!traced) DROWS_TRACE_AT(1);
  DROWS_TRACE_AT(2);
  __syncthreads();  // every slot written (and visible to the CTA: the barrier orders global memory too)
  // the CTA's units, dealt to its warps in turn: a unit's chunks are found from the chunk boundaries
  // (a binary search), its partials summed in chunk order. A unit that one chunk covered whole went to
  // C during the stream; one wholly inside [c0, c0 + L) goes to C here; the CTA's first or last unit,
  // shared with a neighbouring CTA, goes to this CTA's partial slot and its counter
  if (c.L > 0) {
    const long long c1 = c.c0 + c.L;
    const int u_first = static_cast<int>(c.c0 / j.P), u_last = static_cast<int>((c1 - 1) / j.P);
    for (int u = u_first + wib; u <= u_last; u += kWarps) {
      const long long ua = static_cast<long long>(u) * j.P, ub = ua + j.P;  // the unit's positions
      const int xa = static_cast<int>(max(ua, c.c0) - c.c0), xb = static_cast<int>(min(ub, c1) - c.c0);  // in the range
      const int qa = chunk_of(c, total, xa), qb = chunk_of(c, total, xb - 1);
      if (qa == qb && ua >= c.c0 + chunk_start(c, qa) && ub <= c.c0 + chunk_start(c, qa + 1)) continue;  // done
      float tot[NT][4] = {};
      for (int q = qa; q <= qb; ++q) {
        const int cs = chunk_start(c, q);
        if (cs == chunk_start(c, q + 1)) continue;  // empty: nothing written
        add_partial(tot, reinterpret_cast<const float4*>(
                             slots + static_cast<long long>(2 * q + (c.c0 + cs >= ua ? 0 : 1)) * kSlotBytes), lane);
      }
      if (ua >= c.c0 && ub <= c1) {
        write_c(tot, j, u, lane);
      } else {  // shared with a neighbour: this CTA's partial, its arrival, the sum by the last one
        const int covered = xb - xa;
        float4* mine = slot_of(j, blockIdx.x, c.c0 >= ua);  // slot 0: the range starts in the unit
#pragma unroll
        for (int t = 0; t < NT; ++t)
          st_f4(mine + t * 32 + lane, make_float4(tot[t][0], tot[t][1], tot[t][2], tot[t][3]));
        __syncwarp();
        int old = 0;
        if (lane == 0) {
          __threadfence();
          old = atomic_add_acq_rel_gpu(j.counters + u, covered);
        }
        old = shfl_idx(old, 0);
        if (old + covered == j.P) reduce_unit(j, u, lane);
      }
    }
  }
  DROWS_TRACE_AT(3);
}
#endif

}  // namespace drows

HOPPER_DECLARE_DYNAMIC_SMEM(drows::kSmemBytes)

extern "C" __global__ void __launch_bounds__(drows::kThreads, MIN_BLOCKS)
    decode_rows(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K,
#if DROWS_FP8
                float scale_a, float scale_b,
#endif
                int* __restrict__ workspace) {
  using namespace drows;
  HOPPER_DYNAMIC_SMEM(smem_raw);
  if (M > 8 * NT || dynamic_smem_size() < static_cast<uint32_t>(kSmemBytes)) __trap();
  Job j;
  j.X = reinterpret_cast<const unsigned char*>(A);
  j.W = reinterpret_cast<const unsigned char*>(B);
  j.C = C;
  j.M = M;
  j.N = N;
  j.row_bytes = static_cast<long long>(K) * sizeof(TIN);
  j.P = static_cast<int>((j.row_bytes + kStep - 1) / kStep);
  const int units = (N + kRows - 1) / kRows;
  j.units = units;
  j.warps = gridDim.x * kWarps;
  j.parts = XSHARE || BALANCE ? static_cast<int>(gridDim.x) : j.warps;  // stream-K over CTAs, or warps
  j.len = static_cast<long long>((units + kUnitsPerPos - 1) / kUnitsPerPos) * j.P;
#if DROWS_FP8
  j.scale = scale_a * scale_b;
#else
  j.scale = 1.0f;
#endif
  j.counters = workspace;
  j.partials = reinterpret_cast<float4*>(workspace + ((units + 63) / 64) * 64);  // 256-byte aligned
  j.trace = reinterpret_cast<unsigned long long*>(j.partials + static_cast<long long>(j.warps) * 2 * NT * 32);
  j.bslots = reinterpret_cast<unsigned char*>(j.trace) + (TRACE ? static_cast<long long>(j.warps) * 40 : 0);
#if BALANCE
  run_cta_balanced(j, smem_raw);
#else
  run_warp(j, smem_raw);
#endif
}

#if defined(GEMMLAB_HOST_EMULATION)
#include "common/host_emulation/decode_ptx.h"  // the PTX wrappers, on the host (CPU tests)
#endif
