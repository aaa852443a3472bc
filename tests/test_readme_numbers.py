"""Every number of the README's sections on running, measuring, comparing and sweeping, recomputed
from the committed rows each sentence names (outputs/reference/<device>-<date>/...), or read from
its source of truth where it is a setting, not a measurement (a default of gemmlab/config.py, a
constant of the check). A failure names the README sentence that no longer matches.

The section "Reference data, figures and the chapter's claims" is tests/test_readme_reference_numbers.py.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import fields

import numpy as np
import pandas as pd
import pytest
import yaml

from readme_said import ROOT, assert_said, folder, has, raw, span

from analysis.compare import stats
from analysis.compare.core import COMPARED, SKIPPED, compare
from analysis.compare.match import Side
from analysis.compare.paired import compare_paired
from gemmlab import config, fp8
from gemmlab.measure import check, nvml

D1130, D1201 = "h200-2026-11-30", "h200-2026-12-01"


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"]


def _default(schema, name):
    return next(f.default for f in fields(schema) if f.name == name)


# -- Running: settings, the input distributions, what ran on the H200 ----------------------------
def test_running_states_the_settings_it_names():
    """Settings are not measurements: each number is its default or constant in the code."""
    m = config.MeasureConf
    assert_said([
        f"`sparse` ({check.SPARSE_ZERO_FRACTION:.0%} zeros",
        f"for `measure.energy_s` (default {_default(m, 'energy_s'):g} s)",
        f"inputs beyond e4m3's {fp8.FP8_MAX['float8_e4m3fn']:.0f}",
        f"`exact` (integers in [-{check.EXACT_RANGE}, {check.EXACT_RANGE}])",
        f"min(K, {check.LAMBDA:g} sqrt(K))",
        f"`clock_stable_fraction` ({_default(m, 'clock_stable_fraction'):.0%})",
        f"for up to `run.gpu_wait_s` ({_default(config.RunConf, 'gpu_wait_s') / 60:.0f} min)",
        f"(NVML, polled every {nvml.Sampler.__init__.__defaults__[0] * 1000:.0f} ms)",
        f"(but within `max_noise_hard`, {_default(m, 'max_noise_hard'):.0%})",
        f"up to `max_samples_ci` ({_default(m, 'max_samples_ci')}; `quick` and `sustained`: none)",
        f"within `max_median_ci` (±{_default(m, 'max_median_ci'):.1%})",
    ], "settings (sections Running and How a point is measured)")
    for preset in ("quick", "sustained"):  # "none": no samples past max_samples
        p = yaml.safe_load((ROOT / f"conf/measure/{preset}.yaml").read_text())
        assert p["max_samples_ci"] <= p["max_samples"], preset
    assert _default(m, "flush_bytes") == 0 and "0 = twice the device's L2" in (ROOT / "gemmlab/config.py").read_text()
    assert_said(["The flush is a memset of twice the L2 size"], "flush")
    sustained = yaml.safe_load((ROOT / "conf/measure/sustained.yaml").read_text())
    assert_said([f"(`measure=sustained`: {sustained['warmup_s']:g} s;"], "warm-up step")


@pytest.mark.skipif(not has(f"{D1201}/energy_square", f"{D1201}/inputs_power", f"{D1201}/cache_roofs"),
                    reason="the 2026-12-01 H200 rows are not in this checkout")
def test_energy_inputs_and_cache_roofs_ran_on_the_day_the_readme_says():
    for name in ("energy_square", "inputs_power", "cache_roofs"):
        rows = _ok(raw(folder(f"{D1201}/{name}")))
        assert len(rows) and rows["device"].str.contains("H200").all(), name
        assert rows["timestamp"].astype(str).str.startswith("2026-12-01").all(), name
    assert_said(["all three ran on the H200 on 2026-12-01"], "energy paragraph of Running")


# -- How a point is measured --------------------------------------------------------------------
def _noise_study() -> pd.DataFrame:
    """The noise study's rows with the flush each job ran (its .hydra overrides say which)."""
    parts = []
    for job in sorted(p for p in folder(f"{D1130}/noise_study").iterdir() if (p / "results.csv").exists()):
        overrides = (job / ".hydra" / "overrides.yaml").read_text()
        parts.append(raw(job).assign(discard="flush_discard=True" in overrides))
    return _ok(pd.concat(parts, ignore_index=True))


