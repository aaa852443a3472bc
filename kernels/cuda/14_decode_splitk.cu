// Stage 14: decode_splitk -- the decode GEMM (M = 1..64 tokens against a weight matrix) at the HBM
// bandwidth limit: weights streamed once with 16-byte loads straight into mma.sync fragments, split-K
// across all SMs with a deterministic reduction, bf16 or fp8 (e4m3, per-tensor scales).
//
// What changes over the ladder's GEMM stages: at decode sizes the weights are the whole cost (M FLOP
// per byte of W in bf16, 2M in fp8), so nothing here tiles for reuse of W; every byte of it is read
// once, by one warp, into registers, and the design is about keeping enough of those bytes in flight
// on every SM until the end (Little: 4.4 TB/s x ~1 us of loaded HBM latency = ~33 KB per SM).
// * Layout nt, as a linear layer: A = activations X (M x K, row-major), B = weights W stored (out, in)
//   = N x K row-major as PyTorch keeps them, C = X W^T (M x N, row-major, bf16).
// * Swapped operands: C^T = W X^T, so the weight rows are mma's 16-row A operand and the M tokens its
//   n = 8 dimension (mma.sync m16n8k16 bf16). K is consumed in 64-byte chunks per row (32 bf16 = two
//   MMAs). Since a dot product does not care in which order its k terms come, each lane loads 16
//   contiguous bytes of its row (lanes 4g..4g+3 cover 64 bytes of row g) and the same 16 bytes of its
//   token's activations, and those registers ARE the mma fragments (words 0,1 -> first MMA, 2,3 ->
//   second): no shared memory, no ldmatrix, no shuffles for W. fp8: Hopper's mma.sync has no e4m3
//   path of its own (ptxas turns m16n8k32 e4m3 into f16 MMAs, converting both operands at every
//   MMA), so the stage converts each e4m3 byte to f16 once (exact) into fragment order and issues four
//   f16 m16n8k16 per chunk (FP8_F16_MMA; 0: the m16n8k32 e4m3 instruction, same register plan).
// * Work split: a grid of GX x S CTAs, one per SM (the YAML's `let` rules choose S and GX). CTA
//   (bx, by) takes the rows [bx N/GX, (bx+1) N/GX) (balanced to one row) and the by-th of S equal
//   runs of 64-byte chunks of K. Inside it, the (unit of 16*MT rows, block of D chunks) items are cut
//   into WARPS equal contiguous ranges (stream-K inside the CTA): every warp streams the same number
//   of bytes, whatever N, K and S; a unit shared by two or more warps is summed by its owner (the warp
//   that began it) from the others' partials in shared memory, in warp order.
// * Deterministic split-K (SPLIT_K): each unit's owner in each of the S CTAs writes its fp32 partial
//   (fragment-native float4s, coalesced) to the workspace and counts on the unit's counter (an
//   acq_rel atomic after __syncwarp, as CUTLASS's split-K semaphore); the S-th arrival sums the S
//   partials as stored, in split order 0..S-1, writes C and resets the counter, so the next launch
//   finds it zero. No float atomics, one
//   launch, no memset: the workspace (counters + partials) is zeroed once when the launch is made.
//   Units finish one after another, so most reductions overlap other warps' streaming.
// * Activations resident in shared memory (X_SMEM): the CTA's K-slice of X (M rows) is fetched once
//   by 1D bulk copies (cp.async.bulk, the TMA engine) after the warps' first weight loads are out,
//   in X_BLOCKS pieces on their own mbarriers, issued in the order the warps first need them (their
//   stream-K ranges begin at different K positions), and read conflict-free (row stride = 64 mod
//   128 bytes). It sets the
//   split: S is the least that makes M x K/S fit (at M = 64 the X traffic from L2 is GX M K bytes, and
//   S > 1 also divides it). X_SMEM 0: fragments from global memory through L1, no split.
// * Weights: ld.global.nc.L1::no_allocate.L2::256B.v4 (W_HINT; 0: plain ld.global.nc.v4), a ring
//   of D blocks of 64-byte chunks in registers per warp (W_DEPTH for M > 16, W_DEPTH_SMALL for
//   M <= 16): MT*2 16-byte loads per chunk per lane, D chunks in flight per warp, refilled as each is
//   consumed; the loads run on across unit and warp-range boundaries (a unit ends on a block edge).
// * W_PIPE 1 (the TMA weight ring; H200 evidence of session 9: the register ring above kept only
//   ~18 KB of W in flight per SM, DRAM at 53% at M = 1): for M <= W_PIPE_MAX_M, every warp owns a
//   ring of WP_STAGES(_SMALL) stages in shared memory, a stage one item (16 MT rows x WP_CHUNKS(_SMALL)
//   64-byte chunks); the warp fills it itself by 1D bulk copies (one per row, lane r copies row r; lane
//   0's arrive.expect_tx carries the stage's bytes) and reads it with 16-byte lds in the same lane ->
//   fragment mapping, rows 64 mod 128 bytes apart (an odd chunk count needs no padding): conflict-free.
//   A stage is refilled with item i + ST right after item i's MMAs are issued (__syncwarp first), so
//   ST - 1 items per warp stay in flight without a register held for them (M <= 16: 8 warps x 2 x
//   10 KB = 160 KB of ring). Bytes past K in the slice's last chunk are zeroed once (the copies
//   never write them). Above W_PIPE_MAX_M the ring and the heads would leave the X slice too little
//   room (a larger split): the register ring runs there.
// * M = 1: M1_SIMT 1 takes FP32 dot products on the CUDA cores instead of an n8 MMA that is 7/8 empty.
//
// Defines (each a technique that can be switched off; the sweep in conf/variant/decode_splitk.yaml).
// Predicted on the H200 (not measured yet; 4.2-4.4 TB/s HBM read, mma.sync ~640 TFLOP/s at 1980 MHz):
//   define         what it does                                           predicted effect when changed
//   SPLIT_K        1: S = the least split whose X slice fits in XSMEM      0: S = 1; M = 64 points no longer
//                  (the YAML's `let`), 0: S = 1                            fit (skipped); ~0 where S was 1
//   X_SMEM         1: X slice in shared memory by bulk copies;             0: -3..-10% at M = 64 (each warp
//                  0: X fragments from global memory through L1, S = 1     re-reads X through L1: 4x W's bytes)
//   W_DEPTH        64-byte chunks per weight row in flight per warp at     2 (and 4): -10..-25%: 16-32 KB in
//   W_DEPTH_SMALL  M > 16 (4) and at M <= 16 (8): 8 KB / 16 KB per warp    flight per SM is short of the ~33 KB
//                  at 32 rows, ~64 KB / 128 KB per SM at full units        that 4.3 TB/s x ~1 us of latency needs
//   W_HINT         L1::no_allocate + L2::256B prefetch on weight loads     0: -0..-5%
//   MT             m16 tiles per unit (2): X fragments serve 2 tiles       1 (W_DEPTH 8): +-3% (more X reads from
//                                                                          smem per W byte, finer units)
//   M1_SIMT        M = 1 on the CUDA cores (fp32 dot + quad shuffles)     1: +-2% (neither is near its limit)
//                  instead of an n8 MMA that is 7/8 padding
//   FP8_F16_MMA    fp8: e4m3 -> f16 once per byte (cvt.f16x2.e4m3x2),     0 (mma.sync m16n8k32 e4m3, which sm_90
//                  then f16 m16n8k16 MMAs                                  runs as f16 MMAs after converting both
//                                                                          operands at every MMA, 3-4x the
//                                                                          conversions): -10..-30% at M = 64,
//                                                                          ~0 at M <= 16 (W_DEPTH 3: registers)
//   X_BLOCKS       pieces of the X slice with their own mbarrier (16),     1: every warp waits for all of X
//                  fetched in the order the warps need them                (up to 200 KB per SM from L2, all
//                                                                          SMs at once): +1-2 us at M >= 16
//   WARPS          warps per CTA (8); one CTA per SM (255 registers)       -
//   W_PIPE         1: weights by bulk copies into a per-warp ring in       0 (the register ring, as measured
//                  shared memory for M <= W_PIPE_MAX_M (16), 0: the        in session 9): -15..-30% at M = 1
//                  register ring (W_DEPTH, W_HINT) at every M              and 16 (DRAM 53% -> ~85-90% expected
//                                                                          from >= 80 KB in flight per SM)
//   W_PIPE_MAX_M   8, 16, 32 or 64: the largest M on the TMA ring          64: at M = 64 the split grows ~3x
//                                                                          (ring + heads leave X ~50 KB):
//                                                                          -0..-20% there, unknown
//   WP_CHUNKS, WP_CHUNKS_SMALL  chunks per ring stage at M > 16 (3) and  even counts pad rows by 64 bytes;
//   WP_STAGES, WP_STAGES_SMALL  M <= 16 (5); stages per warp (2, 2):    1 stage: no overlap, -40%
//                  96 KB / 160 KB of ring per SM
//   XSMEM, SPLIT_MAX  the X slice's share of shared memory, the largest S (launch rules only)
// Where the limit is: bf16 needs ~M FLOP per weight byte, so at M = 64 and 4.3 TB/s ~280 TFLOP/s of
// mma.sync (44% of its rate); fp8 twice that, 540 TFLOP/s (85%): fp8 at 64 tokens is expected to be
// bound by mma.sync's issue rate at ~75-85% of the copy probe (wgmma, which has a native e4m3 path,
// would not be). The event timer adds ~3.5 us per call (README "How a point is measured"), so a
// 50 MB layer at 4.3 TB/s measures ~15.5-16.5 us, not 11.7.
//
// (W_PIPE 1's effects are predictions too: the decode_v2 stage of .ci/h200-session.sh measures both.)
// Constraints: layout nt; TIN __nv_bfloat16 (TOUT bf16) or __nv_fp8_e4m3 (TOUT bf16, scale_a and
// scale_b after K); M <= 64; K * elem_bytes % 16 == 0 (16-byte rows for the vector and bulk loads);
// any N; grid GX x S with S <= 64-byte chunks of K; block 32*WARPS; dynamic shared memory = 128 +
// head slots (WARPS*MT*NTP*512) + X slice (M rows x (64-byte chunks of the slice rounded to 128,
// + 64)), NTP = n-tiles of 8 tokens; W_PIPE adds 256 bytes of ring mbarriers and, where the ring
// runs, the ring (WARPS x stages x 16 MT rows x the padded stage row); the kernel traps if it is
// given less. Workspace (last argument):
// GX x units counters (ints) + S x GX x units x MT*NTP*512 bytes of partials.
//
// Modeled intensity: the algorithmic one, 2MNK / ((N K + M K) elem_bytes + 2 M N): every weight byte
// read once from DRAM, X once from DRAM (then L2), C once; ~M FLOP/B in bf16, 2M in fp8. At 4.2 TB/s
// a 50.3 MB layer (Llama-3 8B qkv, 6144 x 4096 bf16) streams in 12.0 us.
//
// Run it alone, beside cuBLAS/cuBLASLt and the copy probe: python run.py +experiment=decode
// or: python run.py variant=[decode_splitk] precision=[bf16,fp8] layouts=[nt] measure.fp8_scaling=tensor
//   sizes.square=[] 'sizes.shapes=[[1,6144,4096],[16,6144,4096],[64,6144,4096]]'
// CPU check: tests/test_decode_emulation.py runs it through the host emulation (mma.sync, shuffles and
// the bulk copies emulated in common/host_emulation).
#include <cuda_bf16.h>
#include <cstdint>
#include <type_traits>
#if defined(GEMMLAB_HOST_EMULATION)
#include <deque>
#include <vector>
#endif
#include "hopper/ptx.cuh"  // mbarriers, 1D bulk copies (the host emulation's: hopper_emu.h)

