// Stage 12: wgmma_ws -- warp-specialised, persistent, clustered TMA + wgmma GEMM (sm_90a).
//
// What changes over stage 11 (wgmma_tma):
// * Warp specialisation: warpgroup 0 is a producer whose one elected thread only issues TMA copies
//   (it waits on "empty" barriers, never on data); warpgroups 1 and 2 are consumers that only wait
//   on "full" barriers and issue wgmma. `setmaxnreg` moves registers from the producer (40) to the
//   consumers (232), which hold BN/2 fp32 accumulators each.
// * Persistent grid: at most one CTA per SM (GRID_CTAS caps it); each cluster walks the output tiles
//   t = cluster_id, cluster_id + clusters, ... so the producer prefetches the next tile's first
//   stages while the consumers finish the current one (no launch tail per tile). The producer thread
//   and the consumers each walk that sequence themselves (the measured kernel). PRODUCER_SCHEDULES 1
//   (off, to be measured) makes the producer thread the only scheduler: it hands each piece of work
//   (tile, k-tiles) to the consumers with the piece's first slot (a UnitInfo beside the barriers,
//   published by the full barrier's arrive) and ends them with a slot that carries no data; stream-K
//   needs it (a piece's k-range and cut reach the consumers that way).
// * Rasterisation for L2 reuse: tiles are numbered in groups of GROUP_M cluster-rows, walking down a
//   group column by column, so the tiles in flight at once share A rows and B columns in L2
//   (RASTER 0; the other orders and the stream-K split: hopper/tile_schedule.cuh, defines below).
// * 2-CTA clusters along M with TMA multicast (CLUSTER_M=2): both CTAs of a cluster need the same
//   BK x BN slice of B; each loads half of its 64-column chunks and multicasts them to both, which
//   halves the B traffic out of L2. A slot is refilled only when the consumers of *both* CTAs have
//   released it (the empty barrier counts 2 consumers x CLUSTER_M arrivals, sent across the cluster).
//   The release is a plain remote `mbarrier.arrive` (release at CTA scope), as CUTLASS's
//   PipelineTmaAsync does; at cluster scope ptxas fences each arrive with MEMBAR.ALL.GPU, which
//   held the clusters to 57% of cuBLAS (MBAR_CLUSTER_SCOPE below).
// * Epilogue through shared memory: the accumulators go to a 128B-swizzled staging tile with
//   `stmatrix` (bank-conflict free), then one TMA store per 64-column box writes them out; TMA
//   clips the parts of partial tiles that fall outside C. Staging EPI_BOXES boxes per round (2 of
//   the 4) halves the staging tile, which makes room for a fourth stage.
//
// Layouts (`layouts: [nn, nt]` in the YAML; tn and tt, A stored K x M, are skipped): A row-major
// M x K, read K-major. B either way, chosen at build time by B_KMAJOR, which the launcher sets from
// the point's layout (the YAML's point_defines):
//   nn (B_KMAJOR 0): B stored K x N; boxes of BK rows x 64 columns, read N-major with the wgmma
//     transpose bit (as stage 11): 64-column chunks LBO = 8 KB apart, k16 = 2 KB on.
//   nt (B_KMAJOR 1): B stored N x K, as a linear layer's weight (out, in) is kept; boxes of 64 rows
//     (N) x BK columns (K), the same 8 KB chunks, now 64 K-major rows each, so the stage's B tile is
//     BN rows of 128 bytes, read K-major like A (no transpose bit, SBO 1 KB, k16 = 32 B on), as
//     stage 13 reads its FP8 B. Same bytes per stage, same swizzle, same multicast split.
// Tensor maps passed by the launcher: [A box {64, BM}, B box {64, 64}, C box {64, 64}], all
// SWIZZLE_128B.
//
// Constraints: TIN in {bf16, fp16}, fp32 accumulation, TOUT = TIN; K % 8 == 0 and N % 8 == 0 (TMA
// strides); any M (a cluster's second CTA may get an all-out-of-bounds tile: it loads zeros and
// stores nothing). BM = 128 (two m64 consumers), BK = 64, BN in {128, 256}, CLUSTER_M in {1, 2}; the
// grid must be a multiple of CLUSTER_M, and should be resident at once (grid <= SM count; the
// static schedule balances work over all clusters; no CTA ever waits for another, stream-K
// included). Shared memory: STAGES*(BM*BK + BK*BN)*2 + 2*64*64*EPI_BOXES*2 (staging) + 1 KB
// alignment + barriers (16*STAGES; PRODUCER_SCHEDULES adds 16*STAGES + 16 of slot infos): 225 KB for
// 4 stages and EPI_BOXES 2 (209 KB for 3 stages with the whole tile staged). Last argument: the
// launcher's workspace (YAML workspace_bytes), read only with STREAM_K 1: grid * 2 * 4 bytes of
// counters (to 256) + grid * 2 * BM * BN * 4 bytes of fp32 partials (34.6 MB on 132 CTAs); the kernel
// leaves the counters at zero. With every define below at 0 (B_KMAJOR aside) the kernel compiles to
// the SASS measured in the table below (the workspace argument is never read).
//
// Modeled intensity (operand bytes per CTA tile out of L2/DRAM, no reuse between clusters):
// 2*BM*BN / ((BM + BN/CLUSTER_M) * 2 B) = 128 FLOP/B for 128x256 with multicast of B.
//
// Techniques behind defines, so that a sweep (tune_ws in .ci/h200-session.sh, WS_SWEEP in
// tests/test_hopper_kernels.py) shows what each buys; the YAML's defaults are the measured kernel.
//   define              what it does
//   CLUSTER_M           2: 2-CTA clusters along M, B multicast to both; 1: none
//   MBAR_CLUSTER_SCOPE  1: slot release/wait at cluster scope (MEMBAR.ALL.GPU before every remote arrive); 0: CTA
//                       scope
//   GRID_CTAS           N > 0: persistent grid of min(N, SMs) CTAs; 0: all (66 clusters)
//   STAGES, EPI_BOXES   ring depth; 64x64 output boxes staged per round (0: all BN/64, the whole tile); 4 stages fit
//                       only with 2 or fewer
//   EPI_TMA             1: stmatrix -> staging -> TMA store; 0: direct 32-bit global stores from the accumulators
//   GROUP_M             cluster-rows per group of the grouped raster
// Measured: % of cuBLAS BF16 (the faster of cuBLAS/cuBLASLt timed interleaved with the point), layout nn, at N = 4096 /
// 8192 on the H200, 2026-12-01, each line the defines it changes from the defaults; * = unreliable row, noise or clock
// drift above the limits, as most rows at 8192 are: every tensor-core GEMM there meets the 700 W limit. The table is
// the rows' (python -m analysis.techniques --sync writes it; tests/test_techniques.py fails where it is not); the
// CLUSTER_M 1, EPI_BOXES 0, GRID_CTAS 0, STAGES 3 line is the previous default. The TMA store buys 2-9%; the
// cluster-scope release costs a third. The defaults over three input seeds, sustained (session5c/ws_repeat):
// 99.0-99.3 / 100.5-101.2.
// BEGIN techniques outputs/reference/h200-2026-12-01/session5c/tune_wgmma_ws
// configuration                                     4096    8192
// defaults                                         99.2   100.4*
// CLUSTER_M 1, GRID_CTAS 0                         96.9   104.1*
// CLUSTER_M 1, EPI_BOXES 0, GRID_CTAS 0, STAGES 3  96.2*   98.7*
// CLUSTER_M 1, EPI_TMA 0, GRID_CTAS 0              89.5    95.9*
// GRID_CTAS 0                                      98.3   101.0*
// MBAR_CLUSTER_SCOPE 1                             64.9    60.4*
// EPI_BOXES 0, STAGES 3                            98.7*   98.9*
// EPI_BOXES 1                                      98.8   100.1*
// GROUP_M 16                                       98.3   100.4*
// GROUP_M 4                                        98.6    99.9*
// EPI_TMA 0                                        90.8*   97.5
// END techniques
// Before the CTA-scope release (session4), clusters had been 61.5 / 57.1 and capping the grid at 128/120/112
// CTAs did not rescue them (57.6*, 53.0*, 49.8* at 8192).
// From pranjalssh/fast.cu's list, already here: 128x256 tiles on m64n256k16, mbarrier parity waits
// (try_wait.parity), clusters with multicast (CLUSTER_M), a 128-CTA persistent grid, and (RASTER 2)
// a Hilbert-curve tile order, computed for each tile without a table (a walk of about log2(rows) +
// log2(columns) halvings): by every role, or with PRODUCER_SCHEDULES 1 by the producer thread alone,
// off the consumers' path, while the ring is full.
//
// Techniques added for layout nt and LLM shapes (issue 32), off by default; the predictions below, and under the
// table what the H200 measured of them (tune_ws_nt in .ci/h200-session.sh; WS_NT_SWEEP in tests/test_wgmma_ws_nt.py):
//   define              what it does                               predicted effect when switched on
//   PRODUCER_SCHEDULES  1: the producer thread alone walks the     +-0.5% (noise): the consumers trade a
//                       schedule and hands each piece to the       few integer ops per tile for a 16-byte
//                       consumers with its first slot (UnitInfo);  shared load, the CTA one more slot use.
//                       a slot without data ends them. 0: every    Needed by STREAM_K; takes RASTER 2's
//                       role walks the tiles itself (measured)     walk off the consumers' path
//   RASTER              tile order: 0 grouped raster (GROUP_M      1: 0..+1% where a wave's A and B panels
//                       cluster rows, down each column); 1 the     fit the 60 MiB L2 (K <= ~6144), ~0 at
//                       same with every odd group walking its      8192; 2: the same, and up to +1% on LLM
//                       columns right to left (a group's first     shapes with many tile columns (N = 57344:
//                       tiles reuse the last ones' B columns);     224), less the walk per tile in every
//                       2 generalized Hilbert curve over the       consumer thread unless PRODUCER_SCHEDULES
//                       cluster tiles                              (< 0.5% of a tile's time at K >= 4096)
//   STREAM_K            1 (needs PRODUCER_SCHEDULES 1): when the   with GRID_CTAS 0 (66 clusters): +1..+3%
//                       tiles leave the last wave partly idle,     where 128 CTAs leave 4 SMs idle (4096,
//                       the last whole wave and the partial one    6144, Llama-3 70B prefill: all multiples
//                       are cut into equal runs of k-tiles, one    of 64 cluster tiles), less the fixup
//                       per cluster (data-parallel tiles first);   (<= 2 cut tiles per CTA, 64 KB stored and
//                       a tile cut in two is finished by the part  read per consumer); 0 where tiles % 66
//                       that arrives second (fp32 partials in the  == 0
//                       workspace, a counter per cut, a + b:
//                       deterministic, no float atomics)
//   B_KMAJOR            not a tuning knob: the layout (nt: 1)      nt within +-1% of nn (same bytes, same
//                                                                  swizzle, no transpose bit)
//   UNIFORM_A           1: the consumer index told warp-uniform    both, nt (session24b): 99.8 / 100.5 / 100.3%
//                       (a shuffle from lane 0): A's descriptors   at 4096 / 6144 / 8192 vs the defaults'
//                       in uniform registers, no R2UR              99.7 / 100.2 / 101.2; Llama-3 70B geomean
//   DESC_STEP           1: each k16 step's descriptors the first   0.998 vs 1.000: no gain (a k-tile's wgmmas
//                       step's + a constant (CUTLASS's iterator)   go before the last is waited for: hidden)
//   MAP_PARAMS          1 (the default since session34c): the      predicted +0.5..+2% at 4096 (a kernel of ~180
//                       three tensor maps by value                 us): the maps no longer come from DRAM after the
//                       (__grid_constant__ parameters, written     timer's L2 flush, so no SM starts late for want
//                       with the launch; gemmlab/gpu/tma.py),      of one (stage 17 on an H100: the slowest SM's
//                       prefetched before the barriers; 0: in a    first data 7.0 -> 3.9 us). Measured on the H200
//                       device buffer, fenced (every row before    at nt (h200-2026-12-05/session34c/maps_ws_nt, A B
//                       session34c)                                B A): 100.5 / 100.8 against 99.5 / 99.7% at 4096,
//                                                                  99.8 / 100.4 against 99.6 / 99.9 at 6144, 100.6
//                                                                  / 100.8 against 100.6 / 99.5 at 8192
// Measured at nt, BF16 (measure=sustained, % of the best library interleaved, * unreliable by noise or clock):
// BEGIN techniques outputs/reference/h200-2026-12-02/session9c/ws_nt_square
// configuration                                  4096    6144    8192
// defaults                                       99.4  100.2*  101.9
// RASTER 1                                       99.5  100.2*   99.3
// RASTER 2                                       98.8   99.3    99.3*
// GRID_CTAS 0, PRODUCER_SCHEDULES 1, STREAM_K 1  93.1   97.4*  102.7*
// END techniques
// Llama-3 70B prefill 97.5-101.0 (geomean 0.991) at the defaults. None reaches issue 32's 1.05x: parity at every size.
// Stream-K taken apart on an H100 (ws_streamk_diag; the device tool's card that day): the producer-only schedule and
// all 132 SMs cost a point each, stream-K ten more; ncu at 4096: DRAM 26.5% -> 50.4%, L2 hit rate 80.9% -> 66.3%,
// 182.0 -> 197.6 us: its units, each at its own k in the last two waves' tiles, fetch A and B again where the
// data-parallel waves, in step along k, share them in L2.
// BEGIN techniques outputs/reference/h100-2026-12-05/session30c/ws_streamk_diag
// configuration                                  4096    6144
// defaults                                       99.3   99.9
// PRODUCER_SCHEDULES 1                           98.3  100.0*
// GRID_CTAS 0                                    98.5   99.3*
// GRID_CTAS 0, PRODUCER_SCHEDULES 1              97.5   99.5*
// GRID_CTAS 0, PRODUCER_SCHEDULES 1, STREAM_K 1  87.8   89.1*
// END techniques
//
// Run it alone: python run.py variant=[cublas,wgmma_ws] precision=bf16 sizes.square=[4096,8192]
//   (layout nt: add layouts=[nt]; Llama-3 70B prefill: sizes=llm 'sizes.model_names=[llama3_70b]'
//   'sizes.tokens=[4096,16384]' layouts=[nt])
// Debug aids: GEMMLAB_DEBUG=1 (`+variant.wgmma_ws.cuda.defines.GEMMLAB_DEBUG=1`) turns a barrier
// wait that spins for ~9 s into a printf (block, thread, barrier, parity) and a trap instead of a
// hang; `variant.wgmma_ws.cuda.defines.CLUSTER_M=1` runs the same kernel without clusters and
// multicast, which separates a multicast problem from the rest.
#include "hopper/ptx.cuh"
#include "hopper/tile_schedule.cuh"
#include "hopper/wgmma.cuh"

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
#ifndef CLUSTER_M
#define CLUSTER_M 2
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 40
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS 232
#endif
#ifndef MAP_PARAMS  // 1: the tensor maps by value (__grid_constant__ parameters); 0: in a device buffer (measured)
#define MAP_PARAMS 0
#endif
#ifndef EPI_TMA
#define EPI_TMA 1
#endif
#ifndef EPI_BOXES
#define EPI_BOXES 2
#endif
#if EPI_BOXES == 0  // 0: the whole 64 x BN tile at once
#undef EPI_BOXES
#define EPI_BOXES (BN / 64)
#endif
#ifndef MBAR_CLUSTER_SCOPE
#define MBAR_CLUSTER_SCOPE 0
#endif
#ifndef B_KMAJOR  // set by the launcher from the point's layout (the YAML's point_defines)
#define B_KMAJOR 0
#endif
#ifndef RASTER
#define RASTER 0
#endif
#ifndef STREAM_K
#define STREAM_K 0
#endif
#ifndef PRODUCER_SCHEDULES  // 0: every role walks the tiles itself (the measured kernel); 1: the producer hands them out
#define PRODUCER_SCHEDULES 0
#endif
// UNIFORM_A, DESC_STEP (hopper/issue_path.cuh): A's descriptors in uniform registers; each k16 step's descriptors
// the first's advanced by its bytes (A and K-major B: 32, N-major B: 2 KB)
#include "hopper/issue_path.cuh"
static_assert((UNIFORM_A == 0 || UNIFORM_A == 1) && (DESC_STEP == 0 || DESC_STEP == 1), "UNIFORM_A, DESC_STEP: 0 or 1");

