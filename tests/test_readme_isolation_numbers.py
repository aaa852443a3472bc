"""Every number of the README's section "A kernel that faults, hangs or scribbles stays inside its
own point", recomputed from the H200 rows it names (outputs/reference/h200-2026-12-02/session8*) or
read from its source of truth where it is a setting (gemmlab/config.py, the watchdog's limits, the
controls' YAMLs). A failure names the README sentence that no longer matches."""
from __future__ import annotations

import csv
import json
import re
from dataclasses import fields
from datetime import datetime

import pytest
import yaml
from readme_said import ROOT, assert_said, folder, has, span

from gemmlab import config
from gemmlab.bench import isolation
from gemmlab.measure.worker import limits

D = "h200-2026-12-02"
pytestmark = pytest.mark.skipif(not has(f"{D}/session8", f"{D}/session8b"), reason="session8 rows not in this checkout")


def _rows(path):
    with open(folder(f"{D}/{path}") / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _default(schema, name):
    return next(f.default for f in fields(schema) if f.name == name)


def _ratios(session: str, run: str):
    summary = json.loads((folder(f"{D}/{session}") / "isolation" / "isolation_summary.json").read_text())
    pts = [p for p in summary["points"] if p["run"] == run and "ratio_to_clean" in p]
    return [p["ratio_to_clean"] for p in pts], sum(p["within_3pct"] for p in pts), len(pts)


def test_the_isolation_benchmark_numbers():
    said = []
    for session in ("session8", "session8b"):
        (r_ctl, _, _), (r_sweep, _, _) = _ratios(session, "with_control"), _ratios(session, "sweep")
        said.append(f"{min(r_ctl):.3f}-{max(r_ctl):.3f}")
        said.append(f"{min(r_sweep):.3f}-{max(r_sweep):.3f}")
    within = sum(_ratios("session8b", run)[1] for run in ("with_control", "sweep"))
    total = sum(_ratios("session8b", run)[2] for run in ("with_control", "sweep"))
    said.append(f"(`session8b`, {within} of {total} within 3%)")
    assert_said(said, "isolation benchmark")
    summary = json.loads((folder(f"{D}/session8") / "isolation" / "isolation_summary.json").read_text())
    controls = [p for p in summary["points"] if "expected" in p]
    assert all(p["as_expected"] for p in controls) and {p["m"] for p in controls if p["status"] == "failed"} == {4096}


def test_the_messages_quoted_are_the_rows_own():
    conduct = {(r["variant"], r["precision"], int(r["m"])): r for r in _rows("session8/conduct")}
    oob, into_b = conduct[("wrong_oob_row", "fp32", 1000)], conduct[("wrong_writes_b", "fp32", 1000)]
    hang, fault = conduct[("wrong_hang", "fp32", 2048)], conduct[("wrong_fault", "fp32", 4096)]
    m = re.match(r"(wrote (\d+) bytes after C's end \(first at offset \+\d+\))", oob["reason"])
    assert m and int(m.group(2)) <= 1000 * 4  # row M of FP32 C: at most 4000 bytes
    hang_text = hang["reason"].split(": the worker was killed")[0]
    assert_said([m.group(1), into_b["reason"], hang_text, fault["reason"].split(" (CUDARuntimeError")[0]],
                "conduct controls' messages")
    sanitize = {r["variant"]: r for r in _rows("session8b/sanitize")}
    bad = sanitize["wrong_oob_row"]
    assert_said([f"{bad['sanitize_errors']} errors, first: {bad['sanitize_report']}"], "memcheck")
    assert sanitize["wrong_writes_b"]["sanitize_errors"] == "0" and sanitize["smem_tiled"]["reliable"] == "false"


def test_each_control_fails_where_it_misbehaves_and_only_there():
    """"each failed exactly where it misbehaves and was ok elsewhere", with the YAMLs' thresholds."""
    defines = {v: yaml.safe_load((ROOT / f"conf/variant/{v}.yaml").read_text())["cuda"]["defines"]
               for v in ("wrong_oob_row", "wrong_fault", "wrong_hang")}
    misbehaves = {"wrong_oob_row": lambda m, k: m % defines["wrong_oob_row"]["BM"] != 0,
                  "wrong_writes_b": lambda m, k: k % 32 != 0,
                  "wrong_fault": lambda m, k: m >= defines["wrong_fault"]["FAULT_M"],
                  "wrong_hang": lambda m, k: k >= defines["wrong_hang"]["HANG_K"]}
    for r in _rows("session8/conduct"):
        if r["variant"] in misbehaves:
            bad = misbehaves[r["variant"]](int(r["m"]), int(r["k"]))
            assert r["status"] == ("failed" if bad else "ok"), (r["variant"], r["m"], r["status"], r["reason"])
    assert_said([f"where M % {defines['wrong_oob_row']['BM']} != 0", "where K % 32 != 0",
                 f"M >= {defines['wrong_fault']['FAULT_M']}", f"where K >= {defines['wrong_hang']['HANG_K']}"],
                "conduct controls")
    assert "static_cast<size_t>(1) << 40" in (ROOT / "kernels/cuda/common/wrong_gemm.cuh").read_text()


def test_the_guard_cost_and_the_settings():
    rows = _rows("session8b/default_run")
    ok = [r for r in rows if r["status"] == "ok"]
    cost = sum(json.loads(r["extra"])["guards"]["cost_s"] for r in ok)
    stamps = sorted(datetime.fromisoformat(r["timestamp"]) for r in rows)
    span_s = (stamps[-1] - stamps[0]).total_seconds()
    failed = sum(r["status"] == "failed" for r in rows)
    assert_said([f"{cost:.2f} s in all of the default run's {len(ok)} ok points, {100 * cost / span_s:.1f}% of the "
                 f"{span_s:.0f} s between its first and last row (`session8b/default_run`, {failed} failed)"],
                "guard cost")
    m = config.MeasureConf
    assert_said([f"`measure.guard_bytes` ({_default(m, 'guard_bytes') // 1024} KiB)",
                 f"`measure.point_timeout_floor_s` ({_default(m, 'point_timeout_floor_s'):g} s)",
                 f"a kernel at {limits.SLOW_FRACTION:.0%} of the FP32 SIMT peak"], "settings")


def test_what_the_readme_says_of_issue_30s_gpu_tests_is_in_their_logs():
    logs = folder(f"{D}/session8c") / "logs"
    scaled = (logs / "gpu_fp8_scaling.log").read_text()
    passed = int(re.search(r"(\d+) passed", scaled).group(1))
    assert "failed" not in scaled.splitlines()[-1]
    assert "test_cublaslt_rowcol_and_block_pass_the_check_at_deepseek_v3_shapes" in scaled
    assert_said([f"passed, {passed} of {passed}"], "fp8 scaling on the H200")
    block = (logs / "gpu_fp8_block.log").read_text()
    assert "PASSED tests/test_gpu_hopper_fp8_block.py::test_block_scaled_stage_matches_the_dequantized_fp64_product" in block


H = "h100-2026-12-06"


@pytest.mark.skipif(not has(f"{H}/session38", f"{H}/session38c"), reason="session38 rows not in this checkout")
def test_the_second_job_shift_numbers():
    """The H100 sentences: cuBLAS 2048 in `sweep_clean` against the plain runs, and session38c's
    medians by where cuBLAS ran (plain, a sweep's only job, a sweep's second job)."""
    summary = json.loads((folder(f"{H}/session38") / "isolation" / "isolation_summary.json").read_text())
    clean = {p["precision"]: p["ratio_to_clean"] for p in summary["points"]
             if p["run"] == "sweep" and p["variant"] == "cublas" and p["m"] == 2048}
    said = [f"(cuBLAS 2048 at {clean['fp16']:.3f} / {clean['bf16']:.3f} of the plain runs"]

    def fp16_us(paths):
        out = []
        for path in paths:
            with open(folder(f"{H}/session38c") / path / "results.csv", newline="") as fh:
                out += [1e6 * float(r["time_median_s"]) for r in csv.DictReader(fh)
                        if r["backend"] == "cublas" and r["precision"] == "fp16" and r["status"] == "ok"]
        return f"{min(out):.1f}-{max(out):.1f} us"

    first = [f"plain_orders/{i}" for i in range(1, 6)] + ["multirun/plain1", "multirun/plain2",
                                                          "multirun/multi1_1/0", "multirun/multi1_2/0"]
    said.append(f"ran {fp16_us(first)}")
    said.append(f"{fp16_us(['multirun/multi2_1/1', 'multirun/multi2_2/1'])}, at the same clocks")
    assert_said(said, "isolation benchmark")
    ncu = (folder(f"{H}/session38c") / "plain_orders" / "ncu_cublas.txt").read_text()
    assert "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT" in ncu


@pytest.mark.skipif(not has(f"{H}/session39", f"{H}/session39c", f"{H}/session39d"),
                    reason="session39 rows not in this checkout")
def test_what_the_second_job_stage_measured():
    """session39/39c/39d's `second_job` calls: FP16 cuBLAS 2048 by where it ran, over all three."""
    def fp16_us(run):
        out = []
        for session in ("session39", "session39c", "session39d"):
            for path in run:
                with open(folder(f"{H}/{session}") / "second_job" / path / "results.csv", newline="") as fh:
                    out += [1e6 * float(r["time_median_s"]) for r in csv.DictReader(fh)
                            if r["backend"] == "cublas" and r["precision"] == "fp16" and r["status"] == "ok"]
        assert len(out) == 3 * len(run)
        return f"{min(out):.1f}-{max(out):.1f} us"

    assert_said([f"ran {fp16_us(['plain1', 'plain2'])} in the plain runs",
                 f"{fp16_us(['second1', 'second2'])} as the second job",
                 f"{fp16_us(['second_no_worker'])} as the second job without the worker",
                 f"and {fp16_us(['second_per_gpu'])} with each job a process of its own"], "isolation benchmark")
    for session in ("session39", "session39c", "session39d"):
        ncu = (folder(f"{H}/{session}") / "logs" / "second_job_ncu.log").read_text()
        assert ncu.count("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT") >= 20


@pytest.mark.skipif(not has(f"{H}/session39f"), reason="session39f rows not in this checkout")
def test_which_first_job_slows_the_second():
    """session39f's `second_job_first`: cuBLAS by the job before it (each job's own row, 1/)."""
    def us(run, job=None):
        out = []
        for k in (1, 2):
            path = folder(f"{H}/session39f") / "second_job_first" / f"{run}{k}"
            with open((path / job if job else path) / "results.csv", newline="") as fh:
                out += [1e6 * float(r["time_median_s"]) for r in csv.DictReader(fh) if r["backend"] == "cublas"]
        assert len(out) == 2
        return f"{span(out, '.1f')} us"

    assert_said([f"ran {us('cublas_cublas', '1')} after cuBLAS's own job",
                 f"{us('wmma_nobase_cublas', '1')} after `wmma_tiled`'s with no cuBLAS baseline",
                 f"and {us('plain_nobase')} after `wmma_tiled`'s points in one plain run"], "isolation benchmark")


@pytest.mark.skipif(not has(f"{H}/session39g"), reason="session39g rows not in this checkout")
def test_a_worker_of_its_own_puts_the_second_job_back_in_line():
    """session39g's `second_job_fresh`: FP16 cuBLAS 2048 as the second job with run.fresh_worker on
    and off, and the plain runs of the same call."""
    def us(run):
        out = []
        for k in (1, 2):
            with open(folder(f"{H}/session39g") / "second_job_fresh" / f"{run}{k}" / "results.csv", newline="") as fh:
                out += [1e6 * float(r["time_median_s"]) for r in csv.DictReader(fh)
                        if r["backend"] == "cublas" and r["precision"] == "fp16"]
        assert len(out) == 2
        return f"{span(out, '.1f')} us"

    assert_said([f"ran {us('fresh')} (FP16) with its own worker", f"{us('shared')} in the shared one",
                 f"and {us('plain')} in the plain runs of the same call"], "isolation benchmark")
    assert config.RunConf().fresh_worker is True


@pytest.mark.skipif(not has(f"{H}/session39i"), reason="session39i rows not in this checkout")
def test_the_second_job_at_the_fresh_worker_default():
    """session39i: `second_job` at the default run.fresh_worker=true, FP16 cuBLAS 2048."""
    def us(runs):
        out = []
        for run in runs:
            with open(folder(f"{H}/session39i") / "second_job" / run / "results.csv", newline="") as fh:
                out += [1e6 * float(r["time_median_s"]) for r in csv.DictReader(fh)
                        if r["backend"] == "cublas" and r["precision"] == "fp16"]
        assert len(out) == len(runs)
        return f"{span(out, '.1f')} us"

    assert_said([f"the second job ran {us(['second1', 'second2'])} against {us(['plain1', 'plain2'])} plain",
                 f"shift ({us(['second_no_worker'])} there)"], "isolation benchmark")


@pytest.mark.skipif(not has(f"{H}/session40"), reason="session40 rows not in this checkout")
def test_any_other_kernels_job_slows_the_second():
    """session40's `second_job_cause`: FP16 cuBLAS 2048 as the shared worker's second job after wmma, mma_sync or a
    CUTLASS kernel, and the plain runs."""
    def us(run):
        out = []
        for k in (1, 2):
            with open(folder(f"{H}/session40") / "second_job_cause" / f"{run}{k}" / "results.csv", newline="") as fh:
                rows = [r for r in csv.DictReader(fh) if r["backend"] == "cublas"]
            out += [1e6 * float(r["time_median_s"]) for r in rows]
            assert len({r["worker"] for r in rows}) == 1
        assert len(out) == 2
        return f"{span(out, '.1f')} us"

    assert_said([f"cuBLAS ran {us('mma_sync_cublas')} after `mma_sync`'s", f"job, {us('wmma_cublas')} after `wmma`'s",
                 f"and {us('cutlass_auto_cublas')} after `cutlass_auto`'s",
                 f"against {us('plain')} in the plain runs"], "isolation benchmark")


@pytest.mark.skipif(not has(f"{H}/session40"), reason="session40 rows not in this checkout")
def test_the_isolation_benchmark_at_the_fresh_worker_default():
    summary = json.loads((folder(f"{H}/session40") / "isolation" / "isolation_summary.json").read_text())
    pts = [p for p in summary["points"] if "within_3pct" in p]
    out = [p for p in pts if not p["within_3pct"]]
    assert len(out) == 1 and (out[0]["variant"], out[0]["precision"], out[0]["m"]) == ("cublas", "bf16", 4096)
    assert all(p["as_expected"] for p in summary["points"] if "as_expected" in p)
    assert all(p["status"] == "ok" for p in pts)
    assert_said([f"{len(pts) - len(out)} of {len(pts)} within 3% of their clean runs",
                 f"cuBLAS BF16 at 4096 ran at {out[0]['ratio']:.3f} of `{out[0]['reference']}`",
                 f"differ by {100 * out[0]['clean_drift']:.1f}%"], "isolation benchmark")


@pytest.mark.skipif(not has(f"{H}/session44"), reason="session44 rows not in this checkout")
def test_the_isolation_bar_with_the_clean_runs_drift():
    """session44's one point outside 3%, inside 3% plus its clean runs' drift (gemmlab.bench.isolation.bar)."""
    summary = json.loads((folder(f"{H}/session44") / "isolation" / "isolation_summary.json").read_text())
    out = [p for p in summary["points"] if p.get("within_3pct") is False]
    assert len(out) == 1 and (out[0]["variant"], out[0]["precision"], out[0]["m"]) == ("cublas", "bf16", 4096)
    assert abs(out[0]["ratio"] - 1) <= isolation.bar(out[0]["clean_drift"])
    assert_said([f"cuBLAS BF16 at 4096 ran at {out[0]['ratio']:.3f} of",
                 f"with clean runs {100 * out[0]['clean_drift']:.1f}% apart: inside"], "isolation benchmark")
