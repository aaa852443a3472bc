// Stage 17: decode_wgmma -- the decode GEMM (M = 1..64 tokens, layout nt: the weights stored (out, in) as PyTorch
// keeps them) as the libraries run it on Hopper: the weights streamed by TMA through a deep shared-memory ring into
// wgmma with the operands swapped, stream-K over one CTA per SM, a deterministic reduction of the split tiles.
//
// Why a stage after stage 16 (decode_rows): stage 16 reads the weights as a copy kernel does and feeds mma.sync from
// registers. In bf16 it streams at 91-97% of the copy probe at the large shapes at 1 and 16 tokens (6 of the decode
// experiment's 51 points); at 64 tokens it reaches 56-71% of the faster library (session28b), and in fp8 mma.sync's
// e4m3 form is emulated on sm_90 (F2FP conversions into HMMA, in stage 16's SASS), so fp8 reaches 90% of the copy
// probe at one point of 51. The libraries at 64 tokens (cuBLASLt's algo 66: tiles of 64-448 weight rows by 64
// tokens, split-K up to 3) stream at 83-96% of the copy probe at the shapes of 136 MB or more (session28b's bf16
// decode experiment).
// What changes over stage 16, that recipe hand-written:
// * Swap AB: C^T (N x M) = W (N x K) X^T. The weights are wgmma's A operand (m64 rows of N a consumer warpgroup),
//   the tokens its B operand, N = NTOK (M rounded up to 8: 8..64), both K-major as stored (layout nt), so
//   the same code runs bf16 (k16) and e4m3 (k32, native QGMMA: no conversion of either operand).
// * TMA: one box of kBW weight rows x 128 bytes and one of NTOK token rows x 128 bytes a stage (128-byte
//   swizzle; out-of-bounds rows and K read as zeros: no tail code), STAGES stages in flight per SM: 8 stages hold
//   136 KiB (1 token) to 192 KiB (64 tokens) of the stream in flight, several times the ~33 KB per SM that the copy
//   probe's 4.3 TB/s over 132 SMs asks for if a load takes ~1 us under load (an assumption, not a measurement).
// * Stream-K: the tiles' k-blocks (tile-major) cut into equal contiguous runs, one per unit (a CTA; with CLUSTER 2 a
//   2-CTA cluster, whose tile is two neighbouring CTA tiles); a tile cut across units is summed by the last of its
//   parts to arrive (a counter per CTA tile and consumer), in part order whoever arrives last: the same bits every
//   run. Partials are FP32 in the workspace (two slots per CTA: a run's first and last pieces are the only ones that
//   can be parts).
// * Epilogue: the accumulators (scaled by scale_a * scale_b in fp8) through a padded shared-memory tile that
//   transposes them (144-byte token rows: conflict-free), then 16-byte stores of C's rows (the token rows).
//
// Defines (each measurable; the YAML's defaults):
//   NTOK       token columns of the wgmma (the point's: M rounded up to 8)
//   CONSUMERS  consumer warpgroups (1 to 3), each MSUB m64 slices of the tile's weight rows (the YAML's rule: 1 past
//              16 tokens where 128-row tiles would be fewer than 32: twice the tiles for the split to balance; else 2)
//   MSUB       m64 slices a consumer takes (1 or 2): tile = 64 x CONSUMERS x MSUB weight rows (a TMA box: <= 256)
//   PRODUCER_WG  1: a producer warpgroup whose registers go to the consumers (setmaxnreg); 0: a producer warp
//   L2_HINT    1: the weights' TMA loads evict_first, the tokens' evict_last (L2 cache policies); 0: none (the YAML's
//              rule: 1 where the weights are 64 MiB or more)
//   CLUSTER    2: 2-CTA clusters at the same k-block, the tokens' box multicast (half loaded by each); 1: none
//   KSPAN      128-byte boxes along K a stage (1, 2, 4): KSPAN x 128 contiguous bytes of each weight row a stage
//   STAGES     the ring's depth (the YAML's rule: 8 where the weights are 192 MiB or more, else 4)
//   MAX_PARTS  (the YAML's grid rule, not read here) at most this many units a tile: a matrix of few tiles takes
//              fewer SMs rather than a long sum (the last part loads kSumBatch partials at a time, 1-8)
//   TRACE      1: thread 0 of every consumer warpgroup stamps %globaltimer at the kernel's start, its first stage's
//              data in shared memory, its last MMA done and its end (the run's last reduction and epilogue written),
//              and its SM, after the partial slots (gemmlab/bench/decode_trace.py --variant decode_wgmma reads them;
//              a warpgroup with an empty run stamps 0 as its first data); 0: none (the measured kernel)
//   DYN        1: a dynamic tail. Each tile's k-blocks [0, DYN_K0) are its static head, cut into the stream-K runs above
//              (over unit tiles x DYN_K0, tile-major); [DYN_K0, k-blocks) its tail, chunks of DYN_CK k-blocks that a
//              unit's producer takes by ticket once its static run is issued (a 64-bit atomicAdd on a counter in the
//              workspace; ticket j: chunk j % D of tile j / D, tile-major), the next one taken while the current
//              chunk's stages are issued (the atomic's L2 round trip hidden), until the tickets run out. The producer
//              hands every piece to the consumers in the slot of its first stage (a PieceInfo beside the barriers,
//              written before the slot's arrive, stage 12's PRODUCER_SCHEDULES pattern; a slot without data ends
//              them). Every tile is then split: its head's parts in unit order, then its chunks 0..D-1, each
//              partial in its own slot, summed in that order by the last to arrive: the same bits whichever unit
//              took which chunk. The counter is never reset: every launch takes chunks + units tickets (each unit one
//              past the chunks), so launch L's are [L P, (L + 1) P). Why: ncu on an H100 at 8192 x 28672 bf16, 1
//              token (162.7 us): the SMs active 92.6% of the elapsed cycles on average -- their DRAM bandwidth is
//              not equal and the static runs give each the same bytes, so the kernel ends with the slowest SM (stage
//              17 ~9 us over the copy probe's time at every size). Expected: the end near the SMs' mean finish
//              instead of the slowest's, less the tail's extra partials (a chunk's is NTOK / (32 DYN_CK KSPAN) of its
//              weight bytes: 6% at 1 token, 50% at 64 tokens with DYN_CK 4, written and read once more). Measured on
//              an H100 (outputs/reference/h100-2026-12-05/session32): slower than the static split at all 16 points
//              of each of its three sweep sets (0.7-30% more time; at its defaults 3.5 to 21 points of the library
//              less, 8192 x 28672 fp8 at 64 tokens 69.7% against 90.9%). The stamps (fp8 8192 x 28672): the SMs'
//              last MMAs closer together (1 token: 77.6-89.2 us against 62.8-82.7) but later at the median (82.2 us
//              against 75.3): each chunk ends in a partial, a counter round trip and three barriers (~1.5 us) during
//              which the consumers release no slot, the ring stays full and the producer has nothing in flight; a
//              chunk's 4 k-blocks are ~2 us of an SM's share of the bandwidth. Off: what would help is publishing a
//              piece without stopping the consumers (the producer could count it and hand the tile's sum back through
//              the ring). Without clusters (CLUSTER 1: a cluster's CTAs would have to take the same chunks). 0: none
//              (the measured kernel: the same SASS as before DYN)
//   DYN_PCT    (the YAML's DYN_K0 rule, not read here) about this percentage of each tile's k-blocks in its tail
//   DYN_CK     k-blocks a chunk of the tail (a tile's last chunk may hold fewer)
//   DYN_K0     k-blocks of each tile's static head (the YAML's point rule: the k-blocks less DYN_PCT percent of them
//              rounded to whole chunks, one chunk at least; clipped to the k-blocks here: 0 all dynamic, all no tail;
//              with DYN 0 the YAML's -1, not read)
//   MAP_PARAMS 1: the two tensor maps passed by value, as __grid_constant__ parameters (as CUTLASS and the libraries
//              pass theirs), prefetched by the producer thread while the barriers are set up (the YAML's default); 0:
//              in a device buffer whose address is the parameter (gemmlab/gpu/tma.py), fenced and prefetched after the
//              barriers. Why: the timer empties the L2 before every sample, so the buffer's 256 bytes came from DRAM
//              before the first weight box could be asked for, on every SM's critical path; a parameter is written
//              with the launch. Measured on an H100 (h100-2026-12-05/session34b, each set twice in A B B A order, the
//              libraries interleaved; medians of the two): 1-8% less time at 19 of the 20 points of 3.7-58 MB (fp8 6144 x
//              4096 at 1 token 17.15 -> 16.07 us; fp8 2112 x 7168 at 64 tokens +0.3%), 0.2-2% less at 470-940 MB; +1.3 to
//              +8.7 points of the library at the small matrices. The stamps
//              (TRACE 1, 6144 x 4096 fp8, 1 token): the first data at the median SM 3.54 -> 2.75 us, at the slowest
//              7.04 -> 3.87 us: the late SMs had been waiting on the map
//   WS_PREFETCH 1: each consumer warpgroup's thread 0 prefetches into the L2, at its start, the counters of its run's
//              first and last tiles (the only ones it can share with other units), so that a split tile's atomic at
//              the piece's end finds its line in the L2 rather than in DRAM (the timer's flush leaves it there). Measured
//              (session34b): -3.4 to +5.3% time alone, within +-2.5% of MAP_PARAMS alone with it: no gain. 0: none (the
//              measured kernel); not with DYN 1
//   DYN_PUB    (DYN 1) 1: the consumers never wait on a counter. A consumer warpgroup stores a piece's partial,
//              meets its own warps at a named barrier and bumps a count in shared memory (st.release.cta), then takes
//              the next piece. The producer, between pieces, reads the counts (ld.acquire.cta), counts every piece all
//              warpgroups have stored on its tile's counter (the acq_rel atomic: its round trip behind the TMA loads
//              in flight), and where a piece was its tile's last part puts a sum task in the ring (a slot without
//              data whose PieceInfo has chunk kSumTask): the consumers take it in turn, sum the parts in the fixed
//              order and write the tile. Before its end marker the producer counts every piece it handed out. On an
//              H100 (h100-2026-12-05/session32e, at 1286200: before the barrier that now holds a task's slot until
//              every warp has read it, which a review found missing): its 6 GPU tests passed; fp8 8192 x 28672 back
//              to back 87.7 us at 1 token (static split 84.4, DYN_PUB 0 90.3), 112.0 at 64 (94.9, 118.7): the SMs'
//              last MMAs within 4.6 us of each other (static: 12.2) but their median 3 us later, so still off. 0: each
//              consumer warpgroup counts its own part (DYN 1 as measured in session32)
//   FIXED_SUM  (DYN 0) 1: a split tile summed by its first part. That part's piece begins the tile and runs to its
//              unit's run's end, so it is that run's last piece; every other part begins its unit's run. The others
//              store their partials and count them on the tile's counter with a release reduction (no round trip,
//              no wait); the first part waits until the count says all are in (an acquire load), adds their
//              partials to its own accumulators in unit order (the same bits every run) and writes the tile. No
//              cycle: only first parts wait, on pieces that wait on nothing, so with every CTA of the grid resident
//              (one a SM) each wait ends. Why: session34c's fit (analysis.decode_cost) gives stage 17 ~8.2 us of fixed
//              cost a launch against the libraries' 5.2-6.7, and session31's stamps show ~1.9 us from the median
//              warpgroup's last MMA to its end: the last part to arrive stored its own partial, waited for the
//              atomic's round trip and read every partial back. 2: as 1, and the first part reads the count FIXED_LEAD
//              k-blocks before its piece ends; where the others are all in, it loads the first kSumBatch of their
//              partials then, while its last stages stream, so the count's and the partials' L2 round trips leave the
//              kernel's end (else it waits after its last k-block, as 1). 0: the last part to arrive sums (the
//              measured kernel). Checked in the emulation with the blocks last to first only: it runs one block at a
//              time, so first to last the first part would wait for a block not yet run. On an H100
//              (outputs/reference/h100-2026-12-05/session36, 36b: 14 GPU tests passed; A B C C B A, the libraries
//              interleaved): FIXED_SUM 1 0.4-2.0% less time at all 8 points of 25-235 MB (fp8 70B mlp_down 82.48 ->
//              82.06 us at 1 token, 83.11 -> 82.29 at 16; DeepSeek-V3 dense_gate_up at 64 tokens 93.95 -> 92.11);
//              FIXED_SUM 2 -1.3 to +1.9%: the count's acquire load and the barrier after it stall the consumers
//              mid-stream (the ring full, the loads waiting), which costs what the end saves. On the H200
//              (h200-2026-12-06/session40e, with the YAML's UNSPLIT 1, A B B A, the libraries interleaved): 0.3-2.2%
//              less time at all 8 bf16 points (6144 x 4096 to 36864 x 7168); the YAML's default since (DYN 1 takes 0)
//   FIXED_LEAD (FIXED_SUM 2) k-blocks before the first part's end at which it reads the count (1 at least)
// Written on the CPU machine and checked in the host emulation (tests/test_decode_wgmma.py). Measured on an H100 (outputs/reference/h100-2026-12-05/session30*, the device tool's card that day): the
// sweep's 11 define sets ok at all 132 points, the 33 GPU tests passed (all 66 2-CTA clusters resident, boxes wholly
// past K zero-filled and counted), memcheck clean; in the decode experiment at that sweep's picks (analysis.compare
// --pick) >= 90% of the copy probe at 13 of 50 bf16 points (98.8% at Llama-3 70B mlp_gate_up, where cuBLAS /
// cuBLASLt reach 91-94%) and 4 of 50 fp8, below the libraries on the small matrices (8B attn_o 45-54%); ncu at 70B
// mlp_down: DRAM 86.9% at 1 token, 84.3% at 64 (cuBLASLt 85.0%). The picks over the defaults, each within 1-4%:
// L2_HINT 1 at 16 and 64 tokens (bf16; fp8 at 16), CONSUMERS 1 at fp8's 64, MSUB 2 with the producer warpgroup and
// clusters at bf16's 1 token.
// On the H200 (outputs/reference/h200-2026-12-05/session31*, at bcc5064): the sweep 132 of 132 ok, the 33 GPU tests
// passed, memcheck clean; the picks: STAGES 4 at bf16's 1 token, CONSUMERS 1 at 16 and 64 tokens in both precisions,
// each winning at 8B qkv (6144 x 4096) and losing or tying at the large matrices, where L2_HINT 1 is best at 64
// tokens (fp8 101.6 / 104.0% of cuBLASLt at 57344 x 8192 / 8192 x 28672, the defaults 96.8 / 100.0): the defaults
// stay, a rule by matrix size to be measured. The decode experiment at the picks: >= 90% of the copy probe at 9 of
// 51 bf16 points (96.9-98.0% at 70B mlp_gate_up) and 2 of 51 fp8 (95.2 / 94.4%, the same matrix). TRACE's stamps
// (gemmlab.bench.decode_trace) at fp8 8192 x 28672, 1 token: first data 3.5 us (10.3 at the slowest SM), last MMAs
// at 49.8 / 54.7 / 59.7 us (p10 / p50 / max), then ~2 us of sums and epilogue: the static split ends with the slowest
// SM, which is what DYN is for.
//
// Modeled intensity: every weight and activation byte read once and C written once (the YAML's intensity_model),
// 2 M N K / ((N K + M K) elem_bytes + 2 M N): ~M FLOP/B in bf16, ~2M in fp8; the tokens' re-reads per tile come from L2.
// Run it: python run.py +experiment=decode 'variant=[decode_wgmma,decode_rows,cublas,cublaslt,copy_gpu]'
//
// Constraints: TIN bf16 or e4m3 (TOUT bf16); A (the activations) M x K row-major, B (the weights) N x K row-major
// (layout nt); M <= NTOK; K * sizeof(TIN) % 16 == 0 (TMA row strides) and N % 8 == 0 (16-byte stores of C's rows).
// Workspace: a counter per tile and consumer (reset by the last part: ready for the next launch), then two partial
// slots of kBW x NTOK floats per CTA (TRACE 1: then five 8-byte words per consumer warpgroup of the grid; DYN 1: then,
// from a 256-byte boundary, the tickets' 8-byte counter in 256 bytes, a slot per CTA tile and one per chunk).
#include <cuda_bf16.h>
#include <cstdint>