@pytest.mark.skipif(not has(f"{D1130}/noise_study"), reason="the 2026-11-30 noise study is not here")
def test_readme_states_what_the_flush_discard_and_cupti_show():
    """Step 4: the events' noise with the memset flush and with the discard, the kernels' own (CUPTI)
    spread, at N = 2048; the events' front-end start-up (CUPTI rows keep the event median)."""
    rows = _noise_study()
    small = rows[rows["m"] == 2048]
    events, cupti = small[small["timer"] == "cuda_event"], small[small["timer"] == "cupti_kernel"]
    memset, discard = events[~events["discard"]], events[events["discard"]]
    assert len(memset) == len(discard) == 5
    assert (small["sm_clock_max_mhz"] == 1980).all()
    event_s = np.array([json.loads(e)["timer"]["event_median_s"] for e in cupti["extra"]])
    startup_us = (event_s - cupti["time_median_s"].to_numpy()) * 1e6
    big = rows[(rows["m"] == 4096) & (rows["timer"] == "cupti_kernel")]
    big_us = (np.array([json.loads(e)["timer"]["event_median_s"] for e in big["extra"]]) - big["time_median_s"]) * 1e6
    assert_said([
        f"that made {span(memset['time_median_s'] * 1e6, '.0f')} us calls (N = 2048) jitter by "
        f"{span(memset['noise'] * 100, '.1f')}% between the events",
        f"the kernels themselves (CUPTI) varied by {span(cupti[~cupti['discard']]['noise'] * 100, '.1f')}%; "
        f"with it, {span(discard['noise'] * 100, '.1f')}%",
        f"the events add {span(startup_us, '.1f')} us of front-end start-up to every call at N = 2048 "
        f"({span(big_us, '.1f')} us at 4096), {span(100 * startup_us / (event_s * 1e6), '.0f')}% of those "
        f"{span(event_s * 1e6, '.0f')} us calls",
    ], "step 4 (samples) of How a point is measured")


FIDELITY = "h200-2026-12-03/session11/fidelity_default"


@pytest.mark.skipif(not (folder(FIDELITY) / "fidelity.json").exists(), reason="fidelity not here")
def test_readme_states_how_far_the_timer_agrees_with_do_bench():
    points = json.loads((folder(FIDELITY) / "fidelity.json").read_text())
    worst = {}
    for p in points:
        for t in p["by_timer"]:
            worst[t["timer"]] = max(worst.get(t["timer"], 0.0), abs(t["median_ratio"] - 1))
    sizes = sorted({p["n"] for p in points})
    verdict = points[0]["by_timer"][0]["timer"]  # the run's first timer: do_bench's GPU work between calls
    assert {"flush_bytes=do_bench", "flush_discard=false", "spin=as_needed"} <= set(verdict.split(","))
    assert {p["precision"] for p in points} == {"fp16", "bf16"}
    assert_said([
        f"the timer agrees with it within {100 * worst[verdict]:.1f}% at N = {sizes[0]}-{sizes[-1]}, FP16 and BF16",
        f"with our own flush size and spin within {100 * worst['flush_discard=false']:.1f}%",
        f"with the defaults within {100 * worst['(measure defaults)']:.1f}%",
    ], "step 4's comparison with do_bench")


@pytest.mark.skipif(not has(f"{D1130}/cublas_square", f"{D1201}/session5c/ws_standalone"),
                    reason="the H200 cublas_square / ws_standalone rows are not here")
def test_readme_states_the_clocks_it_quotes():
    """Step 3's settled clock of a dense FP16 GEMM after the sustained warm-up, and step 6's row
    whose NVML clock stood still while the in-band clock moved."""
    lib = _ok(raw(folder(f"{D1201}/session5c/ws_standalone")))
    fp16 = lib[lib["variant"].isin(["cublas", "cublaslt"]) & (lib["precision"] == "fp16") & (lib["m"] == 8192)]
    assert len(fp16) == 2 and (fp16["warmup_s"] >= 1.5).all()
    square = _ok(raw(folder(f"{D1130}/cublas_square")))
    lt = square[(square["variant"] == "cublaslt") & (square["precision"] == "fp16") & (square["m"] == 4096)]
    assert len(lt) == 1
    row = lt.iloc[0]
    inband = json.loads(row["extra"])["timer"]["sm_clock_inband_mhz"]
    assert_said([
        f"a dense FP16 GEMM at N = 8192 settles at {fp16['sm_clock_min_mhz'].min():.0f}-"
        f"{fp16['sm_clock_max_mhz'].max():.0f} MHz after it, down from {lib['sm_clock_max_mhz'].max():.0f} MHz",
        f"(cuBLASLt fp16 at N = 4096, `h200-2026-11-30/cublas_square`: NVML {row['sm_clock_min_mhz']:.0f}-"
        f"{row['sm_clock_max_mhz']:.0f} MHz, in-band {inband[0]:.0f}-{inband[-1]:.0f} MHz, noise "
        f"{100 * row['noise']:.0f}%)",
    ], "steps 3 and 6 of How a point is measured")


