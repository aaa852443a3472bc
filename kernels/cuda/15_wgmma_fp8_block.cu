// Stage 15: wgmma_fp8_block -- stage 13's FP8 wgmma GEMM with DeepSeek-V3's block scales (sm_90a).
//
// What changes over stage 13 (wgmma_fp8, one FP32 scale per tensor):
// * Block scales, as DeepSeek-V3 quantizes (measure.fp8_scaling=block, gemmlab/fp8.py): A (activations,
//   M x K) has one FP32 scale per row and 128-wide block of K, B (weights, stored N x K) one per 128 x 128
//   block. The launcher passes them after the tensor maps in the layouts cuBLASLt's block-scaled kernel
//   reads on Hopper (gemmlab.fp8.cublaslt_scale_layout; DeepGEMM's "TMA-aligned" A scales are the same):
//   scale_a k-block-major, each k-block's M scales contiguous, rows padded to a multiple of 4 (16 bytes):
//   scale_a[kb * roundup(M, 4) + m]; scale_b n-block-major: scale_b[nb * roundup(ceil(K/128), 4) + kb].
// * Promotion every 128 of K, DeepGEMM's recipe: each k-block (BK = 128 = the scale block) is multiplied
//   into a fresh register accumulator (wgmma with scale-d 0 on its first k32 step), then the consumer
//   adds scale_a[row, kb] * scale_b[nb, kb] * partial to its FP32 main accumulator with FFMAs. The
//   tensor cores' FP8 accumulation (~14 bits of mantissa) thus only ever sums 128 products; the sum
//   over K is a true FP32 one.
// * PROMOTE_OVERLAP 1: two partial accumulators alternate, so the promotion of k-block kb runs on the
//   CUDA cores while the wgmma of kb + 1 runs on the tensor cores (wgmma.wait_group 1, not 0). DeepGEMM's
//   kernel waits for each k-block (wait_group 0) and overlaps across its two consumer warpgroups
//   instead; PROMOTE_OVERLAP 0 is that.
// * Scales (SCALE_SMEM 0) are plain loads by the consumers from global memory, issued one k-block ahead
//   of their use so that the load latency hides behind a k-block of wgmma; SCALE_SMEM 2 has the
//   producer's TMA thread bulk-copy (cp.async.bulk) each k-block's BM scales of A (contiguous in the
//   k-block-major layout: one 512-byte copy) and the 16 bytes of B's that hold its scale into the slot
//   beside the tiles, on the slot's full barrier, as DeepGEMM TMA-loads its A scales with each stage.
// * 128 x 128 tiles by default (stage 13: 128 x 256): the partials double the accumulator registers,
//   and BN = 256 in one piece would need 128 + 2 x 128 of them per thread; BN <= 128 also keeps a tile inside one
//   128-column block of B, so one B scale per k-block (DeepGEMM's BLOCK_N = 128 case). 128 x 64 where
//   128-wide tiles fill the persistent grid's waves poorly, 128 x 192 (96 + 96 accumulators, two B scales a
//   k-block) or 128 x 256 (in two 128-column halves through one 64-register partial) where their waves cost
//   less: the YAML's BN 0 is chosen per point (BN below).
//
// Techniques, each a define (tune_fp8_block in .ci/h200-session.sh runs its FP8_BLOCK_SWEEP;
// tests/test_hopper_fp8_block.py builds every entry without spills). Measured: session10b, session14c-e,
// session15. Defaults (the YAML's, since session15): SCALE_SMEM 2, STAGES 5, PROMOTE_OVERLAP 0:
// 87.9-94.9% of cuBLASLt's block-scaled kernel interleaved at the 4 tune shapes (SCALE_SMEM 2 with
// PROMOTE_OVERLAP 1: 86.0-91.5; the consumers' own loads, SCALE_SMEM 0 at 6 stages: 78.6-89.7), all
// measured at BN 128; BN by waves (the YAML's BN 0, after session15e) keeps 128 at three of them and
// takes 64 at 1024 x 2112 x 7168, where {BN:64} measured 100.1% (session15b); as the default there 99.4%
// against 87.8% for {BN:128} beside it (session16). SCALE_READ 1 since session20b: 106.5% against 100.4% at
// 1024 x 2112 x 7168 (BN 64), the 128-wide tune shapes within 1.4 points of SCALE_READ 0 beside it. SCALE_READ 3
// with UNIFORM_A 1 since session23b: DeepSeek-V3 at M >= 1024 91.9-129.2% of cuBLASLt (geomean 106.2) against
// 87.6-125.8 (102.1) for the previous defaults in the run before it; DESC_STEP 2 since session23e: 92.8-129.4
// (108.1) against 92.5-134.0 (106.6) for {DESC_STEP:0} in the run before it.
//   define           what it does
//   PROMOTE_OVERLAP  1: two partial accumulators, promotion overlaps the next k-block's wgmma; 0: one,
//                    wait_group 0 and promote (DeepGEMM's: the two consumer warpgroups overlap each
//                    other's promotion instead)
//   STAGES           shared-memory ring depth (6 fit with the TMA-store epilogue at 128 x 128 without
//                    the scales in the slots; 5 with them)
//   EPI_TMA          1: stmatrix -> swizzled staging tile -> TMA store (stage 13's); 0: direct stores
//   EPI_BOXES        (EPI_TMA 1) 64 x 64 boxes of C staged per round (stage 12's); 0: all of a consumer's at once (the
//                    measured kernel, its code kept apart: the rounds' loop with one round compiles to other register
//                    numbers at 192 and 256). 1 halves the staging tiles at 128 (16 KB for both consumers, not 32) and
//                    quarters them at 256, which makes room for a stage more at every width: 6 at 64 and 128, 5 at 192,
//                    4 at 256 (the YAML's STAGES rule); each round waits for the previous store to have read its box.
//                    Why: moe_router at 4096 tokens and shared_gate_up at 1024 (94.9 and 97.5% of cuBLASLt, session24b)
//                    stream 28-56 k-blocks a unit with 5 and 3 stages in flight. Measured (session27, % of cuBLASLt
//                    against the defaults of the run before): at 256 wide, 4 stages, it won everywhere (shared_gate_up
//                    100.2 / 98.1 and 107.7 / 103.6 at 1024 / 4096 tokens, shared_down +0.4 to +0.6), at 192 wide it
//                    lost 5-14 points, at 128 and 64 mixed: the YAML's rule takes 1 at BN 256 only (session27c: shared_gate_up
//                    at 1024 tokens 101.1 / 97.7 against EPI_BOXES 0 between two runs of the rule)
//   BM               128 (two m64 consumer warpgroups) or 64 (one: small M, DeepGEMM's BLOCK_M 64;
//                    with CONSUMER_REGS 240: at 232 ptxas spills 32 bytes) or 192 (three: each warpgroup's
//                    promotion behind two others' wgmmas; 512 threads leave 128 registers a thread at launch,
//                    {BM:192,BN:128,CONSUMER_REGS:160,PRODUCER_REGS:24,STAGES:4} builds without spills). Why
//                    not more: the wgmma probe with 3 warpgroups runs at the 2's rate (session22h: 89.4-89.8% of
//                    the dense peak at the clock, N 128 and 192); that build ran at 91.6-97.5% of cuBLASLt at
//                    the three large tune shapes against the defaults' 94.0-100.0 beside it, 116.1 against
//                    106.6 at 1024 x 2112 x 7168 (102 tiles: one wave); at moe_router's 4096 tokens (44 tiles split in 3:
//                    132 units, a sixth fewer operand bytes a FLOP) 83.4 against the defaults' 92.3 (session24c); an override
//   BN               128, 64, 192, 160 or 256 columns per tile (wgmma N; 64 doubles the tiles: fuller last waves; 192 straddles
//                    two of B's 128-column scale blocks: from a block boundary 128 + 64 columns, from 64 past one
//                    64 + 128, so each k-block has two B scales, both bulk-copied into the slot, and the columns
//                    64-127 take the first or the second by the tile's parity; SCALE_SMEM 2 and PROMOTE_OVERLAP 0
//                    only, 4 stages with the TMA-store epilogue: DeepGEMM's unaligned BLOCK_N). 192: a third more
//                    work a tile for the same per-k-block costs (the barrier waits, the scale copies and reads, the
//                    producer's issue) and a sixth fewer shared-memory bytes per FLOP. Measured (session21, % of
//                    cuBLASLt interleaved, DeepSeek-V3 at M >= 1024, {BN:192,STAGES:4} against the defaults in the
//                    run before): 100.0-107.8 against 89.0-98.2 at dense_gate_up and attn_q_b (the same waves or
//                    fewer), 120.9 against 111.8 at attn_kv_b t4096, 100.2 against 89.3 at attn_qkv_a t4096 (3 waves
//                    against 5), 90.6-99.1 against 86.6-94.6 at the 7168-wide t4096 ones (10 against 14); lost where
//                    its waves are not fewer (shared_gate_up t1024 61.6 against 87.6, the 7168-wide t1024 ones 82-92
//                    against 89-93, moe_router). A 192-wide tile takes ~4/3 of a 128-wide one's time (1.31-1.37 at
//                    full waves). The YAML's BN 0 means by waves: 192 (unsplit, m >= BM, where the build takes it)
//                    iff its tiles take more than one wave and 4 x waves(192) < 3 x waves(128) and 5 x waves(192) <
//                    3 x waves(64) (88 tiles of 192 on 132 SMs lost to 264 of 64: 100.2 against 105.3); the
//                    defaults with that rule (session21b, 21d, 21e): 87.6-123.5% of cuBLASLt at M >= 1024, geomean
//                    99.4-99.7 (95.1-95.2 before it). 160 (an override, {BN:160}; 5 stages, its first 128 columns
//                    of C by TMA store, the last 32 from registers; the split at 32, 64, 96 or 128 columns): 123.0
//                    against 106.4 at attn_qkv_a t1024 (one wave of 112 tiles), elsewhere under the defaults: a
//                    160-wide tile took about a 192-wide one's time (87.0 against 88.3 at attn_o t1024 with 3
//                    waves against 4; session21e), all of C from registers cost ~10 points more (session21d).
//                    Else the point_defines pass 64 iff 4 x waves(64) < 5 x waves(128),
//                    waves = ceil(tiles / device.sm_count) (a 64-wide tile costs ~0.8 of a 128-wide one:
//                    675-686 against 1028-1056 TFLOP/s at the large tune shapes, session15b; {BN:64} at
//                    1024 x 2112 x 7168, 264 tiles for 136: 100.1% of cuBLASLt), so nvcc never sees BN 0.
//                    Below one row of tiles (m < BM) 64 iff 4 x tiles(128) <= sm_count: there B's stream sets
//                    the time, and 64 won at 2-32 tiles of 128 and lost at 56 (session16 against session15b)
//                    An override {BN:64} or {BN:128} builds that width at every point. 256 (session23; by waves since
//                    session24, where its waves x 37/20 cost less than every other width's): 128 x 256 tiles, each k-block's wgmmas in two 128-column
//                    halves through one m64n128 partial of 64 registers (half 0 issued, waited for, promoted with B's
//                    first scale, then half 1 with the second), so the 128 accumulator registers fit beside it as BN
//                    192's 96 + 96 do; 3 stages with the TMA-store epilogue (211 KB). Why: a 128-wide k-block still
//                    takes 647 cycles against cuBLASLt's 609 with L2 throughput at 84% (session23c), and a 256-wide
//                    tile loads A once for twice the columns: 48 KB a k-block for two 128-wide tiles' work, not 64.
//                    WG_ORDER 0, DIAG 0 only (split by an override alone: {BN:256,SPLIT_K:4}, SPLIT_KEEP below;
//                    {BN:256,CLUSTER_M:2}: each CTA multicasts a 128-row half
//                    of B's tile, a third fewer operand bytes a FLOP; an override, not taken by waves: session24c
//                    93.9 / 99.3% of cuBLASLt at 1024 / 4096 x 4096 x 7168 against 97.6 / 103.4 unclustered). Its loop is its own: with SCALE_READ 3 the next
//                    k-block's slot waited for, its scales read and its descriptors built under the second half's
//                    wgmmas; with any other SCALE_READ at the k-block's top, after its slot's wait (1's place); its
//                    descriptors stepped (DESC_STEP 1's) whatever DESC_STEP says. Measured (session24, {BN:256} with
//                    the top-of-k-block reads, % of cuBLASLt interleaved, against the defaults beside it): shared_gate_up
//                    95.7 / 92.7 and 103.7 / 99.4 at 1024 / 4096 tokens, shared_down 101.5 / 97.0 and 108.8 / 103.7,
//                    dense_gate_up 103.5 / 107.5 and 104.3 / 108.0 (192's waves cost less there). SCALE_READ 3's loop
//                    (session24b, tune shapes): 105.2 / 103.9 / 108.6 / 101.3 against the top-of-k-block reads' 103.0 /
//                    101.7 / 108.4 / 98.5; the defaults with it by waves 94.9-129.0% of cuBLASLt at DeepSeek-V3 M >= 1024
//                    (geomean 109.5, 16 of 18 at or above 100)
//   SCALE_SMEM       3: the producer's warps 1..SCALE_WARPS copy each k-block's scales into the slot with
//                    cp.async (16 bytes a lane: the tile's 128 A scales in one instruction of a warp, by the
//                    load/store unit, not the TMA engine, whose queue they delayed in SCALE_SMEM 2), then
//                    arrive on the slot's full barrier when their copies land (cp.async.mbarrier.arrive).
//                    Measured (session15d, % of cuBLASLt at the 4 tune shapes): 73.4-82.2 (2 warps 71.0-80.8,
//                    with PROMOTE_OVERLAP 1 86.7-92.4) against SCALE_SMEM 2's 87.6-94.9: not better
//                    2: the producer's TMA thread bulk-copies each k-block's scales (BM of A's, 16 bytes of
//                    B's) into the slot beside its tiles, counted in the slot's expect_tx; the consumers
//                    read them from shared memory after their wait on the full barrier. 1: the producer's
//                    warps 1..SCALE_WARPS gather them with loads and stores and arrive on the slot's full
//                    barrier with their 32 lanes. 0: the consumers load them from global memory one
//                    k-block ahead. Why: ncu (session14b, 4096 x 7168 x
//                    16384) put stage 15 at 43-49% of the tensor pipe, its warps' top stall the long
//                    scoreboard (3.7 per issue), where stage 13 with the same 128 x 128 x 128 tiles and 6
//                    stages but no scales reached 87% (1423 TFLOP/s under ncu; cuBLASLt's block-scaled
//                    nvjet 128x128 kernel 81%). Needs STAGES <= 5 at 128 x 128 (6 + the scales: 228 KB).
//                    Measured with one warp gathering serially (session14c, 89a211d): 34-51% of cuBLASLt
//                    against the default's 59-78%: the gathers (a row a load, one L2 round trip each) took
//                    longer than the consumers' k-block, so the consumers waited on the full barrier
//                    (measured then on the row-major (M, k-blocks) grid: a row a sector; the k-block-major
//                    layout now makes a warp's 32 rows one 128-byte line)
//   SCALE_COPY_FIRST (SCALE_SMEM 2) 1: a k-block's scale copies issued before its tiles' loads, 0: after.
//                    Measured (session15c): 71.1-82.9% of cuBLASLt against 87.8-95.0: the small copies ahead
//                    delay the tiles. There too (check off): the defaults 88.6 / 90.1, not reading the copied
//                    scales (DIAG 1) 92.4 / 95.1, nothing copied or loaded 97.9 / 99.3: the copies cost ~5
//                    points, reading them ~4; ncu: 70.7% of the tensor pipe (cuBLASLt 81.0%)
//   SCALE_WARPS      (SCALE_SMEM 1) 1..3 of the producer's idle warps gather, the k-blocks in turn, two loads
//                    of a lane in flight at a time. Not yet measured: session14e ran it with PRODUCER_REGS
//                    48, past the CTA's launch registers, and every launch hung in setmaxnreg (each point
//                    killed by its worker's timeout); the static_assert now refuses such counts. Measured
//                    (session15, 3 warps, k-block-major scales): 72.2-90.2% of cuBLASLt
//   SCALE_AHEAD      2: the consumers load a k-block's scales two k-blocks before its promotion (1: one).
//                    Measured (session14d, % of cuBLASLt interleaved, 2 against 1): 68.4-83.7 against
//                    59.3-78.3 at the 4 tune shapes
//   DIAG             timing diagnostics, wrong results by design (measure.check=false; the rows say
//                    check off and the analysis leaves them out): 1 the scales not read (all 1; SCALE_SMEM
//                    still copies them), 2 no promotion. Measured (session14d, 4096 x 7168 x 16384 and 4096 x 36864 x 7168, % of
//                    cuBLASLt interleaved): DIAG 1 98.1-101.7 (either PROMOTE_OVERLAP), DIAG 2 106.5-110.0 (noisy),
//                    the real kernel 58.9-75.1: the promotion's FFMAs cost ~8 points, the consumers' scale
//                    loads 25-40 (they are pending registers when the next k-block's wgmma fence issues;
//                    measured then with SCALE_SMEM 0 on the row-major grid)
//   GROUP_M          tile rows per group of the persistent grouped raster (L2 reuse; with clusters: rows of
//                    cluster tiles)
//   CLUSTER_M        2: 2-CTA clusters along M with B multicast, stage 12's technique (its CLUSTER_M).
//                    Measured (session16b, correct at every edge of its GPU test, % of cuBLASLt interleaved):
//                    70.0-80.9% at the three large tune shapes against the defaults' 88.3-94.8, 94.3 against
//                    99.2 at 1024 x 2112 x 7168; on DeepSeek-V3's projections 3-30 points under the defaults
//                    at every one: not taken (the YAML's 1 is the measured kernel, the same SASS as before
//                    the define; ncu, session17b, 4096 x 7168 x 16384: 932 against 807 us at a higher clock, 1.71 against
//                    1.56 GHz, with less L2 traffic, 59 against 76% of its throughput, and barrier stalls 3.86
//                    against 1.05 per issue: they lose to waiting for both CTAs' consumers to release a slot). Both
//                    CTAs of a cluster take vertically adjacent tiles (the schedule walks cluster tiles in the
//                    GROUP_M raster) and need the same BN x 128 tile of B each k-block: each loads BN/2 rows of
//                    it (the YAML's B box is BN/CLUSTER_M rows) and multicasts them into the same place of both
//                    CTAs' slots, so each slot's full barrier still expects all of B; A and A's scales stay per
//                    CTA; B's 16 bytes of scales (the same n-block for both) are copied by each CTA for itself,
//                    not multicast. A slot is refilled only when the consumers of both CTAs released it (the
//                    empty barrier counts kConsumers x CLUSTER_M arrivals, the release a plain remote arrive at
//                    CTA scope: stage 12 measured the cluster-scope one, fenced with MEMBAR.ALL.GPU, at 57-65%
//                    of cuBLAS). A cluster's second CTA may get a tile wholly past M (M <= BM): it loads zeros,
//                    copies no A scales, stores nothing, and keeps the barrier protocol. Grid: a multiple of 2,
//                    <= SMs. Predicted: B's traffic out of L2 halved (operand bytes per CTA tile 128 + 64 instead
//                    of 128 + 128 at 128 x 128: 171 instead of 128 FLOP/B modeled), a few points at the large
//                    shapes where stage 15 runs at 87-98% of cuBLASLt, whose block-scaled kernel (nvjet 128x128)
//                    runs its 128 x 128 tiles in 2-CTA clusters with TMA multicast. Builds for every SCALE_SMEM
//                    mode, BN 64 and BM 64; emulated on the CPU since session25 (the driver runs a cluster's two
//                    blocks together: multicast halves, remote releases), checked on the H200 by
//                    tests/test_gpu_hopper_fp8_block.py
//   SPLIT_TAIL       (SPLIT_K > 1) 1: only the last, partial wave's tiles are split (tiles % grid of them, all
//                    where fewer than the grid), each into min(SPLIT_K, grid / tail, k-blocks / 8) runs; the
//                    waves before it walk whole tiles, unit t < tiles - tail being tile t (stream-K's data-
//                    parallel + split hybrid); the runs' partials are summed as SPLIT_K's below, the workspace's
//                    slices counted from the tail's first tile. Why: ncu (session22b, 4096 x 7168 x 16384 at BN
//                    192: 1216 tiles, 9.2 waves) counted SM active cycles at 87% of the kernel's, while a tile
//                    ran at the wgmma probe's rate (930 cycles a k-block against the probe's 933). The YAML's -1
//                    chooses it by a cost model (192-wide tiles, a tail of 2-4 runs of 16 k-blocks at least).
//                    Measured (session22e, {SPLIT_K:4,SPLIT_TAIL:1,BN:192} against the defaults in the run
//                    before it, % of cuBLASLt's block-scaled kernel): attn_o 103.8 / 88.8 at 1024 tokens (40 of
//                    304 tiles in 3 runs), 93.9 / 90.3 at 4096 (28 of 1216 in 4); dense_down 104.1 / 88.8 and
//                    94.1 / 90.9; shared_gate_up at 4096 93.5 / 90.5; lost where K is short or nothing split
//                    (the split build's own cost: attn_q_b 99.8 / 106.3 at 1024, unsplit). Before the split
//                    hand-over was told warp-uniform (cf94614) every split build paid ~10 points for it
//                    (session22d: the ring's descriptors in per-thread registers)
//   SPLIT_K          S > 1: split-K. Each tile's k-blocks are cut into S contiguous
//                    runs (balanced to one k-block; fewer runs where K has fewer k-blocks), one work unit each;
//                    the persistent schedule walks (tile, split) units, a tile's splits on neighbouring CTAs,
//                    each unit promoting its own k-blocks every 128 of K into its FP32 accumulator as before
//                    (the producer loads the tiles and copies the scales of those k-blocks only). Deterministic
//                    reduction, stage 14's protocol (stage 12's stream-K fixup, for S parts): each consumer
//                    warpgroup stores its FP32 partial (64 x BN) to the launcher's workspace (the YAML's
//                    workspace_bytes, zeroed once; last argument) and counts on its slice's counter (named
//                    barrier, then one acq_rel atomic at GPU scope, as CUTLASS's split-K semaphore); the split
//                    that arrives last sums the S stored partials in split order 0..S-1 (C's bits do not depend
//                    on the arrival order), resets the counter to 0 for the next launch and writes C through
//                    the epilogue. A slice wholly past M skips the workspace (its C rows are clipped). Grid:
//                    tiles x S units, at most the SMs; 16 bytes of static shared memory (each consumer's
//                    arrival word), the dynamic layout unchanged. With CLUSTER_M 2 (an override: the rule splits no
//                    clustered point; SPLIT_TAIL refused): a cluster's CTAs walk the same units, so B's multicast
//                    k-blocks are the same for both, and each hands over its own tile's slices (workspace tile: cluster
//                    tile x 2 + rank; a second CTA wholly past M skips the workspace as any slice past M).
//                    {CLUSTER_M:2,SPLIT_K:2} is cuBLASLt's configuration at moe_router's 4096 tokens (its row: tile
//                    128 x 128, split_k 2, cluster_shape 2 x 1, 23.9 us against the defaults' 25.2 interleaved; session24b): a
//                    quarter fewer operand bytes a k-block than the defaults' split (A 16 KB + B's half 8 KB). Emulated
//                    on the CPU at the split edges, both arrival orders; not yet measured (fp8_block_split)
//                    SPLIT_K 1 is the measured kernel (the same SASS; the workspace argument unread). The
//                    YAML's 0 chooses S per point: > 1 only where the tiles leave SMs idle in a single wave
//                    (of DeepSeek-V3's projections at 1024 and 4096 tokens moe_router alone: 16 / 64 tiles of
//                    128 x 128, now 32 x 4 units of 128 x 64 / 64 x 2 of 128 x 128 for 132 SMs), 12 k-blocks a
//                    split at least. Measured (session17, % of cuBLASLt's block-scaled kernel, interleaved,
//                    against {SPLIT_K:1} in the run after it): moe_router 123.8 against 77.5 at 1024 tokens,
//                    87.9 against 84.9 at 4096; at 64 tokens +7 to +60 points at four projections, -0.7 at
//                    attn_o, and -8 at shared_down with 8 k-blocks a split (hence the 12)
//   SPLIT_KEEP       (SPLIT_K > 1; read by split builds only) 1: the split that arrives last adds its own partial from
//                    its registers where the order of the sum allows, reading S - 1 partials back instead of S: the sum
//                    is ((p0 + p1) + p2) + ..., and IEEE addition commutes, so split 0 or 1 (holding one operand of the
//                    first addition) adds the other, then p2, p3, ... in order; any other split starts from p0 read back
//                    (not 0 + p0: a partial of -0 would become +0 and the bits would depend on the arrival order). C has
//                    SPLIT_KEEP 0's bits whichever split arrives last (tests/test_hopper_fp8_block.py, with operands
//                    whose order shows in C). Why: at moe_router's 4096 tokens (64 tiles of 128 x 128 split in 2, the
//                    default: 94.9% of cuBLASLt, session24b) a tile's summing split reads 64 KB of partials a consumer
//                    after its last k-block, one L2 round trip of 16 loads a thread a partial; with 2 splits it always
//                    keeps its own: one round trip and 4 MB of the ~133 MB the grid moves out of L2 fewer. With 128 x 256
//                    tiles split in 4 ({BN:256,SPLIT_K:4}: 32 tiles x 4 = 128 units of 14 k-blocks, each k-block 48 KB of
//                    operands for a 128 x 256 tile, ~86 MB for the grid against 117 MB of 128 x 128 x 2, the partials 128
//                    KB a split) it keeps its own when split 0 or 1 sums. Measured (session27): at moe_router's 4096
//                    tokens 99.7 / 93.9 and 99.3 / 91.6% of cuBLASLt against SPLIT_KEEP 0 (session27c, by rule: 101.2 and
//                    101.3 against 93.5 between); mixed where tiles split in 4. The YAML's rule keeps where split in 2.
//                    {BN:256,SPLIT_K:4} lost there (83.2; 82.2 keeping), as did split-K in 2-CTA clusters (84.9; 89.4)
//   WG_ORDER         1 (BM 128: two consumer warpgroups): they take turns issuing each k-block's wgmmas, by two
//                    named barriers (bar.sync before the issue, bar.arrive after it; FlashAttention-3's ping-pong
//                    between warpgroups): consumer 1 issues k-block use u after consumer 0 has, consumer 0 issues
//                    u + 1 after consumer 1 has issued u. Why: with PROMOTE_OVERLAP 0 each consumer waits for its
//                    k-block's wgmmas and then promotes; both wait on the same full barrier and issue together,
//                    so the tensor pipe, taking their wgmmas interleaved, finishes both at once and then idles
//                    while both promote (the promotion's ~8 points, DIAG 2). In turn, one promotes while the
//                    other's wgmmas run. Measured (session20, % of cuBLASLt interleaved at the 4 tune shapes):
//                    77.2 / 79.1 / 86.6 at the three large ones against the defaults' 87.9 / 89.7 / 94.2, 102.1
//                    against 99.7 at 1024 x 2112 x 7168 (BN 64); with PROMOTE_OVERLAP 1 79.4-86.4 and 102.4; on
//                    DeepSeek-V3's projections 77.5-89.5 at M >= 1024 save attn_kv_b, attn_qkv_a t1024 and
//                    moe_router (102.5-119.8). Not taken: the turns cost more than the in-phase promotion they
//                    were to hide (the wgmmas of the two warpgroups are not simply run in issue order; ncu,
//                    session20: the same promotion not reading the scales, DIAG 1, 789 against 816 us)
//   SCALE_READ       (PROMOTE_OVERLAP 0, SCALE_SMEM > 0) where the consumers read a k-block's scales from its slot: 0
//                    after issuing its wgmmas (the defaults up to session20b), 1 before them, right after the slot's full wait (DeepGEMM's
//                    place), 2 after waiting for them (then each consumer warp releases the slot after its own
//                    reads: the empty barriers count 4 arrivals a consumer). Why: ncu source counters (session20,
//                    4096 x 7168 x 16384, logs/ncu_source_*) put 7.4% of the warps' stall samples on the two FMULs
//                    of the scale product, which ptxas placed between the third and fourth wgmma of the k-block:
//                    the fourth's issue waited for the shared loads under the wgmmas' own shared-memory traffic.
//                    With 1 the loads go before the first wgmma, with 2 after the wait. Measured (session20b,
//                    % of cuBLASLt interleaved at the 4 tune shapes, against 0 beside it): 1 89.5 / 86.6 / 94.5 /
//                    106.5 against 89.5 / 88.0 / 94.8 / 100.4 (the three large ones at BN 128, 1024 x 2112 x
//                    7168 at BN 64), 2 85.7 / 82.6 / 92.1 / 105.8; on DeepSeek-V3's projections at M >= 1024
//                    (three runs in a row) 1 86.7-118.9% (geomean 94.9), 0 86.9-119.0 (94.2), 2 82.2-116.6
//                    (91.6). 1 was the default up to session23: it gains where the tiles are 64 wide (fewer wgmmas
//                    to hide the loads behind) and ties at 128. 3 (the default since session23b): the wait for k-block
//                    kb + 1's slot and the reads of its scales right after kb's wgmmas are issued, under them, so kb's
//                    promotion uses scales read a k-block before and kb + 1's issue follows the promotion with no
//                    barrier wait or shared load between (the turnaround a warpgroup's wgmmas must cover: the tensor pipe
//                    idled ~74 cycles a 128-wide k-block, session22b's ncu against the wgmma probe). Not with WG_ORDER
//                    (the YAML reads at 1 there). Measured (session23b, % of cuBLASLt interleaved, with UNIFORM_A 1):
//                    tune shapes at BN 128 95.8 / 93.9 / 98.7 / 93.6 against 1's 92.9 / 88.0 / 96.7 / 90.5; at the
//                    widths the waves choose 103.3 / 100.0 / 101.5 / 114.0 against 104.5 / 96.8 / 101.6 / 109.0;
//                    DeepSeek-V3 at M >= 1024 91.9-129.2 (geomean 106.2, 13 of 18 >= 100) against 87.6-125.8 (102.1,
//                    10) for the previous defaults and 82.2-126.5 (103.9, 12) for UNIFORM_A alone, in one call
//   UNIFORM_A        1: the consumer warpgroup's index read through a shuffle from lane 0 (hopper::warp_uniform), so
//                    ptxas knows it warp-uniform and computes A's wgmma descriptors in uniform registers: a 128 x 128
//                    k-block's loop 143 instructions against 149, no R2UR against 8, the first wgmma's descriptor
//                    no longer behind a per-thread chain. Measured (session23, tune shapes at BN 128, % of cuBLASLt
//                    interleaved): 94.6 / 88.0 / 96.9 / 90.9 against 89.3 / 86.9 / 95.0 / 86.7; at the widths the
//                    waves choose 104.1 / 96.7 / 101.9 / 109.8 against 99.8 / 94.3 / 99.2 / 106.3. The default since
//                    session23b, with SCALE_READ 3
//   DESC_STEP        1: a k-block's k32 steps take its first step's descriptors + 2 (32 bytes on in the start address
//                    field's 16-byte units; CUTLASS's descriptor iterator) instead of each built from its address;
//                    2 (with SCALE_READ 3; elsewhere as 1): also the next k-block's first descriptors built under this
//                    k-block's wgmmas, after its slot's wait, so the loop's top is the fence and four back-to-back
//                    QGMMAs (the ring index's modulo and the descriptor masks no longer between the promotion and the
//                    issue). Measured (session23e, % of cuBLASLt interleaved, 2 against 0): tune shapes at the widths
//                    the waves choose 107.6 / 104.1 / 103.5 / 121.4 against 103.1 / 100.3 / 101.5 / 113.5, at BN 128
//                    97.2 / 95.8 / 100.1 / 92.8 against 96.0 / 94.0 / 99.3 / 93.2; DeepSeek-V3 at M >= 1024 92.8-129.4
//                    (geomean 108.1) against 92.5-134.0 (106.6) in the run before it. 2 is the default since
//   SCALE_B_TILE     (SCALE_SMEM 2) 1: B's scales come once per work unit: the producer bulk-copies the unit's run of
//                    its n-block's row (whole 16-byte groups) with the unit's first slot, into one of two row
//                    buffers by the unit's parity, instead of 16 bytes with every k-block's slot (DeepGEMM loads B's
//                    scales once per tile too). One small TMA request a k-block fewer: the copies cost ~5 points
//                    (session15c). Safe to overwrite a buffer: where every unit has >= STAGES k-blocks, the
//                    producer's wait for unit j's first slot follows the consumers' release of unit j - 2's last,
//                    after their reads of its scales; elsewhere (or K past kBRowCap k-blocks) per k-block as before.
//                    Measured (session20c, % of cuBLASLt interleaved, against the defaults beside it): tune shapes
//                    89.2 / 88.8 / 93.2 / 107.3 against 89.0 / 86.8 / 94.9 / 106.4; DeepSeek-V3 at M >= 1024
//                    84.8-117.8 (geomean 93.8) against 87.2-119.6 (95.1) in the run before it: no gain, not taken
//                    (the one 16-byte request a k-block is not what the copies cost)
//   MAP_PARAMS       1: the three tensor maps by value (__grid_constant__ parameters the driver writes with the launch,
//                    gemmlab/gpu/tma.py; A's and B's prefetched by thread 0 while the barriers are set up), as stages 12, 13
//                    and 17 take them by default since session34c; 0: in a device buffer whose address is the parameter,
//                    which the copy engine first reads from DRAM after the timer's L2 flush (the measured kernel, every
//                    row of this stage). Predicted from stage 13 (fp8 4096: 106.5 / 106.6 against 104.3 / 104.4% of
//                    cuBLASLt, h200-2026-12-05/session34c/maps_fp8): +1..+2 points at DeepSeek-V3's 1024-token shapes
//                    (40-120 us), less at 4096 tokens. Not measured here yet (session stage maps_fp8_block)
// Not done (DeepGEMM has them): other BLOCK_N that straddle two B scale blocks (144, 160: their C boxes are not
// whole 64-column ones), FP32 output, grouped / masked MoE layouts, JIT specialisation on the shape (K is a run-time argument).
//
// Constraints: TIN = __nv_fp8_e4m3, TOUT = bfloat16; A row-major M x K, B stored row-major N x K
// (layout nt, `layouts: [nt]`); K % 16 == 0 (TMA: 16-byte row strides of the 1-byte operands; a partial
// last k-block is zero-filled by TMA and takes its own scale), N % 8 == 0 (16-byte rows of the bf16 C);
// any M. BK = 128 = the scale block; grid <= SM count (the static persistent schedule assumes every CTA
// resident), a multiple of CLUSTER_M. Last argument: the launcher's workspace (read with SPLIT_K > 1 only:
// counters + partials, the YAML's workspace_bytes; the kernel leaves the counters at zero). Shared memory (the same with clusters): STAGES*(BM + BN)*BK +
// EPI_TMA*(BM/64)*64*(EPI_BOXES or BN/64)*64*2 + 1 KB alignment + barriers (+ SCALE_SMEM: STAGES*(BM + 4)*4, BM + 8 at BN 160
// and 192): 196 KB for 5
// stages of 128 x 128 with the TMA-store epilogue and the scales (6 stages: 228 KB, past the 227 KB a block
// may have; 212 KB with EPI_BOXES 1).
//
// Modeled intensity (operand bytes per CTA tile, 1-byte elements; the scales add 4*BM + 4 bytes per
// 128 x (BM + BN) bytes of operands, under 1%): 2*BM*BN / ((BM + BN/CLUSTER_M) * 1 B) = 128 FLOP/B for 128 x 128
// (171 with CLUSTER_M 2: B multicast).
//
// Run it alone (cuBLASLt's block-scaled fp8 row is the baseline):
//   python run.py variant=[cublaslt,wgmma_fp8_block] precision=fp8 layouts=[nt] measure.fp8_scaling=block
//     sizes=llm sizes.model_names=[deepseek_v3] 'sizes.tokens=[64,1024,4096]'
// Debug aids as stage 12: GEMMLAB_DEBUG=1 turns a hung barrier wait into a printf and a trap.
#include "hopper/cluster_walk.cuh"
#include "hopper/ptx.cuh"
#include "hopper/wgmma.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 128
#endif
#ifndef STAGES
#define STAGES 5
#endif
#ifndef EPI_TMA
#define EPI_TMA 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef PROMOTE_OVERLAP
#define PROMOTE_OVERLAP 0
#endif
#ifndef SCALE_SMEM
#define SCALE_SMEM 2
#endif
// DIAG (timing diagnostics, wrong results by design: run them with measure.check=false): 1 the scales
// not loaded (all 1); 2 (with PROMOTE_OVERLAP 0) no promotion: the k-blocks chained in one accumulator
// as stage 13 does, no FFMAs
#ifndef DIAG
#define DIAG 0
#endif
// SCALE_AHEAD (PROMOTE_OVERLAP 1, SCALE_SMEM 0): the consumers load a k-block's scales this many k-blocks
// before its promotion (1: one, 2: two, a register pair more)
#ifndef SCALE_AHEAD
#define SCALE_AHEAD 1
#endif
// SCALE_COPY_FIRST (SCALE_SMEM 2): the producer issues a k-block's scale copies before its tiles' (0: after)
#ifndef SCALE_COPY_FIRST
#define SCALE_COPY_FIRST 0
#endif
// SCALE_WARPS (SCALE_SMEM 1): the producer's warps that stage the scales, taking the k-blocks in turn (1..3)
#ifndef SCALE_WARPS
#define SCALE_WARPS 1
#endif
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 40
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS 232
#endif
// CLUSTER_M: 1 no clusters (the measured kernel); 2: 2-CTA clusters along M, B's tile multicast to both
#ifndef CLUSTER_M
#define CLUSTER_M 1
#endif
// SCALE_READ (PROMOTE_OVERLAP 0, the scales in the slots): where the consumers read a k-block's scales: 0
// after issuing its wgmmas, 1 before them (after the slot's full wait), 2 after waiting for them, 3 a k-block
// ahead (the next slot's wait and reads under this k-block's wgmmas; the YAML's default). Elsewhere
// the scales are read where they were (SCALE_READ_AT 0): a k-block ahead with PROMOTE_OVERLAP 1, and
// SCALE_SMEM 0's global loads would be pending at the wgmma fence if read before it
#ifndef SCALE_READ
#define SCALE_READ 0
#endif
#if PROMOTE_OVERLAP || !SCALE_SMEM
#define SCALE_READ_AT 0
#else
#define SCALE_READ_AT SCALE_READ
#endif
// SCALE_B_TILE (SCALE_SMEM 2): 1 B's scales come once per work unit (the k-blocks' run of its n-block row,
// one bulk copy with the unit's first slot, into one of two row buffers by unit parity) instead of 16 bytes
// with every k-block's slot; where a unit has fewer k-blocks than STAGES or K more than kBRowCap k-blocks,
// per k-block as before
#ifndef SCALE_B_TILE
#define SCALE_B_TILE 0
#endif
// WG_ORDER (two consumer warpgroups): 1 they take turns issuing each k-block's wgmmas, consumer 0 first
#ifndef WG_ORDER
#define WG_ORDER 0
#endif
// SPLIT_K: 1 a work unit is a whole output tile (the measured kernel); S > 1: each tile's k-blocks cut into
// S contiguous runs, one unit each, the partials summed in split order by the tile's last split to arrive
#ifndef SPLIT_K
#define SPLIT_K 1
#endif
// SPLIT_TAIL (SPLIT_K > 1): 1 only the last, partial wave's tiles are split (up to SPLIT_K runs each, as many
// as fill the grid, kTailMinKBlocks k-blocks a run at least); the whole waves before it run whole tiles
#ifndef SPLIT_TAIL
#define SPLIT_TAIL 0
#endif
// EPI_BOXES (EPI_TMA 1): 64 x 64 boxes of a consumer's output staged per round of the TMA-store epilogue (stage 12's);
// 0: all of them at once (the YAML's rule below BN 256)
#ifndef EPI_BOXES
#define EPI_BOXES 0
#endif
// SPLIT_KEEP (SPLIT_K > 1): 1 the split that sums a tile keeps its own partial in its registers where the sum's order
// allows (it is split 0 or 1: p0 + p1 == p1 + p0), reading S - 1 partials back, not S; 0 reads all S (the YAML's rule
// keeps where a tile is split in 2)
#ifndef SPLIT_KEEP
#define SPLIT_KEEP 0
#endif
#ifndef MAP_PARAMS  // 1: the tensor maps by value (__grid_constant__ parameters); 0: in a device buffer (measured)
#define MAP_PARAMS 0
#endif
// UNIFORM_A, DESC_STEP (hopper/issue_path.cuh): A's descriptors in uniform registers; each k32 step's descriptors the
// first's advanced by 32 bytes, and with DESC_STEP 2 (and SCALE_READ 3) the next k-block's first ones built under this
// k-block's wgmmas, after its slot's wait
#include "hopper/issue_path.cuh"