#ifndef TIN
#define TIN __nv_bfloat16
#endif
#ifndef TOUT
#define TOUT __nv_bfloat16
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef MT
#define MT 2
#endif
#ifndef W_DEPTH
#define W_DEPTH 4
#endif
#ifndef W_DEPTH_SMALL
#define W_DEPTH_SMALL 8
#endif
#ifndef W_HINT
#define W_HINT 1
#endif
#ifndef X_SMEM
#define X_SMEM 1
#endif
#ifndef X_BLOCKS
#define X_BLOCKS 16
#endif
#ifndef M1_SIMT
#define M1_SIMT 0
#endif
#ifndef FP8_F16_MMA
#define FP8_F16_MMA 1
#endif
#ifndef W_PIPE
#define W_PIPE 0
#endif
#ifndef W_PIPE_MAX_M
#define W_PIPE_MAX_M 16
#endif
#ifndef WP_CHUNKS
#define WP_CHUNKS 3
#endif
#ifndef WP_CHUNKS_SMALL
#define WP_CHUNKS_SMALL 5
#endif
#ifndef WP_STAGES
#define WP_STAGES 2
#endif
#ifndef WP_STAGES_SMALL
#define WP_STAGES_SMALL 2
#endif
#ifndef SPLIT_K
#define SPLIT_K 1  // read by the YAML's rule for S (grid.y); the kernel takes any S it is launched with
#endif

