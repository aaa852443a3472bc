"""Shared-memory GPU probes on the kernels of the variant's ``probe.source``
(kernels/cuda/probes/smem.cu): ``smem_bandwidth``, ``smem_bank`` (lane stride) and
``smem_latency`` (a pointer chase, SM cycles per load)."""
from __future__ import annotations

import numpy as np

from gemmlab.backends.probes.common import Probe, ProbeSkip, timed_fields

SMEM_BLOCK = 1024  # threads per block of the shared-memory probes (32 KB each, 2 blocks per SM)
SMEM_BLOCKS_PER_SM = 2


class SmemProbe(Probe):
    """Shared-memory microbenchmarks (kernels/cuda/probes/smem.cu); the shape is unused, so they
    run at [1, 1, 1] (sizes=probe); the work is set by params."""

    compiles = True

    def skip(self, p, params):
        if (p.m, p.n, p.k) != (1, 1, 1):
            return f"{self.op} sets its work by params; run it at the shape [1, 1, 1] (sizes=probe)"
        return super().skip(p, params)

    def _grid(self, ex) -> int:
        return SMEM_BLOCKS_PER_SM * ex.dev["sm_count"]


class SmemBandwidth(SmemProbe):
    """Conflict-free LDS.128 from a 32 KB array: bytes requested / time."""

    op = "smem_bandwidth"

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        iters = int(params.get("iters", 8192))
        if iters % 8:
            raise ProbeSkip(f"smem_bandwidth params.iters must be a multiple of 8, got {iters}")
        kern = backend.function(ex, p, "smem_read_vec4")
        grid = self._grid(ex)
        out = cp.empty(grid * SMEM_BLOCK, dtype=cp.float32)
        args = (out, np.int32(iters))

        def fn():
            kern((grid,), (SMEM_BLOCK,), args)

        nbytes = grid * SMEM_BLOCK * iters * 16
        timed = ex.timer.measure([[fn]])[0]
        extra = {"iters": iters, "blocks": grid, "threads_per_block": SMEM_BLOCK,
                 "load_bytes": 16, "smem_gbs": nbytes / timed.summary.median_s / 1e9}
        return {**timed_fields(ex, timed, 0, extra), "flops": 0, "bytes_min": nbytes, "intensity": None,
                "kernel_name": "smem_read_vec4", "smem_bytes": 32768, "status": "ok"}


class SmemBank(SmemProbe):
    """LDS.32 where lane j reads word j * stride + i: stride 32 is a 32-way bank conflict,
    strides 1 and 33 are conflict-free. Rows of the same run compare directly."""

    op = "smem_bank"

    def skip(self, p, params):
        stride = int(params.get("stride", 1))
        if not 1 <= stride <= 33:
            return f"smem_bank params.stride must be in 1..33, got {stride}"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        iters, stride = int(params.get("iters", 4096)), int(params.get("stride", 1))
        if iters % 32:
            raise ProbeSkip(f"smem_bank params.iters must be a multiple of 32, got {iters}")
        kern = backend.function(ex, p, "smem_read_strided")
        grid = self._grid(ex)
        out = cp.empty(grid * SMEM_BLOCK, dtype=cp.float32)
        args = (out, np.int32(iters), np.int32(stride))

        def fn():
            kern((grid,), (SMEM_BLOCK,), args)

        nbytes = grid * SMEM_BLOCK * iters * 4
        timed = ex.timer.measure([[fn]])[0]
        banks = len({(lane * stride) % 32 for lane in range(32)})
        extra = {"stride": stride, "iters": iters, "blocks": grid, "threads_per_block": SMEM_BLOCK,
                 "distinct_banks": banks, "conflict_ways": 32 // banks,
                 "smem_gbs": nbytes / timed.summary.median_s / 1e9}
        return {**timed_fields(ex, timed, 0, extra), "flops": 0, "bytes_min": nbytes, "intensity": None,
                "kernel_name": "smem_read_strided", "smem_bytes": 32768, "status": "ok"}


class SmemLatency(SmemProbe):
    """One thread chases a chain of shared-memory addresses; clock64() around it gives SM
    cycles per dependent load (the load-to-use latency)."""

    op = "smem_latency"

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        hops, hop_words = int(params.get("hops", 65536)), int(params.get("hop_words", 33))
        if hops % 16:
            raise ProbeSkip(f"smem_latency params.hops must be a multiple of 16, got {hops}")
        kern = backend.function(ex, p, "smem_latency")
        cycles = cp.zeros(1, dtype=cp.uint64)
        sink = cp.zeros(1, dtype=cp.uint32)
        args = (cycles, sink, np.int32(hops), np.int32(hop_words))

        def fn():
            kern((1,), (32,), args)

        fn()
        ex.stream.synchronize()
        first_cycles = int(cycles.get()[0])
        timed = ex.timer.measure([[fn]])[0]
        last_cycles = int(cycles.get()[0])  # the chain is deterministic: both runs must agree
        per_load = last_cycles / hops
        extra = {"hops": hops, "hop_words": hop_words, "cycles_per_load": per_load,
                 "cycles_per_load_first_run": first_cycles / hops,
                 "ns_per_load_from_events": timed.summary.median_s / hops * 1e9}
        return {**timed_fields(ex, timed, 0, extra), "flops": 0, "bytes_min": 4 * hops, "intensity": None,
                "kernel_name": "smem_latency", "smem_bytes": 32768, "status": "ok"}