#include "hopper/ptx.cuh"
#include "hopper/wgmma.cuh"

#define DWG_IS_FP8___nv_fp8_e4m3 1
#define DWG_CAT2(a, b) a##b
#define DWG_CAT(a, b) DWG_CAT2(a, b)
#if DWG_CAT(DWG_IS_FP8_, TIN)
#define DWG_FP8 1
#include <cuda_fp8.h>
#else
#define DWG_FP8 0
#endif

#ifndef NTOK
#define NTOK 64
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef MSUB
#define MSUB 1
#endif
#ifndef STAGES
#define STAGES 8
#endif
// PRODUCER_WG 1: the producer a whole warpgroup that gives its registers to the consumers (setmaxnreg, stage 13's
// split), so that two consumers of two m64 slices (256-row tiles) fit at 64 tokens; 0: one producer warp, no
// setmaxnreg (ptxas then gives 288 threads 168 registers, 416 threads 128)
#ifndef PRODUCER_WG
#define PRODUCER_WG 0
#endif
// L2_HINT 1: the weights' boxes loaded with an L2 evict_first policy (read once), the tokens' with evict_last (every
// tile reads them again), so the stream of weights does not push the tokens (and the split tiles' partials) out of
// the L2; 0: no policy (the TMA default)
#ifndef L2_HINT
#define L2_HINT 0
#endif
// CLUSTER 2: 2-CTA clusters, both CTAs at the same k-block of neighbouring weight tiles, each loading half of the
// tokens' box and multicasting it into both CTAs' slots: the tokens read from L2 once per two tiles (at 64 tokens
// with 128-row tiles the tokens' box is half the weights'); 1: no clusters
#ifndef CLUSTER
#define CLUSTER 1
#endif
// KSPAN: 128-byte boxes along K a stage (1, 2 or 4): a stage reads KSPAN x 128 contiguous bytes of each weight row
// (gemmlab/bench/read_patterns.py on the H200: a warp per row, 512-byte loads, at 92.9-99.7% of a copy-like read;
// stage 14's loads of 8 rows x 64 bytes at 45.3-91.5%) and pays its barriers and TMA issues once for KSPAN boxes
#ifndef KSPAN
#define KSPAN 1
#endif
#ifndef TRACE
#define TRACE 0
#endif
// DYN 1: each tile's k-blocks a static head [0, DYN_K0) cut into stream-K runs as with DYN 0, and a dynamic tail
// [DYN_K0, k-blocks) of chunks of DYN_CK k-blocks that the units' producers take by ticket (an atomic counter in the
// workspace) once their static runs are issued; 0: the static runs alone (the measured kernel, its SASS unchanged)
#ifndef DYN
#define DYN 0
#endif
// DYN_K0: k-blocks of a tile's static head (the YAML's point rule: the k-blocks less about DYN_PCT percent of them in
// whole chunks, one chunk at least; clipped to the tile's k-blocks here); DYN_CK: k-blocks a chunk of the tail
#ifndef DYN_K0
#define DYN_K0 0
#endif
#ifndef DYN_CK
#define DYN_CK 4
#endif
#ifndef MAP_PARAMS
#define MAP_PARAMS 0
#endif
#ifndef WS_PREFETCH
#define WS_PREFETCH 0
#endif
// DYN_PUB (DYN 1): 1: a consumer warpgroup stores a piece's partial and goes on to the next; the producer counts the
// piece on its tile's counter once every consumer has stored it (the atomic's round trip behind the TMA loads it has
// in flight) and, where the piece was the tile's last part, hands the tile's sum to the consumers through the ring (a
// slot without data); 0: each consumer warpgroup counts its own part and the last sums (session32, an H100: ~1.5 us
// a piece during which no slot is released)
#ifndef DYN_PUB
#define DYN_PUB 0
#endif
// FIXED_SUM (DYN 0) 1: a split tile summed by its first part, whose piece is its run's last (the other parts begin
// their runs and end early): the other parts store and count without waiting, the first waits for their count and
// adds their partials to its own accumulators; 2: as 1, and the first part reads the count FIXED_LEAD k-blocks before
// its piece's end and, where every other part is in, loads their partials then (behind its last stages' loads: the
// count's and the partials' L2 round trips off the kernel's end); 0: the last part to arrive sums (every part waits)
#ifndef FIXED_SUM
#define FIXED_SUM 0
#endif
#ifndef FIXED_LEAD
#define FIXED_LEAD 4
#endif

