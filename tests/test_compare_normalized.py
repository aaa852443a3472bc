"""analysis.compare --normalized: two runs, each point's time over the baseline timed interleaved with it
in its own run. Synthetic runs (the harness's own writers, known true ratios) show the clock drift divided
out and a real change kept; the committed H200 rows give the threshold's constant and an end-to-end example
(stage 15's DESC_STEP 0 against 2 on DeepSeek-V3, session23e)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT

from analysis import data
from analysis.compare import Side, compare, compare_normalized, stats
from analysis.compare.__main__ import main
from analysis.compare.core import COMPARED, NO_BASELINE, NORMALIZED, SKIPPED
from gemmlab import rows as result_rows
from gemmlab import samples as sample_files

REFERENCE = ROOT / "outputs" / "reference"
SESSION23E = REFERENCE / "h200-2026-12-04" / "session23e"


def noisy(n: int, median_s: float, noise: float, seed: int) -> np.ndarray:
    return median_s * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def write_run(folder: Path, own_s: float, base_s: float, run_id: str, seed: int, noise: float = 0.005,
              with_samples: bool = True, baseline: str | None = "cublaslt", n: int = 200) -> Path:
    """One hand-written point (wgmma_ws BF16 4096) timed with ``baseline`` interleaved: medians
    ``own_s`` and ``base_s``, ``noise`` each; rows as the runner writes them (pct_of_baseline)."""
    own = noisy(n, own_s, noise, seed)
    folder.mkdir(parents=True, exist_ok=True)
    row = {"run_id": run_id, "point_key": f"{run_id}-0", "device": "NVIDIA H200", "kind": "gpu", "backend": "cuda",
           "variant": "wgmma_ws", "precision": "bf16", "op": "gemm", "m": 4096, "n": 4096, "k": 4096,
           "cache": "flush", "timer": "cuda_event", "status": "ok", "reliable": True, "contended": False,
           "distribution": "normal", "samples": n, "time_median_s": float(np.median(own)),
           "time_p20_s": float(np.percentile(own, 20)), "time_p80_s": float(np.percentile(own, 80)),
           "noise": float((np.percentile(own, 80) - np.percentile(own, 20)) / np.median(own)),
           "extra": {"timer": {"sm_clock_inband_mhz": [1755, 1755, 1755]}}}
    entries = [sample_files.entry("wgmma_ws", own, [1755] * n)]
    if baseline:
        base = noisy(n, base_s, noise, seed + 1000)
        row.update(baseline_variant=baseline, baseline_time_median_s=float(np.median(base)),
                   pct_of_baseline=100 * float(np.median(base)) / float(np.median(own)))
        entries.append(sample_files.entry(baseline, base, [1755] * n))
    with result_rows.RowWriter(folder) as rw, sample_files.SampleWriter(folder) as sw:
        rw.write(row)
        if with_samples:
            sw.write(run_id, row["point_key"], entries)
    return folder


def sides(a: Path, b: Path):
    return Side.load("A", a), Side.load("B", b)


def test_a_clock_drift_both_calls_felt_is_divided_out(tmp_path):
    """B's run 8% slower throughout (a lower clock): the two-run mode says SLOWER, the normalized SAME."""
    a = write_run(tmp_path / "a", 1.00e-3, 1.00e-3, "run-a", 1)
    b = write_run(tmp_path / "b", 1.08e-3, 1.08e-3, "run-b", 2)
    raw = compare(*sides(a, b))
    assert raw.compared.iloc[0]["verdict"] == stats.SLOWER
    norm = compare_normalized(*sides(a, b))
    line = norm.compared.iloc[0]
    assert norm.mode == NORMALIZED and line["baseline"] == "cublaslt" and line["pairing"] == NORMALIZED
    assert line["verdict"] == stats.SAME and line["ci_lo"] <= 1.0 <= line["ci_hi"]
    assert line["threshold"] == stats.NORMALIZED_DRIFT and line["interval_from"] == stats.BOOTSTRAP
    assert "cublaslt itself B/A 1.07" in line["why"] or "cublaslt itself B/A 1.08" in line["why"]


