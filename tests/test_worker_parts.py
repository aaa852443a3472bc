"""The isolation worker's in-process parts (the rest runs in the worker's own process, where the fast
tier's coverage does not follow): which CUDA errors are sticky, how a worker target is named, and how
the isolation benchmark reads and keys its rows."""
from __future__ import annotations

import pytest

from gemmlab.bench import isolation
from gemmlab.measure.worker import child, faults


@pytest.mark.parametrize("text, says", [
    ("CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered",
     "illegal memory access (cudaErrorIllegalAddress)"),
    ("CUDADriverError: CUDA_ERROR_ASSERT: device-side assert triggered", "device-side assert or trap (cudaErrorAssert)"),
    ("CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
     "unspecified launch failure (cudaErrorLaunchFailure)"),
])
def test_sticky_errors_are_named_by_the_runtime_or_the_driver(text, says):
    assert faults.sticky_error(text) == says


def test_a_recoverable_error_is_not_sticky():
    assert faults.sticky_error("cudaErrorMemoryAllocation: out of memory") is None
    assert faults.sticky_error("CUDA_ERROR_INVALID_VALUE: invalid argument") is None


def test_a_worker_target_is_module_colon_function():
    assert child.load("gemmlab.measure.worker.faults:sticky_error") is faults.sticky_error
    with pytest.raises(ValueError, match="not 'module:function'"):
        child.load("gemmlab.measure.worker.faults")


def test_the_isolation_benchmark_reads_and_keys_its_rows(tmp_path):
    assert isolation.read(tmp_path / "missing.csv") == []
    f = tmp_path / "results.csv"
    f.write_text("variant,precision,m,n,k,status\nwmma_tiled,fp16,2048,2048,2048,ok\nwrong_fault,bf16,4096,4096,4096,failed\n")
    rows = isolation.read(f)
    assert [isolation.key(r) for r in rows] == [("wmma_tiled", "fp16", 2048, 2048, 2048),
                                                 ("wrong_fault", "bf16", 4096, 4096, 4096)]
    assert rows[1]["status"] == "failed"


def _runs(**tflops):
    """Runs of the isolation benchmark from {run: {(variant, m): tflops or a status}}."""
    out = {}
    for name, pts in tflops.items():
        rows = []
        for (v, m), t in pts.items():
            st = t if isinstance(t, str) else "ok"
            rows.append({"variant": v, "precision": "fp16", "m": str(m), "n": str(m), "k": str(m), "status": st,
                         "reason": "CUDA fault in wrong_fault: illegal memory access" if st == "failed" else "",
                         "tflops": "" if isinstance(t, str) else str(t)})
        out[name] = {"rows": rows}
    return out


def test_the_isolation_benchmark_judges_the_sweep_against_a_clean_sweep():
    """A sweep's job measures like the clean sweep's job, not like a plain run (session37: cuBLAS at
    2048 in its own job at 0.96 of the plain runs, the clean sweep not yet run): judged against the
    clean sweep it passes; a point that ran slow after the fault fails; with_control is judged against
    the clean runs; the control must fail at FAULT_M and only there; older summaries (no clean sweep)
    fall back to the clean runs."""
    clean = {("cublas", 2048): 620.0, ("cublas", 4096): 730.0}
    control = {("wrong_fault", 2048): 1.0, ("wrong_fault", 4096): "failed"}
    runs = _runs(clean_a=clean, clean_b=clean, with_control={**control, **clean},
                 sweep={**control, ("cublas", 2048): 596.0, ("cublas", 4096): 731.0},
                 sweep_clean={("cublas", 2048): 600.0, ("cublas", 4096): 729.0})
    points, problems = isolation.judge(runs, "wrong_fault", 4096)
    assert problems == []
    sweep = {p["m"]: p for p in points if p["run"] == "sweep" and "ratio" in p}
    assert sweep[2048]["reference"] == "sweep_clean" and abs(sweep[2048]["ratio"] - 596 / 600) < 1e-9
    assert abs(sweep[2048]["ratio_to_clean"] - 596 / 620) < 1e-9  # outside 3% of the plain runs, kept beside it
    runs["sweep"]["rows"][2]["tflops"] = "560.0"  # 0.93 of the clean sweep: a poisoned job
    _, problems = isolation.judge(runs, "wrong_fault", 4096)
    assert len(problems) == 1 and "at 0.933 of sweep_clean" in problems[0]
    del runs["sweep_clean"]  # an older run of the benchmark: the plain runs are the reference again
    _, problems = isolation.judge(runs, "wrong_fault", 4096)
    assert len(problems) == 1 and "of clean_a+clean_b" in problems[0]
    runs["with_control"]["rows"][1].update(status="ok", tflops="1.0")  # the control did not fault
    _, problems = isolation.judge(runs, "wrong_fault", 4096)
    assert any("control" in p for p in problems)


def test_a_point_is_judged_within_3pct_plus_its_clean_runs_drift():
    """A point whose two clean runs differ by 2.4% between themselves may sit 3.2% from its reference
    (the clock, not the control); a 4% shift where the clean runs agree still fails."""
    clean_a, clean_b = {("cublas", 4096): 700.0}, {("cublas", 4096): 717.0}
    sweep_clean, control = {("cublas", 4096): 700.0}, {("wrong_fault", 4096): "failed"}
    runs = _runs(clean_a=clean_a, clean_b=clean_b, with_control={**control, ("cublas", 4096): 708.5},
                 sweep={**control, ("cublas", 4096): 722.4}, sweep_clean=sweep_clean)
    points, problems = isolation.judge(runs, "wrong_fault", 4096)
    assert problems == [] and all(abs(p["bar"] - (0.03 + 17 / 700)) < 1e-9 for p in points if "bar" in p)
    runs["clean_b"]["rows"][0]["tflops"] = "700.0"  # the clean runs agree: the same 3.2% is now outside
    _, problems = isolation.judge(runs, "wrong_fault", 4096)
    assert len(problems) == 1 and "at 1.032 of sweep_clean, outside 1 +- 0.030" in problems[0]


ISOLATION_RUNS = [
    # (reference folder, the points that fail): session37's sweep judged against the plain runs
    # (its benchmark had no clean sweep yet), where the second job's shift was real (0.96, clean drift
    # 0.1-0.3%); the others' only points outside 3% sat where the clean runs drift by 1.7-4.2%
    ("h100-2026-12-06/session37", {("cublas", "fp16", 2048), ("cublas", "bf16", 2048)}),
    ("h100-2026-12-06/session38", set()), ("h100-2026-12-06/session40", set()),
    ("h100-2026-12-06/session44", set()), ("h200-2026-12-02/session8", set()),
    ("h200-2026-12-02/session8b", set()), ("h200-2026-12-05/session31c", set()),
]


@pytest.mark.parametrize("where, failing", ISOLATION_RUNS, ids=[w for w, _ in ISOLATION_RUNS])
def test_the_committed_isolation_runs_judged_by_the_bar(where, failing):
    from conftest import ROOT
    d = ROOT / "outputs" / "reference" / where / "isolation"
    if not d.exists():
        pytest.skip(f"{where} not in this checkout")
    runs = {n: {"rows": isolation.read(d / n / "results.csv")}
            for n in ("clean_a", "with_control", "sweep", "sweep_clean", "clean_b") if (d / n / "results.csv").exists()}
    points, problems = isolation.judge(runs, "wrong_fault", 4096)
    assert {(p["variant"], p["precision"], p["m"]) for p in points if p.get("within_bar") is False} == failing
    assert len(problems) == len(failing) and all(p["as_expected"] for p in points if "as_expected" in p)