namespace dwg {
constexpr int kElem = static_cast<int>(sizeof(TIN));
constexpr int kBK = 128 / kElem;                 // K elements a stage: one 128-byte swizzle row of each operand
constexpr int kBW = 64 * CONSUMERS * MSUB;       // weight rows a tile
constexpr int kTileWBytes = kBW * 128;
constexpr int kTileXBytes = NTOK * 128;
constexpr int kBoxBytes = kTileWBytes + kTileXBytes;   // one 128-byte box along K of the weights and the tokens
constexpr int kStageBytes = KSPAN * kBoxBytes;
constexpr int kAccum = NTOK / 2;                 // accumulators a thread, per m64 slice
constexpr int kThreads = 128 * CONSUMERS + (PRODUCER_WG ? 128 : 32);  // the consumer warpgroups, then the producer
// PRODUCER_WG: the launch's registers (65536 / kThreads a thread, down to a multiple of 8), 40 a producer thread,
// the rest the consumers' (down to a multiple of 8, at most 240)
constexpr int kProducerRegs = DYN_PUB ? 56 : 40;  // (DYN_PUB: the counting loop spills at 40)
constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
constexpr int kConsumerRegsAll = (kLaunchRegs * kThreads - kProducerRegs * 128) / (128 * CONSUMERS) / 8 * 8;
[[maybe_unused]] constexpr int kConsumerRegs = kConsumerRegsAll < 240 ? kConsumerRegsAll : 240;
constexpr int kXShareRows = NTOK / CLUSTER;       // token rows a CTA loads (and multicasts, CLUSTER 2)
[[maybe_unused]] constexpr int kXShareBytes = kXShareRows * 128;
constexpr int kStagingStride = 128 + 16;         // bytes a token row of the transposing tile (64 bf16 + 16: no conflicts)
constexpr int kStagingBytes = NTOK * kStagingStride;
// parts of a split tile whose partials the last part loads at once (their float4s in registers together)
constexpr int kSumBatchRaw = 32 / (MSUB * kAccum);  // 32 registers of loads in flight, as one part at 64 tokens
constexpr int kSumBatch = kSumBatchRaw < 1 ? 1 : (kSumBatchRaw > 8 ? 8 : kSumBatchRaw);
constexpr int kSliceF4 = 128 * NTOK / 8;         // float4s of one m64 slice's partial (128 threads x kAccum / 4)
constexpr int kSlotF4 = CONSUMERS * MSUB * kSliceF4;
// the ring (1024-aligned slots), each consumer's staging tile, 1 KB to align, full + empty barriers, arrival words
// (DYN 1: then a 16-byte PieceInfo a slot; DYN_PUB 1: then a count a consumer and kPieceQueue tiles)
constexpr int kPieceQueue = 16;  // DYN_PUB: pieces of split tiles handed out and not yet counted, at most
constexpr int kSmemBytes = STAGES * kStageBytes + CONSUMERS * kStagingBytes + 1024 + 2 * STAGES * 8 + 4 * CONSUMERS +
                           (DYN ? STAGES * 16 : 0) + (DYN_PUB ? 4 * CONSUMERS + 4 * kPieceQueue : 0);

static_assert(NTOK % 8 == 0 && NTOK >= 8 && NTOK <= 64, "NTOK: the tokens rounded up to 8, at most 64");
static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "CONSUMERS: 1 to 3 warpgroups");
static_assert(L2_HINT == 0 || L2_HINT == 1, "L2_HINT: 0 or 1");
static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER: 1 (no clusters) or 2 CTAs");
static_assert(KSPAN == 1 || KSPAN == 2 || KSPAN == 4, "KSPAN: 1, 2 or 4 boxes along K a stage");
static_assert(TRACE == 0 || TRACE == 1, "TRACE: 0 or 1");
static_assert(DYN == 0 || DYN == 1, "DYN: 0 or 1");
// a cluster's two CTAs stand at the same k-block at every stage (each multicasts half of the tokens' box into both):
// with a dynamic tail one producer would have to hand each chunk to the other's; not done (the YAML's CLUSTER rule
// gives 1 with DYN 1)
static_assert(DYN == 0 || CLUSTER == 1, "DYN 1 runs without clusters (CLUSTER 1)");
static_assert((DYN == 0 || DYN_K0 >= 0) && DYN_CK >= 1, "DYN 1: DYN_K0 >= 0 k-blocks of head, DYN_CK >= 1 a chunk");
static_assert(DYN_PUB == 0 || (DYN_PUB == 1 && DYN == 1), "DYN_PUB: 0, or 1 with DYN 1");
static_assert(FIXED_SUM == 0 || ((FIXED_SUM == 1 || FIXED_SUM == 2) && DYN == 0), "FIXED_SUM: 0, or 1 / 2 with DYN 0");
static_assert(FIXED_LEAD >= 1, "FIXED_LEAD: k-blocks before the piece's end, 1 at least");
// a CTA's half of the tokens' box starts on a 1024-byte swizzle atom (8 rows of 128 bytes), where the descriptor reads it
static_assert(kXShareRows % 8 == 0, "with a cluster the tokens' box splits in whole 8-row swizzle atoms (NTOK % 16 == 0)");
static_assert(PRODUCER_WG == 0 || (PRODUCER_WG == 1 && CONSUMERS >= 2), "PRODUCER_WG: 0, or 1 with 2-3 consumers");
static_assert(MSUB == 1 || MSUB == 2, "MSUB: 1 or 2 m64 slices a consumer");
static_assert(kBW <= 256, "a TMA box has at most 256 rows");
static_assert(STAGES >= 2, "a ring needs two slots at least");
static_assert(kBoxBytes % 1024 == 0, "boxes on 1024-byte swizzle atoms");
static_assert(kSmemBytes <= 227 * 1024, "more shared memory than one sm_90 block may have");

