"""analysis.compare: A against B per point, with intervals and verdicts that hold up under noise.

Synthetic runs are written with the harness's own writers (gemmlab.rows, gemmlab.samples) from
known sample times, so the true ratio is known; a real CPU run made here, and two committed H200
reference datasets, go through the command end to end.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, compose_cfg, run_points

from analysis import data
from analysis.compare import Side, compare, report, stats
from analysis.compare.__main__ import main
from analysis.compare.core import COMPARED, NOT_EVIDENCE, ONLY_A, ONLY_B, SKIPPED
from analysis.compare.match import KEY
from gemmlab import rows as result_rows
from gemmlab import samples as sample_files

REFERENCE = ROOT / "outputs" / "reference"
SQUARE_29 = REFERENCE / "h200-2026-11-29" / "cublas_square"
SQUARE_30 = REFERENCE / "h200-2026-11-30" / "cublas_square"
needs_reference = pytest.mark.skipif(not (SQUARE_29.is_dir() and SQUARE_30.is_dir()),
                                     reason="the H200 cublas_square reference data is not in this checkout")


# -- synthetic runs ----------------------------------------------------------------------------
def write_run(folder: Path, points, run_id: str = "run-a", with_samples: bool = True) -> Path:
    """A results folder holding ``points`` (dicts: ``times`` plus row fields that differ from a
    reliable cuBLAS FP16 GEMM at m = n = k = 1024 timed between events)."""
    folder.mkdir(parents=True, exist_ok=True)
    with result_rows.RowWriter(folder) as rw, sample_files.SampleWriter(folder) as sw:
        for i, p in enumerate(points):
            p = dict(p)
            times = np.asarray(p.pop("times"), float)
            clock = p.pop("clock_mhz", 1980.0)
            size = p.pop("size", 1024)
            row = {"run_id": run_id, "point_key": f"{run_id}-{i}", "device": "NVIDIA H200", "kind": "gpu",
                   "backend": "cublas", "variant": "cublas", "precision": "fp16", "op": "gemm",
                   "m": size, "n": size, "k": size, "cache": "flush", "timer": "cuda_event", "status": "ok",
                   "reliable": True, "contended": False, "distribution": "normal", "samples": len(times),
                   "time_median_s": float(np.median(times)), "time_p20_s": float(np.percentile(times, 20)),
                   "time_p80_s": float(np.percentile(times, 80)),
                   "noise": float((np.percentile(times, 80) - np.percentile(times, 20)) / np.median(times)),
                   "extra": {"timer": {"sm_clock_inband_mhz": [clock, clock, clock]}}, **p}
            rw.write(row)
            if with_samples:
                sw.write(run_id, row["point_key"], [sample_files.entry(row["variant"], times, [clock] * len(times))])
    return folder


def noisy(n: int, median_s: float, noise: float, seed: int) -> np.ndarray:
    return median_s * (1 + noise * np.random.default_rng(seed).standard_normal(n))


def run_compare(a: Path, b: Path, threshold=None):
    return compare(Side.load("A", a), Side.load("B", b), threshold)


# -- (a) a run against itself --------------------------------------------------------------------
def test_a_run_against_itself_is_same_everywhere(tmp_path):
    run = write_run(tmp_path / "a", [{"times": noisy(50, 1e-3 * s / 1024, 0.03, s), "size": s}
                                     for s in (256, 512, 1024)])
    comp = run_compare(run, run)
    assert list(comp.table["status"]) == [COMPARED] * 3
    assert list(comp.table["verdict"]) == [stats.SAME] * 3
    assert (comp.table["time_ratio"] == 1).all()
    assert (comp.table["interval_from"] == stats.BOOTSTRAP).all()
    # and without samples (older rows), from the rows' p20/p80
    bare = write_run(tmp_path / "bare", [{"times": noisy(50, 1e-3, 0.03, 1)}], with_samples=False)
    got = run_compare(bare, bare).table.iloc[0]
    assert (got["verdict"], got["interval_from"]) == (stats.SAME, stats.QUANTILES)


# -- (b) a real regression -----------------------------------------------------------------------
@pytest.mark.slow
def test_ten_percent_slower_is_slower_with_the_true_ratio_inside_and_exit_code_1(tmp_path):
    a = write_run(tmp_path / "a", [{"times": noisy(100, 1e-3, 0.02, 1)}])
    b = write_run(tmp_path / "b", [{"times": 1.1 * noisy(100, 1e-3, 0.02, 2)}], run_id="run-b")
    line = run_compare(a, b).table.iloc[0]
    assert line["verdict"] == stats.SLOWER, line["why"]
    assert line["ci_lo"] <= 1.1 <= line["ci_hi"]
    assert line["ci_lo"] > 1 + line["threshold"]
    assert main([str(a), str(b), "--out", str(tmp_path / "out")]) == 1
    assert main([str(b), str(a), "--out", str(tmp_path / "out2")]) == 0  # the other way: FASTER, no regression
    assert pd.read_csv(tmp_path / "out2" / "compare.csv")["verdict"].tolist() == [stats.FASTER]


# -- (c) a change smaller than the noise ------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("threshold", [None, 0.005])
def test_one_percent_under_two_percent_noise_never_goes_the_wrong_way(tmp_path, threshold):
    seen = set()
    for seed in range(8):
        a = write_run(tmp_path / f"a{seed}", [{"times": noisy(30, 1e-3, 0.02, 100 + seed)}])
        b = write_run(tmp_path / f"b{seed}", [{"times": 1.01 * noisy(30, 1e-3, 0.02, 200 + seed)}], run_id="b")
        v = run_compare(a, b, threshold).table.iloc[0]["verdict"]
        seen.add(v)
        assert v != stats.FASTER, f"seed {seed}: B called faster, it is 1% slower"
        if threshold is None:
            assert v in (stats.SAME, stats.UNSURE), f"seed {seed}: {v} for a 1% change under the drift"
    assert seen <= {stats.SAME, stats.UNSURE, stats.SLOWER}


def test_a_verdict_never_states_a_direction_its_interval_does_not_support():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        lo = float(rng.uniform(0.8, 1.2))
        hi = lo + float(rng.uniform(0, 0.2))
        t = float(rng.uniform(0.005, 0.1))
        v, _ = stats.verdict(lo, hi, t)
        if v == stats.SLOWER:
            assert lo > 1 + t
        elif v == stats.FASTER:
            assert hi < 1 - t
        elif v == stats.SAME:
            assert 1 - t <= lo and hi <= 1 + t
        else:
            assert not (1 - t <= lo and hi <= 1 + t) and lo <= 1 + t and hi >= 1 - t
    assert stats.verdict(0.99, 1.06, 0.05)[0] == stats.UNSURE  # straddles the band's edge


@pytest.mark.parametrize("n", [10, 30, 300])
def test_the_p20_p80_rule_covers_the_true_ratio(n):
    """The fallback claims >= 95% coverage from n = 10 samples: check it on equal distributions
    (true ratio 1), normal and skewed, and that it is no narrower than the bootstrap."""
    rng = np.random.default_rng(n)
    draws = {"normal": lambda: 1 + 0.03 * rng.standard_normal(n),
             "lognormal": lambda: 1 + 0.03 * rng.lognormal(0, 1, n)}
    for name, draw in draws.items():
        hits, trials = 0, 1000
        for _ in range(trials):
            a, b = draw(), draw()
            _, lo, hi = stats.quantile_interval(*[f(x) for x in (a, b) for f in (
                np.median, lambda y: np.percentile(y, 20), lambda y: np.percentile(y, 80), len)])
            hits += lo <= 1 <= hi
        assert hits / trials >= 0.95, (name, hits / trials)
    a, b = draws["normal"](), draws["normal"]()
    _, blo, bhi = stats.bootstrap_interval(a, b, seed=0)
    _, lo, hi = stats.quantile_interval(*[f(x) for x in (a, b) for f in (
        np.median, lambda y: np.percentile(y, 20), lambda y: np.percentile(y, 80), len)])
    assert hi - lo >= bhi - blo


# -- (d) points on one side only ---------------------------------------------------------------------
def test_points_on_one_side_only_are_listed_not_compared(tmp_path):
    a = write_run(tmp_path / "a", [{"times": noisy(30, 1e-3, 0.02, s), "size": s} for s in (256, 1024)])
    b = write_run(tmp_path / "b", [{"times": noisy(30, 1e-3, 0.02, s + 1), "size": s} for s in (1024, 4096)],
                  run_id="b")
    comp = run_compare(a, b)
    by_size = comp.table.set_index("m")
    assert by_size.loc[256, "status"] == ONLY_A and by_size.loc[4096, "status"] == ONLY_B
    assert by_size.loc[256, "verdict"] == "" and pd.isna(by_size.loc[256, "time_ratio"])
    assert by_size.loc[1024, "status"] == COMPARED
    md = report.render_markdown(comp)
    assert "Only in a (not compared)" in md and "cublas fp16 256x256x256" in md
    assert "cublas fp16 4096x4096x4096" in md


# -- (e) rows that are not evidence --------------------------------------------------------------------
def test_rows_that_are_not_evidence_are_unsure_with_the_reason(tmp_path):
    """Too few samples and a failed check leave a point UNSURE with the reason; a row that is
    unreliable and nothing else is still compared (a power-bound GEMM's clock drifts within a
    second), its why naming it: B twice as slow there is a regression."""
    a = write_run(tmp_path / "a", [{"times": noisy(30, 1e-3, 0.02, 1), "size": 512},
                                   {"times": noisy(30, 1e-3, 0.02, 2), "size": 1024},
                                   {"times": noisy(30, 1e-3, 0.02, 3), "size": 2048}])
    b = write_run(tmp_path / "b", [{"times": 2 * noisy(5, 1e-3, 0.02, 4), "size": 512},  # 5 samples
                                   {"times": 2 * noisy(30, 1e-3, 0.02, 5), "size": 1024, "reliable": False,
                                    "unreliable_reason": "clock drift 4%"},
                                   {"times": noisy(30, 1e-3, 0.02, 6), "size": 2048, "status": "failed",
                                    "reason": "element (3, 4) over its bound"}], run_id="b")
    comp = run_compare(a, b)
    t = comp.table.set_index("m")
    left = t.loc[[512, 2048]]
    assert (left["status"] == NOT_EVIDENCE).all() and (left["verdict"] == stats.UNSURE).all()
    assert "fewer than 10 samples" in t.loc[512, "why"]
    assert "failed (element (3, 4) over its bound)" in t.loc[2048, "why"]
    assert left["time_ratio"].isna().all(), "a row that is not evidence was compared"
    assert t.loc[1024, "status"] == COMPARED and t.loc[1024, "verdict"] == stats.SLOWER
    assert "B unreliable (clock drift 4%)" in t.loc[1024, "why"]
    assert comp.regressed
    assert any("unreliable" in n for n in comp.notes)


def test_several_rows_of_one_point_use_the_best_and_say_so(tmp_path):
    a = write_run(tmp_path / "a", [{"times": noisy(30, 1e-3, 0.01, 1)}])
    b = write_run(tmp_path / "b", [{"times": noisy(30, 1.3e-3, 0.01, 2)}, {"times": noisy(30, 1e-3, 0.01, 3)}],
                  run_id="b")
    comp = run_compare(a, b)
    line = comp.table.iloc[0]
    assert line["rows_b"] == 2 and line["verdict"] == stats.SAME  # the 1e-3 row, not the slow one
    assert any("best row" in n for n in comp.notes)


def test_different_clocks_are_noted_with_the_clock_normalised_ratio(tmp_path):
    a = write_run(tmp_path / "a", [{"times": noisy(30, 1e-3, 0.01, 1), "clock_mhz": 1980.0}])
    b = write_run(tmp_path / "b", [{"times": noisy(30, 1.1e-3, 0.01, 2), "clock_mhz": 1800.0}], run_id="b")
    line = run_compare(a, b).table.iloc[0]
    assert "1800 MHz" in line["clock_note"] and "1980 MHz" in line["clock_note"]
    assert line["ratio_at_clock"] == pytest.approx(line["time_ratio"] * 1800 / 1980, rel=1e-9)
    same = write_run(tmp_path / "c", [{"times": noisy(30, 1e-3, 0.01, 3), "clock_mhz": 1970.0}], run_id="c")
    line = run_compare(a, same).table.iloc[0]
    assert line["clock_note"] == "" and pd.isna(line["ratio_at_clock"])


# -- (f) a real CPU run, twice, end to end ----------------------------------------------------------
@pytest.fixture(scope="session")  # once per worker: fast and slow tests use it, at both ends of the run
def two_cpu_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cpu_compare")
    cfg = compose_cfg(["variant=cpu_blas", "precision=[fp32,fp64]", "sizes=smoke", "sizes.square=[64,128]",
                       "measure=quick", "measure.min_samples=10", "run.progress=false"], tmp)
    for name in ("a", "b"):
        _, rows = run_points(cfg, tmp / name)
        assert rows and all(r["status"] == "ok" for r in rows)
    return tmp / "a", tmp / "b"


@pytest.mark.slow
def test_two_cpu_runs_compare_end_to_end(two_cpu_runs, capsys):
    a, b = two_cpu_runs
    code = main([str(a), str(b)])
    assert code in (0, 1)
    out = b / "compare"  # the default: beside B
    assert sorted(p.name for p in out.iterdir()) == sorted(report.FILES)
    table = pd.read_csv(out / "compare.csv")
    assert len(table) == len(pd.read_csv(a / "results.csv"))  # every point of the run, once
    # a 2-core machine's noise can make a row unreliable: it is then UNSURE, not compared
    assert table["status"].isin([COMPARED, NOT_EVIDENCE]).all() and (table["status"] == COMPARED).any()
    assert (table.loc[table["status"] == NOT_EVIDENCE, "verdict"] == stats.UNSURE).all()
    table = table[table["status"] == COMPARED]
    assert (table["interval_from"] == stats.BOOTSTRAP).all()
    assert set(table["verdict"]) <= set(stats.VERDICTS)
    assert code == int((table["verdict"] == stats.SLOWER).any())
    assert (table["ci_lo"] <= table["time_ratio"]).all() and (table["time_ratio"] <= table["ci_hi"]).all()
    printed = capsys.readouterr().out
    assert f"{len(table)} points compared" in printed and "time_ratio = median time B / median time A" in printed
    first = {f: (out / f).read_bytes() for f in report.FILES}
    main([str(a), str(b)])
    assert {f: (out / f).read_bytes() for f in report.FILES} == first, "a rerun changed the files"


# -- (g) bad input -----------------------------------------------------------------------------------
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, two_cpu_runs):
    a, _ = two_cpu_runs
    gpu = write_run(tmp_path / "gpu", [{"times": noisy(30, 1e-3, 0.02, 1)}])
    cases = [[str(tmp_path / "missing"), str(a)],  # no such path
             [str(a), str(gpu), "--out", str(tmp_path / "o")],  # no point in common
             [str(a), str(a), "--threshold", "2"],
             [str(a), str(a), "--out", str(REFERENCE / "h200-2026-11-30" / "x")],  # never under the reference
             [str(a)],  # B missing (and no --paired)
             [str(a), str(a), "--bogus"]]  # argparse
    for argv in cases:
        capsys.readouterr()
        with pytest.raises(SystemExit) if "--bogus" in argv else _nothing():
            assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("analysis.compare: ") and "\n" not in err, (argv, err)
    assert not (REFERENCE / "h200-2026-11-30" / "x").exists()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_reference_data_needs_out(capsys):
    if not SQUARE_30.is_dir():
        pytest.skip("the H200 reference data is not in this checkout")
    assert main([str(SQUARE_29), str(SQUARE_30)]) == 2
    assert "outputs/reference/" in capsys.readouterr().err


# -- (h) two reference datasets ---------------------------------------------------------------------
@needs_reference
def test_two_h200_reference_runs_of_cublas_square(tmp_path, capsys):
    code = main([str(SQUARE_29), str(SQUARE_30), "--out", str(tmp_path)])
    table = pd.read_csv(tmp_path / "compare.csv", keep_default_na=False)
    compared = table[table["status"] == COMPARED]
    assert len(compared) == 63  # cuBLAS fp64..bf16 and cuBLASLt tf32..fp8 at 7 sizes
    assert (compared["interval_from"] == stats.QUANTILES).all()  # rows of 2026-11-29/30 have no samples
    left = table[table["status"] == SKIPPED]
    assert len(left) == 21 and (left["verdict"] == "").all()  # unsupported: skipped on both, no verdict
    assert not (table["status"] == NOT_EVIDENCE).any()
    assert code == int((compared["verdict"] == stats.SLOWER).any())
    # the README quotes these counts
    assert compared["verdict"].value_counts().to_dict() == {"SAME": 51, "UNSURE": 9, "FASTER": 2, "SLOWER": 1}
    fp64 = compared[(compared["precision"] == "fp64") & (compared["m"] == 4096)].iloc[0]
    assert fp64["clock_note"] and float(fp64["ratio_at_clock"]) > float(fp64["time_ratio"])  # B clocked higher
    assert "devices differ" not in (tmp_path / "compare.md").read_text()


@needs_reference
def test_the_drift_constant_is_what_the_reference_data_measures():
    key = [c for c in KEY if c != "cache"]
    best = [data.best_rows(data.evidence(data.load(p)), key) for p in (SQUARE_29, SQUARE_30)]
    drift, n = stats.measured_drift(*best, key)
    assert round(drift, 3) == stats.RUN_TO_RUN_DRIFT and n == 25
    # point_threshold's docstring: of the 63 shared points, 59 moved less than max(drift, noise), 39 less
    # than the drift alone
    m = best[0].merge(best[1], on=key, suffixes=("_a", "_b"))
    r = (m["time_median_s_b"] / m["time_median_s_a"]).to_numpy()
    t = np.array([stats.point_threshold(x, y, None) for x, y in zip(m["noise_a"], m["noise_b"])])
    assert len(m) == 63
    assert int((np.abs(r - 1) <= t).sum()) == 59
    assert int((np.abs(r - 1) <= stats.RUN_TO_RUN_DRIFT).sum()) == 39


EXAMPLE = ROOT / "outputs" / "examples" / "compare_warp_tiled_bk8"


@pytest.mark.skipif(not (EXAMPLE / "compare.csv").exists(), reason="example not in this checkout")
def test_the_readme_compare_example_is_what_the_reference_gives(tmp_path):
    """README shows outputs/examples/compare_warp_tiled_bk8: rebuilt from the reference rows, the
    same bytes (BK 8 is SLOWER at both sizes, exit code 1)."""
    import os

    ref = Path("outputs/reference/h200-2026-12-01/compare")
    cwd = os.getcwd()
    os.chdir(ROOT)  # the files name the inputs as given: relative to the checkout
    try:
        code = main([str(ref / "warp_tiled"), str(ref / "warp_tiled_bk8"), "--out", str(tmp_path)])
    finally:
        os.chdir(cwd)
    assert code == 1
    for name in ("compare.csv", "compare.md", "compare.png"):
        assert (tmp_path / name).read_bytes() == (EXAMPLE / name).read_bytes(), name
    table = pd.read_csv(EXAMPLE / "compare.csv")
    assert (table["verdict"] == stats.SLOWER).all() and len(table) == 2


# -- (i) the 1% control, a renamed variant, the paired example -----------------------------------------
SESSION4 = REFERENCE / "h200-2026-12-01" / "session4" / "compare"
needs_session4 = pytest.mark.skipif(not SESSION4.is_dir(), reason="the 2026-12-01 session-4 rows are not here")


def test_a_same_whose_interval_excludes_one_says_how_much_and_which_way():
    assert stats.verdict(1.011, 1.014, 0.02) == (stats.SAME, "within ±2.0%; B slower by 1.1-1.4% (resolved: "
                                                              "the interval excludes 1)")
    assert stats.verdict(0.984, 0.984, 0.032)[1].endswith("B faster by 1.6% (resolved: the interval excludes 1)")
    assert stats.verdict(0.99, 1.01, 0.02) == (stats.SAME, "within ±2.0%")  # 1 inside: nothing resolved


@needs_session4
def test_match_compares_a_configuration_saved_under_its_own_name(tmp_path, capsys):
    """warp_tiled_s4 (4 stages, ~1.3% slower) against the default of the session before: matched by
    --match, SAME at the run-to-run threshold, slower and resolved, never FASTER."""
    a, b = REFERENCE / "h200-2026-12-01" / "compare" / "warp_tiled", SESSION4 / "warp_tiled_s4"
    assert main([str(a), str(b), "--out", str(tmp_path)]) == 2  # different names: nothing in common
    assert "share no point" in capsys.readouterr().err
    assert main([str(a), str(b), "--match", "warp_tiled_s4=warp_tiled", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "compare.csv", keep_default_na=False)
    assert len(table) == 2 and (table["verdict"] == stats.SAME).all()
    assert ((table["ci_lo"] > 1.005) & (table["time_ratio"] < 1.03)).all()
    assert table["why"].str.contains("B slower by").all()
    assert "B's warp_tiled_s4 compared as A's warp_tiled (--match)" in (tmp_path / "compare.md").read_text()
    for bad in (["--match", "warp_tiled_s4"], ["--match", "nothing=warp_tiled"]):
        capsys.readouterr()
        assert main([str(a), str(b), *bad, "--out", str(tmp_path)]) == 2
        assert capsys.readouterr().err.startswith("analysis.compare: --match")
    assert main([str(SESSION4 / "paired"), "--paired", "--match", "a=b", "--out", str(tmp_path)]) == 2


PAIRED_EXAMPLE = ROOT / "outputs" / "examples" / "compare_paired_controls"


@needs_session4
@pytest.mark.skipif(not (PAIRED_EXAMPLE / "compare.csv").exists(), reason="example not in this checkout")
def test_the_readme_paired_example_is_what_the_reference_gives(tmp_path):
    """README shows outputs/examples/compare_paired_controls: BK 8 SLOWER by about 6%, 4 stages SAME
    but resolved as slower (its true ~1.3%), rebuilt byte for byte."""
    import os

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code = main([str(SESSION4.relative_to(ROOT) / "paired"), "--paired", "--out", str(tmp_path)])
    finally:
        os.chdir(cwd)
    assert code == 1
    for name in ("compare.csv", "compare.md", "compare.png"):
        assert (tmp_path / name).read_bytes() == (PAIRED_EXAMPLE / name).read_bytes(), name
    t = pd.read_csv(PAIRED_EXAMPLE / "compare.csv", keep_default_na=False).set_index(["variant", "m"])
    assert (t.loc["warp_tiled_bk8", "verdict"] == stats.SLOWER).all()
    assert t.loc["warp_tiled_bk8", "time_ratio"].between(1.04, 1.09).all()
    s4 = t.loc["warp_tiled_s4"]
    assert (s4["verdict"] == stats.SAME).all() and (s4["ci_lo"] > 1.0).all() and (s4["ci_hi"] < 1.02).all()