namespace {

constexpr int kConsumers = BM / 64;               // consumer warpgroups, one m64 slice each
constexpr int kThreads = 128 * (1 + kConsumers);  // + the producer warpgroup
constexpr int kTileABytes = BM * BK * 2;
constexpr int kTileBBytes = BK * BN * 2;
constexpr int kStageBytes = kTileABytes + kTileBBytes;
// One TMA box of B: BK rows x 64 columns (B_KMAJOR 0), or 64 rows (N) x BK columns (K) (B_KMAJOR 1).
constexpr int kBChunkBytes = BK * 64 * 2;
constexpr int kBChunks = BN / 64;
constexpr int kCBoxBytes = 64 * 64 * 2;        // one TMA box of C: 64 rows x 64 columns
// One consumer's staging: EPI_BOXES 64 x 64 boxes of its 64 x BN output tile (all of it by default;
// fewer boxes store the tile in rounds and leave room for one more stage).
constexpr int kStagingBytes = EPI_TMA ? EPI_BOXES * kCBoxBytes : 0;
constexpr int kAccum = BN / 2;

static_assert(BM == 128, "two consumer warpgroups of m64");
static_assert(BK == 64, "A rows (and K-major B rows) must be exactly one 128-byte swizzle row");
static_assert(BN == 128 || BN == 256, "wgmma N");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "cluster of 1 or 2 CTAs along M");
static_assert(kBChunks % CLUSTER_M == 0, "B chunks split evenly across the cluster");
static_assert(STAGES >= 2, "a ring needs two slots at least");
static_assert(EPI_TMA == 0 || EPI_TMA == 1, "EPI_TMA is 0 or 1");
static_assert(EPI_BOXES >= 1 && kBChunks % EPI_BOXES == 0, "EPI_BOXES divides the tile's 64-column boxes");
static_assert(MBAR_CLUSTER_SCOPE == 0 || MBAR_CLUSTER_SCOPE == 1, "MBAR_CLUSTER_SCOPE is 0 or 1");
static_assert(B_KMAJOR == 0 || B_KMAJOR == 1, "B_KMAJOR is 0 (B stored K x N) or 1 (B stored N x K)");
static_assert(STREAM_K == 0 || STREAM_K == 1, "STREAM_K is 0 or 1");
static_assert(PRODUCER_SCHEDULES == 0 || PRODUCER_SCHEDULES == 1, "PRODUCER_SCHEDULES is 0 or 1");
static_assert(!STREAM_K || PRODUCER_SCHEDULES,
              "STREAM_K needs PRODUCER_SCHEDULES 1: a piece's k-range and cut reach the consumers in its first slot");
