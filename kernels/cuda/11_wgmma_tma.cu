// Stage 11: wgmma_tma -- Hopper's own datapath: TMA copies + wgmma from shared memory (sm_90a).
//
// What changes over stage 10 (mma_sync): no thread moves operand data any more. One thread asks the
// copy engine (TMA, `cp.async.bulk.tensor`) for whole BMxBK and BKxBN tiles; the engine writes them
// 128B-swizzled into shared memory and counts the bytes on an mbarrier ("full"). Each warpgroup
// (4 warps) then issues `wgmma.mma_async` m64nBNk16 reading A and B straight from shared memory
// through 64-bit matrix descriptors, with no ldmatrix and no register copies of the operands; the
// accumulators (BN/2 fp32 per thread) stay in registers. A STAGES-deep ring of tiles keeps copies
// ahead of the math: after issuing the wgmma group of tile kt, a warpgroup waits for the group of
// tile kt-1 only (wgmma.wait_group 1), releases that slot on an "empty" mbarrier, and thread 0
// refills it with tile kt-1+STAGES. Every warpgroup still both waits for data and computes (no
// warp specialisation: that is stage 12).
//
// Layouts: A is M x K row-major (K-major for wgmma); B is K x N row-major, i.e. N-contiguous
// ("MN-major"), read with wgmma's transpose bit for B (allowed for 16-bit inputs). One stage holds
// A as BM rows of 64 elements (128 B, one swizzle row) and B as BN/64 column chunks of BK rows x 64
// elements, each chunk one TMA box. Descriptor strides: see hopper/ptx.cuh (make_desc_sw128).
//
// Constraints: TIN in {bf16, fp16}, fp32 accumulation, TOUT = TIN. K % 8 == 0 and N % 8 == 0 (TMA
// needs 16-byte row strides; the YAML `requires` skips other sizes). Any M. Partial tiles: TMA fills
// out-of-bounds elements with zeros (their bytes still count on the barrier), stores are guarded.
// BK = 64 (one 128-byte swizzle row per A row), BM in {64, 128} (one m64 slice per warpgroup),
// BN in {64, 128, 256}. Shared memory: STAGES * (BM*BK + BK*BN) * 2 B + 1 KB alignment + barriers.
//
// Modeled intensity (operand bytes per tile, no reuse between tiles): 2*BM*BN / ((BM+BN)*2 B)
// = 85 FLOP/B for 128x256.
//
// Run it alone: python run.py variant=[cublas,wgmma_tma] precision=bf16 sizes.square=[4096,8192]
// Debug aid: GEMMLAB_DEBUG=1 (`+variant.wgmma_tma.cuda.defines.GEMMLAB_DEBUG=1`) makes a barrier
// wait that spins for ~2^34 cycles (~9 s) printf the block, thread, barrier and parity and trap, so
// a wrong expect_tx byte count, parity or tensor map shows up as an error instead of a hang.
#include "hopper/ptx.cuh"
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

namespace {

constexpr int kWarpgroups = BM / 64;
constexpr int kThreads = 128 * kWarpgroups;
constexpr int kTileABytes = BM * BK * 2;
constexpr int kTileBBytes = BK * BN * 2;
constexpr int kStageBytes = kTileABytes + kTileBBytes;
constexpr int kBChunkBytes = BK * 64 * 2;  // one TMA box of B: BK rows x 64 columns
constexpr int kAccum = BN / 2;             // fp32 accumulators per thread for m64 x BN

static_assert(BK == 64, "A rows must be exactly one 128-byte swizzle row");
static_assert(BM == 64 || BM == 128, "one m64 wgmma slice per warpgroup");
static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma N");
static_assert(STAGES >= 2, "a ring needs two slots at least");
static_assert(kTileABytes % 1024 == 0 && kBChunkBytes % 1024 == 0, "swizzle atoms start on 1 KB");

// Tiles, 1 KB of slack to align them to the 1024-byte swizzle period, full + empty barriers.
constexpr int kDynamicSmemBytes = STAGES * kStageBytes + 1024 + 2 * STAGES * 8;

}  // namespace

