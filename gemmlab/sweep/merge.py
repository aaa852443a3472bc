"""Merge the finished jobs of a sweep, also one that was interrupted, into ``<sweep dir>/results.csv``.

    python -m gemmlab.sweep.merge outputs/sweeps/gemm/2026-11-29_12-00-00
    python -m gemmlab.sweep.merge SWEEP_DIR --wait      # first wait for the sweep's Slurm jobs to end

A sweep merges its rows by itself when every job has ended (``gemmlab.sweep.callbacks``). When a
job was killed (scancel, preemption, a node lost) the launcher stops with an error and nothing is
merged: this command merges every row the jobs wrote, and says for each job how many of its points
are ok and how many are missing. To measure only the missing points, rerun the same sweep command
into the same folder: ``python run.py -m <same overrides> hydra.sweep.dir=SWEEP_DIR``.
"""
from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

from gemmlab.rows import RESULTS_FILE
from gemmlab.sweep.callbacks import merge_sweep


@dataclass
class JobReport:
    folder: Path
    overrides: List[str] = field(default_factory=list)
    status: Dict[str, int] = field(default_factory=dict)  # rows per status, one per point
    expected: Optional[int] = None  # points of the job's config; None when it can't be read
    missing: Optional[int] = None  # expected points without an ok row

    def line(self) -> str:
        ok = self.status.get("ok", 0)
        what = ", ".join(f"{n} {s}" for s, n in sorted(self.status.items()) if s != "ok")
        total = f" of {self.expected}" if self.expected is not None else ""
        todo = f"; {self.missing} to measure on rerun" if self.missing else ""
        name = self.folder.name + (f" ({' '.join(self.overrides)})" if self.overrides else "")
        return f"  {name}: {ok}{total} ok" + (f", {what}" if what else "") + todo


def job_folders(sweep_dir: Path) -> List[Path]:
    """Job folders of a sweep: those Hydra made (``.hydra/``) or that hold rows."""
    found = {p.parent.parent for p in sweep_dir.glob("**/.hydra/config.yaml")}
    found |= {p.parent for p in sweep_dir.rglob(RESULTS_FILE)}
    found.discard(sweep_dir)
    return sorted((f for f in found if ".submitit" not in f.parts),
                  key=lambda p: (len(p.parts), int(p.name) if p.name.isdigit() else 1 << 30, str(p)))


def _rows_by_key(folder: Path) -> Dict[str, str]:
    """point_key -> best status in the folder's results.csv (ok wins, as in rows.merge)."""
    out: Dict[str, str] = {}
    f = folder / RESULTS_FILE
    if not f.exists():
        return out
    with open(f, newline="") as fh:
        for r in csv.DictReader(fh):
            key, status = r.get("point_key") or "", r.get("status") or "?"
            if key and (key not in out or status == "ok"):
                out[key] = status
    return out


def expected_keys(folder: Path) -> Optional[Set[str]]:
    """point_keys the job's saved config expands to, or None if it can't be read."""
    cfg_file = folder / ".hydra" / "config.yaml"
    if not cfg_file.exists():
        return None
    try:
        from omegaconf import OmegaConf

        from gemmlab.config import GemmlabConf
        from gemmlab.points import expand

        # The schema first, as at run time, so enums and defaults match and keys hash the same.
        cfg = OmegaConf.merge(OmegaConf.structured(GemmlabConf), OmegaConf.load(cfg_file))
        return {p.key for p in expand(cfg)}
    except Exception:  # an older or hand-edited config: report rows only
        return None


def report(folder: Path) -> JobReport:
    rows = _rows_by_key(folder)
    rep = JobReport(folder)
    for status in rows.values():
        rep.status[status] = rep.status.get(status, 0) + 1
    ov = folder / ".hydra" / "overrides.yaml"
    if ov.exists():
        try:
            from omegaconf import OmegaConf

            rep.overrides = [str(o) for o in OmegaConf.load(ov)]
        except Exception:
            pass
    keys = expected_keys(folder)
    if keys is not None:
        rep.expected = len(keys)
        rep.missing = len({k for k in keys if rows.get(k) != "ok"})
    return rep


