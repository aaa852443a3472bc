"""The energy figures (energy_efficiency, power_clock, inputs_power) and the energy table on rows
made here: each point is the best evidence row's own GFLOP/J, power and clock; without energy rows
every figure and the table say "not measured" and name the command; the inputs figure draws exact
and sparse rows (shaded) and leaves rows the reliability rules drop hollow and out of every best."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis import data, energy, style, tables
from analysis.figures import FIGURES, energy_efficiency, inputs_power, power_clock

DEV = "NVIDIA H200"


def _row(variant, backend, precision, n, time_s, run="run-a", energy_j=None, stage=None, **kw):
    flops = 2.0 * n ** 3
    r = {"run_id": run, "point_key": f"{variant}-{precision}-{n}-{run}-{kw.get('distribution', '')}"
                                     f"-{kw.get('input_scale', '')}",
         "device": DEV, "backend": backend, "variant": variant, "precision": precision, "op": "gemm", "m": n, "n": n,
         "k": n, "kind": "gpu", "status": "ok", "timer": "cuda_event", "cache": "flush", "flops": flops,
         "bytes_min": 6.0 * n * n, "time_median_s": time_s, "time_p20_s": time_s, "time_p80_s": time_s,
         "tflops": flops / time_s / 1e12, "samples": 50, "stage": stage, "warmup_s": 1.5,
         "extra": json.dumps({"timer": {"sm_clock_inband_mhz": [1400.0, 1500.0, 1600.0]}})}
    if energy_j is not None:
        r.update(energy_j=energy_j, gflops_per_joule=flops / energy_j / 1e9, power_avg_w=energy_j / time_s,
                 power_limit_w=700.0, sm_clock_avg_mhz=1755.0, throttle_reasons="sw_power_cap")
    r.update(kw)
    return r


def square_rows():
    rows = []
    for p in ("bf16", "fp16"):
        for n in (4096, 8192):
            t = 2.0 * n ** 3 / 600e12
            rows.append(_row("cublas", "cublas", p, n, t, energy_j=0.5 * t * 1000))
            rows.append(_row("cublaslt", "cublaslt", p, n, t * 0.98, energy_j=0.49 * t * 1000))
            rows.append(_row("wgmma_ws", "cuda", p, n, t * 1.1, energy_j=0.6 * t * 1000, stage=9))
            rows.append(_row("mma_sync", "cuda", p, n, t * 1.5, energy_j=0.9 * t * 1000, stage=7))
    # a slower cublas row at 8192 bf16 in another run: not the best, its GFLOP/J never shown
    rows.append(_row("cublas", "cublas", "bf16", 8192, 2.0 * 8192 ** 3 / 300e12, run="run-b", energy_j=5.0))
    # an unreliable faster row with energy: not evidence, in no best
    rows.append(_row("cublas", "cublas", "bf16", 8192, 1e-4, run="run-c", energy_j=0.01, reliable="false"))
    # a sustained row without energy columns: in power_clock (clock in-band), not in GFLOP/J
    rows.append(_row("cublas", "cublas", "bf16", 2048, 2.0 * 2048 ** 3 / 500e12))
    return rows


def input_rows():
    rows = []
    for d in energy.DISTRIBUTIONS:
        for scale in (1.0, 0.0625):
            for p in ("bf16", "fp8"):
                t = 2.0 * 8192 ** 3 / (700e12 if d in ("exact", "sparse") else 600e12)
                rows.append(_row("cublaslt", "cublaslt", p, 8192, t, energy_j=t * (400 if d == "sparse" else 650),
                                 run=f"inputs-{d}-{scale}", distribution=d, input_scale=scale,
                                 experiment="inputs_power"))
    # an unreliable, faster normal row: hollow, not the best of its point
    rows.append(_row("cublaslt", "cublaslt", "bf16", 8192, 1e-3, run="inputs-normal-1.0-b", energy_j=0.3,
                     distribution="normal", input_scale=1.0, experiment="inputs_power", reliable="false",
                     unreliable_reason="noise"))
    return rows


def _ds(rows):
    return data.Dataset(pd.DataFrame(rows))


def _gids(fig, kind):
    return {a.get_gid(): a for ax in fig.axes for a in list(ax.lines) + list(ax.collections)
            if (a.get_gid() or "").startswith(kind + ":")}


def test_efficiency_points_are_the_best_rows_gflops_per_joule():
    ds = _ds(square_rows())
    fig = energy_efficiency.build(ds)
    lines = _gids(fig, "eff")
    assert set(lines) == {f"eff:{s}:{p}" for s in ("cublas", "cublaslt", "handwritten") for p in ("bf16", "fp16")}
    for p in ("bf16", "fp16"):
        for s, j in (("cublas", 0.5), ("cublaslt", 0.49), ("handwritten", 0.6)):
            line = lines[f"eff:{s}:{p}"]
            assert list(line.get_xdata()) == [4096, 8192]
            want = [2.0 * n ** 3 / (j * 2.0 * n ** 3 / 600e12 * 1000) / 1e9 for n in (4096, 8192)]
            assert np.allclose(line.get_ydata(), want, rtol=1e-9), (s, p)
    # the best stage is named at each point; the slower mma_sync is not
    stages = [g for g in style.series_of(fig) if g.startswith("stage:")]
    assert stages and all(g.endswith(":wgmma_ws") for g in stages)
    assert style.notes_of(fig) == []


def test_power_clock_series():
    ds = _ds(square_rows())
    fig = power_clock.build(ds)
    assert len(fig.axes) == 3
    clock = _gids(fig, "clock")["clock:cublas:bf16"]
    assert list(clock.get_xdata()) == [2048, 4096, 8192]
    assert list(clock.get_ydata()) == [1500.0, 1755.0, 1755.0]  # in-band median where no energy window
    power = _gids(fig, "power")["power:cublas:bf16"]
    assert list(power.get_xdata()) == [4096, 8192]  # the 2048 row has no energy columns
    assert power.get_ydata()[1] == pytest.approx(500.0)
    assert "limit:700" in _gids(fig, "limit") or any(g == "limit:700" for g in style.series_of(fig))
    tflops = _gids(fig, "tflops")["tflops:cublas:bf16"]
    assert max(tflops.get_ydata()) == pytest.approx(600.0)  # not the unreliable row's
    assert style.notes_of(fig) == []


def test_energy_table_numbers_and_columns():
    t = tables.energy_table(_ds(square_rows()))
    headers = [c.header for c in t.columns]
    for h in ("Prec.", "Backend", "Variant", "TFLOP/s", "GFLOP/J", "J per call", "Power (W)", "SM clock (MHz)",
              "Power limit (W)", "Throttle reasons"):
        assert h in headers, h
    f = t.frame
    assert list(zip(f["precision"], f["backend"])) == [("fp16", "cuda"), ("fp16", "cublas"), ("fp16", "cublaslt"),
                                                       ("bf16", "cuda"), ("bf16", "cublas"), ("bf16", "cublaslt")]
    row = f[(f["precision"] == "bf16") & (f["backend"] == "cublas")].iloc[0]
    t8 = 2.0 * 8192 ** 3 / 600e12
    assert row["energy_j"] == pytest.approx(0.5 * t8 * 1000) and row["run_id"] == "run-a"
    assert row["gflops_per_joule"] == pytest.approx(2.0 * 8192 ** 3 / (0.5 * t8 * 1000) / 1e9)
    assert row["power_avg_w"] == pytest.approx(500.0) and row["throttle_reasons"] == "sw_power_cap"
    assert f[(f["backend"] == "cuda")]["variant"].tolist() == ["wgmma_ws", "wgmma_ws"]
    md = tables.render_markdown([t])
    assert "sw_power_cap" in md and "| 600 |" in md and tables.NOT_MEASURED not in md


def test_without_energy_rows_every_figure_and_the_table_say_what_to_run():
    rows = [{k: v for k, v in r.items() if k not in ("energy_j", "gflops_per_joule", "power_avg_w", "power_limit_w",
                                                     "sm_clock_avg_mhz", "throttle_reasons")}
            for r in square_rows()]
    ds = _ds(rows)
    eff = energy_efficiency.build(ds)
    assert energy.MEASURE_SQUARE in "\n".join(style.notes_of(eff)) and not _gids(eff, "eff")
    pc = power_clock.build(ds)
    assert energy.MEASURE_SQUARE in "\n".join(style.notes_of(pc)) and not _gids(pc, "power")
    assert _gids(pc, "clock")  # the clock and TFLOP/s of the sustained rows are still drawn
    ip = inputs_power.build(ds)
    assert energy.MEASURE_INPUTS in "\n".join(style.notes_of(ip)) and not style.series_of(ip)
    md = tables.render_markdown([tables.energy_table(ds)])
    assert tables.NOT_MEASURED in md and energy.MEASURE_SQUARE in md


def test_inputs_figure_draws_exact_and_sparse_shaded_and_unreliable_hollow():
    ds = _ds(input_rows())
    pts = energy.inputs_points(ds)
    assert set(pts["distribution"]) == set(energy.DISTRIBUTIONS)
    assert set(pts.loc[pts["study"], "distribution"]) == {"exact", "sparse"}
    good = pts[pts["counts"]]
    assert len(good) == 16  # 4 distributions x 2 scales x 2 precisions, none left out for its inputs
    normal = good[(good["distribution"] == "normal") & (good["input_scale"] == 1.0) & (good["precision"] == "bf16")]
    assert normal["tflops"].iloc[0] == pytest.approx(600.0)  # not the unreliable row's
    bad = pts[~pts["counts"]]
    assert len(bad) == 1 and bad["run_id"].iloc[0] == "inputs-normal-1.0-b"
    fig = inputs_power.build(ds)
    series = style.series_of(fig)
    assert {"study:exact:1.0", "study:sparse:0.0625"} <= set(series)
    assert not any(s.startswith("study:normal") or s.startswith("study:uniform") for s in series)
    assert "unreliable-tflops:cublaslt:bf16" in series
    hollow = _gids(fig, "unreliable-tflops")["unreliable-tflops:cublaslt:bf16"]
    assert np.atleast_2d(hollow.get_facecolor()).shape[0] == 0 or np.atleast_2d(hollow.get_facecolor())[0][3] == 0
    eff = _gids(fig, "eff")["eff:cublaslt:bf16"]
    assert len(eff.get_offsets()) == 8  # every group, the study's included
    sparse = good[(good["distribution"] == "sparse") & (good["input_scale"] == 1.0) & (good["precision"] == "bf16")]
    t = 2.0 * 8192 ** 3 / 700e12
    assert sparse["gflops_per_joule"].iloc[0] == pytest.approx(2.0 * 8192 ** 3 / (t * 400) / 1e9)
    assert sparse["power_avg_w"].iloc[0] == pytest.approx(400.0)
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert inputs_power.STUDY_LABEL in labels and inputs_power.HOLLOW_LABEL in labels
    # and none of them is evidence for a peak
    assert data.evidence(ds.rows)["distribution"].isin(data.STUDY_INPUTS).sum() == 0


def test_the_figures_are_registered():
    for name in ("energy_efficiency", "power_clock", "inputs_power"):
        assert name in FIGURES


def test_legends_and_labels_stay_inside_the_canvas_with_energy_rows():
    from test_paper_outputs import _inside

    ds = _ds(square_rows() + input_rows())
    for build in (energy_efficiency.build, power_clock.build, inputs_power.build):
        fig = build(ds)
        assert not _inside(fig), (build.__module__, _inside(fig))