// FP8 builds take the per-tensor scales (the launcher appends them for fp8 points): detect e4m3 from
// the TIN token itself (DECODE_IS_FP8___nv_fp8_e4m3 is 1; any other TIN pastes to an undefined name, 0).
#define DECODE_IS_FP8___nv_fp8_e4m3 1
#define DECODE_CAT2(a, b) a##b
#define DECODE_CAT(a, b) DECODE_CAT2(a, b)
#if DECODE_CAT(DECODE_IS_FP8_, TIN)
#define DECODE_FP8 1
#include <cuda_fp8.h>
#else
#define DECODE_FP8 0
#endif

namespace decode {

constexpr int kWarps = WARPS;
constexpr int kThreads = 32 * WARPS;
constexpr int kChunk = 64;          // bytes of one weight row per step: two MMAs' k
constexpr int kUnitRows = 16 * MT;  // rows of one work unit (MT m16 tiles)
constexpr int kBarBytes = 128;      // X_BLOCKS mbarriers at the start of shared memory
constexpr int kWBarBytes = W_PIPE ? 256 : 0;  // W_PIPE: one mbarrier per ring stage of each warp, after them
// W_PIPE: a weight row's bytes in a ring stage: D chunks, padded to 64 mod 128 bytes (conflict-free lds)
__host__ __device__ constexpr int wstride(int d) { return d % 2 ? d * 64 : d * 64 + 64; }
__host__ __device__ constexpr int wring_bytes(int d, int st) { return W_PIPE ? kWarps * st * 16 * MT * wstride(d) : 0; }
static_assert(!W_PIPE || (WARPS * (WP_STAGES > WP_STAGES_SMALL ? WP_STAGES : WP_STAGES_SMALL) * 8 <= kWBarBytes),
              "the W ring's mbarriers must fit in 256 bytes");
static_assert(W_PIPE_MAX_M == 8 || W_PIPE_MAX_M == 16 || W_PIPE_MAX_M == 32 || W_PIPE_MAX_M == 64,
              "W_PIPE_MAX_M: the TMA weight ring for M up to 8, 16, 32 or 64 (the kernel's n-tile branches)");
static_assert(WP_CHUNKS >= 1 && WP_CHUNKS_SMALL >= 1 && WP_STAGES >= 1 && WP_STAGES_SMALL >= 1, "a W ring");
static_assert(MT == 1 || MT == 2, "MT is 1 or 2 m16 tiles per unit");
static_assert(X_BLOCKS >= 1 && X_BLOCKS * 8 <= kBarBytes, "X_BLOCKS mbarriers must fit in 128 bytes");
static_assert(W_DEPTH >= 1 && W_DEPTH_SMALL >= 1, "at least one chunk in flight");
static_assert(sizeof(TIN) == 2 || DECODE_FP8, "bf16 or e4m3 operands");
static_assert(sizeof(TOUT) == 2, "the result is bf16");

struct U4 {
  uint32_t x, y, z, w;
};

}  // namespace decode

#include "common/decode_ptx.cuh"  // the PTX wrappers (ld/st, mma.sync, conversions, the split-K atomic)

