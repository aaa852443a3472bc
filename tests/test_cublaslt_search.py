"""cuBLASLt's algorithm search (variant cublaslt_search), the parts that run without a GPU: its
config, its skips, and the bookkeeping of candidates (which is chosen, what the row records).
The search itself (nvmath's plan/execute on a device) runs in tests/test_gpu_core.py's GPU runs."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from conftest import compose_cfg, run_points

from gemmlab import validate
from gemmlab.backends import cublaslt_search as lt
from gemmlab.points import expand


class FakeResult:
    workspace_size = 1 << 20
    waves_count = 0.97


class FakeAlgorithm:
    """What nvmath-python 1.0.0's Algorithm reports (tile, stages: tuples; split_k: int)."""

    def __init__(self, algo_id, tile=(128, 256), stages=(64, 3), split_k=1, broken=()):
        self.algorithm_id = algo_id
        self._v = {"tile": tile, "stages": stages, "split_k": split_k, "reduction_scheme": 0,
                   "cta_swizzling": False, "custom_option": 0, "inner_shape": 0, "cluster_shape": (2, 1, 1)}
        self._broken = broken
        self.algorithm = FakeResult()

    def __getattr__(self, name):
        if name in ("_v", "_broken"):
            raise AttributeError(name)
        if name in self._broken:
            raise KeyError(f"enum value of {name} not in nvmath's table")
        if name in self._v:
            return self._v[name]
        raise AttributeError(name)

    def as_numpy(self):
        return ("numpy record of", self.algorithm_id)


# -- config --------------------------------------------------------------------------------------
def test_variant_composes_and_expands_to_search_points():
    cfg = compose_cfg(["variant=cublaslt_search", "precision=[bf16,fp8]", "sizes=smoke"])
    v = cfg.variant.cublaslt_search
    assert v.backend.value == "cublaslt" and v.cublaslt.search and v.cublaslt.search_limit == 16
    assert not v.in_default_sweep
    pts = expand(cfg)
    assert pts and {p.variant for p in pts} == {"cublaslt_search"}
    assert {p.precision for p in pts} == {"bf16", "fp8"}
    # the default cublaslt variant is the heuristic's first choice: no search
    assert not compose_cfg(["variant=cublaslt"]).variant.cublaslt.cublaslt.search


def test_search_limit_must_be_positive():
    cfg = compose_cfg(["variant=cublaslt_search", "variant.cublaslt_search.cublaslt.search_limit=0"])
    problems = [str(p) for p in validate.problems(cfg)]
    assert any("search_limit=0" in p and ">= 1" in p for p in problems), problems


@pytest.mark.parametrize("shape", ["[1024,1023,1024]", "[1,6144,4096]", "[1001,1024,1024]"])
def test_fp8_alignment_skip_holds_for_the_search_too(shape):
    # M too: the search ranks nvmath Matmul plans, which take FP8 at M, N, K % 16 only (the cublaslt
    # variant runs any M through the raw bindings)
    (p,) = expand(compose_cfg(["variant=cublaslt_search", "precision=fp8", "sizes.square=[]",
                               f"sizes.shapes=[{shape}]"]))
    assert p.skip_reason and "16-byte aligned" in p.skip_reason and "nvmath" in p.skip_reason


def test_the_searchs_fp8_rule_is_nvmath_takes():
    """The YAML's FP8 rule and cublaslt_scaled.nvmath_takes (the cublaslt variant's route to nvmath) state
    one rule twice: they must agree at every shape, or the search would rank plans nvmath refuses."""
    from gemmlab.backends.cublaslt_scaled import nvmath_takes
    shapes = [[m, n, k] for m in (1, 8, 16, 33, 64) for n in (1032, 1040, 6144) for k in (1024, 1032, 4096)]
    pts = expand(compose_cfg(["variant=cublaslt_search", "precision=fp8", "sizes.square=[]",
                              f"sizes.shapes={shapes}".replace(" ", "")]))
    assert len(pts) == len(shapes)
    assert all((p.skip_reason is None) is nvmath_takes(p) for p in pts)
    assert {nvmath_takes(p) for p in pts} == {True, False}


