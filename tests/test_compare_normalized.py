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
    for job in (1, 2, 3):  # figures too, unless --no-figures
        assert (out / f"job{job}" / "compare.csv").exists() and (out / f"job{job}" / "compare.png").exists()
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


# -- a define sweep's winner per group (--pick) ------------------------------------------------------
def write_points(folder: Path, run_id: str, points, seed: int, no_baseline=()) -> Path:
    """A decode-like job: ``points`` = [(precision, m, n, own_s, base_s, status)], each timed with cuBLASLt
    interleaved (no samples where the status is not ok; no baseline where (precision, m) is in ``no_baseline``)."""
    folder.mkdir(parents=True, exist_ok=True)
    with result_rows.RowWriter(folder) as rw, sample_files.SampleWriter(folder) as sw:
        for i, (precision, m, n, own_s, base_s, status) in enumerate(points):
            row = {"run_id": run_id, "point_key": f"{run_id}-{i}", "device": "NVIDIA H200", "kind": "gpu",
                   "backend": "cuda", "variant": "decode_wgmma", "precision": precision, "op": "gemm", "m": m,
                   "n": n, "k": 28672, "layout": "nt", "cache": "flush", "timer": "cuda_event", "status": status}
            if status == "ok":
                own, base = noisy(200, own_s, 0.003, seed + i), noisy(200, base_s, 0.003, seed + 500 + i)
                row.update(reliable=True, contended=False, distribution="normal", samples=200,
                           time_median_s=float(np.median(own)), time_p20_s=float(np.percentile(own, 20)),
                           time_p80_s=float(np.percentile(own, 80)), noise=0.01,
                           extra={"timer": {"sm_clock_inband_mhz": [1980, 1980, 1980]}})
                entries = [sample_files.entry("decode_wgmma", own, [1980] * 200)]
                if (precision, m) not in no_baseline:
                    row.update(baseline_variant="cublaslt", baseline_time_median_s=float(np.median(base)),
                               pct_of_baseline=100 * float(np.median(base)) / float(np.median(own)))
                    entries.append(sample_files.entry("cublaslt", base, [1980] * 200))
                sw.write(run_id, row["point_key"], entries)
            rw.write(row)
    return folder


PICK_KEY = "variant.decode_wgmma.cuda.defines"