namespace decode {

// Everything one CTA needs to know about its piece of the problem.
struct Cta {
  const unsigned char* X;  // activations, M rows of row_bytes
  const unsigned char* W;  // weights, N rows of row_bytes
  TOUT* C;
  int M, N;
  long long row_bytes;  // K * elem_bytes
  float scale;          // scale_a * scale_b (fp8), 1 (bf16)
  int S, split, GX, bx;
  int ra, rb;           // rows [ra, rb)
  int ca, ck;           // 64-byte chunks [ca, ca + ck) of every row
  int units;            // cdiv(rb - ra, kUnitRows)
  int umax;             // units per CTA the workspace holds (cdiv(cdiv(N, GX), kUnitRows))
  int* counters;        // GX * umax
  float4* partials;     // S * GX * umax units of (MT * NT * 32) float4
};

// Where things are in this CTA's shared memory.
struct Lay {
  uint32_t xs;        // shared address of the X slice (X_SMEM)
  uint32_t xstride;   // bytes between its rows
  uint64_t* xbar;     // X_BLOCKS mbarriers
  uint64_t* wbar;     // W_PIPE: WARPS x stages mbarriers (a warp's ring: stages consecutive)
  unsigned char* wring;  // W_PIPE: WARPS rings of stages of 16 MT rows x wstride(D) bytes
  int xblock_chunks;  // chunks per X piece (a multiple of D)
  float4* heads;      // per warp: MT * NT * 32 float4 (a unit begun by another warp)
};

__device__ __forceinline__ float4 f4(const float (&a)[4]) { return make_float4(a[0], a[1], a[2], a[3]); }

// The NT x 8 tokens x (16 MT) rows of fp32 accumulators of one warp, and what it does with them.
template <int NT>
struct Acc {
  float v[MT][NT][4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[mt][nt][e] = 0.0f;
  }
  // Fragment-native float4s: slot j = mt * NT + nt of `base`, lane-minor (coalesced, conflict-free).
  __device__ __forceinline__ void store(float4* base, int lane) const {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) st_f4(base + (mt * NT + nt) * 32 + lane, f4(v[mt][nt]));
  }
  __device__ __forceinline__ void add_global(const float4* base, int lane) {  // L2, not L1: other SMs wrote it
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const float4 h = ldcg_f4(base + (mt * NT + nt) * 32 + lane);
        v[mt][nt][0] += h.x;
        v[mt][nt][1] += h.y;
        v[mt][nt][2] += h.z;
        v[mt][nt][3] += h.w;
      }
  }
  __device__ __forceinline__ void add_shared(const float4* base, int lane) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const float4 h = base[(mt * NT + nt) * 32 + lane];
        v[mt][nt][0] += h.x;
        v[mt][nt][1] += h.y;
        v[mt][nt][2] += h.z;
        v[mt][nt][3] += h.w;
      }
  }
};

// Unit t of the CTA is finished in this CTA (its owner warp holds the sum of the CTA's K-slice):
// write C, or with S > 1 hand the partial to the workspace; the S-th CTA to get there reduces.
template <int NT>
__device__ __forceinline__ void finish_unit(const Cta& p, Acc<NT>& acc, int t, int lane) {
  const int g = lane >> 2, q = lane & 3;
  if (p.S > 1) {
    const int unit = p.bx * p.umax + t;
    const int per_unit = MT * NT * 32;
    acc.store(p.partials + (static_cast<long long>(p.split) * p.GX * p.umax + unit) * per_unit, lane);
    __syncwarp();  // the lanes' stores happen before lane 0's release (CUTLASS's generic barrier, per warp)
    int arrived = 0;
    if (lane == 0) arrived = atomic_add_acq_rel_gpu(p.counters + unit, 1);
    arrived = shfl_lane0(arrived);
    if (arrived != p.S - 1) return;  // another split finishes this unit
    __syncwarp();                    // lane 0's acquire happens before every lane's reads
    acc.zero();  // sum all S, this split's too (as stored), in split order: the result does
    for (int s = 0; s < p.S; ++s)  // not depend on which split came last
      acc.add_global(p.partials + (static_cast<long long>(s) * p.GX * p.umax + unit) * per_unit, lane);
    if (lane == 0) p.counters[unit] = 0;  // every split has arrived: ready for the next launch
  }
  // C[token][row] = scale * acc: lane holds rows g, g+8 of each m16 tile, tokens 2q, 2q+1 of each n8 tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = p.ra + t * kUnitRows + mt * 16 + g + 8 * (e >> 1);
      if (row >= p.rb) continue;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int token = nt * 8 + 2 * q + (e & 1);
        if (token < p.M) p.C[static_cast<long long>(token) * p.N + row] = __float2bfloat16_rn(p.scale * acc.v[mt][nt][e]);
      }
    }
}

// 16 e4m3 bytes -> 8 f16x2 words (word j: elements 2j, 2j+1).
__device__ __forceinline__ void to_f16(const U4& v, uint32_t (&h)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    h[2 * i] = e4m3x2_to_f16x2(w[i]);
    h[2 * i + 1] = e4m3x2_to_f16x2(w[i] >> 16);
  }
}

// Dot product of 16 weight bytes with 16 activation bytes (M1_SIMT), fp32.
__device__ __forceinline__ float dot16(const U4& w, const U4& x) {
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w}, xs[4] = {x.x, x.y, x.z, x.w};
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#if DECODE_FP8
    float w0, w1, w2, w3, x0, x1, x2, x3;
    e4m3x2_to_float2(ws[i], w0, w1);
    e4m3x2_to_float2(ws[i] >> 16, w2, w3);
    e4m3x2_to_float2(xs[i], x0, x1);
    e4m3x2_to_float2(xs[i] >> 16, x2, x3);
    s += w0 * x0;
    s += w1 * x1;
    s += w2 * x2;
    s += w3 * x3;
#else
    s += bits_to_float(ws[i] << 16) * bits_to_float(xs[i] << 16);
    s += bits_to_float(ws[i] & 0xffff0000u) * bits_to_float(xs[i] & 0xffff0000u);
#endif
  }
  return s;
}

