"""Per-sample times beside the rows (gemmlab/samples.py): written with every row, kept across a
resume, merged with a sweep, readable after a crash."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, compose_cfg, run_points

from gemmlab import samples
from gemmlab.rows import read

QUICK = ["measure=quick", "run.progress=false"]


def _cfg(tmp_path, *extra):
    return compose_cfg(["variant=cpu_blas", "precision=[fp64,fp32]", "sizes=smoke", *QUICK, *extra], tmp_path)


def test_every_ok_row_has_its_samples(tmp_path):
    out = tmp_path / "run"
    run_points(_cfg(tmp_path), out)
    assert (out / samples.SAMPLES_FILE).exists() and not (out / samples.JOURNAL).exists()
    rows, s = read(out), samples.read(out)
    for _, r in rows.iterrows():
        mine = s[(s.run_id == r.run_id) & (s.point_key == r.point_key)]
        assert len(mine) == r.samples and set(mine.call) == {"cpu_blas"}
        assert sorted(mine["sample"]) == list(range(int(r.samples)))
        assert abs(mine.time_s.median() - r.time_median_s) <= 1e-12 + 1e-9 * r.time_median_s


def test_a_resumed_run_keeps_the_first_runs_samples(tmp_path):
    out = tmp_path / "run"
    run_points(_cfg(tmp_path, "precision=fp32"), out)
    first = samples.read(out)
    run_points(_cfg(tmp_path), out)  # fp32 resumed, fp64 new
    both = samples.read(out)
    assert set(first.point_key) < set(both.point_key) and both.run_id.nunique() == 2
    assert len(both) == len(first) + int(read(out).query("precision == 'fp64'").samples.sum())


def test_a_crashed_runs_journal_is_read(tmp_path):
    w = samples.SampleWriter(tmp_path)
    w.write("r1", "k1", [samples.entry("v", [1e-3, 2e-3], [1980.0, 1975.0])])
    # no close(): as if the process died; read() takes the journal
    df = samples.read(tmp_path)
    assert list(df.time_s) == [1e-3, 2e-3] and list(df.sm_clock_mhz) == [1980.0, 1975.0]
    assert samples.finalize(tmp_path).name == samples.SAMPLES_FILE
    assert len(samples.read(tmp_path)) == 2


@pytest.mark.slow
def test_a_sweep_merges_its_jobs_samples(tmp_path):
    sweep = tmp_path / "sweep"
    p = subprocess.run([sys.executable, str(ROOT / "run.py"), "-m", "variant=cpu_blas", "precision=fp32,fp64",
                        "sizes=smoke", *QUICK, "run.report=false", f"hydra.sweep.dir={sweep}"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    merged = samples.read(sweep / samples.SAMPLES_FILE)
    rows = read(sweep / "results.csv")
    assert set(zip(merged.run_id, merged.point_key)) == set(zip(rows.run_id, rows.point_key))
    assert len(merged) == int(rows.samples.sum())