def test_a_real_change_under_a_drift_is_kept_with_the_true_ratio_inside(tmp_path):
    """B 4% faster against the library while its run's clock made everything 6% slower: the raw times
    say B slower (1.06 x 0.96 = 1.018, UNSURE or SAME at 3.2%), the normalized FASTER, 0.96 inside."""
    a = write_run(tmp_path / "a", 1.00e-3, 1.00e-3, "run-a", 3)
    b = write_run(tmp_path / "b", 1.06e-3 * 0.96, 1.06e-3, "run-b", 4)
    assert compare(*sides(a, b)).compared.iloc[0]["verdict"] != stats.FASTER
    line = compare_normalized(*sides(a, b)).compared.iloc[0]
    assert line["verdict"] == stats.FASTER and line["ci_lo"] <= 0.96 <= line["ci_hi"]
    # a slower B the other way round: SLOWER, the exit code's trigger
    c = write_run(tmp_path / "c", 1.06e-3 * 1.04, 1.06e-3, "run-c", 5)
    assert compare_normalized(*sides(a, c)).regressed


def test_one_percent_under_noise_is_never_called_the_wrong_way(tmp_path):
    """B 0.5% slower, 2% noise on every call: never FASTER (SAME or UNSURE)."""
    for seed in range(5):
        a = write_run(tmp_path / f"a{seed}", 1.00e-3, 1.00e-3, "run-a", 10 + seed, noise=0.02)
        b = write_run(tmp_path / f"b{seed}", 1.005e-3 * 1.03, 1.03e-3, "run-b", 20 + seed, noise=0.02)
        assert compare_normalized(*sides(a, b)).compared.iloc[0]["verdict"] in (stats.SAME, stats.UNSURE, stats.SLOWER)
        assert compare_normalized(*sides(a, b)).compared.iloc[0]["verdict"] != stats.FASTER


def test_rows_without_samples_give_the_pct_ratio_without_an_interval(tmp_path):
    a = write_run(tmp_path / "a", 1.00e-3, 1.00e-3, "run-a", 6, with_samples=False)
    b = write_run(tmp_path / "b", 0.95e-3, 1.00e-3, "run-b", 7, with_samples=False)
    line = compare_normalized(*sides(a, b)).compared.iloc[0]
    rows = [data.load(p).iloc[0] for p in (a, b)]
    assert line["verdict"] == stats.UNSURE and line["interval_from"] == stats.NO_INTERVAL
    assert line["time_ratio"] == pytest.approx(rows[0]["pct_of_baseline"] / rows[1]["pct_of_baseline"])
    assert "no interval: samples missing" in line["why"]


def test_a_point_without_a_baseline_on_one_side_is_listed_not_compared(tmp_path, capsys):
    a = write_run(tmp_path / "a", 1.00e-3, 1.00e-3, "run-a", 8)
    b = write_run(tmp_path / "b", 1.00e-3, 1.00e-3, "run-b", 9, baseline=None)
    comp = compare_normalized(*sides(a, b))
    assert comp.compared.empty
    line = comp.table.iloc[0]
    assert line["status"] == NO_BASELINE and "B: none" in line["why"] and "A: cublaslt" in line["why"]
    # the command: nothing to compare is bad input (exit 2, one line)
    assert main(["--normalized", str(a), str(b), "--out", str(tmp_path / "out")]) == 2
    assert "share no point" in capsys.readouterr().err