namespace {

constexpr int kScaleBlock = 128;                  // DeepSeek-V3's quantization block along K (and N of B)
constexpr int kConsumers = BM / 64;               // consumer warpgroups, one m64 slice each
constexpr int kThreads = 128 * (1 + kConsumers);  // + the producer warpgroup
constexpr int kTileABytes = BM * BK;              // 1-byte elements: BM rows of 128 bytes
constexpr int kTileBBytes = BN * BK;              // BN rows (N) of 128 bytes (K)
constexpr int kStageBytes = kTileABytes + kTileBBytes;
constexpr int kOutChunks = BN / 64;               // 64-column boxes of C per consumer tile
constexpr int kCBoxBytes = 64 * 64 * 2;           // one TMA box of C: 64 rows x 64 bf16 columns
// EPI_BOXES boxes a round (0: all kOutChunks)
constexpr int kEpiBoxes = EPI_BOXES ? EPI_BOXES : kOutChunks;
constexpr int kStagingBytes = EPI_TMA ? kEpiBoxes * kCBoxBytes : 0;  // one consumer's kEpiBoxes boxes of 64 x 64
constexpr int kAccum = BN / 2;
// BN 256: a k-block's wgmmas in two 128-column halves through one partial of 64 registers (m64n128), each half
// promoted before the next is issued, so the accumulator's 128 registers and the partial's 64 fit as BN 192's do
constexpr int kHalves = BN == 256 ? 2 : 1;
constexpr int kPartial = kAccum / kHalves;
// BN 192: a tile straddles two 128-column scale blocks of B (its columns from n0 = 192 j: 128 + 64 when n0 is
// on a block boundary, 64 + 128 when it is 64 past one), so each k-block has two B scales; BN 160 likewise
// (n0 = 160 j: 128 + 32, 96 + 64, 64 + 96 or 32 + 128 columns)
constexpr bool kStraddle = BN > kScaleBlock;
constexpr int kBScaleRows = kStraddle ? 2 : 1;
// SCALE_SMEM: a slot's k-block scales beside its tiles: scale_a of the tile's BM rows, then the 16 bytes
// of scale_b's n-block row that hold the k-block's scale (SCALE_SMEM 2: one bulk copy, 16-byte aligned;
// SCALE_SMEM 1 stores the scale itself at its place in them); BN 192: then the 16 of the next n-block's row
constexpr int kScaleFloats = BM + 4 * kBScaleRows;
constexpr int kScaleBytes = SCALE_SMEM ? STAGES * kScaleFloats * 4 : 0;
// SCALE_B_TILE: two buffers of a unit's B scales (a row of up to kBRowCap k-blocks: K <= 32768)
constexpr int kBRowCap = 256;
constexpr int kBRowBytes = SCALE_B_TILE ? 2 * kBRowCap * 4 : 0;
// CLUSTER_M 2: each CTA of the cluster loads BN / CLUSTER_M rows of the slot's B tile (one TMA box, the YAML's
// B map) and multicasts them to the same place in every CTA's slot
constexpr int kBShareRows = BN / CLUSTER_M;
[[maybe_unused]] constexpr int kBShareBytes = kBShareRows * BK;

static_assert(BM == 64 || BM == 128 || BM == 192, "one to three consumer warpgroups of m64");
static_assert(BK == kScaleBlock, "a k-tile is one scale block: one promotion per k-tile");
static_assert(BN != 0, "BN 0 (by waves) is the YAML's: its point_defines pass 64, 128, 192 or 256, never 0");
static_assert(BN == 64 || BN == 128 || BN == 160 || BN == 192 || BN == 256,
              "BN 64 or 128 (inside one 128-column scale block of B) or 160, 192, 256 (across two: two B scales a k-block)");
// BN 256 is written for the plain persistent loop: whole tiles, no ordered turns, no diagnostics (with CLUSTER_M 2
// each CTA multicasts one 128-row half of B's tile: the halves' layout in the slot is the unclustered one)
static_assert(BN != 256 || (WG_ORDER == 0 && DIAG == 0), "BN 256: WG_ORDER 0 and DIAG 0");
// the TMA-store epilogue stores whole 64-column boxes of C: BN 160's last 32 columns go from registers
// BN 192 is written for the producer's bulk copies of the scales and the non-overlapped promotion (two partials
// of 96 registers with the accumulator's 96 would not fit), not for SCALE_B_TILE's row buffers
static_assert(!kStraddle || (SCALE_SMEM == 2 && PROMOTE_OVERLAP == 0 && SCALE_B_TILE == 0),
              "BN 160, 192: SCALE_SMEM 2, PROMOTE_OVERLAP 0 and SCALE_B_TILE 0");
static_assert(EPI_TMA == 0 || EPI_TMA == 1, "EPI_TMA is 0 or 1");
static_assert(kEpiBoxes >= 1 && kOutChunks % kEpiBoxes == 0, "EPI_BOXES divides the tile's whole 64-column boxes");
static_assert(PROMOTE_OVERLAP == 0 || PROMOTE_OVERLAP == 1, "PROMOTE_OVERLAP is 0 or 1");
static_assert(SCALE_SMEM >= 0 && SCALE_SMEM <= 3, "SCALE_SMEM is 0, 1, 2 or 3");
static_assert(SCALE_COPY_FIRST == 0 || (SCALE_COPY_FIRST == 1 && SCALE_SMEM == 2), "SCALE_COPY_FIRST: 0, or 1 with SCALE_SMEM 2");
static_assert(SCALE_SMEM != 2 || SCALE_WARPS == 1, "SCALE_WARPS is SCALE_SMEM 1's (2 has no gathering warps)");
static_assert(SCALE_WARPS >= 1 && SCALE_WARPS <= 3, "SCALE_WARPS: 1..3 of the producer's idle warps");
// A scale warp skips the uses of the others, so its parity wait on a slot's empty barrier must never be
// two phases ahead: its previous use (at most SCALE_WARPS back) waited for a release that, in ring order,
// comes after the one two phases back as long as SCALE_WARPS <= STAGES
static_assert(SCALE_WARPS <= STAGES, "SCALE_WARPS <= STAGES: a scale warp's parity wait stays within a phase");
static_assert(SCALE_AHEAD == 1 || (SCALE_AHEAD == 2 && PROMOTE_OVERLAP && !SCALE_SMEM), "SCALE_AHEAD: 1, or 2 with PROMOTE_OVERLAP 1 and SCALE_SMEM 0");
static_assert(DIAG == 0 || DIAG == 1 || (DIAG == 2 && !PROMOTE_OVERLAP && !SCALE_SMEM), "DIAG: 0, 1, 2 (PROMOTE_OVERLAP 0)");
static_assert(STAGES >= 2, "a ring needs two slots at least");
static_assert(WG_ORDER == 0 || WG_ORDER == 1, "WG_ORDER is 0 or 1");
// SCALE_READ 2 reads the slot's scales after the wait, so the slot is released by each warp after its reads: a
// warpgroup's single release would let the producer refill it under the other warps' reads
constexpr bool kReleasePerWarp = SCALE_READ_AT == 2;
static_assert(SCALE_READ >= 0 && SCALE_READ <= 3, "SCALE_READ: 0, 1, 2 or 3");
// SCALE_READ 3 waits for a slot before its turn: not with WG_ORDER's turns, which wait_full takes
static_assert(SCALE_READ_AT != 3 || WG_ORDER == 0, "SCALE_READ 3: WG_ORDER 0");
static_assert(UNIFORM_A == 0 || UNIFORM_A == 1, "UNIFORM_A: 0 or 1");
static_assert(DESC_STEP >= 0 && DESC_STEP <= 2, "DESC_STEP: 0, 1 or 2");
static_assert(SCALE_B_TILE == 0 || (SCALE_B_TILE == 1 && SCALE_SMEM == 2), "SCALE_B_TILE: 0, or 1 with SCALE_SMEM 2");
// WG_ORDER's two named barriers (1 and 2 are the consumers' own: the epilogue's and split-K's hand-over)
constexpr bool kOrdered = WG_ORDER && kConsumers == 2;
constexpr int kIssuedBar0 = 3;  // consumer 0 has issued its wgmmas of the current k-block
constexpr int kIssuedBar1 = 4;  // consumer 1 has issued its wgmmas of the current k-block
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "CLUSTER_M: 1 (no clusters) or 2 CTAs along M");
static_assert(SPLIT_K != 0, "SPLIT_K 0 (by rule) is the YAML's: its point_defines pass 1 or more, never 0");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 16, "SPLIT_K: 1 (no split) to 16 runs of k-blocks per tile");
// SPLIT_K with clusters: a cluster's CTAs walk the same units (the same k-blocks of B, multicast), each its own tile's
// slices in the workspace; the tail split is not written for them (its whole units would be cluster tiles)
static_assert(SPLIT_TAIL == 0 || CLUSTER_M == 1, "SPLIT_TAIL 1 with CLUSTER_M 2 is not written");
static_assert(SPLIT_TAIL == 0 || (SPLIT_TAIL == 1 && SPLIT_K > 1), "SPLIT_TAIL: 0, or 1 with SPLIT_K > 1 (its most runs a tile)");
static_assert(SPLIT_KEEP == 0 || SPLIT_KEEP == 1, "SPLIT_KEEP: 0 or 1 (read by split builds only)");
// SPLIT_TAIL: a tail tile's runs keep this many k-blocks at least (the last run's sum of the partials costs
// about as much as 2 k-blocks of wgmma per partial at BN 192: shorter runs would not pay for it)
#if SPLIT_TAIL
constexpr int kTailMinKBlocks = 8;
#endif
// a CTA's share of B starts on a 1024-byte swizzle atom (8 rows of 128 bytes): the 128B swizzle TMA writes there
// is the one the wgmma descriptor of the whole tile reads
static_assert(kBShareRows % 8 == 0, "B's tile splits across the cluster in whole 8-row swizzle atoms");
// setmaxnreg moves registers between the warpgroups inside what the launch gave the CTA: kThreads x the
// per-thread count __launch_bounds__(kThreads, 1) allows (65536 / kThreads, down to a multiple of 8: 168
// at 384 threads). Past it, setmaxnreg.inc waits for registers that never come: the kernel hangs (session14e:
// PRODUCER_REGS 48 with 2 x 232, 65536 > 64512)
constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * kConsumers <= kLaunchRegs * kThreads,
              "register file: the warpgroups' setmaxnreg counts past the CTA's launch registers (a hang)");

