"""The ``cutlass`` Backend: the other modules' steps, run for the runner, and the row's fields.

It checks every cutlass variant's options when it is made (a misspelt schedule fails the run at
its start), sets cutlass_cppgen up on first use (:mod:`gemmlab.backends.cutlass.compat`), lists
each point's kernels (:mod:`.catalog`), compiles the run's kernels in ``prepare``
(:mod:`.build`), and in ``make_launch`` loads them (:mod:`.launch`) and, for a search, picks one
(:mod:`.search`). A ``col`` operand is copied once, outside the timed region, by
:meth:`Cutlass.make_inputs`; the check uses the same values.

Besides the row columns, ``Launch.info["extra"]`` carries ``cutlass`` (the kernel's configuration:
CTA tile, cluster, schedules, layouts, alignment, swizzle, raster order, grid, block, workspace)
and, for a search, ``search``: one record per candidate kernel (status, rel_error,
rank_time_median_s, rank_tflops (ranking only: back to back on a warm L2), compile_s, best),
``search_s`` (the search's wall time: checks and ranking, not the compile), and
``search_scheduler``: one per (kernel, swizzle, raster order) timed in the second round (with its
grid).
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from gemmlab import fp8, operands
from gemmlab.backends.base import Backend, Launch
from gemmlab.backends.cutlass import compat
from gemmlab.backends.cutlass.build import (
    CompileResult,
    CutlassCompileError,
    KernelCache,
    build_flavor,
    target_cc,
)
from gemmlab.backends.cutlass.catalog import Catalog, Kernel, Unsupported, first_line
from gemmlab.backends.cutlass.launch import KernelLaunch
from gemmlab.backends.cutlass.options import (
    KernelOptions,
    check_precision,
    kernel_options,
)
from gemmlab.backends.cutlass.search import SearchPick, run_search
from gemmlab.cache import cache_dir

log = logging.getLogger("gemmlab.cutlass")


class Cutlass(Backend):
    name = "cutlass"
    kind = "gpu"

    def __init__(self, cfg):
        super().__init__(cfg)
        # Check every cutlass variant's options now, before any point: a misspelt schedule fails
        # the run at its start with the key and the valid names, even on a machine without a GPU.
        self.options: Dict[str, KernelOptions] = {}
        for vname, v in (cfg.get("variant") or {}).items():
            if v.backend.value != self.name:
                continue
            opts = kernel_options(vname, v.get("cutlass"))
            self.options[vname] = opts
            for pname, p in (cfg.get("precision") or {}).items():
                if pname in v.precisions:
                    check_precision(vname, opts, pname, p.compute)
        self._cutlass = None
        self._catalog: Optional[Catalog] = None
        self._cache: Optional[KernelCache] = None
        self._results: Dict[str, CompileResult] = {}
        self._launches: List[KernelLaunch] = []
        # point key -> what the search chose (kernel, swizzle, raster order) and its records: the
        # executor makes one launch per input set (cache=rotate); the search runs on the first and
        # the others reuse its pick
        self._searched: Dict[str, SearchPick] = {}
        self.out_dir: Optional[Path] = None  # the runner may set the run folder

    # -- setup -----------------------------------------------------------------------------------
    def _setup(self) -> None:
        if self._catalog is not None:
            return
        nvcc = compat.use_nvcc()
        cc = target_cc()
        # cutlass_cppgen keys its cache by the emitted source only: one folder per toolchain, flags
        # and target, so a change of any of them never loads a kernel built another way.
        folder = cache_dir(self.cfg.paths.cache, "cutlass") / build_flavor(nvcc, cc)
        cutlass = compat.import_cutlass(folder)
        header = Path(cutlass.CUTLASS_PATH) / "include" / "cutlass" / "cutlass.h"
        if not header.exists():
            raise compat.CutlassUnavailable(f"CUTLASS headers not found at {header.parent.parent} "
                                                    "(set CUTLASS_PATH or reinstall nvidia-cutlass)")
        compat.use_target_cc(cc)
        self._cutlass = cutlass
        self._catalog = Catalog(cutlass, cc)
        self._cache = KernelCache(folder, nvcc, cutlass, cc)

    def unavailable(self) -> Optional[str]:
        try:
            self._setup()
        except (compat.NvccNotFound, compat.CutlassUnavailable) as e:
            return str(e)
        return None

    def run_dir(self) -> Path:
        if self.out_dir is not None:
            return Path(self.out_dir)
        try:
            from hydra.core.hydra_config import HydraConfig

            return Path(HydraConfig.get().runtime.output_dir)
        except Exception:  # not inside a Hydra run (tests, scripts)
            return Path(os.path.expanduser(str(self.cfg.paths.outputs))) / "runs" / "adhoc"

    @property
    def log_dir(self) -> Path:
        return self.run_dir() / "cutlass" / "logs"

    def compile_jobs(self) -> int:
        jobs = [o.compile_jobs or (os.cpu_count() or 1) for o in self.options.values()]
        return max(jobs) if jobs else (os.cpu_count() or 1)

    # -- points -> kernels -----------------------------------------------------------------------
    def variant_options(self, point) -> KernelOptions:
        """The options of the point's variant; one the run does not measure (a baseline timed
        beside another variant's points, measure.baseline) has them read from its config here."""
        if point.variant not in self.options:
            self.options[point.variant] = kernel_options(point.variant, point.variant_cfg.get("cutlass"))
        return self.options[point.variant]

    def point_options(self, point) -> KernelOptions:
        """The variant's options with the point's operand layouts (gemmlab/operands.py): an operand
        stored transposed is the operand in column-major order (the same memory), so ``t`` is
        CUTLASS's ColumnMajor; ``nn`` keeps the variant's own ``layout_a``/``layout_b``. Raises
        Unsupported where the two would disagree."""
        opts = self.variant_options(point)
        own = (opts.layout_a, opts.layout_b) != ("row", "row")
        if own and (point.layout != "nn" or point.batch != 1):
            raise Unsupported(f"{point.variant} fixes its own operand layouts (layout_a {opts.layout_a}, "
                              f"layout_b {opts.layout_b}; copied untimed): it runs layout nn, batch 1 only")
        if point.layout == "nn":
            return opts
        ta, tb = operands.transposed(point.layout)
        return replace(opts, layout_a="col" if ta else "row", layout_b="col" if tb else "row")

    def kernels(self, point) -> List[Kernel]:
        """The kernel(s) ``point`` needs; raises Unsupported with the skip reason."""
        if point.compute == "fp8":
            mode = self._scaling()
            if mode not in fp8.CUTLASS_MODES:
                raise Unsupported(f"{fp8.not_implemented(mode, fp8.CUTLASS_MODES, 'the cutlass backend')}: "
                                  f"{fp8.CUTLASS_SCALED_REASON[mode]}")
        self._setup()
        return self._catalog.kernels(point, self.point_options(point))

    def _scaling(self) -> str:
        return self.cfg.measure.fp8_scaling.value  # the schema types it at compose

    def skip_reason(self, point) -> Optional[str]:
        if point.compute == "fp8":
            try:
                import torch  # noqa: F401  (fp8.gpu_operands quantizes through PyTorch)
            except ImportError:
                return "fp8 operands are made through PyTorch (pip install torch)"
        try:
            self.kernels(point)
        except Unsupported as e:
            return str(e)
        except Exception:  # not a reason to skip: make_launch raises it again, as a failed row
            log.exception("cutlass: listing kernels for %s %s failed", point.variant, point.precision)
        return None

    def prepare(self, points: Iterable) -> None:
        """Compile every distinct kernel of the run, in parallel, before anything is timed."""
        t0 = time.perf_counter()
        wanted: Dict[str, Kernel] = {}
        for p in points:
            try:
                for k in self.kernels(p):
                    wanted.setdefault(k.key_hash, k)
            except Exception:
                continue  # its row says why (skipped, or failed when make_launch raises again)
        if not wanted:
            return
        jobs = self.compile_jobs()
        self._results.update(self._cache.build(list(wanted.values()), jobs, self.log_dir))
        wall = time.perf_counter() - t0
        self._write_report(wanted, jobs, wall)

    def _write_report(self, wanted: Dict[str, Kernel], jobs: int, wall_s: float) -> None:
        rows = [asdict(self._results[h]) for h in wanted if h in self._results]
        for r in rows:
            r["config"] = wanted[r["key_hash"]].config
        report = {"wall_s": wall_s, "jobs": jobs, "cpu_count": os.cpu_count(),
                  "kernels": len(rows),
                  "compiled": sum(r["status"] == "compiled" for r in rows),
                  "cached": sum(r["status"] == "cached" for r in rows),
                  "failed": sum(r["status"] == "failed" for r in rows),
                  "cache": str(self._cache.db), "results": rows}
        path = self.run_dir() / "cutlass" / "compile.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1))
        log.info("cutlass: %d kernels ready in %.1f s (%d compiled, %d cached, %d failed); %s",
                 report["kernels"], wall_s, report["compiled"], report["cached"], report["failed"], path)

    def _ensure_built(self, kernels: List[Kernel]) -> None:
        missing = [k for k in kernels if k.key_hash not in self._results]
        if missing:  # make_launch without prepare (scripts): compile now, the same way
            self._results.update(self._cache.build(missing, self.compile_jobs(), self.log_dir))

    # -- inputs and launches ---------------------------------------------------------------------
    def wants_fp32_inputs(self, point) -> bool:
        return point.compute == "fp8"

    def make_inputs(self, point, a, b):
        if point.compute == "fp8":  # A row-major, B n x k (K-major), as cuBLASLt's and the FP8 stages'
            ta, tb, a_ref, b_ref, _sc = fp8.gpu_operands(point.layout, point.in_dtype, self._scaling(), a, b)
            return ta, tb, a_ref, b_ref
        opts = self.variant_options(point)
        if (opts.layout_a == "row" and opts.layout_b == "row") or point.layout != "nn" or point.batch != 1:
            return a, b, a, b  # as stored (a variant with its own layouts skips other layouts)
        import cupy

        a2 = cupy.asfortranarray(a) if opts.layout_a == "col" else a
        b2 = cupy.asfortranarray(b) if opts.layout_b == "col" else b
        return a2, b2, a, b

    def make_launch(self, point, a, b, c) -> Launch:
        try:
            kernels = self.kernels(point)
        except Unsupported as e:
            raise RuntimeError(str(e)) from None
        self._ensure_built(kernels)
        failed = [self._results[k.key_hash] for k in kernels if not self._results[k.key_hash].ok]
        ready = [k for k in kernels if self._results[k.key_hash].ok]
        if not ready:
            f = failed[0]
            raise CutlassCompileError(f"CUTLASS kernel {f.name} did not compile ({f.error}); log: {f.log}")
        opts = self.point_options(point)
        if opts.search and point.key in self._searched:
            pick = self._searched[point.key]
            (kernel,) = [k for k in kernels if k.key_hash == pick.key_hash]
            launch = self._load(kernel, point, a, b, c, pick.swizzle, pick.raster_order)
            self._launches.append(launch)
            return Launch(launch, self._info(launch, pick, kernels))
        records: List[Dict[str, Any]] = [self._record(self._results[k.key_hash], k) for k in kernels]
        launches = []
        for k, rec in zip(kernels, records):
            if rec["status"] == "failed":
                continue
            try:
                launches.append(self._load(k, point, a, b, c, *self._scheduler_args(k, opts)))
            except Exception as e:
                if not opts.search:
                    raise
                rec.update(status="failed", error=f"load/arguments: {type(e).__name__}: {first_line(e)}")
        if not launches:
            raise RuntimeError("no CUTLASS candidate could be loaded: "
                               + "; ".join(f"{r['kernel']}: {r.get('error')}" for r in records))
        pick = None
        if opts.search:
            try:
                best, pick = run_search(point, opts, launches, records, a, b, c,
                                        exact=self.cfg.measure.distribution.value == "exact",
                                        watch=self.watch_search)
            finally:
                self.watch_search(None)
            self._searched[point.key] = pick
        else:
            best = launches[0]
        for launch in launches:
            if launch is not best:
                launch.close()
        self._launches.append(best)
        info = self._info(best, pick, kernels)
        sc = self._fp8_scales(point, a, b)
        if sc is not None:
            info["extra"]["fp8_scaling"] = sc.extra()
            info["extra"]["cutlass"]["alpha"] = best.alpha
        return Launch(best, info)

    @staticmethod
    def _scheduler_args(kernel: Kernel, opts: KernelOptions) -> Tuple[int, str]:
        """The variant's swizzle and raster order where the kernel reads them, else the defaults."""
        if kernel.config.get("persistent"):
            return opts.swizzle, opts.raster_order
        return 1, "heuristic"

    def _load(self, kernel: Kernel, point, a, b, c, swizzle: int = 1,
              raster_order: str = "heuristic") -> KernelLaunch:
        if not self._cache.has(kernel):
            raise CutlassCompileError(f"CUTLASS kernel {kernel.name} is not in the cache {self._cache.db}")
        import cupy

        # The kernel goes into the context CuPy uses: make it current on this thread, and tell
        # cutlass_cppgen which device that is (it would otherwise initialise device 0).
        device = cupy.cuda.Device()
        device.use()
        cupy.cuda.runtime.free(0)
        os.environ.setdefault("CUTLASS_CUDA_DEVICE_ID", str(device.id))
        compat.import_cutlass(self._cache.folder)  # its loader reads this backend's cache
        from cutlass_cppgen.backend import compiler

        compiler.add_module([kernel.operation])  # a cache hit: loads cubin + host library, no nvcc
        return KernelLaunch(kernel, point, a, b, c, swizzle, raster_order, alpha=self._alpha(point, a, b))

    def _fp8_scales(self, point, a, b) -> Optional[fp8.Scales]:
        if point.compute != "fp8":
            return None
        return fp8.scales_of(a, b, self._scaling(), point.in_dtype)

    def _alpha(self, point, a, b) -> float:
        """The epilogue's alpha: 1, or for per-tensor FP8 scale_a * scale_b (rounded to FP32 once:
        D = alpha acc in FP32, where cuBLASLt computes scale_a scale_b acc)."""
        sc = self._fp8_scales(point, a, b)
        if sc is None:
            return 1.0
        import numpy as np

        return float(np.float32(sc.a) * np.float32(sc.b))

    def release(self) -> None:
        for launch in self._launches:
            launch.close()
        self._launches = []
        fp8.forget_recorded()  # the point's fp8 input sets are gone; their addresses may be reused

    # -- row fields ------------------------------------------------------------------------------
    def _record(self, res: CompileResult, kernel: Kernel) -> Dict[str, Any]:
        return {"kernel": kernel.name, "key_hash": kernel.key_hash, "config": kernel.config,
                "status": "failed" if not res.ok else "ready", "compile": res.status,
                "compile_s": res.compile_s, "error": res.error, "log": res.log, "best": False}

    def _info(self, best: KernelLaunch, pick: Optional[SearchPick], kernels: List[Kernel]) -> Dict[str, Any]:
        attrs = best.function_attributes()
        res = self._results[best.kernel.key_hash]
        meta = self._cache.meta(best.kernel)
        spill = res.spill_bytes if res.status == "compiled" else meta.get("spill_bytes")
        extra: Dict[str, Any] = {"cutlass": {**best.kernel.config, "swizzle": best.swizzle,
                                             "raster_order": best.raster_order, "grid": best.grid,
                                             "block": best.block, "local_bytes": attrs["local_bytes"],
                                             "workspace_bytes": best.workspace_bytes,
                                             "launch": ("memset workspace + kernel" if best.workspace_bytes
                                                        else "kernel"),
                                             "compile": res.status}}
        compile_s = res.compile_s
        if pick is not None:
            extra["search"] = pick.records
            extra["search_s"] = pick.search_s
            if pick.scheduler_records:
                extra["search_scheduler"] = pick.scheduler_records
            compile_s = sum(self._results[k.key_hash].compile_s for k in kernels)
        return {"kernel_name": best.kernel.name, "registers": attrs["registers"],
                "smem_bytes": attrs["smem_bytes"], "spill_bytes": spill, "compile_s": compile_s,
                "library_version": _library_version(self._cutlass), "extra": extra}


def _library_version(cutlass_module) -> str:
    try:
        from importlib.metadata import version

        pkg = version("nvidia-cutlass")
    except Exception:
        pkg = "?"
    return f"CUTLASS {cutlass_module.__version__} (nvidia-cutlass {pkg}), nvcc {cutlass_module.nvcc_version()}"
