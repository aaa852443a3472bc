// Stage 13: wgmma_fp8 -- stage 12's warp-specialised persistent TMA + wgmma GEMM on FP8 e4m3 (sm_90a).
//
// What changes over stage 12 (wgmma_ws):
// * FP8 e4m3 operands, `wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3` (SASS: QGMMA.64xNx32.F32.E4M3.E4M3),
//   FP32 accumulation: twice the FLOPs of a bf16 k16 step per instruction for the same 32 bytes of
//   each K-major row, so the same shared-memory ring feeds twice the math.
// * Both operands K-major: wgmma has no transpose for 8-bit types, so B is read stored N x K
//   (layout nt, `layouts: [nt]` in the YAML; the other layouts are skipped with the reason), as
//   cuBLASLt's FP8 kernels read it. BK = 128 elements = one 128-byte swizzle row of A and of B.
// * Per-tensor scales (measure.fp8_scaling=tensor, gemmlab/fp8.py): the launcher appends scale_a and
//   scale_b (FP32, 1 and 1 when unscaled) to every fp8 launch; the epilogue writes
//   D = (scale_a * scale_b) * acc rounded to bfloat16, what cuBLASLt's fp8 rows write, so the same
//   FP64 check of the dequantized inputs applies.
// * One TMA box per operand per stage (A: BM x 128 B, B: BN x 128 B; boxes up to 256 rows); by default no
//   cluster multicast (written before stage 12's clusters were fixed: CLUSTER_M below).
//
// Techniques, each a define so that a sweep shows what it buys (tune_fp8 in .ci/h200-session.sh).
//   define       what it does
//   STAGES       shared-memory ring depth (3 with EPI_TMA=1 and the whole tile staged; 4 with EPI_TMA=0 or EPI_BOXES 2)
//   EPI_TMA      1: stmatrix -> swizzled staging tile -> TMA store (stage 12's); 0: direct 32-bit global stores from
//                the accumulators, no staging tile (frees 64 KB of shared memory for a 4th stage)
//   GROUP_M      tile rows per group of the persistent grouped raster (L2 reuse)
//   UNIFORM_A    1: the consumer index told warp-uniform: A's descriptors in uniform registers, no R2UR
//   DESC_STEP    1: each k32 step's descriptors the first's + 2
//   MAP_PARAMS   1 (the default since session34c): the three tensor maps by value (__grid_constant__ parameters
//                written with the launch; gemmlab/gpu/tma.py), prefetched before the barriers; 0: in a device buffer the
//                copy engine first reads from DRAM after the timer's L2 flush (every row before session34c). Predicted
//                +1..+3% at 4096 (~100 us), where an SM that starts late for want of its map finishes late (stage 17
//                on an H100: the slowest SM's first data 7.0 -> 3.9 us). Measured on the H200 (h200-2026-12-05/
//                session34c/maps_fp8, A B B A, cuBLASLt interleaved): 106.5 / 106.6 against 104.3 / 104.4% at 4096,
//                98.9 / 99.0 against 98.9 / 99.0 at 8192, where the 700 W cap sets the clock
//   BN           128 or 256 columns per tile (wgmma N)
//   EPI_BOXES    64 x 64 boxes of a consumer's output staged per round of the TMA-store epilogue (stage 12's; 0: all
//                BN / 64, one round). 2 halves the staging tiles (32 KB for both consumers at 128 x 256, not 64), which
//                makes room for a fourth stage with the TMA store (225 KB); each round waits for the previous round's
//                store to have read its boxes
//   CLUSTER_M    2: 2-CTA clusters along M (both CTAs take vertically adjacent tiles of the grouped raster and need
//                the same B tile each k-tile): each loads BN / 2 of B's rows (the YAML's B box) and multicasts them
//                into the same place of both CTAs' slots; a slot is refilled when the consumers of both CTAs released
//                it (plain remote arrives at CTA scope: stage 12's lesson, MEMBAR.ALL.GPU at cluster scope); a cluster's
//                second CTA may lie wholly past M (loads zeros, stores nothing). Operand bytes per 128 x 256 tile out of
//                L2: 128 + 128 rows a k-tile, not 128 + 256 (256 FLOP/B modeled, not 171). Why: at 8192 every FP8 GEMM
//                here meets the 700 W cap (its rows throttle to 1300-1500 MHz), and fewer bytes moved is a higher clock
//                under it; stage 12's clusters are its fastest configuration at 4096 (99.2 against 96.9 without)
// Measured on the H200: % of cuBLASLt FP8 timed interleaved with the point, at N = 4096 / 8192, each line the defines
// it changes from the defaults, * unreliable (noise or clock drift); the tables are the rows' (python -m
// analysis.techniques --sync; tests/test_techniques.py). 2026-12-01: the TMA store buys 10-15 points, more than a 4th
// stage (1-2.5).
// BEGIN techniques outputs/reference/h200-2026-12-01/session4/tune_wgmma_fp8
// configuration         4096    8192
// defaults             104.4   99.0
// EPI_TMA 0, STAGES 4   90.3   92.1*
// EPI_TMA 0             89.0   89.6*
// GROUP_M 16           104.5   99.2*
// BN 128, STAGES 4     102.4  100.8*
// END techniques
// 2026-12-05 (issue 32's EPI_BOXES and CLUSTER_M, tune_fp8; beside each %, the point's TFLOP/s, SM clock and mean
// power: at 4096 every configuration runs at 1980 MHz below the cap, at 8192 at 1300-1550 MHz against it); none is at
// 105 at 8192, the best within a point or two of the defaults:
// BEGIN techniques outputs/reference/h200-2026-12-05/session27b/tune_wgmma_fp8 show=pct,tflops,clock,power
// configuration                                                       4096                                        8192
// defaults                            104.2, 1368 TFLOP/s, 1980 MHz, 332 W    99.1, 1277 TFLOP/s, 1305-1515 MHz, 677 W
// EPI_TMA 0, STAGES 4                  89.1, 1166 TFLOP/s, 1980 MHz, 342 W   91.9*, 1153 TFLOP/s, 1335-1530 MHz, 676 W
// EPI_TMA 0                            87.7, 1148 TFLOP/s, 1980 MHz, 339 W   89.2*, 1168 TFLOP/s, 1320-1515 MHz, 684 W
// GROUP_M 16                          103.8, 1356 TFLOP/s, 1980 MHz, 280 W    99.3, 1304 TFLOP/s, 1485-1500 MHz, 617 W
// BN 128, STAGES 4                    101.8, 1331 TFLOP/s, 1980 MHz, 343 W   100.0, 1276 TFLOP/s, 1365-1485 MHz, 680 W
// DESC_STEP 1, UNIFORM_A 1            105.1, 1378 TFLOP/s, 1980 MHz, 337 W    99.3, 1301 TFLOP/s, 1335-1500 MHz, 689 W
// EPI_BOXES 2, STAGES 4               105.3, 1383 TFLOP/s, 1980 MHz, 332 W  101.0*, 1247 TFLOP/s, 1365-1485 MHz, 670 W
// EPI_BOXES 1, STAGES 4               104.3, 1364 TFLOP/s, 1980 MHz, 276 W  100.4*, 1292 TFLOP/s, 1350-1515 MHz, 653 W
// CLUSTER_M 2                         103.2, 1352 TFLOP/s, 1980 MHz, 331 W  100.3*, 1281 TFLOP/s, 1305-1545 MHz, 662 W
// CLUSTER_M 2, EPI_BOXES 2, STAGES 4  103.5, 1351 TFLOP/s, 1980 MHz, 284 W   101.1, 1337 TFLOP/s, 1485-1500 MHz, 621 W
// END techniques
// 2026-12-06 (session40f, A B B A, the maps by value in both): EPI_BOXES 2 with STAGES 4 against the defaults then
// (STAGES 3, EPI_BOXES 0); the defaults since. Still 101% at 8192, where the cap holds the clock at 1485-1680 MHz:
// BEGIN techniques outputs/reference/h200-2026-12-06/session40f/candidates34_fp8 show=pct,tflops,clock,power
// configuration                                              4096                                            8192
// defaults               106.9 (2), 1393 TFLOP/s, 1980 MHz, 236 W   99.0* (2), 1350 TFLOP/s, 1560-1620 MHz, 581 W
// EPI_BOXES 2, STAGES 4  108.8 (2), 1423 TFLOP/s, 1980 MHz, 297 W  101.1* (2), 1366 TFLOP/s, 1515-1628 MHz, 622 W
// END techniques
// Standalone in session4 (standalone_fp8): 1340 TFLOP/s at 4096 and 1243 at 8192 against
// cuBLASLt's 1279 and 1288 (1.047x and 0.965x; the 8192 rows throttle to 1400-1500 MHz).
//
// Constraints: TIN = __nv_fp8_e4m3 (e5m2 builds too; cuBLASLt has no e5m2 x e5m2 baseline), TOUT =
// bfloat16; A row-major M x K, B stored row-major N x K; K % 16 == 0 (TMA: 16-byte row strides of
// the 1-byte operands) and N % 8 == 0 (16-byte rows of the bf16 C); any M. BM = 128 (two m64
// consumer warpgroups), BK = 128, BN in {128, 256}; grid <= SM count (the static persistent schedule
// assumes every CTA resident; with clusters a multiple of 2). Shared memory: STAGES*(BM + BN)*BK + EPI_TMA*2*64*
// (EPI_BOXES*64 or BN)*2 + 1 KB alignment + barriers: 209 KB for 3 stages with the TMA-store epilogue, 193 KB for 4
// without, 225 KB for 4 with EPI_BOXES 2 (the same with clusters).
//
// Modeled intensity (operand bytes per CTA tile, 1-byte elements): 2*BM*BN / ((BM + BN/CLUSTER_M) * 1 B) =
// 171 FLOP/B for 128x256 (256 with CLUSTER_M 2: B multicast).
//
// Run it alone (cuBLASLt's fp8 row is the baseline): python run.py variant=[cublaslt,wgmma_fp8] precision=fp8
//   layouts=[nt] measure.fp8_scaling=tensor sizes.square=[4096,8192] sizes.shapes=[]
// Debug aids as stage 12: GEMMLAB_DEBUG=1 turns a hung barrier wait into a printf and a trap.
#include "hopper/cluster_walk.cuh"
#include "hopper/ptx.cuh"
#include "hopper/wgmma.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 128
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef MAP_PARAMS  // 1: the tensor maps by value (__grid_constant__ parameters); 0: in a device buffer (measured)
#define MAP_PARAMS 0
#endif
#ifndef EPI_TMA
#define EPI_TMA 1
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
// EPI_BOXES: 64 x 64 boxes of a consumer's 64 x BN output staged per round of the TMA-store epilogue (stage 12's);
// 0: all BN / 64 at once (the measured kernel)
#ifndef EPI_BOXES
#define EPI_BOXES 0
#endif
#if EPI_BOXES == 0
#undef EPI_BOXES
#define EPI_BOXES (BN / 64)
#endif
// CLUSTER_M: 1 no clusters (the measured kernel); 2: 2-CTA clusters along M, B's tile multicast to both (stage 12's
// and stage 15's), each CTA loading BN / 2 of its rows
#ifndef CLUSTER_M
#define CLUSTER_M 1
#endif
// UNIFORM_A, DESC_STEP (hopper/issue_path.cuh): A's descriptors in uniform registers; each k32 step's descriptors
// the first's advanced by 32 bytes
#include "hopper/issue_path.cuh"
static_assert((UNIFORM_A == 0 || UNIFORM_A == 1) && (DESC_STEP == 0 || DESC_STEP == 1), "UNIFORM_A, DESC_STEP: 0 or 1");