// Stages, the consumers' staging tiles, 1 KB to align to the swizzle period, full + empty barriers.
constexpr int kDynamicSmemBytes = STAGES * kStageBytes + kConsumers * kStagingBytes + 1024 + 2 * STAGES * 8 + kScaleBytes +
                                  kBRowBytes;
static_assert(kDynamicSmemBytes <= 227 * 1024, "more shared memory than one sm_90 block may have");

using hopper::ClusterWalk;
using hopper::TileCoord;

// A unit of work: the tile at schedule index `tile_index` (cta_tile), k-blocks [kb_begin, kb_end) of it
// (split `split`). SPLIT_K 1: unit t is tile t, all its k-blocks. SPLIT_K > 1: unit t is split t % splits of
// tile t / splits (a tile's splits are consecutive units: neighbouring CTAs, the same wave), split s taking
// k-blocks [s k / splits, (s + 1) k / splits): contiguous, balanced to one, none empty (splits <= k-blocks).
// SPLIT_TAIL: the first `whole_units` units are tiles 0 .. whole_units - 1 whole; unit whole_units + u is split
// u % splits of tile whole_units + u / splits (without it `whole_units` is 0).
// The producer, the scale warps and the consumers all walk units through this one function.
struct Unit {
  TileCoord tile;
  int tile_index, split, kb_begin, kb_end;
};
__device__ __forceinline__ Unit unit_of(int t, int splits, int whole_units, int m_rows, int n_tiles, int k_tiles, int cta_rank) {
#if SPLIT_K > 1
#if SPLIT_TAIL
  if (t < whole_units) return {hopper::cta_tile<CLUSTER_M, GROUP_M>(t, m_rows, n_tiles, cta_rank), t, 0, 0, k_tiles};
  const int tile_index = whole_units + (t - whole_units) / splits, split = t - whole_units - (tile_index - whole_units) * splits;
#else
  (void)whole_units;
  const int tile_index = t / splits, split = t - tile_index * splits;
#endif
  return {hopper::cta_tile<CLUSTER_M, GROUP_M>(tile_index, m_rows, n_tiles, cta_rank), tile_index, split, split * k_tiles / splits,
          (split + 1) * k_tiles / splits};
#else
  (void)splits;
  (void)whole_units;
  return {hopper::cta_tile<CLUSTER_M, GROUP_M>(t, m_rows, n_tiles, cta_rank), t, 0, 0, k_tiles};
#endif
}