// One warp's share of the CTA: items (unit t, block b of D chunks), i in [i0, i1) of units * cb.
// NT: n8 tiles of tokens (M <= 8 NT); D: chunks per block = in flight; SIMT: M = 1 on CUDA cores.
template <int D>
__device__ void fetch_x(const Cta& p, const Lay& lay, unsigned char* xslice, int warp, int lane, int cb, int items);

template <int NT, int D, int ST, bool SIMT, bool PIPE>
__device__ void run_warp(const Cta& p, const Lay& lay, unsigned char* xslice, int warp, int lane) {
  const int g = lane >> 2, q = lane & 3;
  // the geometry the main loop uses, in registers (the rest of p stays in shared memory)
  const int ck = p.ck, ca = p.ca, ra = p.ra, rb = p.rb, units = p.units;
  const long long row_bytes = p.row_bytes;
  const unsigned char* const W = p.W;
  const int cb = (ck + D - 1) / D;  // blocks per unit
  const int items = units * cb;
  auto first_item = [&](int w) { return w * items / kWarps; };  // < 2^31: items <= N/16 x 4096
  const int i0 = first_item(warp), i1 = first_item(warp + 1);

  Acc<NT> acc;
  acc.zero();
  float sacc[MT][2];  // SIMT partial dot products of rows g, g+8 of each m16 tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) sacc[mt][0] = sacc[mt][1] = 0.0f;

  // PIPE (W_PIPE, M <= W_PIPE_MAX_M): the warp's ring of ST stages in shared memory, each one item's
  // weights (16 MT rows x D chunks), filled by 1D bulk copies (one per row, the lanes' rows) on the stage's mbarrier: item j goes to
  // stage (j - i0) % ST, issued when item j - ST has been consumed, so ST - 1 items (ST with the
  // wait) are in flight while the warp computes, with no registers held for them.
  constexpr int kWStride = wstride(D), kStageBytes = kUnitRows * wstride(D);
  uint64_t* const wbar = lay.wbar + warp * ST;
  unsigned char* const ring = lay.wring + warp * ST * kStageBytes;
  const uint32_t ring_lane = hopper::smem_u32(ring) + g * kWStride + q * 16;  // row g, the lane's 16 bytes
  auto issue = [&](int j) {
    const int t = j / cb, c0 = (j % cb) * D, s = (j - i0) % ST;
    const int row0 = ra + t * kUnitRows, rows = min(kUnitRows, rb - row0);
    const long long k0 = static_cast<long long>(ca + c0) * kChunk;
    const long long k1 = min(static_cast<long long>(ca + min(ck, c0 + D)) * kChunk, row_bytes);
    const uint32_t bytes = static_cast<uint32_t>(k1 - k0);  // a multiple of 16: K * elem_bytes is
    // the arrival that carries the byte count; copies that complete before it leave the phase open
    if (lane == 0) hopper::mbar_arrive_expect_tx(wbar + s, static_cast<uint32_t>(rows) * bytes);
    for (int r = lane; r < rows; r += 32)
      hopper::bulk_load_1d(ring + s * kStageBytes + r * kWStride, W + static_cast<long long>(row0 + r) * row_bytes + k0,
                           bytes, wbar + s);
  };
  U4 wbuf[PIPE ? 1 : D][MT][2];  // !PIPE: the register ring
  // the lane's weight rows of a unit: row g of it at chunk ca (+ (16 mt + 8 h) rows for the others),
  // and how many of the unit's rows from row g on are the CTA's
  const long long row8 = 8 * row_bytes;
  auto unit_rows = [&](int t, const unsigned char*& ptr, int& left) {
    const int row = ra + t * kUnitRows + g;
    left = rb - row;
    ptr = W + static_cast<long long>(left > 0 ? row : ra) * row_bytes + static_cast<long long>(ca) * kChunk +
          q * 16;
  };
  auto load_chunk = [&](U4 (&slot)[MT][2], const unsigned char* ptr, int left, int c) {
    const bool kin = c < ck && (static_cast<long long>(ca + c) * kChunk + q * 16 < row_bytes);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        slot[mt][h] = ldg_stream(ptr + (2 * mt + h) * row8 + c * kChunk, kin && 16 * mt + 8 * h < left);
  };
  const unsigned char* wptr;
  int wleft;

  if constexpr (PIPE) {
    if (i0 < i1) issue(i0);
  } else if (i0 < i1) {
    unit_rows(i0 / cb, wptr, wleft);
#pragma unroll
    for (int d = 0; d < D; ++d) load_chunk(wbuf[d], wptr, wleft, (i0 % cb) * D + d);
  }
#if X_SMEM
  fetch_x<D>(p, lay, xslice, warp, lane, cb, items);  // with this warp's first weights in flight
#else
  (void)xslice;
#endif
  if constexpr (PIPE)
    for (int j = i0 + 1; j < min(i1, i0 + ST); ++j) issue(j);  // the rest of the ring
  uint32_t xready = 0;  // X pieces this warp has seen complete
  for (int i = i0; i < i1; ++i) {
    const int t = i / cb, b = i % cb;
    const bool more = i + 1 < i1;
    const int tn = (i + 1) / cb, bn = (i + 1) % cb;
#if X_SMEM
    {  // the X piece of this block (pieces are whole blocks), once per piece
      const int piece = (b * D) / lay.xblock_chunks;
      if (!((xready >> piece) & 1u)) {
        hopper::mbar_wait(lay.xbar + piece, 0);
        xready |= 1u << piece;
      }
    }
#endif
    const int stage = PIPE ? (i - i0) % ST : 0;
    if constexpr (PIPE) hopper::mbar_wait(wbar + stage, static_cast<uint32_t>((i - i0) / ST) & 1u);
    const uint32_t wst = ring_lane + stage * kStageBytes;
    // !PIPE: the next block's rows (another unit's, past a unit's last block)
    const unsigned char* nptr = wptr;
    int nleft = wleft;
    if (!PIPE && more && tn != t) unit_rows(tn, nptr, nleft);
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int c = b * D + d;
      if (c < ck) {  // a unit's last block may be short: no MMAs past the slice
        U4 w[MT][2];  // the lane's 16 bytes of rows g, g + 8 of each m16 tile (PIPE: stale past the CTA's rows)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            w[mt][h] = PIPE ? lds16(wst + (16 * mt + 8 * h) * kWStride + d * kChunk) : wbuf[PIPE ? 0 : d][mt][h];
        if constexpr (SIMT) {
#if X_SMEM
          const U4 x = lds16(lay.xs + c * kChunk + q * 16);
#else
          const long long off = static_cast<long long>(ca + c) * kChunk + q * 16;
          const U4 x = ldg_cached(p.X + off, off < row_bytes);
#endif
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) sacc[mt][h] += dot16(w[mt][h], x);
        } else {
          U4 x[NT];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
#if X_SMEM
            // tokens past M read token M-1's row: their columns of D are never stored, and the
            // slice holds only M rows
            x[nt] = lds16(lay.xs + min(nt * 8 + g, p.M - 1) * lay.xstride + c * kChunk + q * 16);
#else
            const int token = nt * 8 + g;
            const long long off = static_cast<long long>(ca + c) * kChunk + q * 16;
            x[nt] = ldg_cached(p.X + static_cast<long long>(token < p.M ? token : 0) * row_bytes + off,
                               token < p.M && off < row_bytes);
#endif
          }
#if DECODE_FP8 && FP8_F16_MMA
          // e4m3 -> f16 once per byte (exact), then four k16 f16 MMAs per 64-byte chunk: half word j of
          // a lane's 16 bytes holds its elements 2j, 2j+1, and MMA i takes half words 2i (k 2q, 2q+1)
          // and 2i + 1 (k 2q+8, 2q+9) of the weight rows and of the tokens alike
          // (converted straight into fragment order: a[mt][i] = {row g lo, row g+8 lo, row g hi, row g+8 hi})
          uint32_t a[MT][4][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            uint32_t lo[8], hi[8];
            to_f16(w[mt][0], lo);
            to_f16(w[mt][1], hi);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              a[mt][i][0] = lo[2 * i];
              a[mt][i][1] = hi[2 * i];
              a[mt][i][2] = lo[2 * i + 1];
              a[mt][i][3] = hi[2 * i + 1];
            }
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            uint32_t xh[8];
            to_f16(x[nt], xh);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int i = 0; i < 4; ++i)
                mma_f16(acc.v[mt][nt], a[mt][i][0], a[mt][i][1], a[mt][i][2], a[mt][i][3], xh[2 * i], xh[2 * i + 1]);
          }