namespace {

constexpr int kConsumers = BM / 64;               // consumer warpgroups, one m64 slice each
constexpr int kThreads = 128 * (1 + kConsumers);  // + the producer warpgroup
constexpr int kTileABytes = BM * BK;              // 1-byte elements: BM rows of 128 bytes
constexpr int kTileBBytes = BN * BK;              // BN rows (N) of 128 bytes (K)
constexpr int kStageBytes = kTileABytes + kTileBBytes;
constexpr int kOutChunks = BN / 64;              // 64-column boxes of C per consumer tile
constexpr int kCBoxBytes = 64 * 64 * 2;          // one TMA box of C: 64 rows x 64 bf16 columns
constexpr int kStagingBytes = EPI_TMA ? EPI_BOXES * kCBoxBytes : 0;  // one consumer's EPI_BOXES boxes of 64 x 64
constexpr int kAccum = BN / 2;
// CLUSTER_M 2: each CTA of the cluster loads BN / CLUSTER_M rows of the slot's B tile (one TMA box, the YAML's B map)
// and multicasts them to the same place in every CTA's slot
constexpr int kBShareRows = BN / CLUSTER_M;
[[maybe_unused]] constexpr int kBShareBytes = kBShareRows * BK;

static_assert(BM == 128, "two consumer warpgroups of m64");
static_assert(BK == 128, "A and B rows must be exactly one 128-byte swizzle row of 1-byte elements");
static_assert(BN == 128 || BN == 256, "wgmma N; TMA boxes have at most 256 rows");
static_assert(EPI_TMA == 0 || EPI_TMA == 1, "EPI_TMA is 0 or 1");
static_assert(STAGES >= 2, "a ring needs two slots at least");
static_assert(EPI_BOXES >= 1 && kOutChunks % EPI_BOXES == 0, "EPI_BOXES divides the tile's 64-column boxes");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "CLUSTER_M: 1 (no clusters) or 2 CTAs along M");
// a CTA's share of B starts on a 1024-byte swizzle atom (8 rows of 128 bytes), where the whole tile's descriptor reads it
static_assert(kBShareRows % 8 == 0, "B's tile splits across the cluster in whole 8-row swizzle atoms");
// setmaxnreg moves registers inside what the launch gave the CTA (65536 / kThreads a thread, down to a
// multiple of 8): past it, setmaxnreg.inc waits for registers that never come (stage 15 hung so, session14e)
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * kConsumers <= 65536 / kThreads / 8 * 8 * kThreads,
              "register file: the warpgroups' setmaxnreg counts past the CTA's launch registers (a hang)");