# -- Comparing two runs -------------------------------------------------------------------------
def _side(name, path) -> Side:
    return Side.load(name, folder(path))


@pytest.mark.skipif(not has("h200-2026-11-29/cublas_square", f"{D1130}/cublas_square"), reason="no cublas_square")
def test_readme_states_the_two_reference_runs_of_cublas_square():
    comp = compare(_side("A", "h200-2026-11-29/cublas_square"), _side("B", f"{D1130}/cublas_square"))
    done = comp.compared
    counts = done["verdict"].value_counts()
    moved = done[done["verdict"].isin([stats.FASTER, stats.SLOWER])]
    fp64 = moved[(moved["precision"] == "fp64") & (moved["m"] == 4096)]
    assert len(fp64) == 1 and fp64["verdict"].iloc[0] == stats.FASTER
    others = moved.drop(fp64.index)
    assert_said([
        f"the measured run-to-run drift of one point on the H200, {100 * stats.RUN_TO_RUN_DRIFT:.1f}% (two reference "
        "runs of `cublas_square` a day apart",
        f"come out {counts[stats.SAME]} SAME, {counts[stats.UNSURE]} UNSURE, {counts[stats.FASTER]} FASTER and "
        f"{counts[stats.SLOWER]} SLOWER of {len(done)} points",
        f"ran at a higher clock ({float(fp64['ratio_at_clock'].iloc[0]):.2f} at A's clock), and the others are "
        f"{span(others['m'], '.0f')} calls",
        f"{int((comp.table['status'] == SKIPPED).sum())} points are skipped in both",
    ], "paragraph on the two committed cublas_square runs")


def _unreliable(why: pd.Series) -> pd.Series:
    return why.str.contains(" unreliable (", regex=False)


@pytest.mark.skipif(not has(f"{D1201}/compare"), reason="the 2026-12-01 compare rows are not here")
def test_readme_states_five_identical_runs_and_the_controls():
    sides = [_side("A", f"{D1201}/compare/cublas_square_rep{i}") for i in range(1, 6)]
    tables = [compare(a, Side("B", b.path, b.rows, b.samples)).table for a, b in itertools.combinations(sides, 2)]
    t = pd.concat(tables, ignore_index=True)
    done = t[t["status"] == COMPARED]
    shaky = done[_unreliable(done["why"])]
    drift = shaky["why"].str.findall(r"SM clock drifted ([-+]?\d+\.\d+)%").explode().astype(float).abs()
    width = 100 * (done["ci_hi"] - done["ci_lo"])
    bk8 = pd.read_csv(ROOT / "outputs/examples/compare_warp_tiled_bk8/compare.csv").set_index("m")
    s4 = compare(_side("A", f"{D1201}/compare/warp_tiled"),
                 _side("B", f"{D1201}/session4/compare/warp_tiled_s4").renamed({"warp_tiled_s4": "warp_tiled"}))
    s4 = s4.compared.set_index("m")
    points = len(tables[0][tables[0]["status"] == COMPARED])
    said = [
        f"compared pairwise ({len(tables)} pairs x {points} points): {int((done['verdict'] == stats.SAME).sum())} of "
        f"{len(done)} SAME, none FASTER, SLOWER or UNSURE; ratios {span(done['time_ratio'], '.3f')}, intervals "
        f"{width.min():.2f}-{width.max():.1f}% wide; {len(shaky)} of the {len(done)} had a side that was unreliable (BF16 at "
        f"{' and '.join(str(m) for m in sorted(shaky['m'].unique()))}, clock drifting {span(drift, '.1f')}%",
    ]
    assert set(shaky["precision"]) == {"bf16"} and (done["verdict"] == stats.SAME).all()
    for m in (2048, 4096):
        said.append(f"{bk8.loc[m, 'time_ratio']:.3f} [{bk8.loc[m, 'ci_lo']:.3f}, {bk8.loc[m, 'ci_hi']:.3f}] at"
                    + (" N = 2048" if m == 2048 else " 4096"))
        r = s4.loc[m]
        assert r["verdict"] == stats.SAME and r["ci_lo"] > 1
        said.append(f"{100 * (r['time_ratio'] - 1):.1f}% [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}] at {m}")
    assert (bk8["verdict"] == stats.SLOWER).all()
    assert_said(said, "paragraph on five identical runs and the BK 8 / 4-stage controls")


