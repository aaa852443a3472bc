"""Tensor-core issue-rate GPU probes on the kernels of the variant's ``probe.source``
(kernels/cuda/probes/mma_peak.cu): ``mma_sync_peak``, back-to-back independent mma.sync m16n8k16
(bf16 or fp16 operands, the point's precision) from registers, no memory: the ceiling of the
legacy warp-level path (stage 10) as TFLOP/s, and, through the row's ``pct_of_peak_at_clock``, as
a fraction of the device's dense (wgmma) rate."""
from __future__ import annotations

import numpy as np

from gemmlab.backends.probes.common import Probe, ProbeSkip, timed_fields

MMA_FLOPS = 2 * 16 * 8 * 16  # one m16n8k16
CHAINS = 8  # independent accumulators per warp (the kernel's CHAINS default)


class MmaSyncPeak(Probe):
    """Shape unused (sizes=probe, [1, 1, 1]); params: iters (per chain), warps (per block),
    blocks_per_sm."""

    op = "mma_sync_peak"
    precisions = ("bf16", "fp16")
    # the kernel and the instruction it issues, per precision
    ENTRIES = {"bf16": ("mma_sync_peak", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
               "fp16": ("mma_sync_peak_fp16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")}
    compiles = True

    def skip(self, p, params):
        if (p.m, p.n, p.k) != (1, 1, 1):
            return f"{self.op} sets its work by params; run it at the shape [1, 1, 1] (sizes=probe)"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        iters, warps = int(params.get("iters", 16384)), int(params.get("warps", 8))
        blocks_per_sm = int(params.get("blocks_per_sm", 2))
        if iters < 1 or not 1 <= warps <= 32 or blocks_per_sm < 1:
            raise ProbeSkip(f"mma_sync_peak needs iters >= 1, 1 <= warps <= 32 and blocks_per_sm >= 1, got "
                            f"{iters}, {warps}, {blocks_per_sm}")
        entry, instruction = self.ENTRIES[p.precision]
        kern = backend.function(ex, p, entry)
        grid, threads = blocks_per_sm * ex.dev["sm_count"], 32 * warps
        out = cp.empty(grid * threads, dtype=cp.float32)
        args = (out, np.int32(iters))

        def fn():
            kern((grid,), (threads,), args)

        flops = grid * warps * iters * CHAINS * MMA_FLOPS
        timed = ex.timer.measure([[fn]])[0]
        extra = {"iters": iters, "chains": CHAINS, "blocks": grid, "threads_per_block": threads,
                 "instruction": instruction,
                 "tflops": flops / timed.summary.median_s / 1e12}
        return {**timed_fields(ex, timed, flops, extra), "flops": flops, "bytes_min": 0, "intensity": None,
                "kernel_name": entry, "smem_bytes": 0, "status": "ok"}


WGMMA_NS = (64, 128, 160, 192, 256)  # the kernel's entries, wgmma_peak_n<N>
WGMMA_SMEM = 1024 + 64 * 128 + 256 * 128  # 1 KB alignment, A's 64 x 128 bytes, the widest B's 256 x 128


class WgmmaPeak(Probe):
    """The FP8 wgmma rate by N (kernels/cuda/probes/wgmma_peak.cu): each warpgroup issues one k-block of
    stage 15 (four m64nNk32 e4m3 wgmmas from shared memory) and waits for it, ``iters`` times. Shape unused
    (sizes=probe, [1, 1, 1]); params: n (64, 128, 160, 192, 256), iters, warpgroups (per block, 1..3: stage
    15 has two consumers), blocks_per_sm (1)."""

    op = "wgmma_peak"
    precisions = ("fp8",)
    compiles = True

    def skip(self, p, params):
        if (p.m, p.n, p.k) != (1, 1, 1):
            return f"{self.op} sets its work by params; run it at the shape [1, 1, 1] (sizes=probe)"
        if int(params.get("n", 128)) not in WGMMA_NS:
            return f"{self.op} has kernels for N in {', '.join(map(str, WGMMA_NS))}, not {params.get('n')}"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        n, iters = int(params.get("n", 128)), int(params.get("iters", 4096))
        groups, blocks_per_sm = int(params.get("warpgroups", 2)), int(params.get("blocks_per_sm", 1))
        if iters < 1 or not 1 <= groups <= 3 or blocks_per_sm != 1:
            raise ProbeSkip(f"wgmma_peak needs iters >= 1, 1 <= warpgroups <= 3 and blocks_per_sm 1 (its shared "
                            f"memory and registers: one block an SM), got {iters}, {groups}, {blocks_per_sm}")
        entry = f"wgmma_peak_n{n}"
        kern = backend.function(ex, p, entry)
        kern.max_dynamic_shared_size_bytes = WGMMA_SMEM
        grid, threads = blocks_per_sm * ex.dev["sm_count"], 128 * groups
        out = cp.empty(grid * threads, dtype=cp.float32)
        args = (out, np.int32(iters))

        def fn():
            kern((grid,), (threads,), args, shared_mem=WGMMA_SMEM)

        flops = grid * groups * iters * 4 * 2 * 64 * n * 32
        timed = ex.timer.measure([[fn]])[0]
        extra = {"n": n, "iters": iters, "warpgroups": groups, "blocks": grid, "threads_per_block": threads,
                 "instruction": f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3",
                 "tflops": flops / timed.summary.median_s / 1e12}
        return {**timed_fields(ex, timed, flops, extra), "flops": flops, "bytes_min": 0, "intensity": None,
                "kernel_name": entry, "smem_bytes": WGMMA_SMEM, "status": "ok"}