#if SPLIT_K > 1
// Split-K workspace (the launcher's cuda.workspace_bytes, zeroed once when the launch is made; the kernel
// leaves its counters at zero for the next launch): a counter per (tile, consumer warpgroup), padded to
// 256 bytes, then each (tile, consumer)'s SPLIT_K fp32 partials of 64 x BN, in the accumulators' register
// order (a thread's float4s 128 x 16 bytes apart: coalesced), split s at s x kPartialFloat4s
__device__ __forceinline__ int counter_bytes(int tiles) { return (tiles * kConsumers * 4 + 255) / 256 * 256; }
constexpr int kPartialFloat4s = 64 * BN / 4;
#endif

// The scales of one k-block for the two rows a consumer thread holds (accumulator registers 4j, 4j+1:
// row r0; 4j+2, 4j+3: row r0 + 8): A's of (row, kb) and B's of (kb, nb), kept as loaded: their
// product is taken only in promote(), a k-block after the loads were issued, so that no instruction
// waits for them before then. Rows past M read nothing and scale by 0 (their outputs are clipped).
struct KBlockScales {
  float a0, a1, b;
  float b1;  // BN 192: the next n-block's (the tile's columns past the scale block boundary; else unread, 0)
};
// Layouts (cuBLASLt's): scale_a[kb * ld_a + row], scale_b[nb * ld_b + kb], ld_a = roundup(M, 4),
// ld_b = roundup(k-blocks, 4).
[[maybe_unused]] __device__ __forceinline__ KBlockScales kblock_scales(const float* __restrict__ scale_a,
                                                      const float* __restrict__ scale_b, int r0, int M, int nb,
                                                      int kb, int ld_a, int ld_b) {
  KBlockScales s;
  s.b = scale_b[static_cast<size_t>(nb) * ld_b + kb];
  const float* col = scale_a + static_cast<size_t>(kb) * ld_a;
  s.a0 = r0 < M ? col[r0] : 0.0f;
  s.a1 = r0 + 8 < M ? col[r0 + 8] : 0.0f;
  return s;
}