// Stages, the consumers' staging tiles, 1 KB to align to the swizzle period, full + empty barriers.
constexpr int kDynamicSmemBytes = STAGES * kStageBytes + kConsumers * kStagingBytes + 1024 + 2 * STAGES * 8;
static_assert(kDynamicSmemBytes <= 227 * 1024, "more shared memory than one sm_90 block may have");

using hopper::TileCoord;

}  // namespace

HOPPER_DECLARE_DYNAMIC_SMEM(kDynamicSmemBytes)

extern "C" __global__ void __launch_bounds__(kThreads, 1)
#if CLUSTER_M > 1
    __cluster_dims__(CLUSTER_M, 1, 1)
#endif
    wgmma_fp8_gemm(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K,
                   HOPPER_MAPS_ABC_PARAMS, float scale_a, float scale_b) {
  using namespace hopper;
  static_assert(sizeof(TIN) == 1, "8-bit inputs (e4m3 or e5m2)");
  static_assert(std::is_same<TOUT, __nv_bfloat16>::value, "the fp8 rows write bfloat16, as cuBLASLt's");
  (void)A;
  (void)B;
  HOPPER_MAPS_ABC  // map_a, map_b, map_c (by value with MAP_PARAMS 1: hopper/ptx.cuh)
#if EPI_TMA
  (void)C;  // C's map is passed either way; only the TMA-store epilogue reads it
#endif

  HOPPER_DYNAMIC_SMEM(smem_raw);
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  unsigned char* staging = smem + STAGES * kStageBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + kConsumers * kStagingBytes);
  uint64_t* empty = full + STAGES;

  const int tid = threadIdx.x;
  const int warpgroup = tid / 128;
  const int m_tiles = (M + BM * CLUSTER_M - 1) / (BM * CLUSTER_M);  // rows of (cluster) tiles
  const int n_tiles = (N + BN - 1) / BN;
  const int tiles = m_tiles * n_tiles;
  const int k_tiles = (K + BK - 1) / BK;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);            // the producer's expect_tx arrival
      mbar_init(&empty[s], kConsumers * CLUSTER_M);  // one arrival per consumer warpgroup of every CTA of the cluster
    }
    fence_mbar_init();
  }
  // CLUSTER_M 2: the peer multicasts into our slots and arrives on our empty barriers: all initialised first