def test_the_pick_of_each_group_is_its_fastest_job_that_measured_every_point_ok(tmp_path, capsys):
    """A sweep as .ci/h200-session.sh's stage_sweep makes one (``-m precision=bf16,fp8 ...defines=A,B,C,D``: jobs
    0-3 bf16, 4-7 fp8, each job's run at its own clock, which the library timed beside it shares), 1 and 64 tokens,
    two points a group. Set B is 6% faster at bf16 / 1 token and 20% at fp8 / 64, where it fails a point; C is 4%
    faster at both fp8 groups and 2% slower at bf16 / 64; D skips a bf16 / 64 point (a `requires` rule) and is 10%
    faster at both 64-token groups. Each fp8 job is compared with job 4 (its precision's first), not job 0. Each
    group's pick: the fastest job with every point of the group ok and as many points as any job, unless within the
    1% threshold of the group's first job (the defaults). At fp8 / 1 token no library is timed (as cuBLASLt's FP8
    at M = 1): the raw times decide, each job's clock in them, against 3.2%."""
    sweep = tmp_path / "sweep"
    # set: (its time ratio to the defaults per (precision, m), the status of a group's first point where not ok)
    table = {"{KSPAN:1}": ({}, {}),
             "{KSPAN:2}": ({("bf16", 1): 0.94, ("fp8", 64): 0.80, ("bf16", 64): 0.998}, {("fp8", 64): "failed"}),
             "{KSPAN:4}": ({("fp8", 1): 0.96, ("fp8", 64): 0.96, ("bf16", 64): 1.02}, {}),
             "{MSUB:2}": ({("bf16", 64): 0.90, ("fp8", 64): 0.90}, {("bf16", 64): "skipped"})}
    clocks = [1.0, 1.05, 0.97, 1.02, 1.03, 0.99, 0.98, 1.04]  # each job's run slower or faster throughout
    for job, (precision, defines) in enumerate((p, d) for p in ("bf16", "fp8") for d in table):
        ratio, status = table[defines]
        base = [1e-4 * n / 8192 * clocks[job] for n in (8192, 4096)]
        pts = [(precision, m, n, b * ratio.get((precision, m), 1.0), b,
                status.get((precision, m), "ok") if n == 8192 else "ok")
               for m in (1, 64) for n, b in zip((8192, 4096), base)]
        folder = write_points(sweep / str(job), f"run-{job}", pts, 100 * job, no_baseline={("fp8", 1)})
        (folder / ".hydra").mkdir()
        (folder / ".hydra" / "overrides.yaml").write_text(
            f"- variant=decode_wgmma\n- precision={precision}\n- {PICK_KEY}={defines}\n")
    out = tmp_path / "out"
    assert main(["--normalized", str(sweep), "--out", str(out), "--pick", PICK_KEY, "--by", "precision,m",
                 "--no-figures"]) == 0
    # --no-figures: each job's tables, no figure (the picks read the tables only)
    assert (out / "job1" / "compare.md").exists() and not list(out.glob("job*/compare.p*"))
    picks = pd.read_csv(out / "picks.csv", keep_default_na=False).set_index(["precision", "m"])
    assert picks.loc[("bf16", 1), "job"] == 1 and picks.loc[("bf16", 1), "value"] == "{KSPAN:2}"
    assert 0.93 < picks.loc[("bf16", 1), "geomean_ratio"] < 0.95 and picks.loc[("bf16", 1), "points"] == 2
    # job 3 skipped a point, job 1's 0.998 is inside the threshold: the defaults stay
    assert picks.loc[("bf16", 64), "job"] == 0 and picks.loc[("bf16", 64), "value"] == "{KSPAN:1}"
    assert "a point not measured that another job measured: jobs 3" in picks.loc[("bf16", 64), "why"]
    assert "the defaults stay" in picks.loc[("bf16", 64), "why"]
    # raw: C 0.96 x 0.98 / 1.03 = 0.913 (B 0.99 / 1.03 = 0.961, D 1.04 / 1.03 = 1.01)
    assert picks.loc[("fp8", 1), "job"] == 6 and picks.loc[("fp8", 1), "value"] == "{KSPAN:4}"
    assert 0.90 < picks.loc[("fp8", 1), "geomean_ratio"] < 0.925 and "raw median times" in picks.loc[("fp8", 1), "why"]
    assert picks.loc[("fp8", 64), "job"] == 7 and "a row not ok: jobs 5" in picks.loc[("fp8", 64), "why"]
    lines = pd.read_csv(out / "summary.csv", keep_default_na=False).set_index("job")
    assert list(lines["against"]) == [0, 0, 0, 4, 4, 4] and (lines["compared"] > 0).all()
    assert "against the first job with its other overrides" in (out / "summary.md").read_text()
    tsv = (out / "picks.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["precision", "m", "job", "value", "geomean_ratio", "points"]
    assert tsv[1].split("\t")[:4] == ["bf16", "1", "1", "{KSPAN:2}"] and len(tsv) == 5
    # by precision alone: bf16 takes B (0.94 and 0.998: 0.968; D ruled out by its skip, C slower), fp8 takes D (B
    # failed; D's 0.90 and 1.0, 0.949, beat C's 0.96)
    assert main(["--normalized", str(sweep), "--out", str(out), "--pick", PICK_KEY, "--by", "precision",
                 "--no-figures"]) == 0
    whole = pd.read_csv(out / "picks.csv", keep_default_na=False).set_index("precision")
    assert whole.loc["bf16", "job"] == 1 and whole.loc["bf16", "candidates"] == 3
    assert whole.loc["fp8", "job"] == 7 and whole.loc["fp8", "value"] == "{MSUB:2}"
    # bad input: --by without --pick, --pick with two runs, a column the rows lack, a misspelt key (every job would be
    # its own first: nothing picked), groups that mix the two precisions' jobs (--by without precision)
    capsys.readouterr()
    assert main(["--normalized", str(sweep), "--out", str(out), "--by", "m"]) == 2
    assert "give --pick KEY too" in capsys.readouterr().err
    assert main(["--normalized", str(sweep / "0"), str(sweep / "1"), "--pick", PICK_KEY]) == 2
    assert main(["--normalized", str(sweep / "0"), str(sweep / "1"), "--no-figures"]) == 2
    assert "give --normalized SWEEP alone" in capsys.readouterr().err
    assert main(["--normalized", str(sweep), "--out", str(out), "--pick", PICK_KEY, "--by", "tokens"]) == 2
    assert "--by tokens" in capsys.readouterr().err
    assert main(["--normalized", str(sweep), "--out", str(out), "--pick", PICK_KEY[:-1]]) == 2
    assert "no job's .hydra/overrides.yaml sets it" in capsys.readouterr().err
    assert main(["--normalized", str(sweep), "--out", str(out), "--pick", PICK_KEY, "--by", "m"]) == 2
    assert "add the keys the sweep varies besides" in capsys.readouterr().err


def write_sweep(sweep: Path, jobs, no_baseline=()) -> Path:
    """``jobs``: [(defines, {(precision, m): time ratio}, {(precision, m): status of the group's first point})], bf16
    only, 1 and 64 tokens, two points a group, every job's run at its own clock."""
    for job, (defines, ratio, status) in enumerate(jobs):
        clock = 1 + 0.03 * ((-1) ** job) * job
        pts = [("bf16", m, n, 1e-4 * n / 8192 * clock * ratio.get(("bf16", m), 1.0), 1e-4 * n / 8192 * clock,
                status.get(("bf16", m), "ok") if n == 8192 else "ok") for m in (1, 64) for n in (8192, 4096)]
        folder = write_points(sweep / str(job), f"run-{job}", pts, 7 * job, no_baseline=no_baseline)
        (folder / ".hydra").mkdir()
        (folder / ".hydra" / "overrides.yaml").write_text(f"- precision=bf16\n- {PICK_KEY}={defines}\n")
    return sweep


def test_a_pick_without_any_baseline_and_with_the_defaults_failing(tmp_path):
    """No library timed beside any point (a sweep without measure.baseline): every group is judged on the raw times.
    The defaults failing a point of a group: the fastest clean job is picked, and the note says the defaults were
    ruled out."""
    sweep = write_sweep(tmp_path / "raw", [("{A:1}", {}, {}), ("{A:2}", {("bf16", 1): 0.85}, {})],
                        no_baseline={("bf16", 1), ("bf16", 64)})
    out = tmp_path / "out"
    assert main(["--normalized", str(sweep), "--out", str(out), "--pick", PICK_KEY, "--by", "m", "--no-figures"]) == 0
    picks = pd.read_csv(out / "picks.csv", keep_default_na=False).set_index("m")
    # the raw ratio carries job 1's clock (1 - 0.03): 0.85 x 0.97
    assert picks.loc[1, "job"] == 1 and "raw median times" in picks.loc[1, "why"]
    assert 0.81 < picks.loc[1, "geomean_ratio"] < 0.84
    assert picks.loc[64, "job"] == 0  # 0.97 within 3.2%: the defaults stay
    sweep = write_sweep(tmp_path / "fail",
                        [("{A:1}", {}, {("bf16", 64): "failed"}), ("{A:2}", {("bf16", 64): 1.04}, {})])
    assert main(["--normalized", str(sweep), "--out", str(out), "--pick", PICK_KEY, "--by", "m", "--no-figures"]) == 0
    picks = pd.read_csv(out / "picks.csv", keep_default_na=False).set_index("m")
    assert picks.loc[64, "job"] == 1 and "the defaults, job 0, ruled out" in picks.loc[64, "why"]
    assert picks.loc[1, "job"] == 0


def test_the_picks_of_a_committed_sweep(tmp_path):
    """session28b's stage-16 sweep (``precision=bf16,fp8`` x five define sets, the libraries interleaved): each fp8
    job is compared with job 5 (fp8's first), and the picks are what that session concluded by hand: all four fixes
    at 64 tokens (~0.72 in both precisions); at fp8 / 1 token no library was timed beside the stage (cuBLASLt's FP8
    needs M x 2 bytes to be a multiple of 16), so the raw median times decide, against 3.2%: within it, the defaults."""
    sweep = REFERENCE / "h200-2026-12-05" / "session28b" / "decode_rows_frag"
    if not sweep.exists():
        pytest.skip("session28b's sweep is not in this checkout")
    assert main(["--normalized", str(sweep), "--out", str(tmp_path), "--pick", "variant.decode_rows.cuda.defines",
                 "--by", "precision,m", "--no-figures"]) == 0
    lines = pd.read_csv(tmp_path / "summary.csv", keep_default_na=False).set_index("job")
    assert lines.loc[4, "against"] == 0 and lines.loc[9, "against"] == 5 and (lines["compared"] > 0).all()
    # the same references without --pick: the one define key the sweep varies beside precision
    assert main(["--normalized", str(sweep), "--out", str(tmp_path / "plain"), "--no-figures"]) == 0
    plain = pd.read_csv(tmp_path / "plain" / "summary.csv", keep_default_na=False).set_index("job")
    assert list(plain["against"]) == list(lines["against"]) and not (tmp_path / "plain" / "picks.csv").exists()
    picks = pd.read_csv(tmp_path / "picks.csv", keep_default_na=False).set_index(["precision", "m"])
    everything = "{XS_WIDE:1,XPAD:1,AFRAG:1,CVT_H1:1}"
    for prec, job in (("bf16", 4), ("fp8", 9)):
        assert picks.loc[(prec, 64), "job"] == job and picks.loc[(prec, 64), "value"] == everything
        assert picks.loc[(prec, 64), "geomean_ratio"] < 0.75
    raw = picks.loc[("fp8", 1)]
    assert raw["job"] == 5 and raw["candidates"] == 5 and raw["points"] == 3
    assert "raw median times" in raw["why"] and "within the 3.2% threshold" in raw["why"]