def test_the_command_line(tmp_path, capsys):
    a = write_run(tmp_path / "a", 1.00e-3, 1.00e-3, "run-a", 11)
    b = write_run(tmp_path / "b", 1.07e-3, 1.07e-3, "run-b", 12)
    assert main(["--normalized", str(a), str(b)]) == 0  # SAME: exit 0, written under B/compare_normalized
    assert (b / "compare_normalized" / "compare.csv").exists()
    md = (b / "compare_normalized" / "compare.md").read_text()
    assert "each over the baseline timed in its run" in md and "1.0%" in md
    assert main(["--normalized", "--paired", str(a), "--out", str(tmp_path / "x")]) == 2
    assert "--normalized compares two runs" in capsys.readouterr().err


needs_23e = pytest.mark.skipif(not SESSION23E.is_dir(), reason="the 2026-12-04 session-23e rows are not here")
needs_ws = pytest.mark.skipif(not all((REFERENCE / r).is_dir() for g in stats.NORMALIZED_RUNS for r in g),
                              reason="stage 12's repeated runs are not in this checkout")


@needs_ws
def test_the_normalized_drift_constant_is_what_the_reference_data_measures():
    groups = [pd.concat([data.load(REFERENCE / r) for r in g], ignore_index=True) for g in stats.NORMALIZED_RUNS]
    drift, n = stats.measured_normalized_drift(groups)
    assert round(drift, 3) == stats.NORMALIZED_DRIFT and n == 47
    # the raw times of the same pairs moved twice as far (2.0%; 3.2% across days, RUN_TO_RUN_DRIFT): the case
    # for dividing by the baseline
    raw = []
    for rows in groups:
        rows = rows[(rows["status"] == "ok") & rows["pct_of_baseline"].notna()]
        for _, g in rows.groupby(["variant", "precision", "m", "baseline_variant"]):
            t = g["time_median_s"].to_numpy(float)
            raw += [abs(np.log(t[j] / t[i])) for i in range(len(t)) for j in range(i + 1, len(t))]
    assert round(float(np.expm1(np.quantile(raw, 0.9))), 3) == 0.020


@needs_23e
def test_desc_step_against_its_predecessor_on_deepseek_v3(tmp_path):
    """Session 23e ran stage 15 with {DESC_STEP:0} (A) and then the defaults, DESC_STEP 2 (B), each with
    cuBLASLt interleaved. Normalized at 1.0%: 8 points FASTER, 3 SLOWER; the raw times at 3.2% decide 4 of
    stage 15's points (all FASTER) and call the library itself SLOWER at 2 (the README quotes these)."""
    raw = compare(Side.load("A", SESSION23E / "ds3_desc0"), Side.load("B", SESSION23E / "ds3_wgmma_fp8_block"))
    by = raw.compared.groupby(["variant", "verdict"]).size().to_dict()
    assert by == {("cublaslt", "SAME"): 24, ("cublaslt", "SLOWER"): 2, ("cublaslt", "UNSURE"): 1,
                  ("wgmma_fp8_block", "FASTER"): 4, ("wgmma_fp8_block", "SAME"): 21, ("wgmma_fp8_block", "UNSURE"): 2}
    code = main(["--normalized", str(SESSION23E / "ds3_desc0"), str(SESSION23E / "ds3_wgmma_fp8_block"),
                 "--out", str(tmp_path)])
    assert code == 1  # some point SLOWER
    t = pd.read_csv(tmp_path / "compare.csv", keep_default_na=False)
    done = t[t["status"] == COMPARED]
    assert len(done) == 27 and set(done["variant"]) == {"wgmma_fp8_block"} and set(done["baseline"]) == {"cublaslt"}
    assert done["verdict"].value_counts().to_dict() == {"SAME": 6, "UNSURE": 10, "FASTER": 8, "SLOWER": 3}
    lib = t[(t["variant"] == "cublaslt") & (t["status"] != SKIPPED)]  # the library's own rows: listed
    assert len(lib) == 27 and (lib["status"] == NO_BASELINE).all()
    big = done[done["m"] >= 1024].set_index("shape_name")
    assert big.loc["deepseek_v3.dense_gate_up.t4096", "verdict"] == stats.FASTER
    assert big.loc["deepseek_v3.moe_router.t4096", "verdict"] == stats.SLOWER


