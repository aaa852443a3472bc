"""The paired A/B mode: ``variant=B measure.baseline=[A]`` times A interleaved with B in one run,
and ``python -m analysis.compare --paired RUN`` compares the two calls of each row.

The run side is checked on the host (the baseline resolution; the timing itself needs a GPU);
the analysis side on synthetic runs written with the harness's own writers (gemmlab.rows,
gemmlab.samples), whose true ratios, clock drifts and offsets are known.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import compose_cfg

from analysis.compare import Side, compare, compare_paired, report, stats
from analysis.compare.__main__ import main
from analysis.compare.core import COMPARED, NO_BASELINE, NOT_EVIDENCE, PAIRED
from gemmlab import rows as result_rows
from gemmlab import samples as sample_files
from gemmlab.runner import Runner


# -- the run side: which baselines a point is timed with ------------------------------------------
class _FakeGpuBackend:
    kind = "gpu"

    def skip_reason(self, point):
        return None


def _runner(tmp_path, overrides):
    runner = Runner(compose_cfg(["precision=fp32", "sizes=smoke", *overrides], tmp_path), tmp_path / "run")
    for name in ("cuda", "cublas", "cublaslt"):  # as on a GPU host: every backend can run
        runner._unavailable[name] = None
        runner._backends[name] = _FakeGpuBackend()
    return runner


def _point(runner, variant):
    return next(p for p in runner.points if p.variant == variant and not p.skip_reason)


def test_any_variant_is_a_baseline_but_never_its_own(tmp_path):
    runner = _runner(tmp_path, ["variant=[naive,smem_tiled]", "measure.baseline=[naive,cublas]",
                                "variant.naive.description=overridden"])
    tiled, naive = _point(runner, "smem_tiled"), _point(runner, "naive")
    got = runner.baselines_for(tiled, runner.backend("cuda"))
    assert [name for name, _p, _b in got] == ["naive", "cublas"]
    # the run's own config of a variant it also measures (its overrides), not the YAML's
    assert got[0][1].variant_cfg.description == "overridden"
    assert got[0][1].backend == "cuda" and got[0][1].variant == "naive"
    # naive's own points: cublas only; a variant timed against itself would share its call name
    assert [name for name, _p, _b in runner.baselines_for(naive, runner.backend("cuda"))] == ["cublas"]


def test_library_and_cpu_points_get_no_baseline(tmp_path):
    runner = _runner(tmp_path, ["variant=[cublas,cpu_blas]", "measure.baseline=[cublaslt]"])
    assert runner.baselines_for(_point(runner, "cublas"), runner.backend("cublas")) == []
    cpu = _point(runner, "cpu_blas")
    assert runner.baselines_for(cpu, runner.backend("cpu_blas")) == []
    # a host variant is no baseline of a GPU point: the GPU timer could not time it
    runner = _runner(tmp_path, ["variant=[naive]", "measure.baseline=[cpu_blas,cublas]"])
    got = runner.baselines_for(_point(runner, "naive"), runner.backend("cuda"))
    assert [name for name, _p, _b in got] == ["cublas"]


# -- the analysis side: synthetic runs ----------------------------------------------------------

VARIANT, BASELINE = "register_blocked", "cublas"


def noisy(n: int, median_s: float, noise: float, seed: int) -> np.ndarray:
    return median_s * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def _row(run_id: str, i: int, times, variant: str = VARIANT, size: int = 1024, **fields) -> dict:
    t = np.asarray(times, float)
    p20, med, p80 = np.quantile(t, [0.2, 0.5, 0.8])
    return {"run_id": run_id, "point_key": f"{run_id}-{i}", "device": "NVIDIA H200", "kind": "gpu",
            "backend": "cublas" if variant in ("cublas", "cublaslt") else "cuda", "variant": variant,
            "precision": "fp32", "op": "gemm", "m": size, "n": size, "k": size, "cache": "flush",
            "timer": "cuda_event", "status": "ok", "reliable": True, "contended": False, "distribution": "normal",
            "samples": len(t), "time_median_s": med, "time_p20_s": p20, "time_p80_s": p80,
            "noise": (p80 - p20) / med, **fields}


def write_paired_run(folder: Path, points, run_id: str = "run-p", with_samples: bool = True) -> Path:
    """A run as the GPU executor writes one: per point (dict: ``b`` the variant's sample times,
    ``a`` the baseline's or None, row fields beside), the row with its baseline columns and both
    calls' samples under their names, the in-band clock of each sample in ``clock``."""
    folder.mkdir(parents=True, exist_ok=True)
    with result_rows.RowWriter(folder) as rw, sample_files.SampleWriter(folder) as sw:
        for i, p in enumerate(points):
            p = dict(p)
            b, a = np.asarray(p.pop("b"), float), p.pop("a", None)
            clock = list(p.pop("clock", np.full(len(b), 1980.0)))
            fields = {}
            if a is not None:
                a = np.asarray(a, float)
                fields = {"baseline_variant": BASELINE, "baseline_time_median_s": float(np.median(a)),
                          "pct_of_baseline": 100 * float(np.median(a) / np.median(b)),
                          "baseline_sm_clock_min_mhz": 1980.0, "baseline_sm_clock_max_mhz": 1980.0}
            row = _row(run_id, i, b, **fields, **p)
            rw.write(row)
            if with_samples:
                entries = [sample_files.entry(row["variant"], b, clock)]
                if a is not None:
                    entries.append(sample_files.entry(BASELINE, a, clock))
                sw.write(run_id, row["point_key"], entries)
    return folder


def paired(folder: Path, threshold=None):
    return compare_paired(Side.load("A", folder), threshold)


def test_ten_percent_slower_than_its_interleaved_baseline_is_slower_with_the_true_ratio_inside(tmp_path):
    run = write_paired_run(tmp_path / "run", [{"a": noisy(100, 1e-3, 0.02, 1), "b": 1.1 * noisy(100, 1e-3, 0.02, 2)}])
    line = paired(run).table.iloc[0]
    assert (line["status"], line["verdict"], line["baseline"]) == (COMPARED, stats.SLOWER, BASELINE), line["why"]
    assert line["interval_from"] == stats.BOOTSTRAP and line["pairing"] == PAIRED
    assert line["ci_lo"] <= 1.1 <= line["ci_hi"] and line["ci_lo"] > 1 + line["threshold"]
    assert line["time_ratio"] == pytest.approx(1.1, rel=0.02)
    assert main(["--paired", str(run)]) == 1  # SLOWER: exit code 1, as the two-run mode
    out = run / "compare_paired"
    assert sorted(p.name for p in out.iterdir()) == sorted(report.FILES)
    csv = pd.read_csv(out / "compare.csv")
    assert csv["pairing"].tolist() == [PAIRED] and csv["verdict"].tolist() == [stats.SLOWER]
    md = (out / "compare.md").read_text()
    assert "paired (interleaved in one run): A = the baseline, B = the row's variant" in md
    assert f"{VARIANT} vs {BASELINE} fp32 1024x1024x1024" in md


def test_equal_calls_are_same_under_the_within_run_threshold(tmp_path):
    run = write_paired_run(tmp_path / "run", [{"a": noisy(100, 1e-3, 0.01, 3), "b": noisy(100, 1e-3, 0.01, 4)}])
    line = paired(run).table.iloc[0]
    assert line["verdict"] == stats.SAME, line["why"]
    # quiet calls: the threshold is the within-run floor, not the run-to-run drift
    assert line["threshold"] == stats.WITHIN_RUN_DRIFT < stats.RUN_TO_RUN_DRIFT
    assert main(["--paired", str(run), "--out", str(tmp_path / "o")]) == 0


def test_the_within_run_floor_is_the_clock_stability_an_evidence_row_allows():
    from gemmlab.config import MeasureConf

    assert stats.WITHIN_RUN_DRIFT == MeasureConf().clock_stable_fraction
    assert stats.point_threshold(0.01, 0.05, None, stats.WITHIN_RUN_DRIFT) == 0.05  # the noisier call's
    assert stats.point_threshold(0.01, 0.05, 0.1, stats.WITHIN_RUN_DRIFT) == 0.1  # --threshold as given


def test_a_clock_drift_both_calls_share_is_same_paired_and_not_same_across_two_runs(tmp_path):
    """The point of pairing: the clock slows 5% over the samples; the two calls, timed batch by
    batch, both slow alike, and their ratio stays 1. The same kernel measured in two runs whose
    clock states differ by that 5% looks 5% slower in the two-run mode."""
    n = 120
    drift = np.linspace(1.0, 1.05, n)  # sample i of both calls ran at the same clock state
    base, own = drift * noisy(n, 1e-3, 0.01, 5), drift * noisy(n, 1e-3, 0.01, 6)
    clock = 1980.0 / drift
    run = write_paired_run(tmp_path / "run", [{"a": base, "b": own, "clock": clock}])
    line = paired(run).table.iloc[0]
    assert line["verdict"] == stats.SAME, (line["time_ratio"], line["ci_lo"], line["ci_hi"], line["why"])
    assert line["clock_note"] == ""  # one clock state for both calls
    # the two-run mode on the same data split into two runs, the second 5% slower (its clock)
    one = write_paired_run(tmp_path / "one", [{"b": base}], run_id="run-1")
    two = write_paired_run(tmp_path / "two", [{"b": 1.05 * own}], run_id="run-2")
    got = compare(Side.load("A", one), Side.load("B", two)).table.iloc[0]
    assert got["status"] == COMPARED and got["verdict"] != stats.SAME, got["why"]
    assert got["ci_lo"] > 1.0  # it sees a slowdown that is the clock's


def test_rows_without_a_baseline_are_listed_and_rows_without_samples_have_no_interval(tmp_path):
    run = write_paired_run(tmp_path / "run", [
        {"a": noisy(50, 1e-3, 0.02, 7), "b": noisy(50, 1e-3, 0.02, 8), "size": 512},
        {"b": noisy(50, 1e-3, 0.02, 9), "variant": "cublas", "size": 512},  # a library point: no baseline
        {"a": noisy(50, 1e-3, 0.02, 10), "b": 2 * noisy(50, 1e-3, 0.02, 11), "size": 2048, "reliable": False,
         "unreliable_reason": "clock drift 4%"}])
    bare = write_paired_run(tmp_path / "bare", [{"a": noisy(50, 1e-3, 0.02, 12), "b": 1.2 * noisy(50, 1e-3, 0.02, 13)}],
                            with_samples=False)
    comp = paired(run)
    t = comp.table
    assert t["status"].tolist() == [COMPARED, NOT_EVIDENCE, NO_BASELINE]
    listed = t.iloc[2]
    assert listed["variant"] == "cublas" and listed["verdict"] == "" and pd.isna(listed["time_ratio"])
    assert "unreliable (clock drift 4%)" in t.iloc[1]["why"] and t.iloc[1]["verdict"] == stats.UNSURE
    assert not comp.regressed  # the unreliable row is twice as slow, but it does not count
    md = report.render_markdown(comp)
    assert "## No baseline (not compared)" in md and "- cublas fp32 512x512x512" in md
    assert "1 with no baseline timed with them" in report.summary(comp)
    line = paired(bare).table.iloc[0]
    assert (line["status"], line["verdict"], line["interval_from"]) == (COMPARED, stats.UNSURE, stats.NO_INTERVAL)
    assert "no interval: samples missing" in line["why"] and pd.isna(line["ci_lo"])
    assert line["time_ratio"] == pytest.approx(1.2, rel=0.03)  # from the row's pct_of_baseline


def test_every_baseline_timed_with_a_point_gets_its_line(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    b, a1, a2 = noisy(60, 1e-3, 0.01, 14), noisy(60, 1e-3, 0.01, 15), noisy(60, 0.8e-3, 0.01, 16)
    with result_rows.RowWriter(folder) as rw, sample_files.SampleWriter(folder) as sw:
        rw.write(_row("r", 0, b, baseline_variant="cublaslt", baseline_time_median_s=float(np.median(a2))))
        sw.write("r", "r-0", [sample_files.entry(VARIANT, b), sample_files.entry("cublas", a1),
                              sample_files.entry("cublaslt", a2)])
    t = paired(folder).table.set_index("baseline")
    assert t.loc["cublas", "verdict"] == stats.SAME and t.loc["cublaslt", "verdict"] == stats.SLOWER


def test_paired_cli_errors_exit_2_with_one_line(tmp_path, capsys):
    run = write_paired_run(tmp_path / "run", [{"a": noisy(30, 1e-3, 0.02, 17), "b": noisy(30, 1e-3, 0.02, 18)}])
    lone = write_paired_run(tmp_path / "lone", [{"b": noisy(30, 1e-3, 0.02, 19)}])  # no baseline anywhere
    cases = [(["--paired", str(run), str(run)], "not two"),
             ([str(run)], "give A and B, or --paired RUN"),
             (["--paired", str(tmp_path / "missing")], "no results file or folder"),
             (["--paired", str(lone), "--out", str(tmp_path / "o")], "has a baseline timed with it"),
             (["--paired", str(run), "--threshold", "0"], "--threshold must lie between 0 and 1")]
    for argv, says in cases:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("analysis.compare: ") and "\n" not in err and says in err, (argv, err)
    assert not (tmp_path / "o").exists()


def test_a_cutlass_baseline_the_run_does_not_measure_gets_its_options(tmp_path):
    """variant=cutlass_search measure.baseline=[cutlass_auto]: the backend, built from the run's
    variants, reads the baseline's options from the baseline's config when it first meets it."""
    from dataclasses import replace

    from gemmlab.backends.cutlass import Cutlass
    from gemmlab.config import load_variant

    runner = _runner(tmp_path, ["variant=[cutlass_search]", "precision=fp16", "measure.baseline=[cutlass_auto]"])
    backend = Cutlass(runner.cfg)
    assert "cutlass_auto" not in backend.options
    bp = replace(_point(runner, "cutlass_search"), variant="cutlass_auto", variant_cfg=load_variant("cutlass_auto"))
    assert backend.point_options(bp) == backend.options["cutlass_auto"]
    assert backend.options["cutlass_auto"] != backend.options["cutlass_search"]


TENSOR_CORES = Path(__file__).resolve().parent.parent / "outputs" / "reference" / "h200-2026-12-01" / "claims_tensor_cores"


@pytest.mark.skipif(not (TENSOR_CORES / "samples.parquet").is_file(), reason="the H200 reference run is not here")
def test_an_h200_run_with_cublas_baselines_pairs_by_call_name(tmp_path):
    """The H200 run of the tensor-core ladder timed cuBLAS and cuBLASLt interleaved with each
    stage: the paired ratio against the row's baseline_variant is its 100 / pct_of_baseline (the
    samples' medians are the rows' medians), and the library rows are listed, not compared."""
    comp = compare_paired(Side.load("A", TENSOR_CORES))
    t = comp.table
    rows = Side.load("A", TENSOR_CORES).rows.set_index("variant")
    compared = t[t["status"] == COMPARED]
    assert len(compared) == 8 and set(compared["baseline"]) == {"cublas", "cublaslt"}
    fastest = compared[[b == rows.loc[v, "baseline_variant"] for v, b in zip(compared["variant"], compared["baseline"])]]
    assert len(fastest) == 4  # one per stage
    for _, line in fastest.iterrows():
        assert line["time_ratio"] == pytest.approx(100 / rows.loc[line["variant"], "pct_of_baseline"], rel=1e-6)
    listed = t[t["status"] == NO_BASELINE]
    assert {"cublas", "cublaslt"} <= set(listed["variant"])
    assert main(["--paired", str(TENSOR_CORES)]) == 2  # never written under outputs/reference/