// The first k-block (tile-major) of CTA g's run: the runs cut tiles x k_blocks into `ctas` equal parts.
__device__ __forceinline__ long long run_begin(int g, long long total, int ctas) {
  return total * g / ctas;
}
// The CTA whose run holds k-block i (the last g with run_begin(g) <= i).
__device__ __forceinline__ int run_owner(long long i, long long total, int ctas) {
  return static_cast<int>(((i + 1) * ctas - 1) / total);
}
#if DYN
// What the producer tells the consumers about a piece, in the slot of its first stage, written before the arrive
// that publishes the slot (mbarrier.arrive: release at CTA scope; the consumers' wait: acquire): the unit tile, its
// k-blocks [kb, ke), and chunk -1 for the unit's static part of the tile, else the chunk's index in the tile's tail;
// tile < 0: no more work (the slot carries no data: a plain arrive, no bytes)
struct PieceInfo {
  int tile, kb, ke, chunk;
};
// DYN_PUB: a PieceInfo's chunk for a sum task (no k-blocks, no data in the slot): every part of the tile is in
[[maybe_unused]] constexpr int kSumTask = -2;
// A ticket of the dynamic tail: the counter's old value. Relaxed (atomicAdd): a ticket orders no data (the chunks'
// partials meet through the tile counters' acq_rel atomics, as the static parts' do), launches on one stream are
// ordered by the kernel boundary.
#if defined(GEMMLAB_HOST_EMULATION)
inline unsigned long long take_ticket(unsigned long long* p) { return __atomic_fetch_add(p, 1ull, __ATOMIC_RELAXED); }
#else
__device__ __forceinline__ unsigned long long take_ticket(unsigned long long* p) { return atomicAdd(p, 1ull); }
#endif
// the producer takes its first ticket this many k-blocks before its static run's end (the atomic's round trip,
// ~1 us under load, behind the last stages' issue), and a chunk's next ticket when it issues the chunk's first stage
constexpr int kTicketLead = 2;
#endif
}  // namespace dwg

HOPPER_DECLARE_DYNAMIC_SMEM(dwg::kSmemBytes)

extern "C" __global__ void __launch_bounds__(dwg::kThreads, 1)
#if CLUSTER > 1
    __cluster_dims__(CLUSTER, 1, 1)
#endif
    decode_wgmma(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N, int K,
#if MAP_PARAMS
                 const __grid_constant__ hopper::TensorMap map_w_param, const __grid_constant__ hopper::TensorMap map_x_param,
#else
                 const hopper::TensorMap* __restrict__ maps,
#endif
#if DWG_FP8
                 float scale_a, float scale_b,
#endif
                 int* __restrict__ workspace) {
  using namespace hopper;
  using namespace dwg;
  static_assert(std::is_same<TOUT, __nv_bfloat16>::value, "bf16 results");
  (void)A;
  (void)B;
#if MAP_PARAMS
  const TensorMap* map_w = &map_w_param;  // the kernel's parameters (the launcher passes them by value)
  const TensorMap* map_x = &map_x_param;
#else
  const TensorMap* map_w = maps + 0;  // B: the weights, N x K, box kBW x 128 bytes
  const TensorMap* map_x = maps + 1;  // A: the activations, M x K, box NTOK / CLUSTER x 128 bytes
#endif
#if DWG_FP8
  const float scale = scale_a * scale_b;
#else
  const float scale = 1.0f;
#endif

  HOPPER_DYNAMIC_SMEM(smem_raw);
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  unsigned char* staging = smem + STAGES * kStageBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + CONSUMERS * kStagingBytes);
  uint64_t* empty = full + STAGES;
  [[maybe_unused]] int* arrived = reinterpret_cast<int*>(empty + STAGES);  // (FIXED_SUM: not read)
#if DYN
  PieceInfo* info = reinterpret_cast<PieceInfo*>(arrived + CONSUMERS);  // a piece's first slot: what it is
#endif
#if DYN_PUB
  int* stored = reinterpret_cast<int*>(info + STAGES);  // pieces of split tiles each consumer warpgroup has stored
  int* queue = stored + CONSUMERS;  // the producer's: the tile of each such piece handed out, by its number % queue
#endif

  const int tid = threadIdx.x;
#if TRACE
  const unsigned long long t_start = globaltimer_ns();