#else
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            const U4& lo = w[mt][0];  // row g
            const U4& hi = w[mt][1];  // row g + 8
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
#if DECODE_FP8  // m16n8k32 e4m3: on sm_90 ptxas converts the operands of every MMA to f16 itself
              mma_e4m3(acc.v[mt][nt], lo.x, hi.x, lo.y, hi.y, x[nt].x, x[nt].y);
              mma_e4m3(acc.v[mt][nt], lo.z, hi.z, lo.w, hi.w, x[nt].z, x[nt].w);
#else
              mma_bf16(acc.v[mt][nt], lo.x, hi.x, lo.y, hi.y, x[nt].x, x[nt].y);
              mma_bf16(acc.v[mt][nt], lo.z, hi.z, lo.w, hi.w, x[nt].z, x[nt].w);
#endif
            }
          }
#endif
        }
      }
      if (!PIPE && more) load_chunk(wbuf[PIPE ? 0 : d], nptr, nleft, bn * D + d);  // refill: D chunks stay in flight
    }
    if constexpr (PIPE) {
      __syncwarp();  // every lane's reads of the stage are done (their MMAs issued): refill it
      if (i + ST < i1) issue(i + ST);
    }
    wptr = nptr;
    wleft = nleft;

    if (b == cb - 1 || !more) {  // this warp's part of unit t ends here
      if constexpr (SIMT) {      // quad sums -> the n8 fragment layout (token 0 = column 2q with q = 0)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float v = sacc[mt][h];
            v += shfl_xor(v, 1);
            v += shfl_xor(v, 2);
            acc.v[mt][0][2 * h] = q == 0 ? v : 0.0f;
            acc.v[mt][0][2 * h + 1] = 0.0f;
            sacc[mt][h] = 0.0f;
          }
      }
      const bool owner = t > i0 / cb || i0 % cb == 0;  // began unit t at its first block
      if (!owner) {
        acc.store(lay.heads + warp * (MT * NT * 32), lane);  // the owner adds it after the loop
        acc.zero();
      } else if (b == cb - 1) {
        finish_unit(p, acc, t, lane);
        acc.zero();
      }  // else: the owner's range ends inside t; acc is kept for after the loop
    }
  }
  __syncthreads();  // every head slot written
  if (i0 < i1 && i1 % cb != 0) {  // the last unit was begun here (owner) but ends in later warps
    const int t = (i1 - 1) / cb;
    const bool owner = t > i0 / cb || i0 % cb == 0;
    if (owner) {
      for (int w = warp + 1; w < kWarps; ++w) {  // warp order: a fixed summation order
        const int j0 = first_item(w), j1 = first_item(w + 1);
        if (j0 >= (t + 1) * cb) break;
        if (j0 < j1) acc.add_shared(lay.heads + w * (MT * NT * 32), lane);
      }
      finish_unit(p, acc, t, lane);
    }
  }
}