// acc += scale_a[row, kb] * scale_b[kb, nb] * partial: the promotion of one k-block into the FP32
// main accumulator (the scale product in FP32 first, as DeepGEMM's). BN 192: accumulator registers 4j..4j+3
// hold columns 8j..8j+7, so columns 0-63 (j < 8) take B's first scale, 128-191 (j >= 16) the second, and
// 64-127 the first where the tile starts on a block boundary, else the second (`mid_second`). BN 160: the
// first `first_cols` columns (32, 64, 96 or 128: whole 32-column chunks) take the first, the rest the second.
[[maybe_unused]] __device__ __forceinline__ void promote(float (&acc)[kAccum], const float (&partial)[kAccum], KBlockScales s,
                                        bool mid_second = false, int first_cols = kScaleBlock) {
  const float s0 = s.a0 * s.b, s1 = s.a1 * s.b;
  if constexpr (BN == 160) {
    (void)mid_second;
    // the split falls on a 32-column chunk's edge, so the middle columns take one scale pair per chunk (c 0..2:
    // columns 32-63, 64-95, 96-127): 4 products and 6 selects a k-block. Selecting per 8-column group instead
    // (12 predicates, more than the SM has) cost 12 compares, 12 selects and 24 products a k-block, which the
    // compiler placed between the k-block's wgmmas, waiting there for the scale loads (session22b: ~40 more
    // instructions a warp a k-block than BN 192, tensor pipe 71% of active cycles against 192's 84%)
    const float t0 = s.a0 * s.b1, t1 = s.a1 * s.b1;
    float c0[3], c1[3];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const bool first = first_cols > 32 * (c + 1);
      c0[c] = first ? s0 : t0;
      c1[c] = first ? s1 : t1;
    }
#pragma unroll
    for (int i = 0; i < kAccum; ++i) {
      const int j = i / 4;  // columns 8j..8j+7: 0-31 always the first block, 128-159 always the second
      const bool r = (i % 4) >= 2;
      acc[i] += (j < 4 ? (r ? s1 : s0) : j < 16 ? (r ? c1[j / 4 - 1] : c0[j / 4 - 1]) : (r ? t1 : t0)) * partial[i];
    }
  } else if constexpr (kStraddle) {
    (void)first_cols;
    const float t0 = s.a0 * s.b1, t1 = s.a1 * s.b1;
    const float m0 = mid_second ? t0 : s0, m1 = mid_second ? t1 : s1;
#pragma unroll
    for (int i = 0; i < kAccum; ++i) {
      const int j = i / 4;
      const bool r = (i % 4) >= 2;
      acc[i] += (j < 8 ? (r ? s1 : s0) : j < 16 ? (r ? m1 : m0) : (r ? t1 : t0)) * partial[i];
    }
  } else {
    (void)mid_second;
    (void)first_cols;
#pragma unroll
    for (int i = 0; i < kAccum; ++i) acc[i] += ((i % 4) < 2 ? s0 : s1) * partial[i];
  }
}

}  // namespace

HOPPER_DECLARE_DYNAMIC_SMEM(kDynamicSmemBytes)

extern "C" __global__ void __launch_bounds__(kThreads, 1)
#if CLUSTER_M > 1
    __cluster_dims__(CLUSTER_M, 1, 1)