def test_without_a_gpu_every_point_is_a_skipped_row_with_a_reason(tmp_path):
    from conftest import cuda_device_reason

    if cuda_device_reason() is None:
        pytest.skip("this machine has a CUDA device: the search runs (tests/test_gpu_core.py)")
    cfg = compose_cfg(["variant=cublaslt_search", "precision=bf16", "sizes=smoke", "measure=quick",
                       "run.progress=false"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    assert rows and all(r["status"] == "skipped" and r["reason"] for r in rows), rows


# -- bookkeeping ---------------------------------------------------------------------------------
def test_records_name_each_algorithm_in_the_heuristics_order():
    recs = lt.candidate_records([FakeAlgorithm(21), FakeAlgorithm(66, tile=(64, 128), split_k=4),
                                 FakeAlgorithm(7, broken=("cluster_shape",))])
    assert [r["heuristic_rank"] for r in recs] == [0, 1, 2]
    assert [r["algorithm_id"] for r in recs] == [21, 66, 7]
    assert recs[1]["tile"] == [64, 128] and recs[1]["split_k"] == 4 and recs[0]["stages"] == [64, 3]
    assert recs[0]["workspace_bytes"] == 1 << 20 and recs[0]["waves_count"] == pytest.approx(0.97)
    assert recs[2]["unreadable"] == ["cluster_shape"] and "cluster_shape" not in recs[2]
    assert all(r["status"] == "ready" and r["best"] is False for r in recs)
    assert lt.describe(recs[1]) == "algo=66 tile=64x128 stages=64x3 split_k=4 cluster_shape=2x1x1"


def test_the_fastest_correct_candidate_is_chosen():
    recs = [{"heuristic_rank": 0, "status": "ok", "rank_time_median_s": 2.0e-3},
            {"heuristic_rank": 1, "status": "wrong", "rank_time_median_s": None},  # fast but wrong
            {"heuristic_rank": 2, "status": "ok", "rank_time_median_s": 1.5e-3},
            {"heuristic_rank": 3, "status": "ok", "rank_time_median_s": 1.5e-3},  # tie: heuristic order
            {"heuristic_rank": 4, "status": "failed"}]
    assert lt.choose(recs) == 2
    assert lt.choose([recs[1], recs[4]]) is None
    assert lt.choose([]) is None
    why = lt.no_correct_candidate([{"heuristic_rank": 0, "algorithm_id": 3, "status": "wrong", "error": "C[0,1]"}])
    assert why.startswith("no cuBLASLt algorithm") and "algo=3: wrong C[0,1]" in why


def test_search_on_a_simulated_device(monkeypatch):
    """run_search with nvmath's Matmul, CuPy and the timer simulated: the wrong candidate is
    left out even though it is fastest, the fastest correct one is picked, every candidate is
    recorded with its status, and extra says what a row needs."""
    algos = [FakeAlgorithm(10), FakeAlgorithm(11), FakeAlgorithm(12), FakeAlgorithm(13)]
    speed = {10: 3e-3, 11: 1e-3, 12: 2e-3, 13: 0.5e-3}
    wrong = {13}
    executed = []

    class FakeMatmul:
        algorithms = tuple(algos)

        def execute(self, algorithm=None, stream=None):
            executed.append(algorithm.algorithm_id)

    class FakeRef:
        released = False

        def release(self):
            FakeRef.released = True

    def check_candidate(point, fn, rec, ref, c):
        fn()
        if executed[-1] in wrong:
            rec.update(status="wrong", error="C[0, 0] off")
            return False
        rec.update(rel_error=1e-3, check_elem_max=0.1)
        return True

    def time_interleaved(fns, point):
        out = []
        for fn in fns:
            fn()
            out.append({"rank_time_median_s": speed[executed[-1]], "rank_tflops": 1.0, "samples": 7,
                        "launches_per_sample": 2})
        return out

    from gemmlab.measure import check

    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    seen = {}

    def gemm_reference(xp, point, kind, a_ref, b_ref, exact):
        seen.update(a=a_ref.shape, b=b_ref.shape, exact=exact)
        return FakeRef()

    monkeypatch.setattr(check, "gemm_reference", gemm_reference)
    monkeypatch.setattr(lt.ranking, "check_candidate", check_candidate)
    monkeypatch.setattr(lt.ranking, "time_interleaved", time_interleaved)
    point = types.SimpleNamespace(layout="nt", compute="bf16", flops=1e9)
    a, b_stored = np.zeros((8, 4)), np.zeros((16, 4))  # m=8, k=4, n=16; nt: B stored (n, k)
    pick = lt.run_search(point, FakeMatmul(), a, b_stored, "C", exact=False, stream_ptr=0, limit=16)
    assert seen == {"a": (8, 4), "b": (4, 16), "exact": False}  # checked against the logical operands
    assert pick.index == 1 and pick.algorithm == ("numpy record of", 11)
    assert [r["status"] for r in pick.records] == ["ok", "ok", "ok", "wrong"]
    assert [r["best"] for r in pick.records] == [False, True, False, False]
    assert FakeRef.released and pick.search_s >= 0
    extra = pick.extra()
    assert extra["algorithm"]["algorithm_id"] == 11 and extra["algorithm"]["heuristic_rank"] == 1
    assert "status" not in extra["algorithm"] and extra["search_limit"] == 16
    assert len(extra["search"]) == 4 and extra["search_s"] == pick.search_s

    wrong.update({10, 11, 12})  # none correct: the point fails, naming every candidate
    with pytest.raises(RuntimeError, match="no cuBLASLt algorithm"):
        lt.run_search(point, FakeMatmul(), a, b_stored, "C", exact=False, stream_ptr=0, limit=16)