// setmaxnreg moves registers inside what the launch gave the CTA (65536 / kThreads a thread, down to a
// multiple of 8): past it, setmaxnreg.inc waits for registers that never come (stage 15 hung so, session14e)
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * kConsumers <= 65536 / kThreads / 8 * 8 * kThreads,
              "register file: the warpgroups' setmaxnreg counts past the CTA's launch registers (a hang)");

#if PRODUCER_SCHEDULES
// What the producer tells the consumers about the work in a slot, at the first k-tile of each piece:
// the tile (cluster row, column), its k-tiles [kb, ke) as kb | ke << 16, and for a stream-K part of a
// tile 2 * boundary + part (-1: a whole tile); m < 0: no more work. The consumers compute nothing of
// the schedule, and keep no value of the prologue across setmaxnreg (ptxas spilled such values in the
// stream-K builds).
struct UnitInfo {
  int m, n, k_range, split;
};
#endif

// Stages, the consumers' staging tiles, 1 KB to align to the swizzle period, full + empty barriers,
// and with PRODUCER_SCHEDULES the slots' UnitInfo and one word per consumer for stream-K's "arrived
// second".
constexpr int kDynamicSmemBytes = STAGES * kStageBytes + kConsumers * kStagingBytes + 1024 + 2 * STAGES * 8 +
                                  PRODUCER_SCHEDULES * (STAGES * 16 + 16);