#endif
  // The work is counted in units: a unit is a cluster of CLUSTER CTAs (one CTA without clusters), its tile CLUSTER x
  // kBW weight rows (rank r's CTA the r-th kBW of them), both CTAs of a cluster at the same k-block at every stage.
  const int rank = CLUSTER > 1 ? static_cast<int>(cluster_cta_rank()) : 0;
  const int unit_tiles = (N + kBW * CLUSTER - 1) / (kBW * CLUSTER);
  const int k_boxes = (K + kBK - 1) / kBK;                   // 128-byte boxes along K
  const int k_blocks = (k_boxes + KSPAN - 1) / KSPAN;          // stages along K (the last may reach past K)
  const long long total = static_cast<long long>(unit_tiles) * k_blocks;
  // no more units than k-blocks (the YAML's grid never asks for more; a unit past them gets an empty run: counted as
  // a part of no tile, so every split tile's last part still knows it is last)
  const int units = static_cast<int>(total < gridDim.x / CLUSTER ? total : gridDim.x / CLUSTER);
  const int g = static_cast<int>(blockIdx.x) / CLUSTER;  // __cluster_dims__ along x: a cluster's CTAs are adjacent
#if DYN
  // DYN 1: the static heads (unit_tiles x K0, tile-major) cut into runs as above among units_s units (no more than
  // the heads' k-blocks: no run is empty; none with K0 = 0), the tails' D chunks a tile by ticket
  const int K0 = DYN_K0 < k_blocks ? DYN_K0 : k_blocks;
  const int D = (k_blocks - K0 + DYN_CK - 1) / DYN_CK;
  const long long total_s = static_cast<long long>(unit_tiles) * K0;
  const int units_s = static_cast<int>(total_s < units ? total_s : units);
  const long long begin = g < units_s ? run_begin(g, total_s, units_s) : total_s;
  const long long end = g < units_s ? run_begin(g + 1, total_s, units_s) : total_s;
  // past the partial slots (and TRACE's stamps), from a 256-byte boundary: the tickets' counter (8 bytes of 256;
  // zeroed when the workspace is allocated, never reset: every launch takes chunks + units tickets, so that launch
  // L's are [L P, (L + 1) P)), then a slot per CTA tile (its first static part) and one per chunk (tile-major)
  unsigned char* const dyn_area =
      reinterpret_cast<unsigned char*>(workspace + (unit_tiles * CLUSTER * CONSUMERS + 63) / 64 * 64) +
      static_cast<long long>(gridDim.x) * 2 * kSlotF4 * 16 + (TRACE ? (gridDim.x * CONSUMERS * 40 + 255) / 256 * 256 : 0);
  unsigned long long* const tickets = reinterpret_cast<unsigned long long*>(dyn_area);
  float4* const dyn_slots = reinterpret_cast<float4*>(dyn_area + 256);
  // tile t's static parts: units s_first.. of the heads' runs (none with K0 = 0); its parts are those and its D chunks
  auto head_parts = [&](int t, int& s_first) {
    s_first = 0;
    if (K0 == 0) return 0;
    s_first = run_owner(static_cast<long long>(t) * K0, total_s, units_s);
    return run_owner(static_cast<long long>(t) * K0 + K0 - 1, total_s, units_s) - s_first + 1;
  };
#else
  const long long begin = g < units ? run_begin(g, total, units) : total;
  const long long end = g < units ? run_begin(g + 1, total, units) : total;
#endif

#if MAP_PARAMS
  // the copy engine's descriptors fetched while the barriers are set up (a parameter map needs no proxy fence)
  if (tid == 128 * CONSUMERS) {
    tensormap_prefetch(map_w);
    tensormap_prefetch(map_x);
  }
#endif
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);                       // the producer's expect_tx arrival
      mbar_init(&empty[s], CONSUMERS * CLUSTER);    // one arrival per consumer warpgroup of every CTA of the cluster
    }
#if DYN_PUB
    for (int c = 0; c < CONSUMERS; ++c) stored[c] = 0;
#endif
    fence_mbar_init();
  }
  // CLUSTER 2: the peer multicasts into our slots and arrives on our empty barriers: all initialised first
#if CLUSTER > 1
  cluster_sync();
#else
  __syncthreads();
