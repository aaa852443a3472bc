"""The kernel search: each candidate checked and timed here, the fastest correct one measured.

``search: true`` profiles the listed kernels that match the set fields, like the CUTLASS
profiler's kernel search (which candidates: :mod:`gemmlab.backends.cutlass.catalog`): each
candidate is checked and timed here with CUDA events (interleaved rounds, back-to-back launches),
the fastest correct one is what the executor then measures; every candidate is recorded in the
row's ``extra.search``. Then the ``search_scheduler_top`` fastest persistent kernels are checked and
timed again, interleaved, with every ``search_swizzles`` x ``search_raster_orders``; the fastest
correct (kernel, swizzle, raster order) is measured, and every trial is in
``extra.search_scheduler``. The times here only rank the candidates (back to back, on a warm L2:
``rank_time_median_s``, ``rank_tflops``); the row's times come from the shared timer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from gemmlab import operands
from gemmlab.backends.cutlass.catalog import first_line
from gemmlab.backends.cutlass.launch import KernelLaunch
from gemmlab.backends.cutlass.options import KernelOptions
from gemmlab.measure import check

# search timing: rounds over all candidates (interleaved, so clock drift hits all alike), each
# sample at least this long (several back-to-back launches for short kernels)
SEARCH_ROUNDS = 7  # after one warm-up round that is not kept
SEARCH_SAMPLE_S = 5e-3
SEARCH_MAX_REPS = 100


@dataclass
class SearchPick:
    """What a search chose for a point (kernel, scheduler arguments) and every trial's record."""

    key_hash: str
    swizzle: int
    raster_order: str
    records: List[Dict[str, Any]]
    scheduler_records: List[Dict[str, Any]]


def run_search(point, opts: KernelOptions, launches: List[KernelLaunch], records, a, b, c,
               exact: bool) -> Tuple[KernelLaunch, SearchPick]:
    """Check and time every candidate kernel; then time the best ``search_scheduler_top`` again
    with every swizzle x raster order. Returns the fastest correct launch and a SearchPick.
    ``exact``: the inputs are small integers (``measure.distribution: exact``), as every point's
    reference takes it."""
    import cupy

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
            best = _search_scheduler(point, top, combos, scheduler_records, ref, a, b, c) or best
    finally:
        ref.release()
    by_hash[best.kernel.key_hash]["best"] = True
    pick = SearchPick(best.kernel.key_hash, best.swizzle, best.raster_order, records, scheduler_records)
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


def _check_candidate(point, launch: KernelLaunch, rec: Dict[str, Any], ref, c) -> bool:
    """Poison C, launch once, check against the reference; records the outcome in ``rec``."""
    import cupy

    from gemmlab.gpu import arrays

    arrays.poison(cupy, c)
    try:
        launch()
        cupy.cuda.get_current_stream().synchronize()
    except Exception as e:
        rec.update(status="failed", error=f"launch: {type(e).__name__}: {first_line(e)}")
        return False
    res = ref.verify(c)
    rec.update(rel_error=res.rel_error, check_elem_max=res.elem_max)
    if not res.passed:
        rec.update(status="wrong", error=res.failure())
        return False
    return True


def _time_interleaved(launches: List[KernelLaunch], point) -> List[Dict[str, Any]]:
    """Median time of each launch: rounds over all of them, each round in a rotated order so clock
    drift hits all alike, each sample a run of back-to-back launches at least SEARCH_SAMPLE_S long."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    launches[0]()
    end.record(stream)
    end.synchronize()
    one_s = max(cupy.cuda.get_elapsed_time(start, end) * 1e-3, 1e-7)
    reps = int(min(SEARCH_MAX_REPS, max(1, round(SEARCH_SAMPLE_S / one_s))))
    samples: List[List[float]] = [[] for _ in launches]
    indices = list(range(len(launches)))
    for r in range(SEARCH_ROUNDS + 1):
        shift = r % len(indices)
        for i in indices[shift:] + indices[:shift]:
            start.record(stream)
            for _ in range(reps):
                launches[i]()
            end.record(stream)
            end.synchronize()
            if r:  # round 0 warms the clocks and caches
                samples[i].append(cupy.cuda.get_elapsed_time(start, end) * 1e-3 / reps)
    out = []
    for ts in samples:
        ts = sorted(ts)
        median = ts[len(ts) // 2]
        # ranking only (back to back, warm L2): the row's times come from the shared timer
        out.append({"rank_time_median_s": median, "rank_tflops": point.flops / median / 1e12, "samples": len(ts),
                    "launches_per_sample": reps})
    return out