@pytest.mark.skipif(not has(f"{D1201}/session4/compare/paired", f"{D1201}/claims_tensor_cores"),
                    reason="the 2026-12-01 paired rows are not here")
def test_readme_states_the_paired_controls_table():
    """The paired table, rebuilt: the paired column from session4/compare/paired, the two-run
    column from the committed BK 8 example and the 4-stage comparison; the sentences around it."""
    paired = compare_paired(_side("B", f"{D1201}/session4/compare/paired")).compared.set_index(["variant", "m"])
    two = pd.read_csv(ROOT / "outputs/examples/compare_warp_tiled_bk8/compare.csv").set_index("m")
    s4 = compare(_side("A", f"{D1201}/compare/warp_tiled"),
                 _side("B", f"{D1201}/session4/compare/warp_tiled_s4").renamed({"warp_tiled_s4": "warp_tiled"}))
    s4 = s4.compared.set_index("m")

    def cell(r, resolved=""):
        return (f"{r['verdict']} {r['time_ratio']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}]{resolved}, "
                f"±{100 * r['threshold']:.1f}%")

    said, widths, above = [], [], []
    for variant, label, other in (("warp_tiled_bk8", "BK 8", two), ("warp_tiled_s4", "4 stages", s4)):
        for m in (2048, 4096):
            p, o = paired.loc[(variant, m)], other.loc[m]
            res = ", resolved" if variant == "warp_tiled_s4" else ""
            said.append(f"| {cell(p, res)} | {cell(o, res)} |")
            widths += [100 * (p["ci_hi"] - p["ci_lo"]), 100 * (o["ci_hi"] - o["ci_lo"])]
            if variant == "warp_tiled_s4":
                above.append(100 * (o["time_ratio"] - p["time_ratio"]))
    assert (paired["baseline"] == "warp_tiled").all()
    said += [f"The intervals are alike ({min(widths):.2f}-{max(widths):.1f}% wide",
             f"±{100 * stats.WITHIN_RUN_DRIFT:.1f}% instead of ±{100 * stats.RUN_TO_RUN_DRIFT:.1f}%",
             f"the two-run ratios sit {span(above, '.1f')}% above the paired ones at the 1% control"]
    tc = compare_paired(_side("B", f"{D1201}/claims_tensor_cores")).compared
    said.append(f"with intervals ±{span(50 * (tc['ci_hi'] - tc['ci_lo']) / tc['time_ratio'], '.1f')}% wide")
    assert_said(said, "paired section (table of the controls)")


def test_readme_states_the_paired_thresholds():
    assert stats.WITHIN_RUN_DRIFT == _default(config.MeasureConf, "clock_stable_fraction")
    assert_said([f"it is {100 * stats.WITHIN_RUN_DRIFT:.0f}%, the most an evidence row's in-band clock may move",
                 f"the run-to-run drift ({100 * stats.RUN_TO_RUN_DRIFT:.1f}%) is not in the default threshold"],
                "paired section (thresholds)")


# -- Sweeps on every GPU of one host ------------------------------------------------------------
@pytest.mark.skipif(not has("h200x2-2026-11-30/multi_gpu"), reason="the 2-GPU rows are not here")
def test_readme_states_the_multi_gpu_check():
    base = folder("h200x2-2026-11-30/multi_gpu")
    summary = json.loads((base / "multi_gpu_summary.json").read_text())
    runs = summary["runs"]
    ratio = runs["all_gpus"]["wall_s"] / runs["one_gpu"]["wall_s"]
    one, both = (_ok(pd.read_csv(base / f)) for f in ("results_one_gpu.csv", "results_all_gpus.csv"))
    points = pd.read_csv(base / "multi_gpu_points.csv")
    key = ["variant", "precision", "m", "n", "k"]
    assert len(points) == len(one.merge(both, on=key))
    assert abs(summary["time_ratio"] - ratio) < 1e-9 and int(points["agrees"].sum()) == summary["points_agreeing_within_noise"]
    assert_said([f"(2 H200s: {ratio:.3f} of the one-GPU time, {int(points['agrees'].sum())} of {len(points)} points "
                 "within the noise"], "multi-GPU sentence of Sweeps")