# -- jobs still running ------------------------------------------------------------------------
def slurm_jobs(sweep_dir: Path) -> List[str]:
    """Slurm job ids of the sweep: submitit keeps ``<sweep dir>/.submitit/<id>/<id>_submission.sh``
    for every sbatch it ran (an array's id covers all its jobs); local jobs have no such file."""
    sub = sweep_dir / ".submitit"
    if not sub.is_dir():
        return []
    return sorted(p.name for p in sub.iterdir() if (p / f"{p.name}_submission.sh").exists())


def running_slurm_jobs(sweep_dir: Path) -> List[str]:
    """The sweep's Slurm jobs that squeue still lists (pending or running); [] without Slurm."""
    ids = slurm_jobs(sweep_dir)
    if not ids or not shutil.which("squeue"):
        return []
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i", "-j", ",".join(ids)],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    # squeue fails when it knows none of the ids (all ended long ago): nothing runs then.
    return sorted(out.stdout.split()) if out.returncode == 0 else []


def wait_for_jobs(sweep_dir: Path, poll_s: float = 5.0, timeout_s: Optional[float] = None) -> List[str]:
    """Wait until none of the sweep's Slurm jobs is pending or running; returns those left."""
    start = time.monotonic()
    while True:
        left = running_slurm_jobs(sweep_dir)
        if not left or (timeout_s is not None and time.monotonic() - start > timeout_s):
            return left
        time.sleep(poll_s)


# -- the command -------------------------------------------------------------------------------
def merge(sweep_dir: Path, wait: bool = False, wait_timeout_s: Optional[float] = None,
          out=sys.stdout) -> int:
    """Merge ``sweep_dir``'s job folders and print a per-job report; returns the exit code."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        print(f"gemmlab.sweep.merge: no sweep folder at {sweep_dir}", file=sys.stderr)
        return 2
    running = wait_for_jobs(sweep_dir, timeout_s=wait_timeout_s) if wait else running_slurm_jobs(sweep_dir)
    if running:
        print(f"warning: Slurm jobs of this sweep still pending or running: {', '.join(running)}; "
              f"their rows so far are merged (merge again when they end, or use --wait)", file=out)
    jobs = job_folders(sweep_dir)
    merged = merge_sweep(sweep_dir)
    if merged is None:
        print(f"gemmlab.sweep.merge: no {RESULTS_FILE} in any job folder under {sweep_dir}", file=sys.stderr)
        return 1
    with open(merged, newline="") as fh:
        statuses = [r.get("status") for r in csv.DictReader(fh)]
    reports = [report(j) for j in jobs]
    # Name each job by what its sweep changed: the overrides all jobs share say nothing.
    shared = set.intersection(*(set(r.overrides) for r in reports)) if len(reports) > 1 else set()
    for r in reports:
        r.overrides = [o for o in r.overrides if o not in shared]
    missing = sum(r.missing or 0 for r in reports)
    print(f"merged {len(statuses)} rows of {len(jobs)} jobs into {merged} (ok {statuses.count('ok')}, "
          f"failed {statuses.count('failed')}, skipped {statuses.count('skipped')})", file=out)
    for r in reports:
        print(r.line(), file=out)
    if missing:
        print(f"{missing} points are not ok yet: rerun the same sweep with hydra.sweep.dir={sweep_dir} "
              f"to measure only those", file=out)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gemmlab.sweep.merge", description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep_dir", type=Path, help="the sweep's folder (hydra.sweep.dir)")
    ap.add_argument("--wait", action="store_true", help="wait for the sweep's Slurm jobs to end first")
    ap.add_argument("--wait-timeout-s", type=float, default=None, help="give up waiting after this long")
    args = ap.parse_args(argv)
    return merge(args.sweep_dir, wait=args.wait, wait_timeout_s=args.wait_timeout_s)


if __name__ == "__main__":
    sys.exit(main())