#endif
    wgmma_fp8_block_gemm(const TIN* __restrict__ A, const TIN* __restrict__ B, TOUT* __restrict__ C, int M, int N,
                         int K, HOPPER_MAPS_ABC_PARAMS, const float* __restrict__ scale_a,
                         const float* __restrict__ scale_b, int* __restrict__ workspace) {
  using namespace hopper;
  static_assert(sizeof(TIN) == 1, "8-bit inputs (e4m3 or e5m2)");
  static_assert(std::is_same<TOUT, __nv_bfloat16>::value, "the fp8 rows write bfloat16, as cuBLASLt's");
  (void)A;
  (void)B;
#if SPLIT_K == 1
  (void)workspace;  // read only by split-K (the launcher passes one either way: cuda.workspace_bytes)
#endif
  HOPPER_MAPS_ABC  // map_a, map_b, map_c (by value with MAP_PARAMS 1: hopper/ptx.cuh); only the TMA store reads map_c
#if EPI_TMA && BN % 64 == 0
  (void)C;  // (BN 160 stores its last 32 columns directly)
#endif

  HOPPER_DYNAMIC_SMEM(smem_raw);
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  unsigned char* staging = smem + STAGES * kStageBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + kConsumers * kStagingBytes);
  uint64_t* empty = full + STAGES;
#if SCALE_SMEM
  float* slot_scales = reinterpret_cast<float*>(empty + STAGES);  // [STAGES][BM + 4], 16-byte aligned
#endif
#if SCALE_B_TILE
  float* b_rows = slot_scales + STAGES * kScaleFloats;  // [2][kBRowCap]: B's scales of a unit, by its parity
#endif

  const int tid = threadIdx.x;
  const int warpgroup = tid / 128;
  // rows of (cluster) tiles: with CLUSTER_M 2 each schedule index is a pair of vertically adjacent tiles
  const int m_tiles = (M + BM * CLUSTER_M - 1) / (BM * CLUSTER_M);
  const int n_tiles = (N + BN - 1) / BN;
  const int tiles = m_tiles * n_tiles;
  const int k_tiles = (K + BK - 1) / BK;  // = k-blocks of the scales: ceil(K / 128)
  const int ld_a = (M + 3) / 4 * 4;            // scale_a: a k-block's M scales, padded to 16 bytes
  const int ld_b = (k_tiles + 3) / 4 * 4;      // scale_b: an n-block's k-block scales, padded likewise
#if SPLIT_K > 1 && SPLIT_TAIL
  // the last wave's `tail` tiles (tiles % grid: all of them where they are fewer than the grid), each cut into
  // as many runs as the grid holds, up to SPLIT_K, kTailMinKBlocks k-blocks a run at least; whole waves before
  const int ctas = static_cast<int>(gridDim.x);
  const int tail = tiles % ctas;
  const int tail_splits = tail ? min(min(SPLIT_K, ctas / tail), k_tiles / kTailMinKBlocks) : 1;
  const int splits = tail_splits > 1 ? tail_splits : 1;
  const int whole_units = splits > 1 ? tiles - tail : tiles;  // the units that are whole tiles
  const int units = whole_units + (tiles - whole_units) * splits;
  const int slice_tiles = ctas;  // the workspace's tiles (the YAML's: the grid; tail < grid)
#elif SPLIT_K > 1
  // a tile's splits: SPLIT_K, fewer where K has fewer k-blocks (the YAML's grid counts the same units)
  const int splits = k_tiles < SPLIT_K ? (k_tiles > 0 ? k_tiles : 1) : SPLIT_K;
  constexpr int whole_units = 0;
  const int units = tiles * splits;
  const int slice_tiles = tiles * CLUSTER_M;  // the CTAs' tiles (with clusters: CLUSTER_M a cluster tile)
#else
  constexpr int splits = 1;
  constexpr int whole_units = 0;
  const int units = tiles;
#endif
  // SCALE_B_TILE: B's scales by unit where every unit has at least STAGES k-blocks (then the producer's wait for
  // the first slot of unit j follows the consumers' release of unit j - 2's last: done reading its row buffer)
  // and the row fits its buffer; per k-block otherwise
  [[maybe_unused]] const bool b_by_unit = SCALE_B_TILE && k_tiles / splits >= STAGES && ld_b <= kBRowCap;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      // the producer's expect_tx arrival (+ SCALE_SMEM 1 or 3: the lanes of the warp that stages the scales)
      mbar_init(&full[s], 1 + 32 * (SCALE_SMEM == 1 || SCALE_SMEM == 3));
      // one arrival per consumer warpgroup (SCALE_READ 2: per consumer warp) of every CTA of the cluster
      mbar_init(&empty[s], kConsumers * CLUSTER_M * (kReleasePerWarp ? 4 : 1));
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
    // ---------------------------------------------------------------- producer warpgroup (stage 13's)
    setmaxnreg_dec<PRODUCER_REGS>();
    if (tid == 0) {
      tensormap_ready(map_a);
      tensormap_ready(map_b);
      int it = 0;  // stage uses so far, across tiles: slot = it % STAGES, use = it / STAGES
      const ClusterWalk walk = hopper::cluster_walk<CLUSTER_M>();
      for (int t = walk.first; t < units; t += walk.stride) {
        const Unit unit = unit_of(t, splits, whole_units, m_tiles, n_tiles, k_tiles, walk.rank);
        const TileCoord tile = unit.tile;
#if SCALE_SMEM == 2
        // the tile's rows of each k-block's A scales: BM, fewer in the last tile row (up to ld_a: the
        // padding is in the array, so the count stays a multiple of 4 floats); B's n-block row
#if CLUSTER_M > 1
        // (none for a cluster's CTA whose tile lies wholly past M: no copy, no bytes expected)
        const int a_rest = ld_a - tile.m * BM;
        const int a_scales = a_rest < BM ? (a_rest > 0 ? a_rest : 0) : BM;
#else
        const int a_scales = ld_a - tile.m * BM < BM ? ld_a - tile.m * BM : BM;
#endif
        const float* b_row = scale_b + static_cast<size_t>(tile.n * BN / kScaleBlock) * ld_b;
#if BN > 128
        // BN 192: the next n-block's row too (the last n-block's again where the tile's columns past the
        // boundary are all past N: their outputs are clipped)
        const int nb_last = (N - 1) / kScaleBlock;
        const int nb1 = tile.n * BN / kScaleBlock + 1 < nb_last ? tile.n * BN / kScaleBlock + 1 : nb_last;
        const float* b_row1 = scale_b + static_cast<size_t>(nb1) * ld_b;
#endif
#if SCALE_B_TILE
        // the unit's run of B's row, whole 16-byte groups: [kb_begin & ~3, roundup(kb_end, 4)) (ld_b: a multiple of 4)
        const int b_first = unit.kb_begin & ~3;
        const int b_unit_bytes = b_by_unit ? ((unit.kb_end + 3) / 4 * 4 - b_first) * 4 : 0;
        const int b_kblock_bytes = b_by_unit ? 0 : 16;
        float* const b_buf = b_rows + (((t - walk.first) / walk.stride) & 1) * kBRowCap;
#else
        constexpr int b_unit_bytes = 0, b_kblock_bytes = 16 * kBScaleRows;
        (void)b_unit_bytes;
#endif
#endif
        for (int kt = unit.kb_begin; kt < unit.kb_end; ++kt, ++it) {  // the unit's k-blocks and their scales
          const int slot = it % STAGES;
          mbar_wait(&empty[slot], (static_cast<uint32_t>(it / STAGES) & 1u) ^ 1u);  // use-1 released
          unsigned char* stage = smem + slot * kStageBytes;
#if SCALE_SMEM == 2
          const int b_bytes = b_kblock_bytes + (kt == unit.kb_begin ? b_unit_bytes : 0);
          mbar_arrive_expect_tx(&full[slot], kStageBytes + a_scales * 4 + b_bytes);
#else
          mbar_arrive_expect_tx(&full[slot], kStageBytes);  // out-of-bounds box parts count too (zeros)
#endif
#if SCALE_SMEM == 2
          // the k-block's scales into the slot: A's of the tile's rows, the 16 bytes of B's n-block row
          // that hold its scale (scale_b[nb, kt] at sc[BM + kt % 4])
          auto copy_scales = [&] {
            float* sc = slot_scales + slot * kScaleFloats;
            if (CLUSTER_M == 1 || a_scales > 0)
              bulk_load_1d(sc, scale_a + static_cast<size_t>(kt) * ld_a + tile.m * BM, a_scales * 4, &full[slot]);
            // B's scale: the same for the cluster's CTAs (same n-block); each copies its own 16 bytes
            if (b_kblock_bytes) bulk_load_1d(sc + BM, b_row + (kt & ~3), 16, &full[slot]);
#if BN > 128
            bulk_load_1d(sc + BM + 4, b_row1 + (kt & ~3), 16, &full[slot]);  // BN 192: the next n-block's
#endif
#if SCALE_B_TILE
            // SCALE_B_TILE: the unit's whole run of B's row with its first k-block's slot
            if (b_unit_bytes && kt == unit.kb_begin) bulk_load_1d(b_buf, b_row + b_first, b_unit_bytes, &full[slot]);
#endif
          };
          if (SCALE_COPY_FIRST) copy_scales();  // the small reads ahead of the tiles' (the slot completes on the last)
#endif
          tma_load_2d(stage, map_a, &full[slot], kt * BK, tile.m * BM);
#if CLUSTER_M > 1
          // this CTA's BN / CLUSTER_M rows of B's tile, into the same place of every CTA's slot; each slot's
          // expect_tx counts all of B, whichever CTA sends it
          tma_load_2d_multicast(stage + kTileABytes + walk.rank * kBShareBytes, map_b, &full[slot], kt * BK,
                                tile.n * BN + walk.rank * kBShareRows, static_cast<uint16_t>((1u << CLUSTER_M) - 1u));
#else
          tma_load_2d(stage + kTileABytes, map_b, &full[slot], kt * BK, tile.n * BN);
#endif
#if SCALE_SMEM == 2
          if (!SCALE_COPY_FIRST) copy_scales();
#endif
        }
      }
    }
#if SCALE_SMEM == 1 || SCALE_SMEM == 3
    else if (tid / 32 >= 1 && tid / 32 <= SCALE_WARPS) {
      // Warps 1..SCALE_WARPS stage the k-blocks' scales in their slots as the TMA fills the tiles, warp w
      // the uses it with it % SCALE_WARPS == w - 1: the tile's BM rows of scale_a (SCALE_SMEM 1: 0 past
      // M, a lane's loads two at a time, then stored; 3: cp.async, 16 bytes a lane) and its scale_b, then
      // every lane arrives on the slot's full barrier (1: release, its stores before the consumers'
      // acquiring wait; 3: when its copies have landed). The loads'
      // latency is these warps', up to STAGES k-blocks ahead of the consumers; the consumers' own loads
      // (SCALE_SMEM 0) are pending registers at their next wgmma fence.
      const int lane = tid % 32, me = tid / 32 - 1;
      int it = 0;
      const ClusterWalk walk = hopper::cluster_walk<CLUSTER_M>();
      for (int t = walk.first; t < units; t += walk.stride) {
        const Unit unit = unit_of(t, splits, whole_units, m_tiles, n_tiles, k_tiles, walk.rank);
        const TileCoord tile = unit.tile;
        const int nb = tile.n * BN / kScaleBlock;
        const int row0 = tile.m * BM + lane;
#if SCALE_SMEM == 3
        (void)row0;
        const float* b_row = scale_b + static_cast<size_t>(nb) * ld_b;
        // lane l copies rows 4l..4l+3 of the tile (BM = 128: all 32 lanes; 64: 16), none past the padded
        // array (ld_a and the tile's first row are multiples of 4: a chunk is all in or all out)
        const int row4 = tile.m * BM + 4 * lane;
        const bool copies = 4 * lane < BM && row4 < ld_a;
#endif
        for (int kt = unit.kb_begin; kt < unit.kb_end; ++kt, ++it) {
          if (it % SCALE_WARPS != me) continue;
          const int slot = it % STAGES;
          mbar_wait(&empty[slot], (static_cast<uint32_t>(it / STAGES) & 1u) ^ 1u);
          float* sc = slot_scales + slot * kScaleFloats;
#if SCALE_SMEM == 3
          if (copies) cp_async_16(sc + 4 * lane, scale_a + static_cast<size_t>(kt) * ld_a + row4);
          if (lane == 0) cp_async_16(sc + BM, b_row + (kt & ~3));  // scale_b[nb, kt] at sc[BM + kt % 4]
          cp_async_mbar_arrive_noinc(&full[slot]);
#else
          const float* col = scale_a + static_cast<size_t>(kt) * ld_a + row0;  // a warp's 32 rows: one line
          // two loads of a lane in flight at a time (four spill the producer's 40 registers)
#pragma unroll 1
          for (int q0 = 0; q0 < BM / 32; q0 += 2) {
            float v[2];
#pragma unroll
            for (int q = 0; q < 2; ++q) {
              const int r = 32 * (q0 + q);
              v[q] = r < BM && row0 + r < M ? col[r] : 0.0f;
            }
#pragma unroll
            for (int q = 0; q < 2; ++q)
              if (32 * (q0 + q) < BM) sc[lane + 32 * (q0 + q)] = v[q];
          }
          if (lane == 0) sc[BM + kt % 4] = scale_b[static_cast<size_t>(nb) * ld_b + kt];
          mbar_arrive(&full[slot]);
#endif
        }
      }
    }