#endif

  if (tid >= 128 * CONSUMERS) {
    // ---------------------------------------------------------------- producer warp(group): one thread issues the TMA
#if PRODUCER_WG
    setmaxnreg_dec<kProducerRegs>();
#endif
    if (tid == 128 * CONSUMERS) {
#if !MAP_PARAMS
      tensormap_acquire(map_w);
      tensormap_acquire(map_x);
#endif
#if L2_HINT
      const uint64_t w_policy = l2_evict_first(), x_policy = l2_evict_last();
#endif
#if DYN
      int slot = 0;
      uint32_t phase = 0;
#if DYN_PUB
      // the pieces of split tiles handed out (`issued`) and counted on their tiles' counters (`pub`), in the order the
      // consumers take them; the tile of piece q in queue[q % kPieceQueue]
      int issued = 0, pub = 0;
      // a slot without data: the consumers sum tile t (its parts all counted)
      auto task_in = [&](int t) {
        mbar_wait(&empty[slot], phase ^ 1u);
        info[slot] = PieceInfo{t, 0, 0, kSumTask};
        mbar_arrive(&full[slot]);
        if (++slot == STAGES) {
          slot = 0;
          phase ^= 1u;
        }
      };
      // every piece that all consumer warpgroups have stored since the last call, counted in turn on its tile's
      // counter: the warpgroups' stores, seen here through the acquire of their counts, released at GPU scope by the
      // atomic (its acquire: the other parts' partials for the sum); where a piece was its tile's last part, the
      // sum goes into the ring. Only between pieces: a task never lands among a piece's stages.
      auto count_stored = [&]() {
        int done = ld_acquire_cta_shared(&stored[0]);
        for (int c = 1; c < CONSUMERS; ++c) {
          const int d = ld_acquire_cta_shared(&stored[c]);
          done = d < done ? d : done;
        }
        for (; pub < done; ++pub) {
          const int tt = queue[pub % kPieceQueue];
          int s_first;
          int* counter = workspace + tt * CONSUMERS;  // (the first consumer's counter of the tile: CLUSTER 1)
          if (atom_add_acq_rel_gpu(counter, 1) == head_parts(tt, s_first) + D - 1) {
            *counter = 0;  // every part is in: ready for the next launch
            task_in(tt);
          }
        }
      };
#endif
      // k-block kb of unit tile t into the ring's next slot (its last use released), `piece` written first where the
      // stage is a piece's first (published by the arrive); no clusters with DYN 1
      auto stage_in = [&](int t, int kb, const PieceInfo* piece) {
        mbar_wait(&empty[slot], phase ^ 1u);
        if (piece != nullptr) info[slot] = *piece;
        unsigned char* stage = smem + slot * kStageBytes;
        mbar_arrive_expect_tx(&full[slot], kStageBytes);
#pragma unroll
        for (int b = 0; b < KSPAN; ++b) {
          unsigned char* box = stage + b * kBoxBytes;
          const int col = (kb * KSPAN + b) * kBK;
#if L2_HINT
          tma_load_2d_hint(box, map_w, &full[slot], col, t * kBW, w_policy);
          tma_load_2d_hint(box + kTileWBytes, map_x, &full[slot], col, 0, x_policy);
#else
          tma_load_2d(box, map_w, &full[slot], col, t * kBW);
          tma_load_2d(box + kTileWBytes, map_x, &full[slot], col, 0);
#endif
        }
        if (++slot == STAGES) {
          slot = 0;
          phase ^= 1u;
        }
      };
      // a piece's first stage, its PieceInfo in the slot (DYN_PUB: first the pieces stored so far counted, and this
      // one queued where its tile has more parts than one; at most kPieceQueue queued: wait for the consumers)
      auto piece_in = [&](const PieceInfo& piece) {
#if DYN_PUB
        count_stored();
        int s_first;
        if (head_parts(piece.tile, s_first) + D > 1) {
          while (issued - pub >= kPieceQueue) {
            __nanosleep(64);
            count_stored();
          }
          queue[issued % kPieceQueue] = piece.tile;
          ++issued;
        }
#endif
        stage_in(piece.tile, piece.kb, &piece);
      };
      // the tickets: P = chunks + units a launch (every unit takes them until one is past the chunks: one such each)
      const long long chunks = static_cast<long long>(unit_tiles) * D;
      const bool takes = g < units && chunks > 0;
      unsigned long long ticket = 0;
      if (takes && end - begin < kTicketLead) ticket = take_ticket(tickets);  // a run too short for the lead
      // the static run: its pieces as with DYN 0 (k_blocks read K0), each piece's first stage with its PieceInfo
      int t = K0 > 0 ? static_cast<int>(begin / K0) : 0;
      int kb = static_cast<int>(begin - static_cast<long long>(t) * K0);
      for (long long n_left = end - begin; n_left > 0; --n_left) {
        if (takes && n_left == kTicketLead) ticket = take_ticket(tickets);
        if (kb == 0 || n_left == end - begin) {
          piece_in(PieceInfo{t, kb, n_left < K0 - kb ? kb + static_cast<int>(n_left) : K0, -1});
        } else {
          stage_in(t, kb, nullptr);
        }
        if (++kb == K0) {
          kb = 0;
          ++t;
        }
      }
      // the dynamic tail: ticket j (this launch's: ticket - base) is chunk j % D of unit tile j / D (tile-major: the
      // units that take neighbouring tickets read neighbouring weight rows), until a ticket past the chunks
      if (takes) {
        const unsigned long long base = ticket - ticket % static_cast<unsigned long long>(chunks + units);
        for (long long j = static_cast<long long>(ticket - base); j < chunks;) {
          const int tt = static_cast<int>(j / D), c = static_cast<int>(j - static_cast<long long>(tt) * D);
          const int ckb = K0 + c * DYN_CK, cke = ckb + DYN_CK < k_blocks ? ckb + DYN_CK : k_blocks;
          const unsigned long long next = take_ticket(tickets);  // its round trip behind this chunk's stages
          piece_in(PieceInfo{tt, ckb, cke, c});
          for (int k = ckb + 1; k < cke; ++k) stage_in(tt, k, nullptr);
          j = static_cast<long long>(next - base);
        }
      }
#if DYN_PUB
      // every piece handed out counted (the consumers store the last ones now), the sums they complete queued
      while (pub < issued) {
        count_stored();
        if (pub < issued) __nanosleep(128);
      }
#endif
      // no more work: one more use of the next slot carries no data, only the end (a plain arrive completes the
      // phase: the barrier counts the producer's one arrival and no bytes)
      mbar_wait(&empty[slot], phase ^ 1u);
      info[slot] = PieceInfo{-1, 0, 0, 0};
      mbar_arrive(&full[slot]);
#else
      // the run's tile and k-block, the ring's slot and phase, stepped (no division a stage)
      int t = static_cast<int>(begin / k_blocks), kb = static_cast<int>(begin - static_cast<long long>(t) * k_blocks);
      int slot = 0;
      uint32_t phase = 0;
      for (long long n_left = end - begin; n_left > 0; --n_left) {
        // its last use released (with a cluster, by the consumers of both CTAs: the peer's half of the tokens lands
        // in our slot, ours in the peer's)
        mbar_wait(&empty[slot], phase ^ 1u);
        unsigned char* stage = smem + slot * kStageBytes;
        // the bytes of whole boxes, out-of-bounds zeros included (a tile's last k-block may hold boxes wholly past K:
        // all zeros, which add nothing, and no branch around the MMAs: one around them made ptxas commit a dummy
        // wgmma group every stage), both halves of the tokens' box with a cluster
        mbar_arrive_expect_tx(&full[slot], kStageBytes);
        const int w_row = (t * CLUSTER + rank) * kBW;
#pragma unroll
        for (int b = 0; b < KSPAN; ++b) {
          unsigned char* box = stage + b * kBoxBytes;
          const int col = (kb * KSPAN + b) * kBK;
#if L2_HINT
          tma_load_2d_hint(box, map_w, &full[slot], col, w_row, w_policy);
#else
          tma_load_2d(box, map_w, &full[slot], col, w_row);
#endif
#if CLUSTER > 1 && L2_HINT
          // this CTA's NTOK / CLUSTER token rows, into the same place of every CTA's slot
          tma_load_2d_multicast_hint(box + kTileWBytes + rank * kXShareBytes, map_x, &full[slot], col, rank * kXShareRows,
                                     static_cast<uint16_t>((1u << CLUSTER) - 1u), x_policy);
#elif CLUSTER > 1
          tma_load_2d_multicast(box + kTileWBytes + rank * kXShareBytes, map_x, &full[slot], col, rank * kXShareRows,
                                static_cast<uint16_t>((1u << CLUSTER) - 1u));
#elif L2_HINT
          tma_load_2d_hint(box + kTileWBytes, map_x, &full[slot], col, 0, x_policy);
#else
          tma_load_2d(box + kTileWBytes, map_x, &full[slot], col, 0);
#endif
        }
        if (++kb == k_blocks) {
          kb = 0;
          ++t;
        }
        if (++slot == STAGES) {
          slot = 0;
          phase ^= 1u;
        }
      }
#endif
    }
  } else {
    // -------------------------------------------------------------- consumer warpgroups
#if PRODUCER_WG
    setmaxnreg_inc<kConsumerRegs>();
#endif
    const int consumer = tid / 128;
    const int local_tid = tid % 128;
    const int warp = local_tid / 32, lane = tid % 32;
    unsigned char* my_staging = staging + consumer * kStagingBytes;
    // counters: one per CTA tile (unit tile x CLUSTER + rank) and consumer, to 256 bytes; then the partial slots
    float4* partials =
        reinterpret_cast<float4*>(workspace + (unit_tiles * CLUSTER * CONSUMERS + 63) / 64 * 64);  // 256-byte aligned
    // a slot released: to its empty barrier in every CTA of the cluster (the peer multicast into ours, we into theirs)
    auto release = [&](int slot) {
      if (local_tid == 0) {
#if CLUSTER > 1
#pragma unroll
        for (int r = 0; r < CLUSTER; ++r) mbar_arrive_remote(&empty[slot], static_cast<uint32_t>(r));
#else
        mbar_arrive(&empty[slot]);
#endif
      }
    };
    float acc[MSUB][kAccum];
    int slot = 0, last_slot = 0;  // the ring's slot and phase, stepped as the producer steps them
    uint32_t phase = 0;
#if TRACE
    unsigned long long t_first = 0, t_mma = 0;
#endif
#if DYN_PUB
    int n_stored = 0;  // pieces of split tiles this warpgroup has stored (thread 0 publishes the count)
#endif
#if WS_PREFETCH && !DYN
    // the counters this warpgroup will count on (its run's first and last tiles, where they are split) into the L2
    // now, so that the atomic at each piece's end does not wait for DRAM (the timer empties the L2 before a sample)
    if (local_tid == 0 && begin < end) {
      prefetch_l2(workspace + (static_cast<int>(begin / k_blocks) * CLUSTER + rank) * CONSUMERS + consumer);
      prefetch_l2(workspace + (static_cast<int>((end - 1) / k_blocks) * CLUSTER + rank) * CONSUMERS + consumer);
    }
#endif
#if DYN
    for (;;) {
      // one piece, as the producer wrote it into the slot of its first stage: k-blocks [kb, ke) of unit tile t, this
      // unit's static part of the tile (chunk < 0) or chunk `chunk` of its tail; no tile: the end
      mbar_wait(&full[slot], phase);
      const PieceInfo piece = info[slot];
      const int t = warp_uniform(piece.tile);
      if (t < 0) break;
      const int kb = warp_uniform(piece.kb), ke = warp_uniform(piece.ke), chunk = warp_uniform(piece.chunk);
#else
    for (long long i = begin; i < end;) {
      // one piece: k-blocks [kb, ke) of unit tile t, the part of this unit's run inside the tile
      const int t = static_cast<int>(i / k_blocks);
      const int kb = static_cast<int>(i - static_cast<long long>(t) * k_blocks);
      const long long tile_end = static_cast<long long>(t + 1) * k_blocks;
      const int ke = static_cast<int>((end < tile_end ? end : tile_end) - static_cast<long long>(t) * k_blocks);
      i += ke - kb;
#endif
      const int cta_tile = t * CLUSTER + rank;  // this CTA's kBW weight rows of the unit tile
#if FIXED_SUM
      [[maybe_unused]] bool have = false;  // FIXED_SUM 2: every other part's partial already loaded (into `pre`)
#endif
#if FIXED_SUM == 2
      // a split tile's first part: its piece begins the tile and stops short of its end (so it is its run's last);
      // FIXED_LEAD k-blocks before that end it reads the count of the other parts (units g + 1 to sum_last, each its
      // run's first piece: slot 0) and, where all are in, loads the first kSumBatch of their partials
      const bool summer = kb == 0 && ke != k_blocks;
      const int pf_at = ke - FIXED_LEAD > kb ? ke - FIXED_LEAD : kb;
      const int sum_last = summer ? run_owner(static_cast<long long>(t) * k_blocks + k_blocks - 1, total, units) : 0;
      float4 pre[kSumBatch][MSUB][kAccum / 4];
#endif
#if DYN_PUB
      if (chunk == kSumTask) {  // a sum task: its slot holds no data
        // every warp has read the slot's PieceInfo before it is released (a piece's wgmma groups hold its warps
        // together; a task has none): the producer may write the next one there at once
        named_barrier_sync(1 + consumer, 128);
        release(slot);
        if (++slot == STAGES) {
          slot = 0;
          phase ^= 1u;
        }
      } else {
#endif

#pragma unroll
      for (int s = 0; s < MSUB; ++s)
#pragma unroll
        for (int r = 0; r < kAccum; ++r) acc[s][r] = 0.0f;

      for (int kt = kb; kt < ke; ++kt) {
#if FIXED_SUM == 2
        if (summer && kt == pf_at) {
          if (local_tid == 0) arrived[consumer] = ld_acquire_gpu(workspace + cta_tile * CONSUMERS + consumer);
          named_barrier_sync(1 + consumer, 128);  // the acquire before every thread's reads
          have = arrived[consumer] == sum_last - g;
          if (have) {
#pragma unroll
            for (int u = 0; u < kSumBatch; ++u) {
              if (g + 1 + u > sum_last) break;
              const float4* part = partials + static_cast<long long>(2 * ((g + 1 + u) * CLUSTER + rank)) * kSlotF4 +
                                   consumer * MSUB * kSliceF4 + local_tid;
#pragma unroll
              for (int s = 0; s < MSUB; ++s)
#pragma unroll
                for (int j = 0; j < kAccum / 4; ++j) pre[u][s][j] = ld_cg_f4(part + s * kSliceF4 + j * 128);
            }
          }
        }
#endif
        mbar_wait(&full[slot], phase);
#if TRACE
        if (t_first == 0) t_first = globaltimer_ns();
#endif
#pragma unroll
        for (int s = 0; s < MSUB; ++s) fence_accumulators(acc[s]);
        wgmma_fence();
#pragma unroll
        for (int b = 0; b < KSPAN; ++b) {
          const uint32_t w_base = smem_u32(smem + slot * kStageBytes + b * kBoxBytes) + consumer * MSUB * 64 * 128;
          const uint32_t x_base = smem_u32(smem + slot * kStageBytes + b * kBoxBytes + kTileWBytes);
#pragma unroll
          for (int kk = 0; kk < 128 / 32; ++kk) {  // 32 bytes of K a step: k16 bf16, k32 e4m3
            // both K-major, 128-byte rows, 8-row swizzle atoms 1024 B apart
            const uint64_t desc_x = make_desc_sw128(x_base + kk * 32, 16, 1024);
#pragma unroll
            for (int s = 0; s < MSUB; ++s) {
              const uint64_t desc_w = make_desc_sw128(w_base + s * 64 * 128 + kk * 32, 16, 1024);
#if DWG_FP8
              wgmma_m64k32<NTOK, TIN>(acc[s], desc_w, desc_x, 1);
#else
              wgmma_m64k16<NTOK, 0, TIN>(acc[s], desc_w, desc_x, 1);
#endif
            }
          }
        }
        wgmma_commit();
#pragma unroll
        for (int s = 0; s < MSUB; ++s) fence_accumulators(acc[s]);
        wgmma_wait<1>();  // the previous stage's group is done reading its slot
#pragma unroll
        for (int s = 0; s < MSUB; ++s) fence_accumulators(acc[s]);
        if (kt > kb) release(last_slot);
        last_slot = slot;
        if (++slot == STAGES) {
          slot = 0;
          phase ^= 1u;
        }
      }
      wgmma_wait<0>();
#pragma unroll
      for (int s = 0; s < MSUB; ++s) fence_accumulators(acc[s]);
      release(last_slot);  // a piece holds one k-block at least
#if TRACE && DYN
      t_mma = globaltimer_ns();  // the last piece's stands
#elif TRACE
      if (i >= end) t_mma = globaltimer_ns();  // the run's last piece
#endif
#if DYN_PUB
      }
#endif

#if DYN
      // The parts of tile t in a fixed order: its static head's (units s_first.. of the head's runs; none with K0 = 0),
      // then its tail's D chunks; a tile of one part (K0 = k_blocks in one run, or one chunk and no head) is written
      // directly. The static head's first part stores into the tile's slot (it may be a piece in the middle of its
      // unit's run: a whole head), every later one began its unit's run (its slot 0, as with DYN 0); each chunk
      // into its own slot. The last to arrive sums them in that order whoever it is and whichever unit took which
      // chunk: the same bits every run.
      int s_first;
      const int n_static = head_parts(t, s_first);
      const int n_parts = n_static + D;
      if (n_parts > 1) {
        auto part_at = [&](int pi) {
          float4* s0 = pi >= n_static ? dyn_slots + (unit_tiles + static_cast<long long>(t) * D + (pi - n_static)) * kSlotF4
                       : pi == 0      ? dyn_slots + static_cast<long long>(t) * kSlotF4
                                      : partials + static_cast<long long>(2 * (s_first + pi)) * kSlotF4;
          return s0 + consumer * MSUB * kSliceF4 + local_tid;
        };
        const int me = chunk >= 0 ? n_static + chunk : g - s_first;
        float4* mine = part_at(me);
#if DYN_PUB
        if (chunk != kSumTask) {  // (a sum task's `mine` is never written)
#endif
#else
      if (kb != 0 || ke != k_blocks) {
        // A part of a split tile: every part stores its partial and counts on the tile's counter; the last to arrive
        // sums the parts in part order (its own from registers, the same values) and writes the tile.
        const int first = run_owner(static_cast<long long>(t) * k_blocks, total, units);
        const int last = run_owner(static_cast<long long>(t) * k_blocks + k_blocks - 1, total, units);
        // unit c's part of tile t: its run's first piece (slot 0) when its run begins inside tile t, as every part's
        // after the first does; else its run's last piece (slot 1), which only the first part can be. Each CTA of
        // the unit its own two slots.
        const int first_which = run_begin(first, total, units) == static_cast<long long>(t) * k_blocks ? 0 : 1;
        auto part_at = [&](int c) {
          return partials + static_cast<long long>(2 * (c * CLUSTER + rank) + (c == first ? first_which : 0)) * kSlotF4 +
                 consumer * MSUB * kSliceF4 + local_tid;
        };
        float4* mine = part_at(g);
#if FIXED_SUM
        int* counter = workspace + cta_tile * CONSUMERS + consumer;
        if (g != first) {  // a part that began its run here: store, count, go on (only the first part waits)
#endif
#endif
#pragma unroll
        for (int s = 0; s < MSUB; ++s)
#pragma unroll
          for (int j = 0; j < kAccum / 4; ++j)
            mine[s * kSliceF4 + j * 128] =
                make_float4(acc[s][4 * j], acc[s][4 * j + 1], acc[s][4 * j + 2], acc[s][4 * j + 3]);
#if DYN_PUB
          // every thread's partial stored before the count's release; the producer counts it on the tile's counter
          named_barrier_sync(1 + consumer, 128);
          ++n_stored;
          if (local_tid == 0) st_release_cta_shared(&stored[consumer], n_stored);
          continue;
        }
        // a sum task: the producer's count found every part in (its atomic acquired them, its arrive on this slot
        // released that to this warpgroup's wait)
#elif FIXED_SUM
          named_barrier_sync(1 + consumer, 128);  // every thread's partial before the release
          if (local_tid == 0) red_add_release_gpu(counter, 1);
          continue;
        }
        // the tile's first part, its run's last piece: every other part in (they began their runs, so they wait on
        // nothing: no cycle with every CTA resident), acquired before every thread reads their partials (FIXED_SUM 2:
        // unless they were all in FIXED_LEAD k-blocks ago, the first of them loaded then)
        if (!have) {
          if (local_tid == 0)
            while (ld_acquire_gpu(counter) != last - first) __nanosleep(32);
          named_barrier_sync(1 + consumer, 128);
        }
#else
        int* counter = workspace + cta_tile * CONSUMERS + consumer;
        named_barrier_sync(1 + consumer, 128);  // every thread's partial before the release
        if (local_tid == 0) arrived[consumer] = atom_add_acq_rel_gpu(counter, 1);
        named_barrier_sync(1 + consumer, 128);  // the acquire before every thread's reads
        const int before = arrived[consumer];
        named_barrier_sync(1 + consumer, 128);  // every thread has read the word before the next piece writes it
#if DYN
        if (before != n_parts - 1) continue;  // not the last part: the last one writes the tile
#else
        if (before != last - first) continue;  // not the last part: the last one writes the tile
#endif
#endif
        // the sum in part order whoever is last: ((0 + p_first) + ...) + p_last, every part (this one's too: stored
        // above, read back by the thread that wrote it) loaded from its slot, kSumBatch parts' float4s at once (one
        // L2 round trip for them), added into the zeroed accumulators
        int pre_parts = 0;  // (FIXED_SUM 2: the parts loaded before, added first)
#if FIXED_SUM
        // (FIXED_SUM: this part's own accumulators, then the units first + 1 to last: (p_first + ...) + p_last)
        const int p_begin = first + 1, p_end = last + 1;
#if FIXED_SUM == 2
        if (have) {
          pre_parts = last - first < kSumBatch ? last - first : kSumBatch;
#pragma unroll
          for (int u = 0; u < kSumBatch; ++u) {
            if (u >= pre_parts) break;
#pragma unroll
            for (int s = 0; s < MSUB; ++s)
#pragma unroll
              for (int j = 0; j < kAccum / 4; ++j) {
                acc[s][4 * j] += pre[u][s][j].x;
                acc[s][4 * j + 1] += pre[u][s][j].y;
                acc[s][4 * j + 2] += pre[u][s][j].z;
                acc[s][4 * j + 3] += pre[u][s][j].w;
              }
          }
        }
#endif
#else
#pragma unroll
        for (int s = 0; s < MSUB; ++s)
#pragma unroll
          for (int r = 0; r < kAccum; ++r) acc[s][r] = 0.0f;
        // (DYN 1: parts 0 to n_parts - 1; else the units first to last)
#if DYN
        const int p_begin = 0, p_end = n_parts;
#else
        const int p_begin = first, p_end = last + 1;
#endif
#endif
        for (int c0 = p_begin + pre_parts; c0 < p_end; c0 += kSumBatch) {
          float4 q[kSumBatch][MSUB][kAccum / 4];
#pragma unroll
          for (int u = 0; u < kSumBatch; ++u) {
            if (c0 + u >= p_end) break;
            const float4* part = part_at(c0 + u);
#pragma unroll
            for (int s = 0; s < MSUB; ++s)
#pragma unroll
              for (int j = 0; j < kAccum / 4; ++j) q[u][s][j] = ld_cg_f4(part + s * kSliceF4 + j * 128);
          }
#pragma unroll
          for (int u = 0; u < kSumBatch; ++u) {
            if (c0 + u >= p_end) break;
#pragma unroll
            for (int s = 0; s < MSUB; ++s)
#pragma unroll
              for (int j = 0; j < kAccum / 4; ++j) {
                acc[s][4 * j] += q[u][s][j].x;
                acc[s][4 * j + 1] += q[u][s][j].y;
                acc[s][4 * j + 2] += q[u][s][j].z;
                acc[s][4 * j + 3] += q[u][s][j].w;
              }
          }
        }
#if !DYN_PUB
        if (local_tid == 0) *counter = 0;  // every part is in: ready for the next launch
#endif
      }

      // Epilogue, one m64 slice at a time: acc[s][4j + r] is weight row 16 warp + lane / 4 + 8 (r / 2) of the slice,
      // token 8 j + 2 (lane % 4) + r % 2; into the staging tile as C's layout has it (token rows of 64 weight
      // columns), then 16-byte stores of each token row's 64 columns.
#pragma unroll
      for (int s = 0; s < MSUB; ++s) {
        const int row0 = cta_tile * kBW + (consumer * MSUB + s) * 64;  // C's column of the slice's first weight row
#pragma unroll
        for (int j = 0; j < NTOK / 8; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int w = 16 * warp + lane / 4 + 8 * (r / 2), tok = 8 * j + 2 * (lane % 4) + r % 2;
            *reinterpret_cast<TOUT*>(my_staging + tok * kStagingStride + w * 2) =
                __float2bfloat16_rn(scale * acc[s][4 * j + r]);
          }
        named_barrier_sync(1 + consumer, 128);  // the slice's tile written
        for (int q = local_tid; q < NTOK * 8; q += 128) {
          const int tok = q / 8, chunk = q % 8;
          const int col = row0 + chunk * 8;
          if (tok < M && col < N)  // N % 8 == 0: a chunk is wholly inside or wholly past
            *reinterpret_cast<float4*>(C + static_cast<long long>(tok) * N + col) =
                *reinterpret_cast<const float4*>(my_staging + tok * kStagingStride + chunk * 16);
        }
        named_barrier_sync(1 + consumer, 128);  // the tile read before the next slice or piece writes it
      }
    }
#if TRACE
    if (local_tid == 0) {
      unsigned long long* rec = reinterpret_cast<unsigned long long*>(partials + static_cast<long long>(gridDim.x) * 2 *
                                                                                   kSlotF4) +
                                (static_cast<long long>(blockIdx.x) * CONSUMERS + consumer) * 5;
      rec[0] = t_start;
      rec[1] = t_first;
      rec[2] = t_first ? t_mma : 0;
      rec[3] = globaltimer_ns();
      rec[4] = sm_id();
    }
#endif
  }
#if CLUSTER > 1
  // The peer may still multicast into our slots and arrive on our empty barriers: no CTA leaves before both are done.
  cluster_sync();
#endif
}
