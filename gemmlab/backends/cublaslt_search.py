"""cuBLASLt's algorithm search (``cublaslt: {search: true}``, variant ``cublaslt_search``): what a
user could get by trying more than the heuristic's first choice.

The point's ``Matmul`` is planned with ``MatmulPlanPreferences(limit=search_limit)`` and the same
reduction mask as every cublaslt plan (compute-type reductions only), so cuBLASLt's heuristic
(``cublasLtMatmulAlgoGetHeuristic``) returns up to ``search_limit`` algorithms in its own order,
fastest first as it predicts. Each one is run with ``Matmul.execute(algorithm=...)``, checked
against the point's FP64 reference, and the correct ones are timed interleaved
(:mod:`gemmlab.measure.ranking`, as the CUTLASS search ranks its kernels: back to back, warm L2,
ranking only). The fastest correct algorithm is then planned alone into a fresh ``Matmul``
(``plan(algorithms=[...])``) whose ``execute()`` the executor measures as an ordinary point with
the shared timer, exactly as the ``cublaslt`` variant's heuristic first choice is measured.

Row fields: ``extra.algorithm`` (the chosen algorithm's id and configuration, its heuristic rank),
``extra.search`` (one record per candidate: heuristic rank, id, tile, stages, split-K, reduction
scheme, cluster shape, swizzle, workspace, status, check, rank time, best), ``extra.search_s``
(wall time of the search: planning, checks and ranking) and ``extra.search_limit``.

Pinned to nvmath-python 1.0.0's documented API: ``MatmulPlanPreferences.limit``,
``Matmul.plan(preferences=..., algorithms=...)`` (returns the heuristic's algorithms in its order),
``Matmul.execute(algorithm=...)`` (marked experimental there), and ``Algorithm``'s
``algorithm_id``, ``tile``, ``stages``, ``split_k``, ``reduction_scheme``, ``cta_swizzling``,
``custom_option``, ``inner_shape``, ``cluster_shape``, ``as_numpy`` / ``from_numpy``. Written
without a GPU: :func:`run_search` has not yet run on the H200.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from gemmlab import operands
from gemmlab.measure import ranking

# the Algorithm properties a record keeps (nvmath-python 1.0.0), in this order
CONFIG_FIELDS = ("tile", "stages", "split_k", "reduction_scheme", "cta_swizzling", "custom_option",
                 "inner_shape", "cluster_shape")
# fields of the heuristic's result beside the configuration
HEURISTIC_FIELDS = (("workspace_size", "workspace_bytes"), ("waves_count", "waves_count"))


def _plain(v):
    """A JSON-friendly value: tuples as lists, enums by name, numbers as numbers."""
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, (int, float, str)):
        return v
    if hasattr(v, "name"):
        return str(v.name)
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            return float(v)
        except (TypeError, ValueError):
            return str(v)


def algorithm_config(alg) -> Dict[str, Any]:
    """An algorithm's id and configuration, as nvmath's ``Algorithm`` reports them; a property
    this cuBLASLt or this algorithm does not report is left out (noted in ``unreadable``)."""
    out: Dict[str, Any] = {"algorithm_id": _plain(alg.algorithm_id)}
    unreadable = []
    for name in CONFIG_FIELDS:
        try:
            out[name] = _plain(getattr(alg, name))
        except Exception:  # e.g. an enum value nvmath's tables do not name
            unreadable.append(name)
    result = getattr(alg, "algorithm", None)
    for attr, key in HEURISTIC_FIELDS:
        try:
            out[key] = _plain(getattr(result, attr))
        except Exception:
            pass
    if unreadable:
        out["unreadable"] = unreadable
    return out


def describe(config: Dict[str, Any]) -> str:
    """``algo=21 tile=[128, 256] stages=[64, 3] split_k=1``: what kernel_name says of an algorithm."""
    parts = [f"algo={config.get('algorithm_id')}"]
    for name in ("tile", "stages", "split_k", "cluster_shape"):
        if name in config:
            v = config[name]
            parts.append(f"{name}={'x'.join(map(str, v)) if isinstance(v, list) else v}")
    return " ".join(parts)


def candidate_records(algorithms: Sequence) -> List[Dict[str, Any]]:
    """One record per algorithm, in the heuristic's order (``heuristic_rank`` 0 is what the
    heuristic would run, the ``cublaslt`` variant's choice)."""
    return [{"heuristic_rank": i, **algorithm_config(alg), "status": "ready", "best": False}
            for i, alg in enumerate(algorithms)]


