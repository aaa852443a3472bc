"""Run every point of a composed config and append one row per point to the run's results file."""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from gemmlab import env, variants
from gemmlab.backends.base import Backend, backend_class
from gemmlab.config import load_variant
from gemmlab.measure import validity
from gemmlab.points import ConfigError, Point, expand, requirement_failure
from gemmlab.rows import RowWriter, ok_keys
from gemmlab.samples import SampleWriter
from gemmlab.sweep.locks import BusyError, lock_folder

log = logging.getLogger("gemmlab")
LIBRARY_BACKENDS = ("cublas", "cublaslt")  # their points get no baseline: they are the baseline
RUN_LOCK = ".gemmlab-run.lock"  # one run at a time per results folder


class Runner:
    def __init__(self, cfg: DictConfig, out_dir: os.PathLike):
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.points: List[Point] = expand(cfg)  # raises ConfigError before any work
        self._backends: Dict[str, Backend] = {}
        self._executors: Dict[str, Any] = {}
        self._unavailable: Dict[str, Optional[str]] = {}
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        # unique per process: two runs into one folder in the same second still differ
        salt = f"{self.out_dir}|{os.getpid()}|{os.urandom(4).hex()}"
        self.run_id = f"{stamp}-{hashlib.sha1(salt.encode()).hexdigest()[:8]}"
        self.counts: Counter = Counter()
        self.summary_rows: List[Dict[str, Any]] = []
        self.gpu_busy: Optional[str] = None  # why the GPU could not be claimed
        self._baseline_variants: Dict[str, Any] = {}

    # -- backends and executors -------------------------------------------------------------
    def executor(self, kind: str):
        if kind not in self._executors:
            if kind == "cpu":
                from gemmlab.measure.cpu import CpuExecutor

                self._executors[kind] = CpuExecutor(self.cfg)
            else:
                from gemmlab.measure.gpu import GpuExecutor

                self._executors[kind] = GpuExecutor(self.cfg)
        return self._executors[kind]

    def backend(self, name: str) -> Backend:
        if name not in self._backends:
            self._backends[name] = backend_class(name)(self.cfg)
        return self._backends[name]

    def unavailable(self, name: str) -> Optional[str]:
        """Why backend `name` cannot run on this machine (no CUDA device, missing package)."""
        if name not in self._unavailable:
            b = self.backend(name)
            reason = self.executor(b.kind).unavailable() or b.unavailable()
            self._unavailable[name] = reason
        return self._unavailable[name]

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

    def skip_reason(self, pt: Point) -> Optional[str]:
        if pt.skip_reason:
            return pt.skip_reason
        # what the backend cannot run on any machine (a layout, a batch) before what this one lacks
        reason = backend_class(pt.backend).workload_reason(pt)
        if reason:
            return reason
        reason = self.unavailable(pt.backend)
        if reason:
            return reason
        return self.backend(pt.backend).skip_reason(pt)

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> Counter:
        lock_folder(self.out_dir, RUN_LOCK, "gemmlab run")  # raises BusyError naming the holder
        done = ok_keys(self.out_dir) if self.cfg.run.resume else set()
        todo = [p for p in self.points if p.key not in done]
        if len(todo) < len(self.points):
            log.info("resume: %d of %d points already ok in %s", len(self.points) - len(todo),
                     len(self.points), self.out_dir)
            self.counts["resumed"] = len(self.points) - len(todo)
        runnable = [p for p in todo if not p.skip_reason and not self.unavailable(p.backend)]
        by_backend: Dict[str, List[Point]] = {}
        for p in runnable:
            by_backend.setdefault(p.backend, []).append(p)
        if any(self.backend(name).kind == "gpu" for name in by_backend):
            self._claim_gpu()
        for name, pts in by_backend.items():
            if not (self.gpu_busy and self.backend(name).kind == "gpu"):
                self.backend(name).prepare(pts)

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
                self.counts["interrupted"] += 1
        return self.counts

    # -- baselines: what "% of cuBLAS" divides by ----------------------------------------------
    def baselines_for(self, pt: Point, b: Backend) -> List[Tuple[str, Point, Backend]]:
        """The baselines (``measure.baseline``) timed interleaved with a GPU point of a
        non-library variant: (name, its point, its backend), each one that can run this shape.
        Any variant may be one (``variant=B measure.baseline=[A]`` is the paired A/B mode), never
        the point's own: its samples would share the point's call name in samples.parquet."""
        if b.kind != "gpu" or pt.backend in LIBRARY_BACKENDS:
            return []
        out = []
        for name in self.cfg.measure.baseline:
            if name == pt.variant:
                continue
            v = self._baseline_variant(name)
            if v is None or pt.precision not in v.precisions:
                continue
            bname = v.backend.value
            if self.unavailable(bname) or self.backend(bname).kind != "gpu":  # timed on the GPU's stream
                continue
            # the library writes the precision's own output type (a wmma kernel may write float)
            bp = replace(pt, variant=name, backend=bname, out_dtype=self.cfg.precision[pt.precision].out_dtype,
                         variant_cfg=v, skip_reason=None)
            if requirement_failure(bp) or backend_class(bname).workload_reason(bp) \
                    or self.backend(bname).skip_reason(bp):
                continue
            out.append((name, bp, self.backend(bname)))
        return out

    def _baseline_variant(self, name: str):
        """The baseline's config: as this run sets it where the run measures that variant too
        (its overrides apply, and a CUTLASS backend knows its options), else its YAML."""
        if name in (self.cfg.get("variant") or {}):
            return self.cfg.variant[name]
        if name not in self._baseline_variants:
            try:
                self._baseline_variants[name] = load_variant(name)
            except Exception as e:  # an unknown name: validation says so before a run starts
                log.warning("baseline %s unavailable: %s", name, e)
                self._baseline_variants[name] = None
        return self._baseline_variants[name]

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

    def measure(self, pt: Point) -> Dict[str, Any]:
        row = self.base_row(pt)
        reason = self.skip_reason(pt)
        if reason:
            kind = self.backend(pt.backend).kind if pt.backend in self._backends else "cpu"
            return {**row, **self._device_fields(kind, quiet=True), "status": "skipped", "reason": reason}
        b = self.backend(pt.backend)
        if b.kind == "gpu" and self.gpu_busy:
            return {**row, "status": "failed", "reason": self.gpu_busy}
        ex = self.executor(b.kind)
        try:
            fields = ex.measure_point(pt, b, seed=self.cfg.measure.seed, baselines=self.baselines_for(pt, b))
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one bad point must not end the run
            log.exception("point %s failed", describe(pt))
            fields = {"status": "failed", "reason": _describe(e)}
        finally:
            b.release()
        if fields.get("status") not in ("ok", "failed", "skipped"):  # a backend bug, not a crash
            fields = {**fields, "status": "failed",
                      "reason": f"backend {pt.backend} returned status {fields.get('status')!r}"}
        row = {**row, **self._device_fields(b.kind), **fields}
        row.update(validity.reliability(row, self.cfg.measure))
        if self._counters_on():
            row = self._with_counters(pt, b.kind, row)
        return row

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

    def _device_fields(self, kind: str, quiet: bool = False) -> Dict[str, Any]:
        try:
            if kind == "gpu" and "gpu" not in self._executors and quiet:
                return {}
            return self.executor(kind).device_fields()
        except Exception:
            return {}


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
    """What the variant is, written into its rows at measure time (:func:`gemmlab.variants.row_fields`)."""
    node = OmegaConf.to_container(pt.variant_cfg, resolve=True, enum_to_str=True)
    return variants.row_fields(node, backend_class(pt.backend).kind)


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


def _describe(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if "OutOfMemory" in name or "out of memory" in text.lower():
        return f"out of memory: {text}"
    return f"{name}: {text}"[:500]


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
    unreliable = [r for r in measured if r.get("reliable") is False]
    if unreliable:
        why = Counter(str(r.get("unreliable_reason") or "").split(" (")[0].split(" >")[0].split(" <")[0]
                      for r in unreliable)
        console.print(f"[yellow]unreliable[/] {len(unreliable)} ok points (figures draw them hollow, claims and "
                      f"tables leave them out): " + escape(", ".join(f"{w} ({n})" for w, n in why.items())))
    contended = [r for r in measured if r.get("contended")]
    if contended:
        pids = sorted({p for r in contended for p in _as_dict(r.get("extra")).get("foreign_pids", [])})
        console.print(f"[red]warning[/] {len(contended)} points were timed while another process was on the "
                      f"GPU (PIDs {', '.join(map(str, pids))}): they are marked contended=true and left out "
                      "of figures and claims; measure again on an idle GPU")
    c = runner.counts
    console.print(f"ok {c['ok']}  failed {c['failed']}  skipped {c['skipped']}"
                  + (f"  already ok (resumed) {c['resumed']}" if c["resumed"] else "")
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