#if CLUSTER_M > 1
  cluster_sync();
#else
  __syncthreads();
#endif

  if (warpgroup == 0) {
    // ---------------------------------------------------------------- producer warpgroup
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      tensormap_ready(map_a);
      tensormap_ready(map_b);
      int it = 0;  // stage uses so far, across tiles: slot = it % STAGES, use = it / STAGES
      const ClusterWalk walk = cluster_walk<CLUSTER_M>();
      for (int t = walk.first; t < tiles; t += walk.stride) {
        const TileCoord tile = cta_tile<CLUSTER_M, GROUP_M>(t, m_tiles, n_tiles, walk.rank);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int slot = it % STAGES;
          mbar_wait(&empty[slot], (static_cast<uint32_t>(it / STAGES) & 1u) ^ 1u);  // use-1 released
          unsigned char* stage = smem + slot * kStageBytes;
          // out-of-bounds box parts count too (zeros); with clusters all of B, whichever CTA sends it
          mbar_arrive_expect_tx(&full[slot], kStageBytes);
          tma_load_2d(stage, map_a, &full[slot], kt * BK, tile.m * BM);
#if CLUSTER_M > 1
          // this CTA's BN / CLUSTER_M rows of B's tile, into the same place of every CTA's slot
          tma_load_2d_multicast(stage + kTileABytes + walk.rank * kBShareBytes, map_b, &full[slot], kt * BK,
                                tile.n * BN + walk.rank * kBShareRows, static_cast<uint16_t>((1u << CLUSTER_M) - 1u));
#else
          tma_load_2d(stage + kTileABytes, map_b, &full[slot], kt * BK, tile.n * BN);
#endif
        }
      }
    }
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<CONSUMER_REGS>();
    // which m64 slice of the tile (UNIFORM_A 1: told warp-uniform, so A's descriptors stay in uniform registers)
    const int consumer = UNIFORM_A ? warp_uniform(warpgroup - 1) : warpgroup - 1;
    const int local_tid = tid % 128;
    const int warp = local_tid / 32;
    const int lane = tid % 32;
    const float scale = scale_a * scale_b;  // FP32, as cuBLASLt's alpha * scale_a * scale_b with alpha 1