# -- a define sweep's jobs, each against its first ------------------------------------------------
def write_job(sweep: Path, job: int, own_s: float, base_s: float, defines: str, seed: int) -> Path:
    """Job ``job`` of a define sweep, with the overrides Hydra saves beside it."""
    folder = write_run(sweep / str(job), own_s, base_s, f"run-{job}", seed)
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text(
        f"- variant=wgmma_ws\n- precision=bf16\n- variant.wgmma_ws.cuda.defines={defines}\n")
    return folder


def test_a_sweep_is_judged_job_by_job_against_its_first(tmp_path, capsys):
    """Job 1: the same kernel in a run 7% slower throughout (SAME); job 2: 5% faster against the library
    while its run was 3% slower (FASTER, its ratio ~0.95); one summary line each, every job's comparison
    written beside it; exit 0 even with a slower job (a sweep's answer, not a regression)."""
    sweep = tmp_path / "sweep"
    write_job(sweep, 0, 1.00e-3, 1.00e-3, "{STAGES:4}", 30)
    write_job(sweep, 1, 1.07e-3, 1.07e-3, "{STAGES:3}", 31)
    write_job(sweep, 2, 1.03e-3 * 0.95, 1.03e-3, "{BN:128}", 32)
    write_job(sweep, 3, 1.00e-3 * 1.06, 1.00e-3, "{GROUP_M:16}", 33)
    assert main(["--normalized", str(sweep)]) == 0
    out = sweep / "compare_normalized"
    s = pd.read_csv(out / "summary.csv", keep_default_na=False).set_index("job")
    assert list(s.index) == [1, 2, 3]
    assert s.loc[1, "overrides"] == "variant.wgmma_ws.cuda.defines={STAGES:3}" and s.loc[1, "SAME"] == 1
    assert s.loc[2, "FASTER"] == 1 and 0.94 < s.loc[2, "geomean_ratio"] < 0.96
    assert s.loc[3, "SLOWER"] == 1
    for job in (1, 2, 3):
        assert (out / f"job{job}" / "compare.csv").exists()
    md = (out / "summary.md").read_text()
    assert "each job against job 0 (`variant.wgmma_ws.cuda.defines={STAGES:4}`)" in md and "(job2/compare.md)" in md
    # bad input: a folder without two jobs, --match, a file
    capsys.readouterr()
    assert main(["--normalized", str(sweep / "0"), "--out", str(tmp_path / "x")]) == 2
    assert "a sweep to compare needs two or more" in capsys.readouterr().err
    assert main(["--normalized", str(sweep), "--match", "a=b"]) == 2
    assert main(["--normalized", str(sweep / "0" / "results.csv")]) == 2


@needs_23e
def test_a_committed_sweep_needs_out_and_reads_as_its_jobs(tmp_path, capsys):
    """session24c's stage-15 sweep (the defaults, then three configurations at three points): nothing is
    written under outputs/reference/ (--out is needed); with --out, every configuration SLOWER at all three."""
    sweep = REFERENCE / "h200-2026-12-04" / "session24c" / "tune_wgmma_fp8_block"
    assert main(["--normalized", str(sweep)]) == 2
    assert "inside outputs/reference/" in capsys.readouterr().err
    assert main(["--normalized", str(sweep), "--out", str(tmp_path)]) == 0
    s = pd.read_csv(tmp_path / "summary.csv", keep_default_na=False)
    assert list(s["job"]) == [1, 2, 3] and (s["SLOWER"] == 3).all() and (s["geomean_ratio"] > 1.15).all()
    assert s.loc[0, "overrides"] == "variant.wgmma_fp8_block.cuda.defines={BN:256,CLUSTER_M:2}"
