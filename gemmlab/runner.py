"""Run every point of a composed config and append one row per point to the run's results file."""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from gemmlab import env, variants
from gemmlab.backends.base import Backend, backend_class
from gemmlab.measure import validity
from gemmlab.measure.worker import Worker, WorkerError, shared_worker
from gemmlab.measuring import LIBRARY_BACKENDS, PointMeasurer  # noqa: F401  (LIBRARY_BACKENDS: re-exported)
from gemmlab.points import ConfigError, Point, expand
from gemmlab.rows import RowWriter, failed_keys, ok_keys
from gemmlab.samples import SampleWriter
from gemmlab.sweep.locks import BusyError, lock_folder

log = logging.getLogger("gemmlab")
RUN_LOCK = ".gemmlab-run.lock"  # one run at a time per results folder
# what a worker's rows say about the device, kept for rows the worker did not finish
DEVICE_FIELDS = ("device", "gpu_index", "gpu_uuid", "sm_count", "l2_bytes", "driver_version",
                 "cuda_runtime_version", "cupy_version")


class Runner:
    # what a worker runs ("module:function", gemmlab/measure/worker/child.py), and anything more
    # its init carries beside the config (tests swap in targets that misbehave on purpose)
    worker_target = "gemmlab.measuring:worker_target"
    worker_init: Dict[str, Any] = {}

    def __init__(self, cfg: DictConfig, out_dir: os.PathLike):
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.points: List[Point] = expand(cfg)  # raises ConfigError before any work
        self.measurer = PointMeasurer(cfg)  # skip reasons, and the points measured in this process
        self.worker: Optional[Worker] = None  # the process GPU points are measured in (run.isolate)
        self.worker_faults: List[str] = []  # faults that ended a worker during this run
        self._worker_mark = (0, 0)  # the shared worker's (restarts, faults) when this run took it
        self._worker_device: Dict[str, Any] = {}  # device fields of the last point a worker measured
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        # unique per process: two runs into one folder in the same second still differ
        salt = f"{self.out_dir}|{os.getpid()}|{os.urandom(4).hex()}"
        self.run_id = f"{stamp}-{hashlib.sha1(salt.encode()).hexdigest()[:8]}"
        self.counts: Counter = Counter()
        self.summary_rows: List[Dict[str, Any]] = []
        self.gpu_busy: Optional[str] = None  # why the GPU could not be claimed

    # -- backends, executors and baselines live in the measurer (gemmlab/measuring.py) ----------
    def executor(self, kind: str):
        return self.measurer.executor(kind)

    def backend(self, name: str) -> Backend:
        return self.measurer.backend(name)

    def unavailable(self, name: str) -> Optional[str]:
        return self.measurer.unavailable(name)

    def skip_reason(self, pt: Point) -> Optional[str]:
        return self.measurer.skip_reason(pt)

    def baselines_for(self, pt: Point, b: Backend):
        return self.measurer.baselines_for(pt, b)

    @property
    def _backends(self):
        return self.measurer._backends

    @property
    def _unavailable(self):
        return self.measurer._unavailable

    # -- rows ------------------------------------------------------------------------------
    def base_row(self, pt: Point) -> Dict[str, Any]:
        m = self.cfg.measure
        try:
            model = pt.intensity_model
        except Exception as e:  # a broken model expression must not hide the measurement
            log.warning("intensity_model of %s: %s", pt.variant, e)
            model = None
        return {
            "run_id": self.run_id, "backend": pt.backend, "variant": pt.variant,
            **variant_fields(pt),
            "precision": pt.precision, "op": "gemm", "m": pt.m, "n": pt.n, "k": pt.k,
            "layout": pt.layout, "batch": pt.batch, "shape_name": pt.shape_name,
            "in_dtype": pt.in_dtype, "out_dtype": pt.out_dtype, "compute": pt.compute,
            "point_key": pt.key, "flops": pt.flops, "bytes_min": pt.bytes_min,
            "intensity": pt.intensity, "intensity_model": model, "tolerance": pt.tolerance,
            "seed": m.seed, "distribution": m.distribution.value, "input_scale": m.input_scale,
            "experiment": (self.cfg.get("experiment") or {}).get("name"),
            **env.provenance(),
        }

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> Counter:
        lock_folder(self.out_dir, RUN_LOCK, "gemmlab run")  # raises BusyError naming the holder
        done = ok_keys(self.out_dir) if self.cfg.run.resume else set()
        todo = [p for p in self.points if p.key not in done]
        if len(todo) < len(self.points):
            log.info("resume: %d of %d points already ok in %s", len(self.points) - len(todo),
                     len(self.points), self.out_dir)
            self.counts["resumed"] = len(self.points) - len(todo)
        again = failed_keys(self.out_dir) & {p.key for p in todo} if self.cfg.run.resume else set()
        if again:
            _say(f"gemmlab: resume: {len(again)} points failed in an earlier run into this folder and are "
                 "measured again")
            self.counts["remeasured"] = len(again)
        runnable = [p for p in todo if not p.skip_reason and not self.unavailable(p.backend)]
        self._say_estimate(runnable)
        by_backend: Dict[str, List[Point]] = {}
        for p in runnable:
            by_backend.setdefault(p.backend, []).append(p)
        if any(self.backend(name).kind == "gpu" for name in by_backend):
            self._claim_gpu()
        for name, pts in by_backend.items():
            if not (self.gpu_busy and self.backend(name).kind == "gpu"):
                self.backend(name).prepare(pts)  # compiles into the on-disk cache a worker loads from

        with RowWriter(self.out_dir) as writer, SampleWriter(self.out_dir) as sample_writer, \
                _progress(self.cfg.run.progress, len(todo)) as bar:
            try:
                for pt in todo:
                    bar.describe(describe(pt))
                    row = self.measure(pt)
                    row["timestamp"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
                    entries = row.pop("_samples", None) or []
                    writer.write(row)
                    sample_writer.write(self.run_id, pt.key,
                                        [{**e, "call": e["call"] or pt.variant} for e in entries])
                    self.counts[row["status"]] += 1
                    self.summary_rows.append(row)
                    bar.advance()
            except KeyboardInterrupt:
                log.warning("interrupted: %d finished rows are in %s", len(self.summary_rows), writer.path)
                _say(f"gemmlab: interrupted after {len(self.summary_rows)} of {len(todo)} points; every finished row "
                     f"is in {writer.path}. {resume_hint(self.out_dir)}")
                self.counts["interrupted"] += 1
            finally:
                self.close()
        return self.counts

    def _say_estimate(self, runnable: List[Point]) -> None:
        """One line per device: about how long the run takes and its peak memory
        (gemmlab/estimate.py), before anything is compiled or measured."""
        from gemmlab import estimate
        from gemmlab.measure.footprint import host_free_bytes

        try:
            est = estimate.estimate(runnable, lambda p: self.backend(p.backend).kind, self.cfg,
                                    lambda p: len(self.baselines_for(p, self.backend(p.backend))))
        except Exception as e:  # an estimate must never stop a run
            log.warning("no estimate: %s", e)
            return
        for line in est.lines(host_free_bytes()):
            _say(f"gemmlab: {line}")

    def close(self) -> None:
        """Count this run's worker restarts and free what this process's executors hold on the
        device; the shared worker stays for the next run of this process (it ends with the
        process), a run's own (run.fresh_worker) ends here."""
        self.measurer.close()
        if self.worker is not None:
            restarts, faults = self._worker_mark
            self.counts["worker_restarts"] = self.worker.restarts - restarts
            self.worker_faults = self.worker.faults[faults:]
            if self.cfg.run.fresh_worker:  # this run's own (run.fresh_worker): it ends with the run
                self.worker.close()

    def _claim_gpu(self) -> None:
        """One GPU, one measurement: wait for any other gemmlab run on this GPU to end."""
        from gemmlab.sweep.pinning import GpuBusy, claim_for_run

        try:
            claim = claim_for_run(float(self.cfg.run.gpu_wait_s), announce=_say)
        except GpuBusy as e:
            self.gpu_busy = str(e)
            log.error("%s", e)
            _say(f"gemmlab: error: {e}")
            return
        if claim is not None and claim.waited_s > 1:
            log.info("claimed GPU %s after waiting %.0f s", claim.entry, claim.waited_s)

    def isolated(self, kind: str) -> bool:
        """Whether a point of this executor kind runs in the worker (run.isolate)."""
        how = self.cfg.run.isolate.value
        return how == "all" or (how == "gpu" and kind == "gpu")

    def measure(self, pt: Point) -> Dict[str, Any]:
        row = self.base_row(pt)
        reason = self.skip_reason(pt)
        if reason:
            kind = self.backend(pt.backend).kind if pt.backend in self._backends else "cpu"
            device = self._worker_device if self.isolated(kind) else self.measurer.device_fields(kind, quiet=True)
            return {**row, **device, "status": "skipped", "reason": reason}
        b = self.backend(pt.backend)
        if b.kind == "gpu" and self.gpu_busy:
            return {**row, "status": "failed", "reason": self.gpu_busy}
        sanitized: Dict[str, Any] = {}
        if b.kind == "gpu" and self.cfg.measure.sanitize.value != "none":
            sanitized = self._sanitize(pt)
            if sanitized.get("status"):  # the sanitizer found errors, or could not run
                return {**row, **self._worker_device, **sanitized}
        if self.isolated(b.kind):
            fields = self._in_worker(pt, b.kind)
        else:
            fields = self.measurer.measure(pt)
        row = {**row, **fields, **sanitized}
        row.update(validity.reliability(row, self.cfg.measure))
        if sanitized and row.get("status") == "ok":  # instrumented once, timed after: no evidence
            _as_dict(row.get("extra")).pop("reliability", None)
            row.update(reliable=False, unreliable_reason=f"measure.sanitize={self.cfg.measure.sanitize.value}: "
                                                         "a sanitizer run, not evidence")
        if self._counters_on():
            row = self._with_counters(pt, b.kind, row)
        return row

    # -- the worker (gemmlab/measure/worker) ----------------------------------------------------
    def _in_worker(self, pt: Point, kind: str) -> Dict[str, Any]:
        m = self.cfg.measure
        try:
            if self.worker is None:
                self.worker = (Worker(self.worker_target, self.worker_init) if self.cfg.run.fresh_worker
                               else shared_worker(self.worker_target, self.worker_init))
                self._worker_mark = (self.worker.restarts, len(self.worker.faults))
                self._cfg_yaml = OmegaConf.to_yaml(self.cfg, resolve=True)  # resolved: no Hydra in the worker
            fixed = float(m.point_timeout_s) > 0
            n_baselines = len(self.baselines_for(pt, self.backend(pt.backend)))
            expected_s, limit_s = self.executor(kind).limits(pt, n_baselines).whole()
            request = {"cfg_yaml": self._cfg_yaml, "point_key": pt.key, "log_files": _log_files()}
            out = self.worker.call(request, float(m.point_timeout_s) if fixed else limit_s, fixed_limit=fixed)
        except WorkerError as e:
            return {**self._worker_device, "status": "failed", "reason": f"{e} (run.isolate=none measures in the "
                                                                         "runner's process)"}
        if out.kind == "ok" and "error" in out.reply:
            log.error("worker: %s\n%s", out.reply["error"], out.reply.get("traceback", ""))
            return {**self._worker_device, "status": "failed", "reason": out.reply["error"]}
        if out.kind == "ok":
            fields = dict(out.reply["fields"])
            self._worker_device = {k: fields[k] for k in DEVICE_FIELDS if k in fields}
            return {**fields, "worker": out.reply["pid"]}
        fields = dict((out.reply or {}).get("fields") or {})
        if out.kind == "poisoned":
            first = fields.get("reason") or ""
            why = f"CUDA fault in {pt.variant}: {out.fault.split(': ', 1)[-1]}"
            reason = f"{why} ({first})" if first and first not in why else why
        elif out.kind == "timeout":
            reason = f"{pt.variant} {out.fault}: the worker was killed"
        else:
            reason = f"{pt.variant}: {out.fault}"
        fields.pop("_samples", None)
        return {**self._worker_device, **fields, "status": "failed", "worker": self.worker.pid,
                "reason": f"{reason}; a fresh worker measures the next point"}

    def _sanitize(self, pt: Point) -> Dict[str, Any]:
        from gemmlab import sanitize

        return sanitize.run_point(pt, self.cfg, self.out_dir)

    # -- hardware counters (measure.counters=ncu) -------------------------------------------
    def _counters_on(self) -> bool:
        return self.cfg.measure.counters.value == "ncu"

    def _with_counters(self, pt: Point, kind: str, row: Dict[str, Any]) -> Dict[str, Any]:
        from gemmlab.measure import counters

        if row.get("status") != "ok":
            return row
        reason = counters.unavailable(kind)
        if reason:
            return {**row, "counters_reason": reason}
        cfg_file = self.out_dir / "ncu" / "config.yaml"
        if not cfg_file.exists():
            cfg_file.parent.mkdir(parents=True, exist_ok=True)
            OmegaConf.save(self.cfg, cfg_file, resolve=True)
        fields = counters.profile(pt, self.cfg, self.out_dir, cfg_file)
        extra = {**_as_dict(row.get("extra")), **fields.pop("extra", {})}
        return {**row, **fields, "extra": extra or None}


def describe(pt: Point) -> str:
    """The point in a few words, for the progress bar and the log: variant, precision, shape, and
    the workload axes where they are not the defaults."""
    text = f"{pt.variant} {pt.precision} {pt.shape_name or f'{pt.m}x{pt.n}x{pt.k}'}"
    if pt.batch != 1:
        text += f" x{pt.batch}"
    if pt.layout != "nn":
        text += f" {pt.layout}"
    return text


def variant_fields(pt: Point) -> Dict[str, Any]:
    """What the variant is, written into its rows at measure time (:func:`gemmlab.variants.row_fields`);
    a cuda kernel's ``defines`` include the point's own (``cuda.point_defines``: stage 12's B_KMAJOR
    follows the layout), as the build and its ``kernel_name`` have them."""
    node = OmegaConf.to_container(pt.variant_cfg, resolve=True, enum_to_str=True)
    fields = variants.row_fields(node, backend_class(pt.backend).kind)
    extra = pt.point_defines() if isinstance(node.get("cuda"), dict) else {}
    if extra:
        fields["defines"] = {**(fields["defines"] or {}), **extra}
    return fields


def _say(text: str) -> None:
    """A line for the person at the terminal (stderr), beside the log."""
    import sys

    print(text, file=sys.stderr, flush=True)


def _as_dict(v) -> Dict[str, Any]:
    if isinstance(v, dict):
        return v
    if isinstance(v, str) and v:
        import json

        return json.loads(v)
    return {}


def resume_hint(out_dir: Path) -> str:
    """How to measure what a run did not finish: the same command into the same folder."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        if hc.mode == RunMode.MULTIRUN:
            return (f"To measure the rest, run the same command again with hydra.sweep.dir={hc.sweep.dir} "
                    "(points already ok are skipped).")
    except Exception:  # not under Hydra (tests, benchmarks)
        pass
    return f"To measure the rest, run the same command again with hydra.run.dir={out_dir} (points already ok are skipped)."


def _log_files() -> List[str]:
    """The run's log files (Hydra's job log): the worker appends its records there too."""
    return [h.baseFilename for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]


class _progress:
    """A rich progress bar over the points (or nothing, with run.progress=false)."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total
        self._p = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._p = Progress(TextColumn("[bold]{task.description:<40}"), BarColumn(),
                               MofNCompleteColumn(), TimeElapsedColumn(), transient=False)
            self._p.__enter__()
            self._task = self._p.add_task("points", total=self.total)
        return self

    def describe(self, text: str) -> None:
        if self._p:
            self._p.update(self._task, description=text)

    def advance(self) -> None:
        if self._p:
            self._p.advance(self._task)

    def __exit__(self, *exc):
        if self._p:
            self._p.update(self._task, description="done")
            self._p.__exit__(*exc)


