"""Merging an interrupted sweep (python -m gemmlab.sweep.merge) and resuming it into the same folder."""
from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import compose_cfg, run_points
from omegaconf import OmegaConf

from gemmlab.rows import RESULTS_FILE
from gemmlab.sweep import merge as merge_cmd

ROOT = Path(__file__).resolve().parent.parent
QUICK = ["variant=cpu_blas", "sizes=smoke", "sizes.shapes=[]", "measure=quick", "measure.threads=1",
         "measure.warmup_s=0", "run.progress=false", "run.report=false"]  # the sweep's page: tests/test_cpu_run.py


def read_rows(path: Path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def drop_last_rows(path: Path, keep: int) -> None:
    """Keep the header and the first ``keep`` rows, as if the job was killed after them."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:1 + keep]))


def fake_job(sweep: Path, num: int, overrides, tmp_path: Path):
    """A job folder as Hydra leaves it: .hydra/config.yaml + overrides.yaml, and its rows."""
    cfg = compose_cfg(list(overrides), tmp_path)
    folder = sweep / str(num)
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, folder / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(list(overrides)), folder / ".hydra" / "overrides.yaml")
    runner, rows = run_points(cfg, folder)
    return runner, rows


def test_merge_reports_each_jobs_missing_points(tmp_path):
    sweep = tmp_path / "sweep"
    _, rows0 = fake_job(sweep, 0, QUICK + ["precision=fp32", "sizes.square=[16,24,32]"], tmp_path)
    runner1, rows1 = fake_job(sweep, 1, QUICK + ["precision=fp64", "sizes.square=[16,24,32]"], tmp_path)
    assert len(rows0) == len(rows1) == 3
    # the saved config expands to exactly the keys the job measured
    assert merge_cmd.expected_keys(sweep / "1") == {p.key for p in runner1.points}
    drop_last_rows(sweep / "1" / RESULTS_FILE, keep=1)

    out = io.StringIO()
    assert merge_cmd.merge(sweep, out=out) == 0
    text = out.getvalue()
    merged = read_rows(sweep / RESULTS_FILE)
    assert len(merged) == 4 and {r["status"] for r in merged} == {"ok"}
    assert "0 (precision=fp32): 3 of 3 ok" in text, text
    assert "1 (precision=fp64): 1 of 3 ok; 2 to measure on rerun" in text, text
    assert "2 points are not ok yet" in text


def test_merge_command_exit_codes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "gemmlab.sweep.merge", *map(str, a)], cwd=ROOT,
                                    env=env, capture_output=True, text=True, timeout=60)
    assert run(tmp_path / "nowhere").returncode == 2
    (tmp_path / "empty" / "0").mkdir(parents=True)
    r = run(tmp_path / "empty")
    assert r.returncode == 1 and "no results.csv" in r.stderr


def test_no_slurm_jobs_without_submitit_folder(tmp_path):
    assert merge_cmd.slurm_jobs(tmp_path) == []
    assert merge_cmd.running_slurm_jobs(tmp_path) == []
    (tmp_path / ".submitit" / "12").mkdir(parents=True)
    (tmp_path / ".submitit" / "12" / "12_submission.sh").write_text("#!/bin/bash\n")
    (tmp_path / ".submitit" / "4711").mkdir()  # a local job (a pid): no submission file
    assert merge_cmd.slurm_jobs(tmp_path) == ["12"]


@pytest.mark.slow
def test_rerun_into_the_same_sweep_folder_measures_only_missing_points(tmp_path):
    """A sweep whose job 1 lost its last points: the rerun measures those and nothing else."""
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "run.py", "-m", f"hydra.sweep.dir={sweep}", *QUICK, "precision=fp32,fp64",
           "sizes.square=[16,24,32]"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    job0, job1 = sweep / "0" / RESULTS_FILE, sweep / "1" / RESULTS_FILE
    drop_last_rows(job1, keep=1)
    (sweep / RESULTS_FILE).unlink()
    kept0, kept1 = job0.read_bytes(), read_rows(job1)

    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert job0.read_bytes() == kept0, "the complete job measured its points again"
    rows1 = read_rows(job1)
    assert rows1[:1] == kept1 and len(rows1) == 3
    assert rows1[0]["point_key"] not in {r["point_key"] for r in rows1[1:]}
    merged = read_rows(sweep / RESULTS_FILE)
    assert len(merged) == 6 and len({r["point_key"] for r in merged}) == 6
    assert {r["status"] for r in merged} == {"ok"}
