"""One point measured in this process: its backend, its executor, the baselines timed beside it.

The runner (gemmlab/runner.py) owns the run: which points, in what order, where the rows go, the
GPU claim, resume. What happens to one point lives here, so that the runner's own process and a
worker process (gemmlab/measure/worker, which the runner starts for GPU points) measure it the
same way: :class:`PointMeasurer` in the runner for skip reasons and host points, and
:func:`worker_target` in the worker.
"""
from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Tuple

from gemmlab.backends.base import Backend, backend_class
from gemmlab.config import load_variant
from gemmlab.points import Point, requirement_failure

log = logging.getLogger("gemmlab")
LIBRARY_BACKENDS = ("cublas", "cublaslt")  # their points get no baseline: they are the baseline


class PointMeasurer:
    def __init__(self, cfg, watch: Optional[Callable] = None):
        self.cfg = cfg
        self.watch = watch  # the worker's phase reports, handed to the executors
        self._backends: Dict[str, Backend] = {}
        self._executors: Dict[str, Any] = {}
        self._unavailable: Dict[str, Optional[str]] = {}
        self._baseline_variants: Dict[str, Any] = {}

    # -- backends and executors -------------------------------------------------------------
    def executor(self, kind: str):
        if kind not in self._executors:
            if kind == "cpu":
                from gemmlab.measure.cpu import CpuExecutor

                ex = CpuExecutor(self.cfg)
            else:
                from gemmlab.measure.gpu import GpuExecutor

                ex = GpuExecutor(self.cfg)
            if self.watch is not None:
                ex.watch = self.watch
            self._executors[kind] = ex
        return self._executors[kind]

    def backend(self, name: str) -> Backend:
        if name not in self._backends:
            self._backends[name] = backend_class(name)(self.cfg)
        return self._backends[name]

    def close(self) -> None:
        """Free the executors' device state (the timer's flush buffer, the stream) at the end of a
        run (gemmlab/measure/gpu.py: close), so that a process serving several runs (a sweep's
        shared worker) does not hold every earlier run's."""
        for ex in self._executors.values():
            close = getattr(ex, "close", None)
            if close is not None:
                close()

    def unavailable(self, name: str) -> Optional[str]:
        """Why backend `name` cannot run on this machine (no CUDA device, missing package)."""
        if name not in self._unavailable:
            b = self.backend(name)
            reason = self.executor(b.kind).unavailable() or b.unavailable()
            self._unavailable[name] = reason
        return self._unavailable[name]

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

    # -- one point ---------------------------------------------------------------------------
    def measure(self, pt: Point) -> Dict[str, Any]:
        """The row fields the executor measured for a point that can run here (skip reasons were
        asked first): timing, check, guards, device state; a failure is a failed row, not a raise."""
        b = self.backend(pt.backend)
        ex = self.executor(b.kind)
        try:
            fields = ex.measure_point(pt, b, seed=self.cfg.measure.seed, baselines=self.baselines_for(pt, b))
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one bad point must not end the run
            log.exception("point %s failed", pt.variant)
            fields = {"status": "failed", "reason": describe_error(e)}
        finally:
            b.release()
        if fields.get("status") not in ("ok", "failed", "skipped"):  # a backend bug, not a crash
            fields = {**fields, "status": "failed",
                      "reason": f"backend {pt.backend} returned status {fields.get('status')!r}"}
        return {**self.device_fields(b.kind), **fields}

    def n_baselines(self, pt: Point) -> int:
        b = self.backend(pt.backend)
        return len(self.baselines_for(pt, b))

    def device_fields(self, kind: str, quiet: bool = False) -> Dict[str, Any]:
        try:
            if kind == "gpu" and "gpu" not in self._executors and quiet:
                return {}
            return self.executor(kind).device_fields()
        except Exception:
            return {}


def describe_error(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if "OutOfMemory" in name or "out of memory" in text.lower():
        return f"out of memory: {text}"
    return f"{name}: {text}"[:500]


# -- the worker's side -------------------------------------------------------------------------
def worker_target(init: Dict[str, Any], phase: Callable) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """What a worker process runs (gemmlab/measure/worker/child.py). Each request is one point of a
    run, named by its key in the run's config (sent with it, resolved); the worker keeps the
    measurer of the run it served last, for the runs of one process that share the worker
    (run.fresh_worker=false). The reply carries the point's fields and, when the point left the
    process's CUDA context unusable, ``poisoned`` (the runner then starts a fresh worker)."""
    import hashlib

    from omegaconf import OmegaConf

    from gemmlab.config import GemmlabConf
    from gemmlab.measure.worker import faults
    from gemmlab.points import expand

    current: Dict[str, Any] = {}

    def run_of(cfg_yaml: str):
        digest = hashlib.sha256(cfg_yaml.encode()).hexdigest()
        if current.get("digest") != digest:
            if "measurer" in current:  # a new run: the last one's device state goes first
                current.pop("measurer").close()
            # through the schema, as at run time: typed values (enums) and the same point keys
            cfg = OmegaConf.merge(OmegaConf.structured(GemmlabConf), OmegaConf.create(cfg_yaml))
            current.update(digest=digest, points={p.key: p for p in expand(cfg)},
                           measurer=PointMeasurer(cfg, watch=phase))
        return current["points"], current["measurer"]

    def handle(request: Dict[str, Any]) -> Dict[str, Any]:
        points, measurer = run_of(request["cfg_yaml"])
        pt = points[request["point_key"]]
        fields = measurer.measure(pt)
        poisoned = None
        if measurer.backend(pt.backend).kind == "gpu":
            poisoned = faults.context_error()
            if poisoned is None and fields.get("status") == "failed":
                poisoned = faults.sticky_error(str(fields.get("reason") or ""))
        return {"fields": fields, "pid": os.getpid(), "poisoned": poisoned}

    return handle