def print_summary(runner: Runner, path: Path) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    measured = [r for r in runner.summary_rows if r["status"] != "skipped"]
    skipped = Counter((r["variant"], r["precision"], r.get("reason") or "")
                      for r in runner.summary_rows if r["status"] == "skipped")
    t = Table(title=f"gemmlab: {len(measured)} measured points", show_lines=False)
    for col in ("variant", "precision", "m x n x k", "status", "TFLOP/s", "% base", "err/bound", "noise"):
        t.add_column(col, no_wrap=True)

    def f(v, spec):
        return "" if v is None or v == "" else format(v, spec)

    for r in measured:
        t.add_row(r["variant"], r["precision"], f"{r['m']}x{r['n']}x{r['k']}",
                  r["status"] if r["status"] == "ok" else f"[red]{r['status']}",
                  f(r.get("tflops"), ".4g"), f(r.get("pct_of_baseline"), ".1f"),
                  f(r.get("check_elem_max"), ".2g"),
                  f(r.get("noise"), ".1%") + ("" if r.get("reliable") is not False else " [yellow]unreliable"))
    console = Console(width=max(100, Console().width))
    if measured:
        console.print(t)
    for r in measured:
        if r["status"] == "failed":
            console.print(f"[red]failed[/] {r['variant']} {r['precision']} {r['m']}x{r['n']}x{r['k']}: "
                          f"{escape(str(r.get('reason')))}")
    unsupported = sum(n for (_v, _p, reason), n in skipped.items() if " does not support " in reason)
    by_reason: Dict[str, Counter] = {}
    for (v, _p, reason), n in skipped.items():
        if " does not support " not in reason:
            by_reason.setdefault(reason, Counter())[v] += n
    for reason, variants in by_reason.items():
        what = ", ".join(f"{v} ({n})" for v, n in variants.items())
        console.print(f"[yellow]skipped[/] {escape(what)}: {escape(reason)}")
    if unsupported:
        console.print(f"[yellow]skipped[/] {unsupported} points whose variant does not support the "
                      "precision (each row says which it supports)")
    by_ci = [r for r in measured if r.get("reliable") is True and _as_dict(r.get("extra")).get("reliability")]
    if by_ci:
        console.print(f"[green]reliable by median_ci[/] {len(by_ci)} ok points (noise above max_noise, but the "
                      "median's 95% interval within max_median_ci: extra.reliability)")
    unreliable = [r for r in measured if r.get("reliable") is False]
    if unreliable:
        why = Counter(validity.criteria(r.get("unreliable_reason")) for r in unreliable)
        console.print(f"[yellow]unreliable[/] {len(unreliable)} ok points (figures draw them hollow, claims and "
                      f"tables leave them out): " + escape(", ".join(f"{w} ({n})" for w, n in why.items())))
    contended = [r for r in measured if r.get("contended")]
    if contended:
        pids = sorted({p for r in contended for p in _as_dict(r.get("extra")).get("foreign_pids", [])})
        console.print(f"[red]warning[/] {len(contended)} points were timed while another process was on the "
                      f"GPU (PIDs {', '.join(map(str, pids))}): they are marked contended=true and left out "
                      "of figures and claims; measure again on an idle GPU")
    c = runner.counts
    if runner.worker_faults:
        console.print(f"[red]worker[/] {len(runner.worker_faults)} faults ended a worker process; "
                      f"{runner.counts['worker_restarts']} fresh workers measured the points after them (each "
                      "fault's row names it)")
    console.print(f"ok {c['ok']}  failed {c['failed']}  skipped {c['skipped']}"
                  + (f"  already ok (resumed) {c['resumed']}" if c["resumed"] else "")
                  + (f"  failed before, measured again {c['remeasured']}" if c["remeasured"] else "")
                  + (f"  worker restarts {c['worker_restarts']}" if c["worker_restarts"] else "")
                  + ("  INTERRUPTED" if c["interrupted"] else "") + f"   rows: {path}")
    warn_if_nothing_measured(runner)


