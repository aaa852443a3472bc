"""What a backend's search does with its candidates, whatever they are (CUTLASS kernels, cuBLASLt
algorithms): check each one like every point is checked, then rank the correct ones by time.

A candidate is a callable that enqueues C = A @ B into the point's output buffer. The times here
only rank candidates (rounds over all of them, back to back, on a warm L2: ``rank_time_median_s``,
``rank_tflops``); the winner's row gets its times from the shared timer (gemmlab/measure/timer.py)
when the executor measures it as an ordinary point.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

# rounds over all candidates (interleaved, so clock drift hits all alike), each sample at least
# this long (several back-to-back launches for short calls)
SEARCH_ROUNDS = 7  # after one warm-up round that is not kept
SEARCH_SAMPLE_S = 5e-3
SEARCH_MAX_REPS = 100


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def check_candidate(point, launch: Callable[[], None], rec: Dict[str, Any], ref, c) -> bool:
    """Poison C, launch once, check against the reference (gemmlab/measure/check.py, the same
    element-wise verdict as every point); records the outcome in ``rec``."""
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


def reps_for(one_call_s: float) -> int:
    """Back-to-back launches per ranking sample: enough for SEARCH_SAMPLE_S, at most SEARCH_MAX_REPS."""
    return int(min(SEARCH_MAX_REPS, max(1, round(SEARCH_SAMPLE_S / max(one_call_s, 1e-7)))))


def rank_summary(samples_s: Sequence[float], flops: float, reps: int) -> Dict[str, Any]:
    """A candidate's ranking record from its per-launch sample times."""
    ts = sorted(samples_s)
    median = ts[len(ts) // 2]
    return {"rank_time_median_s": median, "rank_tflops": flops / median / 1e12, "samples": len(ts),
            "launches_per_sample": reps}


def time_interleaved(launches: Sequence[Callable[[], None]], point) -> List[Dict[str, Any]]:
    """Median time of each launch: rounds over all of them, each round in a rotated order so clock
    drift hits all alike, each sample a run of back-to-back launches at least SEARCH_SAMPLE_S long."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    launches[0]()
    end.record(stream)
    end.synchronize()
    reps = reps_for(cupy.cuda.get_elapsed_time(start, end) * 1e-3)
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
    return [rank_summary(ts, point.flops, reps) for ts in samples]