#endif
  } else {
    // ---------------------------------------------------------------- consumer warpgroups
    setmaxnreg_inc<CONSUMER_REGS>();
    // which m64 slice of the tile (UNIFORM_A 1: told warp-uniform, so A's descriptors stay in uniform registers)
    const int consumer = UNIFORM_A ? warp_uniform(warpgroup - 1) : warpgroup - 1;
    const int local_tid = tid % 128;
    const int warp = local_tid / 32;
    const int lane = tid % 32;
#if EPI_TMA
    unsigned char* my_staging = staging + consumer * kStagingBytes;
    if (local_tid == 0) tensormap_ready(map_c);
#endif

    // Issue k-block use `use` of the ring into `partial` (fresh: scale-d 0 on the first k32 step).
    // Wait until ring use `use`'s slot is full (its tiles and, with SCALE_SMEM, its scales landed).
    auto wait_full = [&](int use) {
      // WG_ORDER: consumer 1 issues use `use` after consumer 0 has, consumer 0 issues it after consumer 1
      // has issued use - 1, so the tensor pipe gets them in turn, not interleaved (see WG_ORDER above)
      if (kOrdered && (consumer == 1 || use > 0)) named_barrier_sync(consumer == 1 ? kIssuedBar0 : kIssuedBar1, 256);
      mbar_wait(&full[use % STAGES], static_cast<uint32_t>(use / STAGES) & 1u);
    };
    // The first k32 step's descriptors of ring use `use` (A's: this consumer's 64 rows of the slot)
    struct Descs {
      uint64_t a, b;
    };
    [[maybe_unused]] auto descs_of = [&](int use) -> Descs {
      const int slot = use % STAGES;
      const uint32_t a_base = smem_u32(smem + slot * kStageBytes) + consumer * 64 * 128;
      const uint32_t b_base = smem_u32(smem + slot * kStageBytes + kTileABytes);
      return {make_desc_sw128(a_base, 16, 1024), make_desc_sw128(b_base, 16, 1024)};
    };
    // DESC_STEP: issue the k-block whose first step's descriptors are `d` into `partial`, each k32 step's the
    // first's advanced by 32 bytes
    [[maybe_unused]] auto issue_descs = [&](float(&partial)[kAccum], Descs d, bool chain) {
      fence_accumulators(partial);  // the last promotion's reads of it come first
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 32; ++kk)
        wgmma_m64k32<BN, TIN>(partial, desc_advance(d.a, 32 * kk), desc_advance(d.b, 32 * kk), (kk > 0 || chain) ? 1 : 0);
      wgmma_commit();
      if (kOrdered) named_barrier_arrive(consumer == 0 ? kIssuedBar0 : kIssuedBar1, 256);
    };
    // Issue the wgmmas of ring use `use` (its slot full) into `partial`.
    auto issue_wgmma = [&](float(&partial)[kAccum], int use, bool chain) {
#if DESC_STEP
      issue_descs(partial, descs_of(use), chain);
#else
      const int slot = use % STAGES;
      const uint32_t a_base = smem_u32(smem + slot * kStageBytes) + consumer * 64 * 128;
      const uint32_t b_base = smem_u32(smem + slot * kStageBytes + kTileABytes);
      fence_accumulators(partial);  // the last promotion's reads of it come first
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 32; ++kk) {
        // Both K-major, 128-byte rows, 8-row swizzle atoms 1024 B apart; k32 = 32 bytes on.
        const uint64_t desc_a = make_desc_sw128(a_base + kk * 32, 16, 1024);
        const uint64_t desc_b = make_desc_sw128(b_base + kk * 32, 16, 1024);
        wgmma_m64k32<BN, TIN>(partial, desc_a, desc_b, (kk > 0 || chain) ? 1 : 0);
      }
      wgmma_commit();
      if (kOrdered) named_barrier_arrive(consumer == 0 ? kIssuedBar0 : kIssuedBar1, 256);
#endif
    };
    [[maybe_unused]] auto issue = [&](float(&partial)[kAccum], int use, bool chain = false) {
      wait_full(use);
      issue_wgmma(partial, use, chain);
    };
#if SCALE_B_TILE
    const float* unit_b_row = nullptr;  // SCALE_B_TILE: the current unit's row buffer, from k-block unit_b_first
    int unit_b_first = 0;
#endif
    // The scales of ring use `use` (k-block kb of the tile): from its slot (SCALE_SMEM, after issue()'s
    // wait on the slot's full barrier, before its release) or from global memory
    auto scales_of = [&](int use, int r0, int nb, int kb) -> KBlockScales {
      if (DIAG == 1) return KBlockScales{1.0f, 1.0f, 1.0f, 1.0f};  // not read (SCALE_SMEM: still copied)
#if SCALE_SMEM
      (void)nb;
      const float* sc = slot_scales + (use % STAGES) * kScaleFloats;
      const int lr = consumer * 64 + warp * 16 + lane / 4;
      // rows past M: 0 (SCALE_SMEM 2 copies no scales for them; their outputs are clipped)
#if SCALE_B_TILE
      const float b = b_by_unit ? unit_b_row[kb - unit_b_first] : sc[BM + kb % 4];
      return {r0 < M ? sc[lr] : 0.0f, r0 + 8 < M ? sc[lr + 8] : 0.0f, b};
#elif BN > 128
      // BN 192: the next n-block's 16 bytes follow the first's
      return {r0 < M ? sc[lr] : 0.0f, r0 + 8 < M ? sc[lr + 8] : 0.0f, sc[BM + kb % 4], sc[BM + 4 + kb % 4]};
#else
      return {r0 < M ? sc[lr] : 0.0f, r0 + 8 < M ? sc[lr + 8] : 0.0f, sc[BM + kb % 4]};
#endif
#else
      (void)use;
      return kblock_scales(scale_a, scale_b, r0, M, nb, kb, ld_a, ld_b);
#endif
    };
    // CLUSTER_M 2: to the slot's empty barrier in every CTA of the cluster (the peer multicast into ours,
    // we into theirs), a plain remote arrive (release at CTA scope, as stage 12: at cluster scope ptxas
    // fences each with MEMBAR.ALL.GPU); the reads released are wgmma's, complete at wgmma.wait_group
    // (SCALE_READ 2: each warp releases for itself, after its own reads of the slot's scales)
    auto release = [&](int use) {
      const bool releases = kReleasePerWarp ? lane == 0 : local_tid == 0;
#if CLUSTER_M > 1
      if (releases) {
#pragma unroll
        for (int r = 0; r < CLUSTER_M; ++r) mbar_arrive_remote(&empty[use % STAGES], static_cast<uint32_t>(r));
      }
#else
      if (releases) mbar_arrive(&empty[use % STAGES]);
#endif
    };

    float acc[kAccum];  // the FP32 main accumulator: sum over k-blocks of scale * partial
    float part0[kPartial];
#if PROMOTE_OVERLAP
    float part1[kAccum];
#endif
#if SPLIT_K > 1
    // Deterministic split-K (stage 12's stream-K fixup and stage 14's reduction, for S parts): every split
    // of the tile stores this warpgroup's fp32 partial (acc) to the workspace and counts on the slice's
    // counter (CUTLASS's split-K semaphore: the warpgroup's stores ordered before thread 0's acq_rel atomic
    // by the named barrier; its acquire before the others' reads by the second); the split that arrives
    // last (count splits - 1) sums all the stored partials, its own too, in split order 0..S-1 (the bits of
    // C do not depend on which split came last), resets the counter for the next launch and goes on to
    // the epilogue. No CTA waits for another, no float atomics.
    HOPPER_BLOCK_SHARED(int, arrived, kConsumers);
    // `tile`: the CTA's tile among the workspace's (SPLIT_TAIL: of the tail; with clusters: cluster tile x CLUSTER_M + rank)
    auto holds_the_sum = [&](int tile, int split) -> bool {
      const int who = tile * kConsumers + consumer;  // this slice's counter
      float4* const partials = reinterpret_cast<float4*>(reinterpret_cast<unsigned char*>(workspace) + counter_bytes(slice_tiles));
      float4* const slice = partials + static_cast<size_t>(who) * SPLIT_K * kPartialFloat4s + local_tid;
      float4* const mine = slice + split * kPartialFloat4s;
      if (hand_over_partial(mine, acc, workspace + who, 1 + consumer, local_tid, &arrived[consumer]) != splits - 1)
        return false;  // another split finishes the slice
#if SPLIT_KEEP
      // ((p0 + p1) + p2) + ...: split 0 or 1 holds the first sum's one operand already (IEEE addition commutes, so
      // p1 + p0 has p0 + p1's bits) and reads the other; any other split starts from p0 read back (not 0 + p0,
      // which would turn a partial of -0 into +0 and make the bits depend on the arrival order)
      const bool keep = split <= 1;
      if (!keep) {
#pragma unroll
        for (int j = 0; j < kAccum / 4; ++j) {
          const float4 v = ld_cg_f4(slice + j * 128);
          acc[4 * j] = v.x;
          acc[4 * j + 1] = v.y;
          acc[4 * j + 2] = v.z;
          acc[4 * j + 3] = v.w;
          if (j % 8 == 7) asm volatile("" ::: "memory");
        }
      }
      for (int s = keep ? 1 - split : 1; s < splits; s = keep && s + 1 == split ? s + 2 : s + 1) {
#else
#pragma unroll
      for (int i = 0; i < kAccum; ++i) acc[i] = 0.0f;
      for (int s = 0; s < splits; ++s) {  // in split order, whichever split this is
#endif
#pragma unroll
        for (int j = 0; j < kAccum / 4; ++j) {
          const float4 v = ld_cg_f4(slice + s * kPartialFloat4s + j * 128);
          acc[4 * j] += v.x;
          acc[4 * j + 1] += v.y;
          acc[4 * j + 2] += v.z;
          acc[4 * j + 3] += v.w;
          if (j % 8 == 7) asm volatile("" ::: "memory");  // at most 8 loads in flight (stage 12's)
        }
      }
      if (local_tid == 0) workspace[who] = 0;  // every split has arrived: ready for the next launch
      return true;
    };
#endif

    int it = 0;  // ring uses so far, across tiles (as the producer counts them)
    const ClusterWalk walk = hopper::cluster_walk<CLUSTER_M>();
    for (int t = walk.first; t < units; t += walk.stride) {
      const Unit unit = unit_of(t, splits, whole_units, m_tiles, n_tiles, k_tiles, walk.rank);
      const TileCoord tile = unit.tile;
      const int kb_begin = unit.kb_begin, kb_end = unit.kb_end;  // the unit's k-blocks (SPLIT_K 1: all)
      const int m0 = tile.m * BM + consumer * 64;
      const int n0 = tile.n * BN;
      const int r0 = m0 + warp * 16 + lane / 4;  // this thread's first accumulator row
      const int nb = n0 / kScaleBlock;           // B's scale block row (of the tile's first column)
      // BN 192: columns 64-127 of the tile in the next scale block (n0 64 past a block boundary)
      const bool mid_second = kStraddle && n0 % kScaleBlock != 0;
      (void)mid_second;
#if BN == 160
      const int first_cols = kScaleBlock - n0 % kScaleBlock;  // BN 160: the tile's columns in its first n-block
#else
      constexpr int first_cols = kScaleBlock;
#endif
      (void)first_cols;
#if SCALE_B_TILE
      unit_b_row = b_rows + (((t - walk.first) / walk.stride) & 1) * kBRowCap;
      unit_b_first = kb_begin & ~3;
#endif

#pragma unroll
      for (int i = 0; i < kAccum; ++i) acc[i] = 0.0f;

#if BN == 256
      // Each k-block in two 128-column halves of B's tile (rows 128-255 of the slot's B 16 KB on), through the one
      // partial: half h's four m64n128k32 wgmmas, wait, its promotion into acc[64 h .. 64 h + 63] with B's scale of
      // n-block nb + h (the fragments of the two halves side by side are m64n256's: the epilogue stores them as one)
      // SCALE_READ 3 (the default): the next k-block's slot waited for, its scales read and its descriptors built
      // under the last half's wgmmas, so that half's promotion is followed by the next issue with no barrier wait
      // or shared load between (stage 15's 128-wide loop's gain, session23b); else (1's place) at the k-block's top
#if SCALE_READ_AT == 3
      KBlockScales s_next{};
      Descs d_next{};
      if (kb_end > kb_begin) {
        wait_full(it);
        s_next = scales_of(it, r0, nb, kb_begin);
        d_next = descs_of(it);
      }
#endif
      for (int kb = kb_begin; kb < kb_end; ++kb, ++it) {
#if SCALE_READ_AT == 3
        const KBlockScales s = s_next;
        const Descs d = d_next;
#else
        wait_full(it);
        const KBlockScales s = scales_of(it, r0, nb, kb);
        const Descs d = descs_of(it);
#endif
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          fence_accumulators(part0);  // the last promotion's reads of it come first
          wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK / 32; ++kk)
            wgmma_m64k32<128, TIN>(part0, desc_advance(d.a, 32 * kk), desc_advance(d.b, h * 128 * 128 + 32 * kk),
                                   kk > 0 ? 1 : 0);
          wgmma_commit();
#if SCALE_READ_AT == 3
          if (h == kHalves - 1 && kb + 1 < kb_end) {
            wait_full(it + 1);
            s_next = scales_of(it + 1, r0, nb, kb + 1);
            d_next = descs_of(it + 1);
          }
#endif
          wgmma_wait<0>();
          fence_accumulators(part0);
          if (h == kHalves - 1) release(it);
          const float sb = h ? s.b1 : s.b;
          const float s0 = s.a0 * sb, s1 = s.a1 * sb;
#pragma unroll
          for (int i = 0; i < kPartial; ++i) acc[h * kPartial + i] += ((i % 4) < 2 ? s0 : s1) * part0[i];
        }
      }