HOPPER_DECLARE_DYNAMIC_SMEM(kDynamicSmemBytes)

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    wgmma_tma_gemm(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N,
                   int K, const hopper::TensorMap* __restrict__ maps) {
  using namespace hopper;
  static_assert(std::is_same<TIN, __nv_bfloat16>::value || std::is_same<TIN, __half>::value, "TIN");
  (void)A;
  (void)B;
  const TensorMap* map_a = maps + 0;  // box {64 (K), BM (M)}, 128B swizzle
  const TensorMap* map_b = maps + 1;  // box {64 (N), BK (K)}, 128B swizzle

  // The 128B swizzle pattern repeats every 1024 bytes and TMA and wgmma both apply it to address
  // bits, so every tile starts on a 1 KB boundary (the YAML asks for 1 KB of slack).
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + STAGES * kStageBytes);
  uint64_t* empty = full + STAGES;

  const int tid = threadIdx.x;
  const int warpgroup = tid / 128;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                // the expect_tx arrival of thread 0
      mbar_init(&empty[s], kWarpgroups);     // one arrival per warpgroup that finished reading
    }
    fence_mbar_init();
    tensormap_acquire(map_a);
    tensormap_acquire(map_b);
  }
  __syncthreads();

  auto issue_tile_loads = [&](int slot, int kt) {
    unsigned char* stage = smem + slot * kStageBytes;
    mbar_arrive_expect_tx(&full[slot], kStageBytes);
    tma_load_2d(stage, map_a, &full[slot], kt * BK, m0);
#pragma unroll
    for (int j = 0; j < BN / 64; ++j)
      tma_load_2d(stage + kTileABytes + j * kBChunkBytes, map_b, &full[slot], n0 + 64 * j, kt * BK);
  };

  if (tid == 0) {
    for (int s = 0; s < STAGES && s < k_tiles; ++s) issue_tile_loads(s, s);
  }

  float acc[kAccum];
#pragma unroll
  for (int i = 0; i < kAccum; ++i) acc[i] = 0.0f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int slot = kt % STAGES;
    mbar_wait(&full[slot], (kt / STAGES) & 1);

    const uint32_t a_base = smem_u32(smem + slot * kStageBytes) + warpgroup * 64 * 128;
    const uint32_t b_base = smem_u32(smem + slot * kStageBytes + kTileABytes);
    fence_accumulators(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const uint64_t desc_a = make_desc_sw128(a_base + kk * 32, 16, 1024);
      const uint64_t desc_b = make_desc_sw128(b_base + kk * 2 * 1024, kBChunkBytes, 1024);
      wgmma_m64k16<BN, 1, TIN>(acc, desc_a, desc_b, 1);
    }
    wgmma_commit();
    fence_accumulators(acc);
    wgmma_wait<1>();  // the group of tile kt-1 has finished reading its slot
    fence_accumulators(acc);

    if (kt > 0) {
      const int prev = (kt - 1) % STAGES;
      if (tid % 128 == 0) mbar_arrive(&empty[prev]);
      const int refill = kt - 1 + STAGES;
      if (tid == 0 && refill < k_tiles) {
        mbar_wait(&empty[prev], ((kt - 1) / STAGES) & 1);  // every warpgroup is done with it
        issue_tile_loads(prev, refill);
      }
    }
  }
  wgmma_wait<0>();
  fence_accumulators(acc);

  // Epilogue: each thread owns pairs of adjacent columns (see hopper/wgmma.cuh for the layout).
  // N is a multiple of 8, so a pair is either fully inside or fully outside, and 4-byte aligned.
  const int warp = (tid % 128) / 32;
  const int lane = tid % 32;
  const int row_base = m0 + warpgroup * 64 + warp * 16 + lane / 4;
  const int col_base = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = col_base + 8 * j;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + 8 * h;
      if (row < M && col < N) {
        *reinterpret_cast<uint32_t*>(C + static_cast<size_t>(row) * N + col) =
            pack2<TOUT>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      }
    }
  }
}
