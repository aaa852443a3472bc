"""cutlass: CUTLASS GEMM kernels emitted from Python by ``cutlass_cppgen`` (nvidia-cutlass 4.2).

A variant's ``cutlass:`` block (:class:`gemmlab.config.CutlassConf`) chooses the kernel:

- precision -> types: fp16 / bf16 (FP32 accumulation), tf32 (``float32`` storage on tensor cores:
  CUTLASS's ``element=float32`` with the tensor-op class *is* TF32 math, so such points are labelled
  tf32), fp32 (true FP32: the SIMT opcode class, CUTLASS 2.x SIMT kernels generated for SM80; for
  SM90 cutlass_cppgen lists only one 2-stage fallback), fp64 (DMMA tensor cores). FP8 is not offered: CUTLASS's SM90 FP8
  kernels need a K-major (column-major) B and per-tensor scales.
- ``tile`` is the thread-block (CTA) tile [m, n, k] handed to CUTLASS's CollectiveBuilder, ``cluster``
  the cluster shape; ``stages`` the mainloop stages (None = as many as shared memory allows);
  ``kernel_schedule``, ``epilogue_schedule`` and ``tile_scheduler`` take the names in
  :data:`KERNEL_SCHEDULES`, :data:`EPILOGUE_SCHEDULES`, :data:`TILE_SCHEDULERS`. (cutlass_cppgen's own
  ``TileDescription.threadblock_shape`` is the *cluster* tile on SM90, CTA tile x cluster; this module
  converts.) Every field left ``auto``/empty keeps CUTLASS's default: the first kernel CUTLASS lists
  for the operands' alignment. Fields that are set pick the first listed kernel that matches them,
  or, when CUTLASS lists none, a tile description built from the default with those fields changed.
  CUTLASS's list is put in a fixed order first (cutlass_cppgen orders tiles of equal size by
  Python's hash seed, so its "first kernel" changed between processes; see ``Catalog._deterministic``).
- ``swizzle`` (1, 2, 4, 8) and ``raster_order`` (heuristic, along_m, along_n) are run-time arguments
  of the persistent tile schedulers of CUTLASS 3 (SM90 cooperative and ping-pong kernels), the
  profiler's ``--swizzle_size`` and ``--raster_order``: the largest swizzle of CTAs the tile grid
  allows, and whether consecutive CTAs walk along m or n. No recompile: the same kernel launched
  with other arguments (and a launch grid computed from them). cutlass_cppgen always passes 1 and
  heuristic; :func:`scheduler_arguments_class` sets them. A kernel that ignores them (non-persistent
  schedules, CUTLASS 2.x kernels) skips the point when they are set.
- ``search: true`` profiles the listed kernels that match the set fields, like the CUTLASS
  profiler's kernel search: each candidate is checked and timed here with CUDA events (interleaved
  rounds, back-to-back launches), the fastest correct one is what the executor then measures; every
  candidate is recorded in the row's ``extra.search``. Which candidates: ``search_order: listed``
  takes the first ``search_limit`` (0 = all) of CUTLASS's list, which are the schedules of one tile;
  ``diverse`` goes round-robin over the first ``search_groups`` (CTA tile, cluster) groups, each
  group's schedules by :func:`schedule_preference`, duplicates of ``ScheduleAuto`` dropped. Then the
  ``search_scheduler_top`` fastest persistent kernels are checked and timed again, interleaved, with
  every ``search_swizzles`` x ``search_raster_orders``; the fastest correct (kernel, swizzle, raster
  order) is measured, and every trial is in ``extra.search_scheduler``.
- Alignment: the largest alignment CUTLASS offers that divides the leading dimensions (like
  ``plan.run``). Odd sizes get the lower-alignment kernels where CUTLASS has them (TF32, FP32, FP64:
  alignment 1); FP16/BF16 need even leading dimensions and are skipped with the reason otherwise.
- Layouts: ``layout_a``/``layout_b`` row or col (a col operand is copied once, outside the timed
  region, by :meth:`Cutlass.make_inputs`; the check uses the same values); C is row-major. SM90
  16-bit kernels are built with no C operand (``element_C = void``: D = A @ B, as cuBLAS computes
  it with beta = 0); the others get C = D and beta = 0, so their epilogue never reads C.
- TF32 and layouts: SM90 wgmma reads 16-bit operands from shared memory in either major order, but
  32-bit (TF32) ones only K-major, i.e. A row-major and B column-major ("TN"). With the usual
  row-major B ("NN") CUTLASS's builder swaps A and B (computing the transposed problem, hence
  ``EpilogueTransposed`` in its TF32 list) and transposes B from shared memory into registers every
  k-step for the register-A form of wgmma (:func:`wgmma_operands`); that ran at ~60% of cuBLAS TF32
  at N = 8192. The ``cutlass_tf32_tn`` variant stores B column-major instead (copied once, untimed);
  the row says so (``extra.cutlass.layout_b``, ``wgmma_operands``). Its baselines get the same
  buffers: cuBLAS runs NN on them (reading B's storage as row-major), cuBLASLt (nvmath reads
  strides) runs TN; see the variant's YAML.

Compiling (``prepare``): the distinct kernels of a run are emitted here and compiled before any timing
by nvcc processes run side by side (device cubin and host library of a kernel in parallel,
``compile_jobs`` processes at once, 0 = one per CPU core), with ``-DNDEBUG`` added to cutlass_cppgen's
flags (see :data:`EXTRA_NVCC_FLAGS`). Results go into cutlass_cppgen's own sqlite cache,
``<paths.cache>/cutlass/<flavor>/compiled_cache.db`` (never the current directory; the flavor names
target, nvcc and package versions and flags), under its own keys, so its loader finds them; a per-kernel lock (:func:`gemmlab.cache.locked`) makes a kernel that two jobs
need compile once. Each compile's commands and nvcc output go to ``<run>/cutlass/logs/``; the run's
compile summary to ``<run>/cutlass/compile.json``. A failed compile becomes a failed row naming its
log; the run goes on.

Timing: ``make_launch`` loads the kernel (a cache hit costs milliseconds), builds the kernel
arguments once (CUTLASS's Params, TMA descriptors, workspace) and a ready launch configuration; the
returned ``fn`` only calls ``cuLaunchKernelEx`` on the current CuPy stream. (``plan.run()`` would
rebuild arguments and look the kernel up in the cache on every call.) The one exception: a kernel
with a device workspace (the stream-K tile scheduler) gets it zeroed by a ``cuMemsetD32Async``
before each launch, as CUTLASS's own adapter does, since its barrier counters are not reset by the
kernel; the row's ``extra.cutlass.launch`` says so.

Besides the row columns, ``Launch.info["extra"]`` carries ``cutlass`` (the kernel's configuration:
CTA tile, cluster, schedules, layouts, alignment, swizzle, raster order, grid, block, workspace)
and, for a search, ``search``: one record per candidate kernel (status, rel_error, rank_time_median_s,
rank_tflops (ranking only: back to back on a warm L2), compile_s, best), and ``search_scheduler``: one per (kernel, swizzle, raster order) timed
in the second round (with its grid).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from gemmlab.backends import cutlass_compat
from gemmlab.backends.base import Backend, Launch
from gemmlab.cache import cache_dir, locked
from gemmlab.measure import check
from gemmlab.points import ConfigError

log = logging.getLogger("gemmlab.cutlass")

# -- names in the YAML -> CUTLASS enum members ------------------------------------------------------
KERNEL_SCHEDULES = {
    "auto": "ScheduleAuto",
    "tma_warp_specialized": "TmaWarpSpecialized",
    "pingpong": "TmaWarpSpecializedPingpong",
    "cooperative": "TmaWarpSpecializedCooperative",
    "cpasync_warp_specialized": "CpAsyncWarpSpecialized",
    "cpasync_pingpong": "CpAsyncWarpSpecializedPingpong",
    "cpasync_cooperative": "CpAsyncWarpSpecializedCooperative",
}
EPILOGUE_SCHEDULES = {
    "auto": "ScheduleAuto",
    "nosmem": "NoSmemWarpSpecialized",
    "tma": None,  # TmaWarpSpecialized, or its Cooperative form with a cooperative kernel schedule
    "tma_warp_specialized": "TmaWarpSpecialized",
    "tma_cooperative": "TmaWarpSpecializedCooperative",
    "transposed": "EpilogueTransposed",
}
TILE_SCHEDULERS = {"auto": "Default", "persistent": "Persistent", "stream_k": "StreamK"}
# Runtime arguments of CUTLASS 3's SM90 persistent tile schedulers (PersistentTileSchedulerSm90 and
# its stream-K form): the largest CTA swizzle (a power of two; the scheduler takes the largest one
# not over this that the tile grid allows) and the raster order, whose values are those of
# cutlass::gemm::kernel::detail::RasterOrderOptions (tile_scheduler_detail.hpp).
SWIZZLES = (1, 2, 4, 8)
RASTER_ORDERS = {"heuristic": 0, "along_m": 1, "along_n": 2}
SEARCH_ORDERS = ("listed", "diverse")
# Kernel schedules whose persistent tile scheduler reads swizzle and raster order at run time; the
# non-persistent ones (TmaWarpSpecialized, CpAsyncWarpSpecialized) launch one CTA per tile in grid
# order and ignore them, and CUTLASS 2.x kernels have their swizzle compiled in.
PERSISTENT_SCHEDULES = ("TmaWarpSpecializedPingpong", "TmaWarpSpecializedCooperative",
                        "CpAsyncWarpSpecializedPingpong", "CpAsyncWarpSpecializedCooperative")
TMA_EPILOGUES = ("TmaWarpSpecialized", "TmaWarpSpecializedCooperative")
TMA_ALIGNMENT_BYTES = 16  # CUTLASS's detail::tma_alignment_bytes: below it ScheduleAuto means cp.async
# A consumer warp group holds its share of the CTA tile's FP32 accumulators in registers: the whole
# tile with ping-pong (two groups on two tiles), half of it with cooperative (two groups on one).
# Beyond 128 accumulators per thread the kernel spills (the 256x128 ping-pong kernels spilled and ran
# an order of magnitude slower than the cooperative ones in the first H200 search), so the diverse
# search tries such kernels last.
MAX_ACCUMULATORS_PER_THREAD = 128
OPCLASSES = ("auto", "tensorop", "simt")
LAYOUTS = {"row": "RowMajor", "col": "ColumnMajor"}
# storage type name (gemmlab.dtypes) -> cutlass DataType member
ELEMENTS = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}
# the precisions (PrecisionConf.compute) this backend builds and the opcode class `auto` means for each
AUTO_OPCLASS = {"fp16": "tensorop", "bf16": "tensorop", "tf32": "tensorop", "fp32": "simt",
                "fp64": "tensorop"}
# where the opcode class decides the math: float32 on tensor cores is TF32, on SIMT cores FP32
REQUIRED_OPCLASS = {"tf32": "tensorop", "fp32": "simt"}
SIMT_KERNEL_CC = 80  # CUTLASS generates its SIMT GEMMs for SM80; they run unchanged on SM90
DEFAULT_TARGET_CC = 90  # emit for Hopper when no GPU says otherwise
# Added to cutlass_cppgen's nvcc options (device and host alike). Without NDEBUG, CUTLASS's device
# asserts stay in as function calls inside the mainloop, and ptxas serializes every wgmma around
# them ("C7510 Potential Performance Loss: wgmma.mma_async instructions are serialized").
EXTRA_NVCC_FLAGS = ["-DNDEBUG"]
# Architectures whose features need the arch-specific target (sm_90a: wgmma, setmaxnreg), as in
# cutlass_cppgen's CompilationOptions.
ARCH_SPECIFIC_CCS = (90, 100, 101, 103, 120, 121)

# search timing: rounds over all candidates (interleaved, so clock drift hits all alike), each
# sample at least this long (several back-to-back launches for short kernels)
SEARCH_ROUNDS = 7  # after one warm-up round that is not kept
SEARCH_SAMPLE_S = 5e-3
SEARCH_MAX_REPS = 100


class Unsupported(Exception):
    """This point cannot be built with this variant (the message is the row's skip reason)."""


class CutlassCompileError(RuntimeError):
    """The kernel did not compile; the message names the compile log."""


# ==================================================================================================
# The variant's options, checked without importing CUTLASS
# ==================================================================================================
@dataclass(frozen=True)
class KernelOptions:
    opclass: str = "auto"
    layout_a: str = "row"
    layout_b: str = "row"
    tile: Optional[Tuple[int, int, int]] = None
    cluster: Optional[Tuple[int, int, int]] = None
    stages: Optional[int] = None
    kernel_schedule: str = "auto"
    epilogue_schedule: str = "auto"
    tile_scheduler: str = "auto"
    swizzle: int = 1
    raster_order: str = "heuristic"
    search: bool = False
    search_limit: int = 0
    search_order: str = "listed"
    search_groups: int = 0
    search_scheduler_top: int = 0
    search_swizzles: Tuple[int, ...] = SWIZZLES
    search_raster_orders: Tuple[str, ...] = tuple(RASTER_ORDERS)
    compile_jobs: int = 0

    @property
    def scheduler_args_set(self) -> bool:
        """Whether swizzle or raster order differ from CUTLASS's defaults (1, heuristic)."""
        return self.swizzle != 1 or self.raster_order != "heuristic"

    @property
    def constrained(self) -> bool:
        """Whether any kernel field is set (else CUTLASS's default kernel is taken)."""
        return (self.tile is not None or self.cluster is not None or self.stages is not None
                or self.kernel_schedule != "auto" or self.epilogue_schedule != "auto"
                or self.tile_scheduler != "auto")


def kernel_options(variant: str, conf) -> KernelOptions:
    """The validated options of a variant's ``cutlass:`` block; raises ConfigError naming the key."""
    if conf is None:
        raise ConfigError(f"variant {variant}: backend cutlass needs a `cutlass:` block")
    where = f"variant {variant}: cutlass."

    def choice(key: str, allowed) -> str:
        value = str(conf.get(key, "auto")).lower()
        if value not in allowed:
            raise ConfigError(f"{where}{key}={value!r} is not one of {', '.join(allowed)}")
        return value

    def shape(key: str, allow_two: bool):
        v = list(conf.get(key) or [])
        if not v:
            return None
        if allow_two and len(v) == 2:
            v = v + [1]
        if len(v) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
            raise ConfigError(f"{where}{key}={v} must be three positive integers [m, n, k]"
                              + (" (or [m, n])" if allow_two else ""))
        return tuple(v)

    layout_c = choice("layout_c", LAYOUTS)
    if layout_c != "row":
        raise ConfigError(f"{where}layout_c must be row: the executor hands the kernel a row-major C")
    cluster = shape("cluster", allow_two=True)
    if cluster is not None and cluster[2] != 1:
        raise ConfigError(f"{where}cluster={list(cluster)}: CUTLASS needs the cluster's k extent to be 1")
    stages = conf.get("stages")
    if stages is not None and (not isinstance(stages, int) or isinstance(stages, bool) or stages < 1):
        raise ConfigError(f"{where}stages={stages!r} must be a positive integer or null (auto)")

    def swizzle_value(key: str, value) -> int:
        if isinstance(value, bool) or value not in SWIZZLES:
            raise ConfigError(f"{where}{key}={value!r} is not one of {', '.join(map(str, SWIZZLES))}")
        return int(value)

    def raster_value(key: str, value) -> str:
        v = str(value).lower()
        if v not in RASTER_ORDERS:
            raise ConfigError(f"{where}{key}={value!r} is not one of {', '.join(RASTER_ORDERS)}")
        return v

    def non_empty(key: str, default):
        v = conf.get(key)
        v = list(default) if v is None else list(v)
        if not v:
            raise ConfigError(f"{where}{key} is empty: list at least one value")
        return v

    swizzles = tuple(dict.fromkeys(swizzle_value("search_swizzles", x)
                                   for x in non_empty("search_swizzles", SWIZZLES)))
    rasters = tuple(dict.fromkeys(raster_value("search_raster_orders", x)
                                  for x in non_empty("search_raster_orders", RASTER_ORDERS)))
    counts = {}
    for key in ("search_limit", "search_groups", "search_scheduler_top", "compile_jobs"):
        value = conf.get(key, 0)
        value = 0 if value is None else value
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{where}{key}={value!r} must be an integer >= 0 (0 = all / off / one per core)")
        counts[key] = value
    opts = KernelOptions(
        opclass=choice("opclass", OPCLASSES),
        layout_a=choice("layout_a", LAYOUTS), layout_b=choice("layout_b", LAYOUTS),
        tile=shape("tile", allow_two=False), cluster=cluster, stages=stages,
        kernel_schedule=choice("kernel_schedule", KERNEL_SCHEDULES),
        epilogue_schedule=choice("epilogue_schedule", EPILOGUE_SCHEDULES),
        tile_scheduler=choice("tile_scheduler", TILE_SCHEDULERS),
        swizzle=swizzle_value("swizzle", conf.get("swizzle", 1)),
        raster_order=raster_value("raster_order", conf.get("raster_order", "heuristic")),
        search=bool(conf.get("search", False)),
        search_order=choice("search_order", SEARCH_ORDERS) if conf.get("search_order") else "listed",
        search_swizzles=swizzles, search_raster_orders=rasters, **counts,
    )
    if opts.epilogue_schedule != "auto" and opts.kernel_schedule == "auto" and not opts.search:
        raise ConfigError(f"{where}epilogue_schedule={opts.epilogue_schedule} needs kernel_schedule set "
                          "as well: CUTLASS takes both schedules, or neither (auto)")
    return opts


def check_precision(variant: str, opts: KernelOptions, precision: str, compute: str) -> None:
    """Raise ConfigError where the variant asks for math the precision does not mean."""
    if compute == "fp8":
        return  # skipped per point with the reason (see Catalog.kernels)
    if compute not in AUTO_OPCLASS:
        raise ConfigError(f"variant {variant}: precision {precision} computes {compute}, which the "
                          f"cutlass backend does not build (it builds {', '.join(AUTO_OPCLASS)})")
    needed = REQUIRED_OPCLASS.get(compute)
    if needed and opts.opclass not in ("auto", needed):
        why = ("tensor-op float32 math is TF32: use precision tf32, or opclass simt for true FP32"
               if compute == "fp32" else "SIMT float32 math is FP32, not TF32: use precision fp32")
        raise ConfigError(f"variant {variant}: cutlass.opclass={opts.opclass} cannot compute "
                          f"{precision} ({why})")


# ==================================================================================================
# Kernels: emitted C++ and cutlass_cppgen's cache key
# ==================================================================================================
@dataclass
class Kernel:
    name: str  # CUTLASS's procedural name, the symbol profilers show
    key: str  # cutlass_cppgen's cache key: emitted source + name + compiler backend
    operation: Any = field(repr=False)  # cutlass_cppgen GemmOperationUniversal
    config: Dict[str, Any] = field(default_factory=dict)  # CTA tile, cluster, schedules, alignment
    void_c: bool = False  # built without a C operand

    @functools.cached_property
    def key_hash(self) -> str:
        return hashlib.sha1(self.key.encode()).hexdigest()[:16]

    @property
    def file_stem(self) -> str:
        return f"{self.name[:120]}-{self.key_hash[:8]}"

    def sources(self) -> Tuple[str, str]:
        """(device source, host source), assembled exactly as cutlass_cppgen's compiler does."""
        from cutlass_library import SubstituteTemplate

        rt = self.operation.rt_module
        includes = list(dict.fromkeys(rt.emitter.includes))
        host_includes = ["builtin_types.h", "device_launch_parameters.h", "cstddef"] + includes
        values = {"operation_name": rt.name(), "operation_suffix": rt.emitter.operation_suffix}
        body = rt.emit()
        device = "".join(f'#include "{i}"\n' for i in includes) + body
        host = "".join(f'#include "{i}"\n' for i in host_includes) + body
        return (device + SubstituteTemplate(rt.KernelTemplate, values),
                host + SubstituteTemplate(rt.HostTemplate, values))


class Catalog:
    """Turns points into Kernels: CUTLASS's list for the operands, filtered by the variant's options."""

    def __init__(self, cutlass_module, target_cc: int):
        self.cutlass = cutlass_module
        self.cc = target_cc
        self._plans: Dict[tuple, Any] = {}
        self._kernels: Dict[tuple, List[Kernel]] = {}
        self._lock = threading.RLock()

    # -- plans ---------------------------------------------------------------------------------
    def _plan(self, elements: Tuple[str, str, str, str, str], layouts: Tuple[str, str], opclass: str):
        key = (elements, layouts, opclass)
        if key not in self._plans:
            c = self.cutlass
            dt = [getattr(c.DataType, e) for e in elements]
            lay = [getattr(c.LayoutType, LAYOUTS[x]) for x in layouts]
            kernel_cc = SIMT_KERNEL_CC if opclass == "simt" else None
            try:
                plan = c.op.Gemm(element_A=dt[0], element_B=dt[1], element_C=dt[2], element_D=dt[3],
                                 element_accumulator=dt[4], layout_A=lay[0], layout_B=lay[1],
                                 layout_C=c.LayoutType.RowMajor, cc=self.cc, kernel_cc=kernel_cc)
                plan.opclass = c.OpcodeClass.Simt if opclass == "simt" else c.OpcodeClass.TensorOp
            except Exception as e:  # cutlass_cppgen raises bare Exceptions for unsupported types
                raise Unsupported(f"CUTLASS has no {opclass} GEMM for {elements[0]} x {elements[1]} "
                                  f"-> {elements[3]} ({layouts[0]}, {layouts[1]}): {_first_line(e)}")
            self._plans[key] = plan
        return self._plans[key]

    # -- kernels for a point -------------------------------------------------------------------
    def kernels(self, point, opts: KernelOptions) -> List[Kernel]:
        """The kernels to build for ``point``: one, or the search candidates. Raises Unsupported."""
        if point.compute == "fp8":
            raise Unsupported("fp8 is not built by the cutlass backend: CUTLASS's SM90 FP8 GEMMs need "
                              "a column-major (K-major) B and per-tensor scales")
        opclass = opts.opclass if opts.opclass != "auto" else AUTO_OPCLASS[point.compute]
        acc = (point.precision_cfg.get("accumulate") if point.precision_cfg is not None else None) \
            or ("float64" if point.compute == "fp64" else "float32")
        try:
            ein, eout, eacc = ELEMENTS[point.in_dtype], ELEMENTS[point.out_dtype], ELEMENTS[acc]
        except KeyError as e:
            raise Unsupported(f"the cutlass backend has no CUTLASS type for {e.args[0]}") from None
        sm90_16bit = opclass == "tensorop" and ein in ("f16", "bf16") and self.cc >= 90
        ec = "void" if sm90_16bit else eout
        with self._lock:
            plan = self._plan((ein, ein, ec, eout, eacc), (opts.layout_a, opts.layout_b), opclass)
            ops_all = plan.possible_operations
            lay_a, lay_b = plan._layout_a, plan._layout_b
            align = (ops_all.find_alignment((point.m, point.k), lay_a, "A"),
                     ops_all.find_alignment((point.k, point.n), lay_b, "B"),
                     ops_all.find_alignment((point.m, point.n), self.cutlass.LayoutType.RowMajor, "C"))
            cache_key = (point.variant, point.compute, ein, eout, eacc, opts, align)
            if cache_key not in self._kernels:
                self._kernels[cache_key] = self._select(plan, opts, align, point, sm90_16bit,
                                                        ELEMENT_BYTES[ein])
            kernels = self._kernels[cache_key]
        if not opts.search and opts.scheduler_args_set and not kernels[0].config["persistent"]:
            raise Unsupported(
                f"swizzle={opts.swizzle}, raster_order={opts.raster_order}: these are run-time arguments "
                "of the persistent tile schedulers of CUTLASS 3 (SM90 cooperative / ping-pong kernels); "
                f"{kernels[0].name} is not one (set swizzle: 1, raster_order: heuristic)")
        return kernels

    def _select(self, plan, opts: KernelOptions, align, point, void_c: bool, elem_bytes: int) -> List[Kernel]:
        from cutlass_cppgen.utils.datatypes import td_from_profiler_op

        try:
            ops = plan.possible_operations.operations(*align, None)
        except Exception:
            keys = sorted(plan.possible_operations.kernels_by_alignment)
            ld = {"A": point.k if opts.layout_a == "row" else point.m,
                  "B": point.n if opts.layout_b == "row" else point.k, "C": point.n}
            raise Unsupported(
                f"CUTLASS has no {point.precision} kernel for leading dimensions A {ld['A']}, "
                f"B {ld['B']}, C {ld['C']} elements: its alignments (A B C) are {keys}, each must divide "
                "its leading dimension (16-bit kernels need even sizes)") from None
        # CUTLASS lists each tile description once per C type (C and void-C variants); keep one.
        candidates, seen = [], set()
        for op in ops:
            td = td_from_profiler_op(op)
            sig = self._signature(td) + ((op.A.alignment, op.B.alignment, op.C.alignment),)
            if sig not in seen:
                seen.add(sig)
                candidates.append((td, (op.A.alignment, op.B.alignment, op.C.alignment)))
        candidates = self._deterministic(candidates)
        build = functools.partial(self._kernel, plan, void_c=void_c, elem_bytes=elem_bytes,
                                  layouts=(opts.layout_a, opts.layout_b))
        if opts.search:
            chosen = [c for c in candidates if self._matches(c[0], opts)]
            if opts.search_order == "diverse":
                chosen = self._diverse(chosen, opts.search_groups, elem_bytes)
            if opts.search_limit:
                chosen = chosen[:opts.search_limit]
            if not chosen:
                raise Unsupported(f"none of CUTLASS's {len(candidates)} {point.precision} kernels for "
                                  "these operands matches the variant's tile/cluster/schedule filters")
            return [build(td, al, listed=True) for td, al in chosen]
        if not opts.constrained:
            td, al = candidates[0]  # what plan.construct() takes: CUTLASS's default (see _deterministic)
            return [build(td, al, listed=True)]
        matching = [c for c in candidates if self._matches(c[0], opts)]
        if matching:
            # fields left auto stay at CUTLASS's defaults where a listed kernel allows it
            td, al = min(matching, key=lambda c: self.describe(c[0])["tile_scheduler"] != "Default")
            return [build(td, al, listed=True)]
        # Listed only for larger alignments (TMA needs 16-byte rows): say so rather than compile
        # a kernel CUTLASS would reject.
        elsewhere = sorted({f"{op.A.alignment} {op.B.alignment} {op.C.alignment}"
                            for op in plan.possible_operations.all_operations
                            if self._matches(td_from_profiler_op(op), opts)})
        if elsewhere:
            raise Unsupported(f"CUTLASS lists this {point.precision} configuration only for alignments "
                              f"(A B C) {elsewhere}; these leading dimensions allow {list(align)}")
        td, al = candidates[0]
        return [build(self._customized(td, opts), al, listed=False)]

    def _kernel(self, plan, td, align, listed: bool, void_c: bool, elem_bytes: int,
                layouts: Tuple[str, str]) -> Kernel:
        if listed:
            # construct() re-validates a passed td with a rule CUTLASS's own TF32 descriptions fail
            # (auto kernel schedule with the transposed epilogue); one set on the plan is used as is.
            plan._tile_description = td
        else:
            try:
                plan.tile_description = td  # the public setter validates stages, cluster, schedules
            except Exception as e:
                raise Unsupported(f"CUTLASS rejects this tile description: {_first_line(e)}") from None
        op = plan.construct(None, *align)
        name = op.procedural_name()
        from cutlass_cppgen.backend import compiler

        key = op.rt_module.emit() + name + compiler.backend  # = cutlass_cppgen's ArtifactManager key
        d = self.describe(td)
        cutlass3 = _enum_name(op.api) == "v3x"
        schedule = resolved_schedule(d, align, elem_bytes) if cutlass3 else None
        config = {**d, "alignment": list(align), "opclass": _enum_name(td.math_instruction.opcode_class),
                  "arch": op.arch, "in_cutlass_list": listed, "void_c": void_c,
                  "layout_a": layouts[0], "layout_b": layouts[1], "layout_c": "row",
                  "persistent": schedule in PERSISTENT_SCHEDULES}
        if cutlass3 and config["opclass"] == "TensorOp":
            config["wgmma_operands"] = wgmma_operands(layouts, elem_bytes)
        return Kernel(name=name, key=key, operation=op, void_c=void_c, config=config)

    # -- tile descriptions ---------------------------------------------------------------------
    @staticmethod
    def cta_tile(td) -> Tuple[int, int, int]:
        cl = list(td.cluster_shape) if td.cluster_shape else [1, 1, 1]
        return tuple(int(t) // max(int(c), 1) for t, c in zip(td.threadblock_shape, cl))

    def describe(self, td) -> Dict[str, Any]:
        return {"tile": list(self.cta_tile(td)),
                "cluster": [int(x) for x in (td.cluster_shape or [1, 1, 1])],
                "stages": int(td.stages) if td.stages else None,
                "kernel_schedule": _enum_name(td.kernel_schedule) or "ScheduleAuto",
                "epilogue_schedule": _enum_name(td.epilogue_schedule) or "ScheduleAuto",
                "tile_scheduler": _enum_name(td.tile_scheduler) or "Default",
                "warp_count": list(td.warp_count) if td.warp_count else None,
                "instruction_shape": list(td.math_instruction.instruction_shape or [])}

    # -- candidate order -------------------------------------------------------------------------
    def _deterministic(self, candidates: List[tuple]) -> List[tuple]:
        """CUTLASS's list in an order that is the same in every process.

        cutlass_cppgen sorts its kernels by cluster tile (CTA tile x cluster) volume only, and kernels
        of equal volume (128x256 with a 2x1 cluster, 256x128 with 1x2) come in an order that follows
        Python's string hash seed, so "CUTLASS's default" and "the first K" changed from one run
        to the next. Ties are broken here by CTA tile volume, then the wider n, the taller m, the
        deeper k and the cluster; a tile's schedules keep CUTLASS's order (stable sort)."""
        def key(c):
            d = self.describe(c[0])
            (m, n, k), cl = d["tile"], d["cluster"]
            return (-(m * n * k * cl[0] * cl[1] * cl[2]), -(m * n * k), -n, -m, -k, tuple(cl))

        return sorted(candidates, key=key)

    def _diverse(self, candidates: List[tuple], max_groups: int, elem_bytes: int) -> List[tuple]:
        """Round-robin over (CTA tile, cluster) groups: every group's preferred schedule, then every
        group's second, ... (groups in list order, the first ``max_groups`` of them, 0 = all); the
        kernels :func:`schedule_preference` expects to be slow come after all the others, again
        round-robin.

        Within a group the schedules go by :func:`schedule_preference`; an explicit schedule that is
        what ``ScheduleAuto`` resolves to in the same group is dropped (the same kernel compiled
        twice), the auto one is kept, since it is also the ``cutlass_auto`` kernel."""
        groups: Dict[tuple, List[tuple]] = {}
        for c in candidates:
            d = self.describe(c[0])
            groups.setdefault((tuple(d["tile"]), tuple(d["cluster"])), []).append(c)
        tiers: Tuple[List[list], List[list]] = ([], [])  # per group: (expected fast, expected slow)
        for members in list(groups.values())[:max_groups or None]:
            described = [(self.describe(td), al) for td, al in members]
            autos = {equivalent_schedule(d, al, elem_bytes) for d, al in described
                     if d["kernel_schedule"] == "ScheduleAuto"}
            ranked = sorted((schedule_preference(d, al, elem_bytes), i) for i, (d, al) in enumerate(described)
                            if d["kernel_schedule"] == "ScheduleAuto"
                            or equivalent_schedule(d, al, elem_bytes) not in autos)
            for slow, tier in zip((False, True), tiers):
                tier.append([members[i] for pref, i in ranked if pref[0] == slow])
        out = []
        for tier in tiers:
            for r in range(max((len(g) for g in tier), default=0)):
                out += [g[r] for g in tier if r < len(g)]
        return out

    def _signature(self, td) -> tuple:
        d = self.describe(td)
        return tuple(json.dumps(d[k]) for k in sorted(d))

    def _matches(self, td, opts: KernelOptions) -> bool:
        d = self.describe(td)
        if opts.tile is not None and tuple(d["tile"]) != opts.tile:
            return False
        if opts.cluster is not None and tuple(d["cluster"]) != opts.cluster:
            return False
        if opts.stages is not None and d["stages"] != opts.stages:
            return False
        if opts.kernel_schedule != "auto" and d["kernel_schedule"] != KERNEL_SCHEDULES[opts.kernel_schedule]:
            return False
        if opts.epilogue_schedule != "auto":
            want = EPILOGUE_SCHEDULES[opts.epilogue_schedule]
            ok = (d["epilogue_schedule"] in ("TmaWarpSpecialized", "TmaWarpSpecializedCooperative")
                  if want is None else d["epilogue_schedule"] == want)
            if not ok:
                return False
        if opts.tile_scheduler != "auto" and d["tile_scheduler"] != TILE_SCHEDULERS[opts.tile_scheduler]:
            return False
        return True

    def _customized(self, base, opts: KernelOptions):
        """``base`` with the options' fields changed: a kernel CUTLASS does not list, built anyway."""
        c = self.cutlass
        cluster = list(opts.cluster) if opts.cluster else [int(x) for x in base.cluster_shape]
        tile = list(opts.tile) if opts.tile else list(self.cta_tile(base))
        update: Dict[str, Any] = {"cluster_shape": cluster,
                                  "threadblock_shape": [t * cl for t, cl in zip(tile, cluster)]}
        if opts.stages is not None:
            update["stages"] = opts.stages
        if opts.kernel_schedule != "auto":
            kernel = getattr(c.KernelScheduleType, KERNEL_SCHEDULES[opts.kernel_schedule])
            update["kernel_schedule"] = kernel
            if opts.epilogue_schedule != "auto":
                want = EPILOGUE_SCHEDULES[opts.epilogue_schedule]
                if want is None:
                    want = ("TmaWarpSpecializedCooperative" if "Cooperative" in kernel.name
                            else "TmaWarpSpecialized")
                update["epilogue_schedule"] = getattr(c.EpilogueScheduleType, want)
            elif _enum_name(base.epilogue_schedule) == "EpilogueTransposed":
                update["epilogue_schedule"] = base.epilogue_schedule  # TF32 row-major B transposes
            else:
                update["epilogue_schedule"] = c.EpilogueScheduleType.NoSmemWarpSpecialized
        if opts.tile_scheduler != "auto":
            update["tile_scheduler"] = getattr(c.TileSchedulerType, TILE_SCHEDULERS[opts.tile_scheduler])
        return base.clone_and_update(update)


# -- what a tile description means on SM90 ---------------------------------------------------------
def resolved_schedule(d: Dict[str, Any], align, elem_bytes: int) -> str:
    """The kernel schedule a CUTLASS 3 kernel runs: ``ScheduleAuto`` resolved as CUTLASS's SM90
    CollectiveBuilder does (TMA when A and B rows are 16-byte aligned; then ping-pong for a CTA
    tile of m 64, cooperative otherwise; cp.async warp-specialized without TMA)."""
    ks = d["kernel_schedule"]
    if ks != "ScheduleAuto":
        return ks
    if any(a * elem_bytes < TMA_ALIGNMENT_BYTES for a in align[:2]):
        return "CpAsyncWarpSpecialized"
    return "TmaWarpSpecializedPingpong" if d["tile"][0] == 64 else "TmaWarpSpecializedCooperative"


def equivalent_schedule(d: Dict[str, Any], align, elem_bytes: int) -> tuple:
    """What decides the compiled kernel besides tile and cluster, with ``auto`` resolved (an auto
    epilogue is CUTLASS's NoSmemWarpSpecialized)."""
    epilogue = d["epilogue_schedule"]
    return (resolved_schedule(d, align, elem_bytes),
            "NoSmemWarpSpecialized" if epilogue == "ScheduleAuto" else epilogue,
            d["tile_scheduler"], d["stages"])


def schedule_preference(d: Dict[str, Any], align, elem_bytes: int) -> tuple:
    """Sort key of a tile's schedules in the diverse search (smaller = tried first).

    Persistent kernels that keep their accumulators in registers come first, then the data-parallel
    tile scheduler before stream-K (which also needs a workspace memset per launch), then the TMA
    epilogue (whole tiles stored by TMA through shared memory) before the direct stores from
    registers, then the auto schedule before an explicit one. Last: non-persistent kernels, ping-pong tiles whose
    accumulators exceed :data:`MAX_ACCUMULATORS_PER_THREAD`, cooperative tiles under m 128."""
    ks = resolved_schedule(d, align, elem_bytes)
    m, n = d["tile"][0], d["tile"][1]
    cooperative = "Cooperative" in ks
    accumulators = m * n // (256 if cooperative else 128)
    slow = (ks not in PERSISTENT_SCHEDULES or accumulators > MAX_ACCUMULATORS_PER_THREAD
            or (cooperative and m < 128))
    return (slow, d["tile_scheduler"] == "StreamK", d["epilogue_schedule"] not in TMA_EPILOGUES,
            d["kernel_schedule"] != "ScheduleAuto")


def wgmma_operands(layouts: Tuple[str, str], elem_bytes: int) -> str:
    """Where an SM90 tensor-op kernel's wgmma reads its operands from.

    wgmma reads 16-bit operands from shared memory in either major order, but 32-bit (TF32) ones
    only K-major (A row-major, B column-major). For any other TF32 layout CUTLASS's builder loads
    the MN-major operand from shared memory into registers, transposing it there, and issues the
    register-A form of wgmma; a row-major B is first swapped into A's place (the problem is
    computed transposed, hence the EpilogueTransposed of CUTLASS's TF32 row-major-B kernels)."""
    if elem_bytes <= 2 or tuple(layouts) == ("row", "col"):
        return "smem x smem"
    if layouts[0] == "row":  # A K-major, B MN-major: swapped
        return "registers x smem (A and B swapped: B transposed into registers; epilogue transposed)"
    return "registers x smem (A transposed into registers)"


# ==================================================================================================
# Compiling into cutlass_cppgen's cache
# ==================================================================================================
@dataclass
class CompileResult:
    key_hash: str
    name: str
    status: str  # compiled | cached | failed
    compile_s: float = 0.0  # device + host nvcc seconds; 0 = taken from the cache
    device_s: Optional[float] = None
    host_s: Optional[float] = None
    log: Optional[str] = None
    error: Optional[str] = None
    spill_bytes: Optional[int] = None
    ptxas_registers: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.status != "failed"


class KernelCache:
    """cutlass_cppgen's sqlite cache in ``folder``, filled by nvcc processes that run side by side."""

    def __init__(self, folder: Path, nvcc: Path, cutlass_module, target_cc: int):
        self.folder = Path(folder)
        self.db = self.folder / "compiled_cache.db"
        self.nvcc = Path(nvcc)
        self.cutlass = cutlass_module
        self.cc = target_cc
        for sub in ("locks", "meta", "build"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)

    # -- lookups -------------------------------------------------------------------------------
    def has(self, kernel: Kernel) -> bool:
        with sqlite3.connect(self.db, timeout=60) as con:
            return con.execute("SELECT 1 FROM compiled_operations WHERE op_key = ? LIMIT 1",
                               (kernel.key,)).fetchone() is not None

    def meta(self, kernel: Kernel) -> Dict[str, Any]:
        path = self.folder / "meta" / f"{kernel.key_hash}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}

    # -- compiling -----------------------------------------------------------------------------
    def build(self, kernels: Sequence[Kernel], jobs: int, log_dir: Path) -> Dict[str, CompileResult]:
        """Make every kernel present in the cache; returns a result per key hash (never raises)."""
        jobs = jobs or os.cpu_count() or 1
        todo, results = [], {}
        for k in {k.key_hash: k for k in kernels}.values():
            if self.has(k):
                results[k.key_hash] = CompileResult(k.key_hash, k.name, "cached")
            else:
                todo.append(k)
        if not todo:
            return results
        sources = {k.key_hash: k.sources() for k in todo}  # emitted here, not in the worker threads
        # Each kernel runs its device and host compiles side by side: jobs // 2 kernels at once.
        per_time = max(1, jobs // 2)
        log.info("cutlass: compiling %d kernels (%d already cached), %d at a time", len(todo),
                 len(results), per_time)
        with ThreadPoolExecutor(max_workers=per_time, thread_name_prefix="cutlass-nvcc") as pool:
            work = pool.map(lambda k: self._compile(k, sources[k.key_hash], log_dir, jobs >= 2), todo)
            for res in work:
                results[res.key_hash] = res
                log.info("cutlass: %s %s (%.1f s)", res.status, res.name, res.compile_s)
        return results

    def commands(self, kernel: Kernel, build: Path) -> Tuple[List[str], List[str]]:
        """The nvcc commands of cutlass_cppgen's compiler (device cubin, host library), in ``build``."""
        from cutlass_cppgen.backend import compiler

        cuda_root = self.nvcc.parent.parent
        cutlass_root = Path(self.cutlass.CUTLASS_PATH)
        includes = [cuda_root / "include", cutlass_root / "include", cutlass_root / "tools/util/include",
                    cutlass_root / "python/cutlass/cpp/include"]
        flags = [part for opt in compiler._nvcc_compile_options for part in opt.split(" ")]
        flags += EXTRA_NVCC_FLAGS + [f"--include-path={p}" for p in includes]
        # One explicit target: `-arch=sm_90a` (cutlass_cppgen's flag) also runs a compute_90 device
        # pass when building the host library, which needs no device code at all.
        arch = _arch_flag(self.cc)
        device = [str(self.nvcc), *flags, arch, "-Xptxas=-v", "-cubin", str(build / "device.cu"),
                  "-o", str(build / "device.cubin")]
        host = [str(self.nvcc), "-x", "cu", "-Xcompiler=-fpermissive", "-Xcompiler=-w",
                "-Xcompiler=-fPIC", *flags, arch, "-shared", "-o", str(build / "host.so"),
                str(build / "host.cu"), "-lcudart", "-lcuda"]
        return device, host

    def _compile(self, kernel: Kernel, sources: Tuple[str, str], log_dir: Path,
                 parallel_parts: bool = True) -> CompileResult:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{kernel.file_stem}.log"
        try:
            with locked(self.folder / "locks" / kernel.key_hash):
                if self.has(kernel):  # another job compiled it while we waited for the lock
                    return CompileResult(kernel.key_hash, kernel.name, "cached")
                return self._compile_locked(kernel, sources, log_dir, log_path, parallel_parts)
        except Exception as e:  # a broken kernel must not stop the others
            _append(log_path, f"\n== error\n{type(e).__name__}: {e}\n")
            return CompileResult(kernel.key_hash, kernel.name, "failed", log=str(log_path),
                                 error=f"{type(e).__name__}: {_first_line(e)}")

    def _compile_locked(self, kernel: Kernel, sources: Tuple[str, str], log_dir: Path, log_path: Path,
                        parallel_parts: bool) -> CompileResult:
        build = Path(tempfile.mkdtemp(prefix=kernel.key_hash + "-", dir=self.folder / "build"))
        try:
            device_src, host_src = sources
            (build / "device.cu").write_text(device_src)
            (build / "host.cu").write_text(host_src)
            device_cmd, host_cmd = self.commands(kernel, build)
            log_path.write_text(f"kernel {kernel.name}\nkey {kernel.key_hash}\nconfig "
                                f"{json.dumps(kernel.config)}\n\n== device\n{' '.join(device_cmd)}\n"
                                f"== host\n{' '.join(host_cmd)}\n")
            if parallel_parts:
                host_out: Dict[str, Any] = {}
                t = threading.Thread(target=lambda: host_out.update(r=_run_timed(host_cmd)))
                t.start()
                device_rc, device_s, device_text = _run_timed(device_cmd)
                t.join()
                host_rc, host_s, host_text = host_out["r"]
            else:
                device_rc, device_s, device_text = _run_timed(device_cmd)
                host_rc, host_s, host_text = _run_timed(host_cmd)
            _append(log_path, f"\n== device: exit {device_rc} after {device_s:.1f} s\n{device_text}"
                              f"\n== host: exit {host_rc} after {host_s:.1f} s\n{host_text}")
            result = CompileResult(kernel.key_hash, kernel.name, "compiled", device_s + host_s,
                                   device_s, host_s, str(log_path))
            if device_rc or host_rc:
                for part in ("device.cu", "host.cu"):  # keep what failed beside its log
                    shutil.copy(build / part, log_dir / f"{kernel.file_stem}.{part}")
                which = "device" if device_rc else "host"
                result.status = "failed"
                result.error = f"nvcc ({which} part) exited with {device_rc or host_rc}"
                return result
            result.spill_bytes, result.ptxas_registers = _ptxas_usage(device_text)
            self._insert(kernel, (build / "device.cubin").read_bytes(), build / "host.so")
            meta = {k: v for k, v in asdict(result).items() if k not in ("status", "log", "error")}
            (self.folder / "meta" / f"{kernel.key_hash}.json").write_text(json.dumps(meta))
            return result
        finally:
            shutil.rmtree(build, ignore_errors=True)

    def _insert(self, kernel: Kernel, cubin: bytes, host_lib: Path) -> None:
        """Store the kernel as cutlass_cppgen's ArtifactManager.add_module does."""
        rt = kernel.operation.rt_module
        lib = ctypes.CDLL(str(host_lib))  # host-only call: no CUDA context is made
        param_size = int(getattr(lib, f"{rt.name()}_get_param_size")())
        attrs = [param_size] + list(getattr(rt, "extra_funcs", {}) or {})
        with sqlite3.connect(self.db, timeout=60) as con:
            con.execute("INSERT OR IGNORE INTO compiled_operations (op_key, cubin, hostbin, op_name, "
                        "op_attrs) VALUES (?, ?, ?, ?, ?)",
                        (kernel.key, cubin, host_lib.read_bytes(), rt.name(), json.dumps(attrs)))


def _run_timed(cmd: List[str]) -> Tuple[int, float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    return proc.returncode, time.perf_counter() - t0, proc.stdout


def _ptxas_usage(text: str) -> Tuple[Optional[int], Optional[int]]:
    """(spill bytes = stores + loads, registers) from ``ptxas -v`` output, or Nones."""
    spills = [int(s) + int(l) for s, l in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)]
    regs = [int(r) for r in re.findall(r"Used (\d+) registers", text)]
    return (max(spills) if spills else None), (max(regs) if regs else None)


# ==================================================================================================
# Launching: arguments built once, fn = one cuLaunchKernelEx
# ==================================================================================================
@functools.lru_cache(maxsize=None)
def scheduler_arguments_class():
    """cutlass_cppgen's ``GemmArguments3x`` with the tile scheduler's swizzle and raster order set.

    cutlass_cppgen fills the scheduler arguments with ``max_swizzle_size = 1`` and
    ``raster_order_option = 0`` (heuristic) in ``c_types.get_tile_scheduler_arguments_3x``. This
    subclass sets both fields of that ctypes struct (the ``scheduler`` member of the arguments, laid
    out as CUTLASS's ``TileScheduler::Arguments``: int swizzle, RasterOrderOptions as int) each time
    the arguments are built, so everything cutlass_cppgen derives from them sees the same values:
    the kernel Params (``get_args``), the launch grid (``get_grid_shape``, which rounds the tile
    grid up to the swizzle and orients it by the raster order) and the workspace size. No
    module-level function is patched, so concurrent launches with other values are unaffected."""
    from cutlass_cppgen.backend.gemm_operation import GemmArguments3x

    class GemmArgumentsWithScheduler(GemmArguments3x):
        def __init__(self, *args, swizzle: int = 1, raster_order: str = "heuristic", **kwargs):
            # set before the base __init__, which builds the arguments (initialize())
            self.max_swizzle_size = int(swizzle)
            self.raster_order_option = RASTER_ORDERS[raster_order]
            super().__init__(*args, **kwargs)

        def get_arguments(self):
            arguments = super().get_arguments()
            scheduler = arguments.scheduler  # a view into `arguments`: its fields are theirs
            scheduler.max_swizzle_size = self.max_swizzle_size
            scheduler.raster_order_option = self.raster_order_option
            return arguments

    return GemmArgumentsWithScheduler


class KernelLaunch:
    """A loaded kernel bound to (a, b, c): calling it enqueues the kernel on the current stream.

    ``swizzle`` and ``raster_order`` go into the tile scheduler's arguments of a CUTLASS 3 kernel
    (see :func:`scheduler_arguments_class`); a CUTLASS 2.x kernel takes only the defaults."""

    def __init__(self, kernel: Kernel, point, a, b, c, swizzle: int = 1, raster_order: str = "heuristic"):
        import cupy
        from cuda.bindings import driver
        from cutlass_cppgen.backend.gemm_operation import GemmArguments
        from cutlass_cppgen.backend.operation import supports_cluster_launch
        from cutlass_cppgen.shape import GemmCoord
        from cutlass_library import GemmUniversalMode

        self.kernel = kernel
        self._driver = driver
        self._cupy = cupy
        op = kernel.operation
        stream_ptr = cupy.cuda.get_current_stream().ptr
        # Raw pointers: the operation already fixes types and layouts (and cutlass_cppgen would
        # import torch to ask whether an array is a torch tensor).
        def ptr(x):
            return driver.CUdeviceptr(int(x.data.ptr))

        arguments = dict(
            operation=op, problem_size=GemmCoord(point.m, point.n, point.k), A=ptr(a), B=ptr(b),
            C=None if kernel.void_c else ptr(c), D=ptr(c), output_op=op.epilogue_type(1.0, 0.0),
            gemm_mode=GemmUniversalMode.Gemm, split_k_slices=1, stream=driver.CUstream(stream_ptr))
        self.swizzle, self.raster_order = int(swizzle), str(raster_order)
        if _enum_name(op.api) == "v3x":
            self.args = scheduler_arguments_class()(**arguments, swizzle=self.swizzle,
                                                    raster_order=self.raster_order)
        elif (self.swizzle, self.raster_order) == (1, "heuristic"):
            self.args = GemmArguments(**arguments)
        else:
            raise ValueError(f"{kernel.name} is a CUTLASS 2.x kernel: its swizzle is compiled in")
        # The launch that ExecutableOperation.run() rebuilds on every call, built once here.
        self._param_bytes = (ctypes.c_char * len(self.args.host_workspace)).from_buffer(self.args.host_workspace)
        self._param_ptrs = (ctypes.c_void_p * 1)(ctypes.addressof(self._param_bytes))
        self._params = ctypes.addressof(self._param_ptrs)
        lc = self.args.launch_config
        self.grid, self.block, self.smem_dynamic = list(lc.grid), list(lc.block), lc.shared_memory_capacity
        cfg = driver.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = self.grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = self.block
        cfg.sharedMemBytes = self.smem_dynamic
        cfg.hStream = driver.CUstream(stream_ptr)
        self._kernel_fn = op.rt_module.kernel
        attrs = []
        if supports_cluster_launch():
            attr = driver.CUlaunchAttribute()
            attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            cluster = list(op.tile_description.cluster_shape or [1, 1, 1])
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
            attrs = [attr]
            _check(driver.cuFuncSetAttribute(
                self._kernel_fn,
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                "cuFuncSetAttribute")
        cfg.attrs = attrs
        cfg.numAttrs = len(attrs)
        self._attrs = attrs  # keep what the config points at alive as long as the config
        self._config = cfg
        self._stream_ptr = stream_ptr
        self._ok = driver.CUresult.CUDA_SUCCESS
        # A device workspace (stream-K: partial tiles and the barrier counters that order their
        # reduction) must start zeroed on every launch, as CUTLASS's GemmUniversalAdapter clears it
        # in initialize() before each run; the counters are not reset by the kernel, so a second
        # launch on a stale workspace would wait forever. Such a launch is a memset + the kernel.
        self.workspace_bytes = 0
        self._workspace = None
        buffer = getattr(self.args, "workspace_buffer", None)
        if buffer is not None:
            self.workspace_bytes = int(op.rt_module.get_device_workspace_size(self.args))
            self._workspace_ptr = int(buffer.ptr)
            self._workspace = driver.CUdeviceptr(self._workspace_ptr)
            self._workspace_words = (self.workspace_bytes + 3) // 4

    def __call__(self) -> None:
        ptr = self._cupy.cuda.get_current_stream().ptr
        if ptr != self._stream_ptr:  # e.g. a CUDA-graph capture stream
            self._config.hStream = self._driver.CUstream(ptr)
            self._stream_ptr = ptr
        if self._workspace is not None:
            err, = self._driver.cuMemsetD32Async(self._workspace, 0, self._workspace_words,
                                                 self._config.hStream)
            if err != self._ok:
                raise RuntimeError(f"clearing the workspace of {self.kernel.name} failed: {err}")
        err, = self._driver.cuLaunchKernelEx(self._config, self._kernel_fn, self._params, 0)
        if err != self._ok:
            raise RuntimeError(f"cuLaunchKernelEx({self.kernel.name}) failed: {err}")

    def close(self) -> None:
        """Free the workspace cutlass_cppgen allocated with cudaMalloc (it never frees it)."""
        if self._workspace is not None:
            from cuda.bindings import runtime

            runtime.cudaFree(self._workspace_ptr)
            self._workspace = None

    def function_attributes(self) -> Dict[str, int]:
        d = self._driver
        attr = d.CUfunction_attribute
        regs = _check(d.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, self._kernel_fn), "regs")
        static = _check(d.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self._kernel_fn), "smem")
        local = _check(d.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, self._kernel_fn), "local")
        return {"registers": int(regs), "smem_bytes": int(static) + int(self.smem_dynamic),
                "local_bytes": int(local)}


def _check(result, what: str):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver call {what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


# ==================================================================================================
# The backend
# ==================================================================================================
class Cutlass(Backend):
    name = "cutlass"
    kind = "gpu"

    def __init__(self, cfg):
        super().__init__(cfg)
        # Check every cutlass variant's options now, before any point: a misspelt schedule fails
        # the run at its start with the key and the valid names, even on a machine without a GPU.
        self.options: Dict[str, KernelOptions] = {}
        for vname, v in (cfg.get("variant") or {}).items():
            if str(getattr(v.backend, "value", v.backend)) != self.name:
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
        nvcc = cutlass_compat.use_nvcc()
        cc = _target_cc()
        # cutlass_cppgen keys its cache by the emitted source only: one folder per toolchain, flags
        # and target, so a change of any of them never loads a kernel built another way.
        folder = cache_dir(self.cfg.paths.cache, "cutlass") / build_flavor(nvcc, cc)
        cutlass = cutlass_compat.import_cutlass(folder)
        header = Path(cutlass.CUTLASS_PATH) / "include" / "cutlass" / "cutlass.h"
        if not header.exists():
            raise cutlass_compat.CutlassUnavailable(f"CUTLASS headers not found at {header.parent.parent} "
                                                    "(set CUTLASS_PATH or reinstall nvidia-cutlass)")
        cutlass_compat.use_target_cc(cc)
        self._cutlass = cutlass
        self._catalog = Catalog(cutlass, cc)
        self._cache = KernelCache(folder, nvcc, cutlass, cc)

    def unavailable(self) -> Optional[str]:
        try:
            self._setup()
        except (cutlass_compat.NvccNotFound, cutlass_compat.CutlassUnavailable) as e:
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
    def kernels(self, point) -> List[Kernel]:
        """The kernel(s) ``point`` needs; raises Unsupported with the skip reason."""
        self._setup()
        return self._catalog.kernels(point, self.options[point.variant])

    def skip_reason(self, point) -> Optional[str]:
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
    def make_inputs(self, point, a, b):
        opts = self.options[point.variant]
        if opts.layout_a == "row" and opts.layout_b == "row":
            return a, b, a, b
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
        opts = self.options[point.variant]
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
                rec.update(status="failed", error=f"load/arguments: {type(e).__name__}: {_first_line(e)}")
        if not launches:
            raise RuntimeError("no CUTLASS candidate could be loaded: "
                               + "; ".join(f"{r['kernel']}: {r.get('error')}" for r in records))
        pick = None
        if opts.search:
            best, pick = self._search(point, opts, launches, records, a, b, c)
            self._searched[point.key] = pick
        else:
            best = launches[0]
        for launch in launches:
            if launch is not best:
                launch.close()
        self._launches.append(best)
        return Launch(best, self._info(best, pick, kernels))

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
        cutlass_compat.import_cutlass(self._cache.folder)  # its loader reads this backend's cache
        from cutlass_cppgen.backend import compiler

        compiler.add_module([kernel.operation])  # a cache hit: loads cubin + host library, no nvcc
        return KernelLaunch(kernel, point, a, b, c, swizzle, raster_order)

    def release(self) -> None:
        for launch in self._launches:
            launch.close()
        self._launches = []

    # -- search ----------------------------------------------------------------------------------
    def _search(self, point, opts: KernelOptions, launches: List[KernelLaunch], records, a, b, c):
        """Check and time every candidate kernel; then time the best ``search_scheduler_top`` again
        with every swizzle x raster order. Returns the fastest correct launch and a SearchPick."""
        import cupy

        by_hash = {r["key_hash"]: r for r in records}
        # the same reference and element-wise verdict as every point (gemmlab/measure/check.py)
        ref = check.gemm_reference(cupy, point, "gpu", a, b, self.cfg.measure.distribution.value == "exact")
        try:
            good = []
            for launch in launches:
                rec = by_hash[launch.kernel.key_hash]
                rec.update(swizzle=launch.swizzle, raster_order=launch.raster_order)
                if self._check_candidate(point, launch, rec, ref, c):
                    good.append(launch)
            if not good:
                raise RuntimeError("no CUTLASS search candidate computed a correct result: "
                                   + "; ".join(f"{r['kernel']}: {r.get('error')}" for r in records))
            for launch, result in zip(good, _time_interleaved(good, point)):
                by_hash[launch.kernel.key_hash].update(status="ok", **result)
            good.sort(key=lambda l: by_hash[l.kernel.key_hash]["rank_time_median_s"])
            best = good[0]
            scheduler_records: List[Dict[str, Any]] = []
            top = [l for l in good if l.kernel.config.get("persistent")][:opts.search_scheduler_top]
            combos = [(s, r) for s in opts.search_swizzles for r in opts.search_raster_orders]
            if top and len(combos) > 1:
                best = self._search_scheduler(point, top, combos, scheduler_records, ref, a, b, c) or best
        finally:
            ref.release()
        by_hash[best.kernel.key_hash]["best"] = True
        pick = SearchPick(best.kernel.key_hash, best.swizzle, best.raster_order, records, scheduler_records)
        return best, pick

    def _search_scheduler(self, point, top: List[KernelLaunch], combos, scheduler_records, ref,
                          a, b, c) -> Optional[KernelLaunch]:
        """Time ``top`` kernels with every (swizzle, raster order): run-time arguments, no compile."""
        trials: List[Tuple[KernelLaunch, Dict[str, Any]]] = []
        for kernel_launch in top:
            for swizzle, raster in combos:
                rec = {"kernel": kernel_launch.kernel.name, "key_hash": kernel_launch.kernel.key_hash,
                       "swizzle": swizzle, "raster_order": raster, "best": False}
                scheduler_records.append(rec)
                try:
                    launch = KernelLaunch(kernel_launch.kernel, point, a, b, c, swizzle, raster)
                except Exception as e:
                    rec.update(status="failed", error=f"arguments: {type(e).__name__}: {_first_line(e)}")
                    continue
                rec["grid"] = launch.grid
                if self._check_candidate(point, launch, rec, ref, c):
                    trials.append((launch, rec))
                else:
                    launch.close()
        if not trials:
            return None
        for (_, rec), result in zip(trials, _time_interleaved([l for l, _ in trials], point)):
            rec.update(status="ok", **result)
        best, best_rec = min(trials, key=lambda t: t[1]["rank_time_median_s"])
        best_rec["best"] = True
        for launch, _ in trials:
            if launch is not best:
                launch.close()
        return best

    @staticmethod
    def _check_candidate(point, launch: KernelLaunch, rec: Dict[str, Any], ref, c) -> bool:
        """Poison C, launch once, check against the reference; records the outcome in ``rec``."""
        import cupy

        from gemmlab.gpu import arrays

        arrays.poison(cupy, c)
        try:
            launch()
            cupy.cuda.get_current_stream().synchronize()
        except Exception as e:
            rec.update(status="failed", error=f"launch: {type(e).__name__}: {_first_line(e)}")
            return False
        res = ref.verify(c)
        rec.update(rel_error=res.rel_error, check_elem_max=res.elem_max)
        if not res.passed:
            rec.update(status="wrong", error=res.failure())
            return False
        return True

    # -- row fields ------------------------------------------------------------------------------
    def _record(self, res: CompileResult, kernel: Kernel) -> Dict[str, Any]:
        return {"kernel": kernel.name, "key_hash": kernel.key_hash, "config": kernel.config,
                "status": "failed" if not res.ok else "ready", "compile": res.status,
                "compile_s": res.compile_s, "error": res.error, "log": res.log, "best": False}

    def _info(self, best: KernelLaunch, pick: Optional["SearchPick"], kernels: List[Kernel]) -> Dict[str, Any]:
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
            if pick.scheduler_records:
                extra["search_scheduler"] = pick.scheduler_records
            compile_s = sum(self._results[k.key_hash].compile_s for k in kernels)
        return {"kernel_name": best.kernel.name, "registers": attrs["registers"],
                "smem_bytes": attrs["smem_bytes"], "spill_bytes": spill, "compile_s": compile_s,
                "library_version": _library_version(self._cutlass), "extra": extra}


@dataclass
class SearchPick:
    """What a search chose for a point (kernel, scheduler arguments) and every trial's record."""

    key_hash: str
    swizzle: int
    raster_order: str
    records: List[Dict[str, Any]]
    scheduler_records: List[Dict[str, Any]]


def _time_interleaved(launches: List[KernelLaunch], point) -> List[Dict[str, Any]]:
    """Median time of each launch: rounds over all of them, each round in a rotated order so clock
    drift hits all alike, each sample a run of back-to-back launches at least SEARCH_SAMPLE_S long."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    launches[0]()
    end.record(stream)
    end.synchronize()
    one_s = max(cupy.cuda.get_elapsed_time(start, end) * 1e-3, 1e-7)
    reps = int(min(SEARCH_MAX_REPS, max(1, round(SEARCH_SAMPLE_S / one_s))))
    samples: List[List[float]] = [[] for _ in launches]
    indices = list(range(len(launches)))
    for r in range(SEARCH_ROUNDS + 1):
        shift = r % len(indices)
        for i in indices[shift:] + indices[:shift]:
            start.record(stream)
            for _ in range(reps):
                launches[i]()
            end.record(stream)
            end.synchronize()
            if r:  # round 0 warms the clocks and caches
                samples[i].append(cupy.cuda.get_elapsed_time(start, end) * 1e-3 / reps)
    out = []
    for ts in samples:
        ts = sorted(ts)
        median = ts[len(ts) // 2]
        # ranking only (back to back, warm L2): the row's times come from the shared timer
        out.append({"rank_time_median_s": median, "rank_tflops": point.flops / median / 1e12, "samples": len(ts),
                    "launches_per_sample": reps})
    return out


# ==================================================================================================
# helpers
# ==================================================================================================
def _target_cc() -> int:
    """The compute capability of the current CUDA device, or Hopper's (90) without one."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return int(cupy.cuda.Device().compute_capability)
    except Exception:  # no driver / no device: emit for the H200 this project targets
        pass
    return DEFAULT_TARGET_CC


def _arch_flag(cc: int) -> str:
    target = f"{cc}a" if cc in ARCH_SPECIFIC_CCS else str(cc)
    return f"-gencode=arch=compute_{target},code=sm_{target}"


def build_flavor(nvcc: Path, cc: int) -> str:
    """Names the cache folder: target, nvcc release, nvidia-cutlass version and our extra flags."""
    try:
        from importlib.metadata import version

        package = version("nvidia-cutlass")
    except Exception:
        package = "unknown"
    nvcc_version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout
    what = json.dumps([package, nvcc_version.strip().splitlines()[-1:], EXTRA_NVCC_FLAGS, _arch_flag(cc)])
    return f"sm{cc}-{hashlib.sha1(what.encode()).hexdigest()[:10]}"


def _library_version(cutlass_module) -> str:
    try:
        from importlib.metadata import version

        pkg = version("nvidia-cutlass")
    except Exception:
        pkg = "?"
    return f"CUTLASS {cutlass_module.__version__} (nvidia-cutlass {pkg}), nvcc {cutlass_module.nvcc_version()}"


def _enum_name(v) -> Optional[str]:
    return None if v is None else getattr(v, "name", str(v))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(text)


BACKEND = Cutlass