def warn_if_nothing_measured(runner: Runner) -> Optional[str]:
    """Print (and return) one plain warning line when the run measured no point: every point it
    ran was skipped (no GPU, a missing package, unsupported precisions or sizes)."""
    rows = runner.summary_rows
    if not rows or any(r["status"] != "skipped" for r in rows) or runner.counts["resumed"]:
        return None
    reason, n = Counter(r.get("reason") or "no reason given" for r in rows).most_common(1)[0]
    why = reason if len(reason) <= 160 else reason[:157] + "..."
    share = "each" if n == len(rows) else f"{n} of them"
    line = (f"warning: nothing was measured: all {len(rows)} points were skipped ({share}: {why}); "
            "each row of the results file says why")
    print(line, flush=True)  # plain text on one line: no markup, no wrapping
    return line


def main(cfg: DictConfig) -> int:
    """Entry point behind run.py. Returns the process exit code."""
    from hydra.core.hydra_config import HydraConfig

    try:
        out_dir = Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # called without Hydra (tests): write next to the cwd
        out_dir = Path(cfg.paths.outputs) / "runs" / "adhoc"
    runner = Runner(cfg, out_dir)
    try:
        counts = runner.run()
    except BusyError as e:
        _say(f"gemmlab: error: {e}")
        return 2
    print_summary(runner, out_dir / "results.csv")
    if counts["interrupted"]:
        return 130
    return 1 if counts["failed"] and cfg.run.fail_on_error else 0


__all__ = ["Runner", "main", "ConfigError"]