#if EPI_TMA
    unsigned char* my_staging = staging + consumer * kStagingBytes;
    if (local_tid == 0) tensormap_ready(map_c);
#endif

    // CLUSTER_M 2: to the slot's empty barrier in every CTA of the cluster (the peer multicast into ours, we into
    // theirs), a plain remote arrive (release at CTA scope, as stages 12 and 15)
    auto release = [&](int slot) {
#if CLUSTER_M > 1
      if (local_tid == 0) {
#pragma unroll
        for (int r = 0; r < CLUSTER_M; ++r) mbar_arrive_remote(&empty[slot], static_cast<uint32_t>(r));
      }
#else
      if (local_tid == 0) mbar_arrive(&empty[slot]);
#endif
    };

    float acc[kAccum];
    int it = 0;
    const ClusterWalk walk = cluster_walk<CLUSTER_M>();
    for (int t = walk.first; t < tiles; t += walk.stride) {
      const TileCoord tile = cta_tile<CLUSTER_M, GROUP_M>(t, m_tiles, n_tiles, walk.rank);
      const int m0 = tile.m * BM + consumer * 64;
      const int n0 = tile.n * BN;

#pragma unroll
      for (int i = 0; i < kAccum; ++i) acc[i] = 0.0f;

      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int slot = it % STAGES;
        mbar_wait(&full[slot], static_cast<uint32_t>(it / STAGES) & 1u);
        const uint32_t a_base = smem_u32(smem + slot * kStageBytes) + consumer * 64 * 128;
        const uint32_t b_base = smem_u32(smem + slot * kStageBytes + kTileABytes);
        fence_accumulators(acc);
        wgmma_fence();
        [[maybe_unused]] const uint64_t desc_a0 = make_desc_sw128(a_base, 16, 1024);
        [[maybe_unused]] const uint64_t desc_b0 = make_desc_sw128(b_base, 16, 1024);
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk) {
          // Both K-major, 128-byte rows, 8-row swizzle atoms 1024 B apart; k32 = 32 bytes on
          const uint64_t desc_a = DESC_STEP ? desc_advance(desc_a0, 32 * kk) : make_desc_sw128(a_base + kk * 32, 16, 1024);
          const uint64_t desc_b = DESC_STEP ? desc_advance(desc_b0, 32 * kk) : make_desc_sw128(b_base + kk * 32, 16, 1024);
          wgmma_m64k32<BN, TIN>(acc, desc_a, desc_b, 1);
        }
        wgmma_commit();
        fence_accumulators(acc);
        wgmma_wait<1>();  // the previous stage's group is done reading its slot
        fence_accumulators(acc);
        if (kt > 0) release((it - 1) % STAGES);
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
      if (k_tiles > 0) release((it - 1) % STAGES);