static_assert(kDynamicSmemBytes <= 227 * 1024, "more shared memory than one sm_90 block may have");

#if STREAM_K
// Stream-K workspace: a counter per (boundary, CTA of the cluster, consumer), padded to 256 bytes,
// then the two parts' fp32 partials of each, 64 x BN floats, in the accumulators' register order.
__device__ __forceinline__ int counter_bytes(int ctas) { return (ctas * kConsumers * 4 + 255) / 256 * 256; }
constexpr int kPartialFloat4s = 64 * BN / 4;
#endif

}  // namespace

HOPPER_DECLARE_DYNAMIC_SMEM(kDynamicSmemBytes)

extern "C" __global__ void __launch_bounds__(kThreads, 1)
#if CLUSTER_M > 1
    __cluster_dims__(CLUSTER_M, 1, 1)
#endif
    wgmma_ws_gemm(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N,
                  int K, HOPPER_MAPS_ABC_PARAMS, int* __restrict__ workspace) {
  using namespace hopper;
  static_assert(std::is_same<TIN, __nv_bfloat16>::value || std::is_same<TIN, __half>::value, "TIN");
  static_assert(sizeof(TOUT) == 2, "the staging tile and the C tensor map hold 16-bit outputs");
  (void)A;
  (void)B;
  HOPPER_MAPS_ABC  // map_a, map_b, map_c (by value with MAP_PARAMS 1: hopper/ptx.cuh)
#if EPI_TMA
  (void)C;
#endif
#if !STREAM_K
  (void)workspace;
#endif

  HOPPER_DYNAMIC_SMEM(smem_raw);
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  unsigned char* staging = smem + STAGES * kStageBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + kConsumers * kStagingBytes);
  uint64_t* empty = full + STAGES;