def choose(records: Sequence[Dict[str, Any]]) -> Optional[int]:
    """Index of the fastest correct candidate (status ok, the shortest rank time; ties to the
    heuristic's order), or None when none was correct."""
    ok = [i for i, r in enumerate(records) if r.get("status") == "ok" and r.get("rank_time_median_s")]
    if not ok:
        return None
    return min(ok, key=lambda i: (records[i]["rank_time_median_s"], records[i]["heuristic_rank"]))


def no_correct_candidate(records: Sequence[Dict[str, Any]]) -> str:
    return ("no cuBLASLt algorithm of the search computed a correct result: "
            + "; ".join(f"rank {r['heuristic_rank']} algo={r.get('algorithm_id')}: {r.get('status')} "
                        f"{r.get('error') or ''}".strip() for r in records))


@dataclass
class LtSearchPick:
    """What the search chose for a point, and every candidate's record."""

    algorithm: Any  # the chosen Algorithm as nvmath's NumPy record (Algorithm.as_numpy)
    index: int  # its heuristic rank
    records: List[Dict[str, Any]]
    search_s: float
    limit: int

    def extra(self) -> Dict[str, Any]:
        chosen = {k: v for k, v in self.records[self.index].items()
                  if k not in ("status", "best", "error", "samples", "launches_per_sample")}
        return {"algorithm": chosen, "search": self.records, "search_s": self.search_s,
                "search_limit": self.limit}


def reference_operands(point, a, b, scales=None):
    """The logical A and B the check compares with: the stored operands as views, and for fp8
    (torch float8 tensors) their exact values in FP32 CuPy arrays, dequantized (FP64 times the
    scale) when ``scales`` (gemmlab/fp8.py) are not 1."""
    ta, tb = operands.transposed(point.layout)
    la, lb = operands.logical(a, ta), operands.logical(b, tb)
    if point.compute != "fp8":
        return la, lb
    import cupy
    import torch

    ra = cupy.from_dlpack(la.to(torch.float32).contiguous())
    rb = cupy.from_dlpack(lb.to(torch.float32).contiguous())
    if scales is not None and scales.mode != "none":
        from gemmlab import fp8

        ra, rb = fp8.dequantize(cupy, ra, scales.a), fp8.dequantize(cupy, rb, scales.b)
    return ra, rb


def run_search(point, mm, a, b, c, exact: bool, stream_ptr: int, limit: int,
               started: Optional[float] = None, scales=None) -> LtSearchPick:
    """Check and rank every algorithm of ``mm``'s plan (already planned with ``limit``); ``a``
    and ``b`` as stored, ``c`` the point's output buffer (``mm`` writes it in place).
    ``started``: the ``time.perf_counter()`` before the plan, so ``search_s`` counts the
    heuristic's query too. ``scales``: an fp8 input set's (gemmlab/fp8.py), for the reference."""
    import cupy

    from gemmlab.measure import check

    t0 = time.perf_counter() if started is None else started
    algorithms = list(mm.algorithms)
    records = candidate_records(algorithms)
    ref = check.gemm_reference(cupy, point, "gpu", *reference_operands(point, a, b, scales), exact)
    try:
        good = []
        for alg, rec in zip(algorithms, records):
            fn = _executor(mm, alg, stream_ptr)
            if ranking.check_candidate(point, fn, rec, ref, c):
                good.append((fn, rec))
        if good:
            for (_, rec), result in zip(good, ranking.time_interleaved([f for f, _ in good], point)):
                rec.update(status="ok", **result)
    finally:
        ref.release()
    best = choose(records)
    if best is None:
        raise RuntimeError(no_correct_candidate(records))
    records[best]["best"] = True
    return LtSearchPick(algorithms[best].as_numpy(), best, records, time.perf_counter() - t0, limit)


def _executor(mm, alg, stream_ptr: int):
    def fn():
        mm.execute(algorithm=alg, stream=stream_ptr)

    return fn