#elif PROMOTE_OVERLAP
      // k-block kb was issued into `done`; with `issue_next`, issue kb + 1 into `next` and wait for kb
      // only (wait_group 1), so the promotion of kb runs while kb + 1 does. The scales of kb + 1 are
      // loaded there, used one step later. The loop's steps always issue and the last one or two are
      // peeled, so that at every wait ptxas knows which partial is in flight (with a conditional issue
      // it serialised the wgmmas: C7514).
      KBlockScales cur{};  // k-block 0's, read once it is issued (its slot full)
#if SCALE_AHEAD == 2
      KBlockScales after{};  // k-block kb + 1's (loaded a k-block ahead of nxt)
#endif
      auto step = [&](float(&done)[kAccum], float(&next)[kAccum], int kb, bool issue_next) {
        KBlockScales nxt = cur;
        if (issue_next) {
          issue(next, it + 1);
#if SCALE_AHEAD == 2
          nxt = after;  // kb + 1's, loaded a step ago; kb + 2's now (clamped: past the last, unused)
          after = scales_of(it + 2, r0, nb, kb + 2 < kb_end ? kb + 2 : kb_end - 1);
#else
          nxt = scales_of(it + 1, r0, nb, kb + 1);
#endif
          wgmma_wait<1>();
        } else {
          wgmma_wait<0>();
        }
        fence_accumulators(done);
        release(it);
        promote(acc, done, cur);
        cur = nxt;
        ++it;
      };
      if (kb_end > kb_begin) {
        issue(part0, it);
        cur = scales_of(it, r0, nb, kb_begin);
#if SCALE_AHEAD == 2
        after = scales_of(it + 1, r0, nb, kb_end - kb_begin > 1 ? kb_begin + 1 : kb_begin);
#endif
        int kb = kb_begin;
        for (; kb + 2 < kb_end; kb += 2) {  // part0 in flight at the top of every iteration
          step(part0, part1, kb, true);
          step(part1, part0, kb + 1, true);
        }
        if (kb + 1 < kb_end) {  // two k-blocks left
          step(part0, part1, kb, true);
          step(part1, part0, kb + 1, false);
        } else {
          step(part0, part1, kb, false);
        }
      }
#else
#if SCALE_READ_AT == 3
      // SCALE_READ 3: the wait for k-block kb + 1's slot and the reads of its scales go right after kb's wgmmas
      // are issued, under them; kb's promotion then uses scales read a k-block before, and kb + 1's issue
      // follows the promotion with no barrier wait or shared load between
      KBlockScales s_next{};
      [[maybe_unused]] Descs d_next{};  // DESC_STEP 2: the next k-block's descriptors, also built a k-block ahead
      if (kb_end > kb_begin) {
        wait_full(it);
        s_next = scales_of(it, r0, nb, kb_begin);
        if (DESC_STEP == 2) d_next = descs_of(it);
      }
#endif
      for (int kb = kb_begin; kb < kb_end; ++kb, ++it) {
#if SCALE_READ_AT == 3
        const KBlockScales s = s_next;
#if DESC_STEP == 2
        issue_descs(part0, d_next, DIAG == 2 && kb > kb_begin);  // its slot waited for a k-block before
#else
        issue_wgmma(part0, it, DIAG == 2 && kb > kb_begin);  // its slot waited for a k-block before
#endif
        if (kb + 1 < kb_end) {
          wait_full(it + 1);
          s_next = scales_of(it + 1, r0, nb, kb + 1);
          if (DESC_STEP == 2) d_next = descs_of(it + 1);
        }
        wgmma_wait<0>();
#elif SCALE_READ_AT == 1
        wait_full(it);
        const KBlockScales s = scales_of(it, r0, nb, kb);  // before the wgmmas (DeepGEMM's place)
        issue_wgmma(part0, it, DIAG == 2 && kb > kb_begin);
        wgmma_wait<0>();
#elif SCALE_READ_AT == 2
        issue(part0, it, DIAG == 2 && kb > kb_begin);
        wgmma_wait<0>();
        const KBlockScales s = scales_of(it, r0, nb, kb);  // after the wait, before the slot's release
#else
        issue(part0, it, DIAG == 2 && kb > kb_begin);
        const KBlockScales s = scales_of(it, r0, nb, kb);
        wgmma_wait<0>();
#endif
        fence_accumulators(part0);
        release(it);
        if (DIAG != 2) promote(acc, part0, s, mid_second, first_cols);
      }
#if DIAG == 2
#pragma unroll
      for (int i = 0; i < kAccum; ++i) acc[i] = part0[i];
#endif
#endif
#if SPLIT_K > 1
      // A slice wholly past M stores nothing to C (clipped): it skips the workspace, at every split alike.
      // The others hand their partial over; only the tile's last split goes on to the epilogue. The verdict
      // is the warpgroup's, told to ptxas as warp-uniform (a `continue` on a per-thread value put the ring's
      // descriptor arithmetic of every k-block in per-thread registers: 16 R2UR a k-block, session22)
      const bool handed_over = splits > 1 && (!SPLIT_TAIL || unit.tile_index >= whole_units) && m0 < M &&
                               !holds_the_sum((unit.tile_index - whole_units) * CLUSTER_M + walk.rank, unit.split);
      if (warp_uniform(handed_over)) continue;
#endif

      // Columns 8 j0 .. BN - 1 of the thread's two rows straight to C, two bf16 per 32-bit store (N % 8 == 0:
      // pairs never straddle the edge). acc[4j + r]: row 16*warp + lane/4 + 8*(r/2), column 8j + 2*(lane%4).
      [[maybe_unused]] auto store_from_registers = [&](int j0) {
#pragma unroll
        for (int j = j0; j < BN / 8; ++j) {
          const int col = n0 + 8 * j + 2 * (lane % 4);
          if (col < N) {
            if (r0 < M)
              *reinterpret_cast<uint32_t*>(C + static_cast<size_t>(r0) * N + col) = pack2<TOUT>(acc[4 * j + 0], acc[4 * j + 1]);
            if (r0 + 8 < M)
              *reinterpret_cast<uint32_t*>(C + static_cast<size_t>(r0 + 8) * N + col) =
                  pack2<TOUT>(acc[4 * j + 2], acc[4 * j + 3]);
          }
        }
      };
#if EPI_TMA
#if EPI_BOXES
      // Epilogue: registers -> swizzled staging tile (stmatrix) -> TMA store (clips at C's edges), the whole 64-column
      // boxes (BN 160: the first 128 columns) kEpiBoxes a round
      store_boxes_tma<kOutChunks, kEpiBoxes, TOUT>([&](int i) { return acc[i]; }, my_staging, map_c, n0, m0, 1 + consumer,
                                                   local_tid, warp, lane);
#else
      // Epilogue: registers -> swizzled staging tile (stmatrix) -> TMA store (clips at C's edges). The measured code,
      // kept as written: store_boxes_tma with one round of all the boxes compiles to other SASS at BN 64, 192 and 256
      if (local_tid == 0) bulk_wait_group_read0();  // the last tile's store has read the buffer
      named_barrier_sync(1 + consumer, 128);
      const int row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;  // row this lane addresses
      const uint32_t staging_base = smem_u32(my_staging);
#pragma unroll
      for (int j2 = 0; j2 < kOutChunks * 4; ++j2) {  // the whole 64-column boxes (BN 160: the first 128 columns)
        const int col = 16 * j2 + (lane / 16) * 8;
        const uint32_t addr = staging_base + (col / 64) * kCBoxBytes + row * 128 +
                              ((((col % 64) / 8) ^ (row % 8)) * 16);
        stmatrix_x4(addr, pack2<TOUT>(acc[8 * j2 + 0], acc[8 * j2 + 1]), pack2<TOUT>(acc[8 * j2 + 2], acc[8 * j2 + 3]),
                    pack2<TOUT>(acc[8 * j2 + 4], acc[8 * j2 + 5]), pack2<TOUT>(acc[8 * j2 + 6], acc[8 * j2 + 7]));
      }
      fence_proxy_async_smem();  // stmatrix writes -> visible to the TMA engine
      named_barrier_sync(1 + consumer, 128);
      if (local_tid == 0) {
#pragma unroll
        for (int b = 0; b < kOutChunks; ++b) tma_store_2d(map_c, my_staging + b * kCBoxBytes, n0 + 64 * b, m0);
        bulk_commit_group();
      }
#endif
#if BN % 64
      store_from_registers(kOutChunks * 8);  // BN 160: columns 128-159 from registers
#endif
#else
      store_from_registers(0);  // Epilogue: registers -> global
#endif
    }
    // WG_ORDER: consumer 1 arrived after every use it issued, consumer 0 waited before all but the first:
    // the last arrival is taken here, so that no phase of the barrier is left open when the CTA ends
    if (kOrdered && consumer == 0 && it > 0) named_barrier_sync(kIssuedBar1, 256);
#if EPI_TMA
    if (local_tid == 0) bulk_wait_group0();
#endif
  }

#if CLUSTER_M > 1
  // The peer may still arrive on our empty barriers: no CTA leaves before the whole cluster is done.
  cluster_sync();
#endif
}