#if PRODUCER_SCHEDULES
  UnitInfo* info = reinterpret_cast<UnitInfo*>(empty + STAGES);
#endif
#if STREAM_K
  int* arrived = reinterpret_cast<int*>(info + STAGES);  // per consumer: the counter's value before it arrived
#endif

  const int tid = threadIdx.x;
  const int warpgroup = tid / 128;
#if !PRODUCER_SCHEDULES
  // Every role walks the cluster's tiles itself (the measured kernel): the same few integers, read
  // before setmaxnreg, in the producer thread and in every consumer thread.
#if CLUSTER_M > 1
  const uint32_t cta_rank = cluster_cta_rank();
  const int cluster = static_cast<int>(cluster_id_x());
  const int clusters = static_cast<int>(cluster_count_x());
#else
  const uint32_t cta_rank = 0;
  const int cluster = blockIdx.x;
  const int clusters = gridDim.x;
#endif
  const int m_clusters = (M + BM * CLUSTER_M - 1) / (BM * CLUSTER_M);
  const int n_tiles = (N + BN - 1) / BN;
  const int tiles = m_clusters * n_tiles;
  const int k_tiles = (K + BK - 1) / BK;
#endif

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                       // the producer's expect_tx arrival
      mbar_init(&empty[s], kConsumers * CLUSTER_M);  // every consumer of every CTA in the cluster
    }
    fence_mbar_init();
  }
  // Peers multicast into our slots and arrive on our barriers: all must be initialised first.
