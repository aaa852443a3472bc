"""Hydra callbacks: one sweep per sweep folder, and its rows merged into one file when it ends."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gemmlab.rows import RESULTS_FILE, merge
from gemmlab.sweep.locks import BusyError, lock_folder

log = logging.getLogger("gemmlab")
SWEEP_LOCK = ".gemmlab-sweep.lock"  # held by the process that launched the sweep, until it ends


def merge_sweep(sweep_dir: Path) -> Path | None:
    """Merge every job folder's results.csv under ``sweep_dir`` into ``sweep_dir/results.csv``,
    and the samples of the rows kept into ``sweep_dir/samples.parquet``."""
    import csv

    from gemmlab import samples

    sweep_dir = Path(sweep_dir)
    jobs = sorted({p.parent for p in sweep_dir.rglob(RESULTS_FILE) if p.parent != sweep_dir})
    out = merge(jobs, sweep_dir / RESULTS_FILE)
    if out is not None:
        with open(out, newline="") as fh:
            keep = {(r.get("run_id"), r.get("point_key")) for r in csv.DictReader(fh)}
        samples.merge(jobs, sweep_dir, keep)
    return out


class LockSweepFolder(Callback):
    """A second sweep into a folder that a running sweep writes refuses to start, naming the
    first one's PID: two sweeps would measure every point twice, on one GPU at once."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            lock_folder(Path(config.hydra.sweep.dir), SWEEP_LOCK, "gemmlab sweep")
        except BusyError as e:
            print(f"gemmlab: error: {e}", file=sys.stderr)
            sys.exit(2)


class MergeResults(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        out = merge_sweep(sweep_dir)
        if out is None:
            log.warning("no results to merge under %s", sweep_dir)
            return
        import csv

        with open(out, newline="") as fh:
            statuses = [r["status"] for r in csv.DictReader(fh)]
        failed = statuses.count("failed")
        print(f"gemmlab: merged {len(statuses)} rows of the sweep into {out} "
              f"(ok {statuses.count('ok')}, failed {failed}, skipped {statuses.count('skipped')})")
        if config.run.report:
            from gemmlab.report import write_report

            write_report(sweep_dir)
        if failed and config.run.fail_on_error:
            sys.exit(1)