template <int NT, int D, int ST, bool SIMT, bool PIPE>
__device__ void run_cta(const Cta& p, unsigned char* smem) {
  Lay lay;
  // shared memory: [X_BLOCKS mbarriers][W ring mbarriers][head slots][W ring][X slice]
  lay.xbar = reinterpret_cast<uint64_t*>(smem);
  lay.wbar = reinterpret_cast<uint64_t*>(smem + kBarBytes);
  lay.heads = reinterpret_cast<float4*>(smem + kBarBytes + kWBarBytes);
  const uint32_t head_bytes = kWarps * MT * NT * 32 * 16;
  constexpr uint32_t ring_bytes = PIPE ? wring_bytes(D, ST) : 0;
  lay.wring = smem + kBarBytes + kWBarBytes + head_bytes;
  unsigned char* const xslice = lay.wring + ring_bytes;
  lay.xstride = X_SMEM ? ((p.ck * kChunk + 127) / 128) * 128 + 64 : 0;  // rows 64 mod 128 bytes apart
  const uint32_t needed = kBarBytes + kWBarBytes + head_bytes + ring_bytes + (X_SMEM ? p.M * lay.xstride : 0);
  if (needed > dynamic_smem_size()) __trap();  // the launch rule gives less than this split needs
  lay.xs = hopper::smem_u32(xslice);
  lay.xblock_chunks = D * ((((p.ck + D - 1) / D) + X_BLOCKS - 1) / X_BLOCKS);
  if constexpr (PIPE) {
  // The ring's barriers, and the K tail: where the slice's last chunk ends inside K's last 64 bytes,
  // the bytes past K in its stage position are zeroed once (the copies never write them; the X
  // slice holds zeros there, and 0 x a stale NaN would be NaN). Copies that write the same
  // position later (other blocks' full chunks) leave finite weights there.
  if (threadIdx.x == 0) {
    for (int j = 0; j < kWarps * ST; ++j) hopper::mbar_init(lay.wbar + j, 1);
    hopper::fence_mbar_init();
  }
  const int tail = static_cast<int>(p.row_bytes % kChunk);  // bytes of K's last chunk (0: whole)
  const int chunks = static_cast<int>((p.row_bytes + kChunk - 1) / kChunk);
  if (tail != 0 && p.ca + p.ck == chunks) {
    const int pos = ((p.ck - 1) % D) * kChunk + tail, pieces = (kChunk - tail) / 16;  // 16-byte pieces
    constexpr int rows = kWarps * ST * kUnitRows;  // every row of every stage of every warp
    for (int i = threadIdx.x; i < rows * pieces; i += kThreads)
      *reinterpret_cast<U4*>(lay.wring + (i / pieces) * wstride(D) + pos + (i % pieces) * 16) = U4{0, 0, 0, 0};
    hopper::fence_proxy_async_smem();  // before the copies (the async proxy) write near them
  }
  __syncthreads();
  }
  run_warp<NT, D, ST, SIMT, PIPE>(p, lay, xslice, threadIdx.x / 32, threadIdx.x % 32);
}

// The CTA's X slice into shared memory (X_SMEM), once, by the TMA engine: M rows x `pieces` pieces
// of whole blocks, each piece on its own mbarrier. The warps' ranges begin at different K positions
// (stream-K inside the CTA), so the pieces go out in the order the warps will first need them, not
// in K order: a warp that begins at K/2 does not wait for the whole slice. Called by every thread
// (a __syncthreads inside), after the warps' first weight loads are in flight.
template <int D>
__device__ void fetch_x(const Cta& p, const Lay& lay, unsigned char* xslice, int warp, int lane, int cb,
                        int items) {
  const long long x0 = static_cast<long long>(p.ca) * kChunk;  // the slice's first byte in a row
  const long long x1 = x0 + static_cast<long long>(p.ck) * kChunk;
  const int slice_bytes = static_cast<int>((x1 < p.row_bytes ? x1 : p.row_bytes) - x0);
  const int pieces = (p.ck + lay.xblock_chunks - 1) / lay.xblock_chunks;
  if (threadIdx.x == 0) {
    for (int j = 0; j < pieces; ++j) hopper::mbar_init(lay.xbar + j, 1);
    hopper::fence_mbar_init();
  }
  // the slice's last chunk past K: zeros (the weights there load as zeros; 0 x garbage may be NaN)
  const int tail = p.ck * kChunk - slice_bytes;
  for (int i = threadIdx.x; i < p.M * tail; i += kThreads) xslice[(i / tail) * lay.xstride + slice_bytes + i % tail] = 0;
  __syncthreads();  // barriers initialised, tails zeroed
  if (warp != 0) return;
  // when each piece is first needed: blocks from a warp's first block to the piece, wrapping into
  // its next unit. Lane j < pieces takes piece j; its rank among the pieces (by need, then index) is
  // the order its copies go out in.
  const int per_piece = lay.xblock_chunks / D;  // blocks
  int need = 0x7fffffff;
  if (lane < pieces)
    for (int w = 0; w < kWarps; ++w) {
      const int j0 = w * items / kWarps, j1 = (w + 1) * items / kWarps;
      const int b0 = j0 % cb, jb0 = lane * per_piece, jb1 = min(cb, jb0 + per_piece);
      const int t = (b0 >= jb0 && b0 < jb1) ? 0 : (jb0 > b0 ? jb0 - b0 : cb - b0 + jb0);
      if (j0 < j1 && j0 + t < j1) need = min(need, t);
    }
  int rank = 0;
  for (int c = 0; c < pieces; ++c) {
    const int nc = shfl_idx(need, c);
    rank += (nc < need || (nc == need && c < lane)) ? 1 : 0;
  }
  if (lane == 0)
    for (int j = 0; j < pieces; ++j) {
      const int b0 = j * lay.xblock_chunks * kChunk;
      const int b1 = min(slice_bytes, (j + 1) * lay.xblock_chunks * kChunk);
      hopper::mbar_arrive_expect_tx(lay.xbar + j, static_cast<uint32_t>(p.M * max(0, b1 - b0)));
    }
  __syncwarp();
  for (int r = 0; r < pieces; ++r) {
    int j = 0;  // the piece of rank r
    for (int c = 0; c < pieces; ++c) j = shfl_idx(rank, c) == r ? c : j;
    const int b0 = j * lay.xblock_chunks * kChunk;
    const int b1 = min(slice_bytes, (j + 1) * lay.xblock_chunks * kChunk);
    for (int m = lane; m < p.M; m += 32)
      if (b1 > b0)
        hopper::bulk_load_1d(xslice + m * lay.xstride + b0, p.X + m * p.row_bytes + x0 + b0,
                             static_cast<uint32_t>(b1 - b0), lay.xbar + j);
  }
}

}  // namespace decode