#if CLUSTER_M > 1
  cluster_sync();
#else
  __syncthreads();
#endif

  if (warpgroup == 0) {
    // ---------------------------------------------------------------- producer warpgroup
    // PRODUCER_SCHEDULES 1: the one thread that issues the copies is also the only scheduler: it walks
    // the cluster's work (tile order RASTER, stream-K pieces) and hands each piece to the consumers with
    // its first slot.
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
#if PRODUCER_SCHEDULES
#if CLUSTER_M > 1
      const uint32_t cta_rank = cluster_cta_rank();
      const int cluster = static_cast<int>(cluster_id_x());
      const int clusters = static_cast<int>(cluster_count_x());
#else
      const uint32_t cta_rank = 0;
      const int cluster = blockIdx.x;
      const int clusters = gridDim.x;
#endif
      const int m_clusters = (M + BM * CLUSTER_M - 1) / (BM * CLUSTER_M);
      const int n_tiles = (N + BN - 1) / BN;
      const int k_tiles = (K + BK - 1) / BK;
#endif
      tensormap_ready(map_a);
      tensormap_ready(map_b);
      int it = 0;  // stage uses so far, across tiles: slot = it % STAGES, use = it / STAGES
#if PRODUCER_SCHEDULES
      const StreamK sched(m_clusters * n_tiles, k_tiles, clusters, cluster, STREAM_K != 0);
      for (WorkUnit u = sched.first(); u.t >= 0; u = sched.next(u)) {
        const TileCoord tile = tile_of<RASTER, GROUP_M>(u.t, m_clusters, n_tiles);
        const int kb = u.kb, ke = u.ke;
#else
      for (int t = cluster; t < tiles; t += clusters) {
        const TileCoord tile = tile_of<RASTER, GROUP_M>(t, m_clusters, n_tiles);
        const int kb = 0, ke = k_tiles;
#endif
        const int m0 = (tile.m * CLUSTER_M + static_cast<int>(cta_rank)) * BM;
        const int n0 = tile.n * BN;
        for (int kt = kb; kt < ke; ++kt, ++it) {
          const int slot = it % STAGES;
          const uint32_t use = static_cast<uint32_t>(it / STAGES);
          // Wait until use-1 of this slot was released by all consumers of the cluster.
#if CLUSTER_M > 1 && MBAR_CLUSTER_SCOPE
          mbar_wait_cluster(&empty[slot], (use & 1u) ^ 1u);
#else
          mbar_wait(&empty[slot], (use & 1u) ^ 1u);
#endif
#if PRODUCER_SCHEDULES
          if (kt == kb) {  // published by the arrive below
            const int part = split_part(u, k_tiles);
            info[slot] = UnitInfo{tile.m, tile.n, kb | ke << 16,
                                  part < 0 ? -1 : 2 * split_boundary(u, k_tiles, cluster) + part};
          }
#endif
          unsigned char* stage = smem + slot * kStageBytes;
          mbar_arrive_expect_tx(&full[slot], kStageBytes);  // A + all of B, whoever sends it
          tma_load_2d(stage, map_a, &full[slot], kt * BK, m0);
          // this CTA's share of B's chunks; the producer-only schedule counts them from 0 (no loop bound
          // live: with stream-K's state the 40-register thread spilled the other form)
#pragma unroll
#if PRODUCER_SCHEDULES
          for (int jj = 0; jj < kBChunks / CLUSTER_M; ++jj) {
            const int j = jj * CLUSTER_M + static_cast<int>(cta_rank);
#else
          for (int j = static_cast<int>(cta_rank); j < kBChunks; j += CLUSTER_M) {
#endif
            // B_KMAJOR 0: rows kt*BK.. of K x N, columns n0 + 64j..; 1: rows n0 + 64j.. of N x K, columns kt*BK..
            const int b_col = B_KMAJOR ? kt * BK : n0 + 64 * j;
            const int b_row = B_KMAJOR ? n0 + 64 * j : kt * BK;
#if CLUSTER_M > 1
            tma_load_2d_multicast(stage + kTileABytes + j * kBChunkBytes, map_b, &full[slot], b_col, b_row,
                                  static_cast<uint16_t>((1u << CLUSTER_M) - 1u));
#else
            tma_load_2d(stage + kTileABytes + j * kBChunkBytes, map_b, &full[slot], b_col, b_row);
#endif
          }
        }
      }
#if PRODUCER_SCHEDULES
      // No more work: one more use of the next slot carries no data, only the end (a plain arrive).
      const int slot = it % STAGES;
      mbar_wait(&empty[slot], (static_cast<uint32_t>(it / STAGES) & 1u) ^ 1u);
      info[slot] = UnitInfo{-1, 0, 0, 0};
      mbar_arrive(&full[slot]);
#endif
    }
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<CONSUMER_REGS>();
#if PRODUCER_SCHEDULES
#if CLUSTER_M > 1
    const uint32_t cta_rank = cluster_cta_rank();
#else
    const uint32_t cta_rank = 0;
#endif
#endif
    // which m64 slice of the tile (UNIFORM_A 1: told warp-uniform, so A's descriptors stay in uniform registers)
    const int consumer = UNIFORM_A ? warp_uniform(warpgroup - 1) : warpgroup - 1;
    const int local_tid = tid % 128;
    const int warp = local_tid / 32;
    const int lane = tid % 32;
#if EPI_TMA
    unsigned char* my_staging = staging + consumer * kStagingBytes;
    if (local_tid == 0) tensormap_ready(map_c);
#endif

    auto release = [&](int slot) {
      if (local_tid == 0) {
#if CLUSTER_M > 1
#pragma unroll
        for (uint32_t r = 0; r < CLUSTER_M; ++r) mbar_arrive_remote<MBAR_CLUSTER_SCOPE != 0>(&empty[slot], r);
#else
        mbar_arrive(&empty[slot]);
#endif
      }
    };

    float acc[kAccum];
#if STREAM_K
    // A piece that is part of a tile: both parts' warpgroups store their partial and count on the
    // tile's counter; the second to arrive adds the other's partial (a + b: the same bits whichever
    // part comes second) and goes on to the epilogue. No waiting on another CTA, no float atomics.
    auto holds_the_sum = [&](int part, int boundary) -> bool {
      const int who = (boundary * CLUSTER_M + static_cast<int>(cta_rank)) * kConsumers + consumer;
      float4* partials = reinterpret_cast<float4*>(reinterpret_cast<unsigned char*>(workspace) +
                                                   counter_bytes(static_cast<int>(gridDim.x)));
      // this thread's float4s, 128 x 16 bytes apart (coalesced): one address, constant offsets
      float4* mine = partials + (2 * who + part) * kPartialFloat4s + local_tid;
      const float4* other = partials + (2 * who + 1 - part) * kPartialFloat4s + local_tid;
#pragma unroll
      for (int j = 0; j < kAccum / 4; ++j)
        mine[j * 128] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
      named_barrier_sync(1 + consumer, 128);  // every thread's partial before the release
      if (local_tid == 0) arrived[consumer] = atom_add_acq_rel_gpu(workspace + who, 1);
      named_barrier_sync(1 + consumer, 128);  // the acquire before every thread's reads
      if (arrived[consumer] != 1) return false;  // first (0): the other part finishes the tile
#pragma unroll
      for (int j = 0; j < kAccum / 4; ++j) {
        const float4 v = ld_cg_f4(other + j * 128);
        acc[4 * j] += v.x;
        acc[4 * j + 1] += v.y;
        acc[4 * j + 2] += v.z;
        acc[4 * j + 3] += v.w;
        // at most 8 loads in flight: 128 more registers beside the accumulators would not fit
        if (j % 8 == 7) asm volatile("" ::: "memory");
      }
      if (local_tid == 0) workspace[who] = 0;  // both parts are in: ready for the next launch
      return true;
    };
#endif

    int it = 0;
#if PRODUCER_SCHEDULES
    while (true) {
      mbar_wait(&full[it % STAGES], static_cast<uint32_t>(it / STAGES) & 1u);  // the piece's first slot
      const UnitInfo u = info[it % STAGES];
      if (u.m < 0) break;
      const TileCoord tile{u.m, u.n};
      const int kb = u.k_range & 0xFFFF, ke = u.k_range >> 16;
#else
    for (int t = cluster; t < tiles; t += clusters) {
      const TileCoord tile = tile_of<RASTER, GROUP_M>(t, m_clusters, n_tiles);
      const int kb = 0, ke = k_tiles;
#endif
      const int m0 = (tile.m * CLUSTER_M + static_cast<int>(cta_rank)) * BM + consumer * 64;
      const int n0 = tile.n * BN;

#pragma unroll
      for (int i = 0; i < kAccum; ++i) acc[i] = 0.0f;

      for (int kt = kb; kt < ke; ++kt, ++it) {
        const int slot = it % STAGES;
        mbar_wait(&full[slot], static_cast<uint32_t>(it / STAGES) & 1u);
        const uint32_t a_base = smem_u32(smem + slot * kStageBytes) + consumer * 64 * 128;
        const uint32_t b_base = smem_u32(smem + slot * kStageBytes + kTileABytes);
        fence_accumulators(acc);
        wgmma_fence();
        // DESC_STEP: the first step's descriptors, the others these + a constant (no carry below 256 KB)
        [[maybe_unused]] const uint64_t desc_a0 = make_desc_sw128(a_base, 16, 1024);
        [[maybe_unused]] const uint64_t desc_b0 =
            B_KMAJOR ? make_desc_sw128(b_base, 16, 1024) : make_desc_sw128(b_base, kBChunkBytes, 1024);
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
#if DESC_STEP
          const uint64_t desc_a = desc_advance(desc_a0, 32 * kk);
          const uint64_t desc_b = desc_advance(desc_b0, (B_KMAJOR ? 32 : 2048) * kk);
#else
          const uint64_t desc_a = make_desc_sw128(a_base + kk * 32, 16, 1024);
#if B_KMAJOR
          // B as A: BN rows (N) of 128 bytes (K), 8-row atoms 1024 B apart; k16 = 32 bytes on; no transpose
          const uint64_t desc_b = make_desc_sw128(b_base + kk * 32, 16, 1024);
#else
          // B N-major: 64-column chunks kBChunkBytes apart, 8-row K groups 1024 B apart; k16 = 2 groups on
          const uint64_t desc_b = make_desc_sw128(b_base + kk * 2 * 1024, kBChunkBytes, 1024);
#endif
#endif
          wgmma_m64k16<BN, B_KMAJOR ? 0 : 1, TIN>(acc, desc_a, desc_b, 1);
        }
        wgmma_commit();
        fence_accumulators(acc);
        wgmma_wait<1>();  // the previous stage's group is done reading its slot
        fence_accumulators(acc);
        if (kt > kb) release((it - 1) % STAGES);
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
#if PRODUCER_SCHEDULES
      release((it - 1) % STAGES);  // every piece the producer hands out holds one k-tile at least
#else
      if (k_tiles > 0) release((it - 1) % STAGES);
#endif
#if STREAM_K
      if (u.split >= 0 && !holds_the_sum(u.split & 1, u.split >> 1)) continue;
#endif

#if EPI_TMA
      // Epilogue: registers -> swizzled staging tile (stmatrix) -> TMA store, EPI_BOXES boxes per round.
      const int row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;  // row this lane addresses
      const uint32_t staging_base = smem_u32(my_staging);
#pragma unroll
      for (int r = 0; r < kBChunks / EPI_BOXES; ++r) {
        if (local_tid == 0) bulk_wait_group_read0();  // the previous store has read the buffer
        named_barrier_sync(1 + consumer, 128);
#pragma unroll
        for (int j2 = r * EPI_BOXES * 4; j2 < (r + 1) * EPI_BOXES * 4; ++j2) {
          const int col = 16 * j2 + (lane / 16) * 8;
          const uint32_t addr = staging_base + ((col / 64) % EPI_BOXES) * kCBoxBytes + row * 128 +
                                ((((col % 64) / 8) ^ (row % 8)) * 16);
          stmatrix_x4(addr, pack2<TOUT>(acc[8 * j2 + 0], acc[8 * j2 + 1]), pack2<TOUT>(acc[8 * j2 + 2], acc[8 * j2 + 3]),
                      pack2<TOUT>(acc[8 * j2 + 4], acc[8 * j2 + 5]), pack2<TOUT>(acc[8 * j2 + 6], acc[8 * j2 + 7]));
        }
        fence_proxy_async_smem();  // stmatrix writes -> visible to the TMA engine
        named_barrier_sync(1 + consumer, 128);
        if (local_tid == 0) {
#pragma unroll
          for (int b = 0; b < EPI_BOXES; ++b)
            tma_store_2d(map_c, my_staging + b * kCBoxBytes, n0 + 64 * (r * EPI_BOXES + b), m0);
          bulk_commit_group();
        }
      }
#else
      // Epilogue: registers -> global, two outputs per 32-bit store (N % 8 == 0: pairs never straddle
      // the edge). acc[4j + r]: row 16*warp + lane/4 + 8*(r/2), column 8j + 2*(lane%4) + r%2.
      const int row0 = m0 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + 8 * j + 2 * (lane % 4);
        if (col < N) {
          if (row0 < M)
            *reinterpret_cast<uint32_t*>(C + static_cast<size_t>(row0) * N + col) = pack2<TOUT>(acc[4 * j], acc[4 * j + 1]);
          if (row0 + 8 < M)
            *reinterpret_cast<uint32_t*>(C + static_cast<size_t>(row0 + 8) * N + col) =
                pack2<TOUT>(acc[4 * j + 2], acc[4 * j + 3]);
        }
      }
#endif
    }
#if EPI_TMA
    if (local_tid == 0) bulk_wait_group0();
#endif
  }

#if CLUSTER_M > 1
  // Peers may still arrive on our empty barriers: nobody leaves before the whole cluster is done.
  cluster_sync();
#endif
}