#if EPI_TMA
      // Epilogue: scaled registers -> swizzled staging tile (stmatrix) -> TMA store (clips at C's edges), EPI_BOXES
      // 64-column boxes a round (all of them in one by default)
      store_boxes_tma<kOutChunks, EPI_BOXES, TOUT>([&](int i) { return scale * acc[i]; }, my_staging, map_c, n0, m0,
                                                   1 + consumer, local_tid, warp, lane);
#else
      // Epilogue: scaled registers -> global, two bf16 per 32-bit store (N % 8 == 0: pairs never
      // straddle the edge). acc[4j + r]: row 16*warp + lane/4 + 8*(r/2), column 8j + 2*(lane%4).
      const int row0 = m0 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + 8 * j + 2 * (lane % 4);
        if (col < N) {
          if (row0 < M)
            *reinterpret_cast<uint32_t*>(C + static_cast<size_t>(row0) * N + col) =
                pack2<TOUT>(scale * acc[4 * j + 0], scale * acc[4 * j + 1]);
          if (row0 + 8 < M)
            *reinterpret_cast<uint32_t*>(C + static_cast<size_t>(row0 + 8) * N + col) =
                pack2<TOUT>(scale * acc[4 * j + 2], scale * acc[4 * j + 3]);
        }
      }
#endif
    }
#if EPI_TMA
    if (local_tid == 0) bulk_wait_group0();
#endif
  }

#if CLUSTER_M > 1
  // The peer may still arrive on our empty barriers: no CTA leaves before the whole cluster is done.
  cluster_sync();
#endif
}
