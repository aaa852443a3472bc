"""A CPU sweep through a real single-node Slurm on localhost (Hydra's submitit_slurm launcher).

.ci/slurm/start.sh installs and starts munge, MariaDB + slurmdbd, slurmctld and slurmd (root and
apt-get needed; the test is skipped with the script's reason where it can't). Then:
1. a 4-job sweep runs as a Slurm job array; one job is cancelled with scancel after its first row,
   so the launcher stops with an error and nothing is merged;
2. `python -m gemmlab.sweep.merge SWEEP_DIR --wait` merges every row the jobs wrote;
3. the same sweep, rerun into the same folder (hydra.sweep.dir), measures only the cancelled job's
   missing points: the other jobs' files stay byte-identical, the cancelled job's earlier rows keep
   their timestamps, and the sweep's merged file holds every point once, ok.
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
START = ROOT / ".ci" / "slurm" / "start.sh"
SKIP_EXIT = 77  # start.sh: Slurm cannot be set up on this machine

SIZES = ["[64,72,80,88]", "[96,104,112,120]"]  # 4 points per job, distinct across jobs
POINTS_PER_JOB = 4
KILLED = 2  # the job to cancel: precision=fp64, the first size list


@pytest.fixture(scope="module")
def slurm():
    if os.environ.get("GEMMLAB_SKIP_SLURM"):
        pytest.skip("GEMMLAB_SKIP_SLURM is set")
    if not shutil.which("bash"):
        pytest.skip("no bash to run .ci/slurm/start.sh")
    r = subprocess.run(["bash", str(START)], capture_output=True, text=True, timeout=300)
    if r.returncode == SKIP_EXIT:
        pytest.skip(f"no single-node Slurm here: {r.stderr.strip()}")
    assert r.returncode == 0, f"Slurm setup failed:\n{r.stdout}\n{r.stderr}"


def sweep_command(sweep_dir: Path):
    # Each point is timed for 2 s, so the job to cancel is still running when its first row lands.
    return [sys.executable, "run.py", "-m", "hydra/launcher=slurm_cpu", f"hydra.sweep.dir={sweep_dir}",
            "variant=cpu_blas", "precision=fp32,fp64", "sizes=smoke", "sizes.shapes=[]",
            f"sizes.square={','.join(SIZES)}", "measure=quick", "measure.threads=1",
            "measure.warmup_s=0.1", "measure.min_time_s=2.0", "measure.max_time_s=2.0",
            "measure.max_samples=100000000",
            "run.progress=false", "run.report=false"]  # the sweep's page: tests/test_cpu_run.py


def job_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def read_rows(path: Path):
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def array_task_id(sweep_dir: Path, job_num: int, timeout_s: float = 60) -> str:
    """Slurm id of sweep job ``job_num``: submitit's folder <sweep>/.submitit/<array>_<num>."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = sorted((sweep_dir / ".submitit").glob(f"*_{job_num}"))
        if found:
            return found[0].name
        time.sleep(0.2)
    raise AssertionError(f"no Slurm job folder for sweep job {job_num} under {sweep_dir}/.submitit")


def test_sweep_on_slurm_cancel_one_job_merge_and_rerun(slurm, tmp_path):
    sweep = tmp_path / "sweep"
    log1 = open(tmp_path / "first.log", "w")
    first = subprocess.Popen(sweep_command(sweep), cwd=ROOT, env=job_env(), stdout=log1,
                             stderr=subprocess.STDOUT)
    try:
        # 1. cancel job KILLED as soon as it has written its first row
        killed_csv = sweep / str(KILLED) / "results.csv"
        deadline = time.monotonic() + 120
        while len(read_rows(killed_csv)) < 1:
            assert first.poll() is None, "the sweep ended before the job to cancel wrote a row:\n" + \
                (tmp_path / "first.log").read_text()
            assert time.monotonic() < deadline, "job never wrote a row:\n" + (tmp_path / "first.log").read_text()
            time.sleep(0.1)
        task = array_task_id(sweep, KILLED)
        subprocess.run(["scancel", task], check=True)
        # submitit's launcher sees the job CANCELLED (sacct) and fails the multirun
        rc = first.wait(timeout=180)
    finally:
        if first.poll() is None:
            first.kill()
        log1.close()
    first_log = (tmp_path / "first.log").read_text()
    assert rc != 0, f"the sweep with a cancelled job should fail:\n{first_log}"
    state = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", task],
                           capture_output=True, text=True).stdout
    assert "CANCELLED" in state, f"job {task} state: {state!r}"

    # 2. merge what the jobs wrote (waiting for any job still running)
    m = subprocess.run([sys.executable, "-m", "gemmlab.sweep.merge", str(sweep), "--wait", "--wait-timeout-s", "120"],
                       cwd=ROOT, env=job_env(), capture_output=True, text=True, timeout=180)
    assert m.returncode == 0, m.stdout + m.stderr
    merged = read_rows(sweep / "results.csv")
    killed_rows = read_rows(killed_csv)
    assert 1 <= len(killed_rows) < POINTS_PER_JOB, f"job {KILLED} was not killed mid-run: {len(killed_rows)} rows"
    assert len(merged) == 3 * POINTS_PER_JOB + len(killed_rows)
    assert "to measure on rerun" in m.stdout, m.stdout

    before = {j: (sweep / str(j) / "results.csv").read_bytes() for j in range(4)}
    killed_before = {r["point_key"]: (r["timestamp"], r["run_id"]) for r in killed_rows}

    # 3. rerun the same sweep into the same folder: only the cancelled job's missing points run
    r = subprocess.run(sweep_command(sweep), cwd=ROOT, env=job_env(), capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for j in range(4):
        if j != KILLED:
            assert (sweep / str(j) / "results.csv").read_bytes() == before[j], \
                f"job {j} was complete, yet its rows changed on rerun"
    killed_after = read_rows(killed_csv)
    assert killed_after[:len(killed_rows)] == killed_rows, "rows measured before the cancel changed"
    new = killed_after[len(killed_rows):]
    assert len(new) == POINTS_PER_JOB - len(killed_rows)
    assert not {r["point_key"] for r in new} & set(killed_before), "an ok point was measured again"
    assert len({r["run_id"] for r in new}) == 1 and new[0]["run_id"] not in {v[1] for v in killed_before.values()}

    merged = read_rows(sweep / "results.csv")
    assert len(merged) == 4 * POINTS_PER_JOB
    assert len({r["point_key"] for r in merged}) == 4 * POINTS_PER_JOB
    assert {r["status"] for r in merged} == {"ok"}
    for row in merged:  # the merged file kept the original measurements
        if row["point_key"] in killed_before:
            assert (row["timestamp"], row["run_id"]) == killed_before[row["point_key"]]
