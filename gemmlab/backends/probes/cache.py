"""Cache bandwidth GPU probes on the kernels of the variant's ``probe.source``
(kernels/cuda/probes/cache.cu): ``l2_bandwidth`` (a working set resident in L2, read with
ld.global.cg) and ``l1_bandwidth`` (a slice per block resident in its SM's L1, read with
ld.global.ca). Each row's ``bytes_min`` is the bytes requested, so ``bytes_min / time_median_s``
is the level's bandwidth, read like the copy probe's (analysis.figures.hierarchical_roofline)."""
from __future__ import annotations

import numpy as np

from gemmlab.backends.probes.common import Probe, ProbeSkip, timed_fields

THREADS = 1024
BLOCKS_PER_SM = 2
VEC4 = 16  # bytes per load


class CacheProbe(Probe):
    """The shape is unused (sizes=probe, [1, 1, 1]); params set the work. Timed on a warm cache:
    a flush before each sample would turn the first pass into a DRAM read."""

    compiles = True

    def skip(self, p, params):
        if (p.m, p.n, p.k) != (1, 1, 1):
            return f"{self.op} sets its work by params; run it at the shape [1, 1, 1] (sizes=probe)"
        return super().skip(p, params)

    def _warm_only(self, ex) -> None:
        if ex.timer.cache != "warm":
            raise ProbeSkip(f"{self.op} reads a working set resident in the cache: run it with "
                            f"measure.cache=warm (this run: {ex.timer.cache})")

    def _measure(self, backend, p, ex, entry: str, buf_floats: int, args, nbytes: int, extra: dict):
        """Time ``entry`` on 2 blocks x THREADS per SM over a buffer of ones; the row's fields."""
        cp = ex.cp
        grid = BLOCKS_PER_SM * ex.dev["sm_count"]
        buf, out = cp.ones(buf_floats, dtype=cp.float32), cp.empty(grid * THREADS, dtype=cp.float32)
        kern, args = backend.function(ex, p, entry), (buf, *args, out)

        def fn():
            kern((grid,), (THREADS,), args)

        timed = ex.timer.measure([[fn]])[0]
        extra = {**extra, "blocks": grid, "threads_per_block": THREADS,
                 "gbs": nbytes / timed.summary.median_s / 1e9}
        return {**timed_fields(ex, timed, 0, extra), "flops": 0, "bytes_min": nbytes, "intensity": None,
                "kernel_name": entry, "status": "ok"}


class L2Bandwidth(CacheProbe):
    """16-byte ld.global.cg over ``params.l2_fraction`` of the L2, ``params.passes`` times."""

    op = "l2_bandwidth"

    def run(self, backend, p, ex, seed, params):
        fraction, passes = float(params.get("l2_fraction", 0.25)), int(params.get("passes", 64))
        if not 0 < fraction <= 0.5 or passes < 2:
            raise ProbeSkip(f"l2_bandwidth needs 0 < params.l2_fraction <= 0.5 (a working set the L2 holds "
                            f"whole) and passes >= 2, got {fraction}, {passes}")
        self._warm_only(ex)
        n_vec4 = int(ex.dev["l2_bytes"] * fraction) // VEC4
        return self._measure(backend, p, ex, "l2_read", n_vec4 * 4, (np.int64(n_vec4), np.int32(passes)),
                             n_vec4 * VEC4 * passes, {"working_set_bytes": n_vec4 * VEC4, "passes": passes,
                                                      "load": "ld.global.cg.v4.f32"})


class L1Bandwidth(CacheProbe):
    """16-byte ld.global.ca over a ``params.slice_bytes`` slice per block, ``params.iters`` times."""

    op = "l1_bandwidth"

    def run(self, backend, p, ex, seed, params):
        slice_bytes, iters = int(params.get("slice_bytes", 16384)), int(params.get("iters", 2048))
        per_block = slice_bytes // VEC4
        if per_block <= 0 or per_block % THREADS or iters < 2:
            raise ProbeSkip(f"l1_bandwidth needs params.slice_bytes a multiple of {THREADS * VEC4} bytes and "
                            f"iters >= 2, got {slice_bytes}, {iters}")
        self._warm_only(ex)
        grid = BLOCKS_PER_SM * ex.dev["sm_count"]
        return self._measure(backend, p, ex, "l1_read", grid * per_block * 4, (np.int32(per_block), np.int32(iters)),
                             grid * per_block * VEC4 * iters, {"slice_bytes": slice_bytes, "iters": iters,
                                                               "load": "ld.global.ca.v4.f32"})
