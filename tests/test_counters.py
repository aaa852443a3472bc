"""Hardware-counter columns: the CPU-only path and parsing real ncu output."""
from __future__ import annotations

import pytest
from conftest import ROOT, compose_cfg, run_points

from gemmlab.measure import counters

RECORDED = sorted((ROOT / "outputs" / "reference").rglob("ncu/*.csv"))


def test_cpu_points_leave_counter_columns_empty_with_a_reason(tmp_path):
    cfg = compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke", "measure=quick",
                       "run.progress=false", "measure.counters=ncu"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    for r in rows:
        assert r["status"] == "ok"
        assert r["bytes_dram"] == "" and r["intensity_dram"] == ""
        assert "GPU points only" in r["counters_reason"]


def test_counters_off_by_default_leave_no_reason(tmp_path):
    cfg = compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke", "measure=quick",
                       "run.progress=false"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    assert all(r["counters_reason"] == "" for r in rows)


def test_missing_ncu_is_a_reason_not_an_error(monkeypatch):
    monkeypatch.setattr(counters.shutil, "which", lambda _: None)
    assert "not on the PATH" in counters.unavailable("gpu")


def test_parse_ignores_noise_and_the_units_row():
    text = ('==PROF== Connected to process 1\n'
            '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","lts__t_bytes.sum","l1tex__t_bytes.sum"\n'
            '"","","byte","byte","byte","byte"\n'
            '"0","k1","100","50","400","800"\n'
            '"1","k2","1,000","0","600","200"\n'
            '==PROF== Disconnected\n')
    rows = counters.parse_ncu_csv(text)
    assert [r["Kernel Name"] for r in rows] == ["k1", "k2"]
    f = counters.summarize(rows, flops=3000.0)
    assert f["bytes_dram"] == 1150 and f["bytes_l2"] == 1000 and f["bytes_l1"] == 1000
    assert f["intensity_dram"] == pytest.approx(3000 / 1150)


def test_no_kernel_in_range_is_a_reason():
    assert "no kernel" in counters.summarize([], 1.0)["counters_reason"]


@pytest.mark.skipif(not RECORDED, reason="no recorded ncu output in outputs/reference yet")
@pytest.mark.parametrize("path", RECORDED, ids=[p.parent.parent.name + "/" + p.stem for p in RECORDED])
def test_recorded_ncu_output_parses_to_the_committed_row(path):
    from gemmlab.rows import read

    rows = counters.parse_ncu_csv(path.read_text())
    assert rows, f"{path} holds no profiled kernel"
    df = read(path.parent.parent / "results.csv")
    row = df[df.point_key == path.stem].iloc[0]
    f = counters.summarize(rows, float(row.flops))
    assert f["bytes_dram"] == pytest.approx(float(row.bytes_dram))
    assert f["intensity_dram"] == pytest.approx(float(row.intensity_dram))