// the least any launch needs: one n8 tile of heads and the smaller of the two W rings (if every M has one)
HOPPER_DECLARE_DYNAMIC_SMEM(decode::kBarBytes + decode::kWBarBytes + decode::kWarps * MT * 32 * 16 +
                            (W_PIPE_MAX_M < 64 ? 0  // M = 64 without the ring
                             : decode::wring_bytes(WP_CHUNKS_SMALL, WP_STAGES_SMALL) <
                                     decode::wring_bytes(WP_CHUNKS, WP_STAGES)
                                 ? decode::wring_bytes(WP_CHUNKS_SMALL, WP_STAGES_SMALL)
                                 : decode::wring_bytes(WP_CHUNKS, WP_STAGES)))

extern "C" __global__ void __launch_bounds__(decode::kThreads, 1)
    decode_splitk(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K,
#if DECODE_FP8
                  float scale_a, float scale_b,
#endif
                  int* __restrict__ workspace) {
  using namespace decode;
  HOPPER_DYNAMIC_SMEM(smem_raw);
  // The CTA's geometry, written by one thread: in shared memory, the fields the main loop does not
  // touch are read where they are needed instead of holding registers all along.
  __shared__ Cta cta;
  if (threadIdx.x == 0) {
  Cta& p = cta;
  p.X = reinterpret_cast<const unsigned char*>(A);
  p.W = reinterpret_cast<const unsigned char*>(B);
  p.C = C;
  p.M = M;
  p.N = N;
  p.row_bytes = static_cast<long long>(K) * sizeof(TIN);
#if DECODE_FP8
  p.scale = scale_a * scale_b;
#else
  p.scale = 1.0f;
#endif
  p.GX = gridDim.x;
  p.S = gridDim.y;
  p.bx = blockIdx.x;
  p.split = blockIdx.y;
  p.ra = p.bx * N / p.GX;  // 32-bit: bx < 2^8, N < 2^18
  p.rb = (p.bx + 1) * N / p.GX;
  const int chunks = static_cast<int>((p.row_bytes + kChunk - 1) / kChunk);
  p.ca = p.split * chunks / p.S;  // 32-bit: split < 2^6, chunks < 2^16
  p.ck = (p.split + 1) * chunks / p.S - p.ca;
  if (p.ck <= 0 || M > 64) __trap();  // S <= chunks and M <= 64 are the launch rule's to keep
  p.units = (p.rb - p.ra + kUnitRows - 1) / kUnitRows;
  p.umax = ((N + p.GX - 1) / p.GX + kUnitRows - 1) / kUnitRows;
  p.counters = workspace;
  // partials after the counters, 256-byte aligned
  p.partials = reinterpret_cast<float4*>(workspace + ((p.GX * p.umax + 63) / 64) * 64);
  }
  __syncthreads();
  const Cta& p = cta;
  // PIPE: the TMA weight ring for M <= W_PIPE_MAX_M (a multiple of the branches' bounds: 8, 16, 32,
  // 64); D chunks per block (an item): the ring stage's with PIPE, else the register ring's depth
  constexpr bool P8 = W_PIPE && 8 <= W_PIPE_MAX_M, P16 = W_PIPE && 16 <= W_PIPE_MAX_M,
                 P32 = W_PIPE && 32 <= W_PIPE_MAX_M, P64 = W_PIPE && 64 <= W_PIPE_MAX_M;
  constexpr int D8 = P8 ? WP_CHUNKS_SMALL : W_DEPTH_SMALL, D16 = P16 ? WP_CHUNKS_SMALL : W_DEPTH_SMALL,
                D32 = P32 ? WP_CHUNKS : W_DEPTH, D64 = P64 ? WP_CHUNKS : W_DEPTH;
  constexpr int SS = W_PIPE ? WP_STAGES_SMALL : 1, SL = W_PIPE ? WP_STAGES : 1;
  if (M == 1 && M1_SIMT)
    run_cta<1, D8, SS, true, P8>(p, smem_raw);
  else if (M <= 8)
    run_cta<1, D8, SS, false, P8>(p, smem_raw);
  else if (M <= 16)
    run_cta<2, D16, SS, false, P16>(p, smem_raw);
  else if (M <= 32)
    run_cta<4, D32, SL, false, P32>(p, smem_raw);
  else
    run_cta<8, D64, SL, false, P64>(p, smem_raw);
}

#if defined(GEMMLAB_HOST_EMULATION)
#include "common/host_emulation/decode_ptx.h"  // the PTX wrappers above, on the host (CPU tests)
#endif
