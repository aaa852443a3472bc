"""The kernel search: each candidate checked and timed here, the fastest correct one measured.

``search: true`` profiles the listed kernels that match the set fields, like the CUTLASS
profiler's kernel search (which candidates: :mod:`gemmlab.backends.cutlass.catalog`): each
candidate is checked and timed here with CUDA events (interleaved rounds, back-to-back launches),
the fastest correct one is what the executor then measures; every candidate is recorded in the
row's ``extra.search``, the search's wall time (checks and ranking, not the compile) in
``extra.search_s``. Then the ``search_scheduler_top`` fastest persistent kernels are checked and
timed again, interleaved, with every ``search_swizzles`` x ``search_raster_orders``; the fastest
correct (kernel, swizzle, raster order) is measured, and every trial is in
``extra.search_scheduler``. The times here only rank the candidates (back to back, on a warm L2:
``rank_time_median_s``, ``rank_tflops``); the row's times come from the shared timer. The checking
and ranking are :mod:`gemmlab.measure.ranking`'s, shared with the cuBLASLt search.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from gemmlab import operands
from gemmlab.backends.cutlass.launch import KernelLaunch
from gemmlab.backends.cutlass.options import KernelOptions
from gemmlab.measure.ranking import check_candidate as _check_candidate
from gemmlab.measure.ranking import first_line
from gemmlab.measure.ranking import time_interleaved as _time_interleaved
from gemmlab.measure import check


@dataclass
class SearchPick:
    """What a search chose for a point (kernel, scheduler arguments) and every trial's record."""

    key_hash: str
    swizzle: int
    raster_order: str
    records: List[Dict[str, Any]]
    scheduler_records: List[Dict[str, Any]]
    search_s: float = 0.0  # wall time of the search: every candidate checked and ranked (no compile)


def run_search(point, opts: KernelOptions, launches: List[KernelLaunch], records, a, b, c,
               exact: bool, watch: Callable[[int], None] = lambda n_trials: None
               ) -> Tuple[KernelLaunch, SearchPick]:
    """Check and time every candidate kernel; then time the best ``search_scheduler_top`` again
    with every swizzle x raster order. Returns the fastest correct launch and a SearchPick.
    ``exact``: the inputs are small integers (``measure.distribution: exact``), as every point's
    reference takes it. ``watch(n)`` is told each round's number of trials before it starts (the
    worker's watchdog gives it a limit of its own: ``Backend.watch_search``)."""
    import time

    import cupy

    t0 = time.perf_counter()
    watch(len(launches))
    by_hash = {r["key_hash"]: r for r in records}
    # the same reference and element-wise verdict as every point (gemmlab/measure/check.py)
    # of the logical operands: a and b are stored as the point's layout says (gemmlab/operands.py)
    trans_a, trans_b = operands.transposed(point.layout)
    ref = check.gemm_reference(cupy, point, "gpu", operands.logical(a, trans_a), operands.logical(b, trans_b),
                               exact)
    try:
        good = []
        for launch in launches:
            rec = by_hash[launch.kernel.key_hash]
            rec.update(swizzle=launch.swizzle, raster_order=launch.raster_order)
            if _check_candidate(point, launch, rec, ref, c):
                good.append(launch)
        if not good:
            raise RuntimeError("no CUTLASS search candidate computed a correct result: "
                               + "; ".join(f"{r['kernel']}: {r.get('error')}" for r in records))
        for launch, result in zip(good, _time_interleaved(good, point)):
            by_hash[launch.kernel.key_hash].update(status="ok", **result)
        good.sort(key=lambda l: by_hash[l.kernel.key_hash]["rank_time_median_s"])
        best = good[0]
        scheduler_records: List[Dict[str, Any]] = []
        top = [l for l in good if l.kernel.config.get("persistent")][:opts.search_scheduler_top]
        combos = [(s, r) for s in opts.search_swizzles for r in opts.search_raster_orders]
        if top and len(combos) > 1:
            watch(len(top) * len(combos))
            best = _search_scheduler(point, top, combos, scheduler_records, ref, a, b, c) or best
    finally:
        ref.release()
    by_hash[best.kernel.key_hash]["best"] = True
    pick = SearchPick(best.kernel.key_hash, best.swizzle, best.raster_order, records, scheduler_records,
                      search_s=time.perf_counter() - t0)
    return best, pick


def _search_scheduler(point, top: List[KernelLaunch], combos, scheduler_records, ref,
                      a, b, c) -> Optional[KernelLaunch]:
    """Time ``top`` kernels with every (swizzle, raster order): run-time arguments, no compile."""
    trials: List[Tuple[KernelLaunch, Dict[str, Any]]] = []
    for kernel_launch in top:
        for swizzle, raster in combos:
            rec = {"kernel": kernel_launch.kernel.name, "key_hash": kernel_launch.kernel.key_hash,
                   "swizzle": swizzle, "raster_order": raster, "best": False}
            scheduler_records.append(rec)
            try:
                launch = KernelLaunch(kernel_launch.kernel, point, a, b, c, swizzle, raster)
            except Exception as e:
                rec.update(status="failed", error=f"arguments: {type(e).__name__}: {first_line(e)}")
                continue
            rec["grid"] = launch.grid
            if _check_candidate(point, launch, rec, ref, c):
                trials.append((launch, rec))
            else:
                launch.close()
    if not trials:
        return None
    for (_, rec), result in zip(trials, _time_interleaved([l for l, _ in trials], point)):
        rec.update(status="ok", **result)
    best, best_rec = min(trials, key=lambda t: t[1]["rank_time_median_s"])
    best_rec["best"] = True
    for launch, _ in trials:
        if launch is not best:
            launch.close()
    return best
