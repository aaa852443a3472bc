"""A variant's ``cutlass:`` block (:class:`gemmlab.config.CutlassConf`), checked without CUTLASS.

:func:`kernel_options` turns the block into :class:`KernelOptions`, or raises ConfigError naming
the key and the valid values; :func:`check_precision` refuses math a precision does not mean. The
tables below map the names in the YAML to CUTLASS's enum members. The fields:

- ``opclass`` (auto, tensorop, simt), ``layout_a``/``layout_b`` (row or col; ``layout_c`` must be
  row).
- ``kernel_cc`` (null, or one of :data:`KERNEL_CCS`): the architecture generation CUTLASS generates
  the kernels for, cutlass_cppgen's ``kernel_cc``; they are compiled for the target all the same
  (sm_90a on an H200). null keeps the default: the target's own (CUTLASS 3 SM90 wgmma kernels for
  tensorop on SM90) and SM80 for simt. 80 takes CUTLASS 2.x's SM80 kernels: for tensorop the
  multistage GEMM (mma.sync m16n8k16, ldmatrix, cp.async; ``tile`` and ``stages`` pick from its
  list, no cluster or schedules), which runs unchanged on SM90. A kernel_cc above the target's is
  skipped per point (:mod:`gemmlab.backends.cutlass.catalog`).
- ``tile`` is the thread-block (CTA) tile [m, n, k] handed to CUTLASS's CollectiveBuilder,
  ``cluster`` the cluster shape; ``stages`` the mainloop stages (None = as many as shared memory
  allows); ``kernel_schedule``, ``epilogue_schedule`` and ``tile_scheduler`` take the names in
  :data:`KERNEL_SCHEDULES`, :data:`EPILOGUE_SCHEDULES`, :data:`TILE_SCHEDULERS`. Every field left
  ``auto``/empty keeps CUTLASS's default (which kernel that is, and what set fields pick:
  :mod:`gemmlab.backends.cutlass.catalog`).
- ``swizzle`` (1, 2, 4, 8) and ``raster_order`` (heuristic, along_m, along_n) are run-time
  arguments of the persistent tile schedulers of CUTLASS 3 (SM90 cooperative and ping-pong
  kernels), the profiler's ``--swizzle_size`` and ``--raster_order``: the largest swizzle of CTAs
  the tile grid allows, and whether consecutive CTAs walk along m or n. No recompile
  (:mod:`gemmlab.backends.cutlass.launch`). A kernel that ignores them (non-persistent schedules,
  CUTLASS 2.x kernels) skips the point when they are set.
- ``search: true`` profiles the listed kernels that match the set fields
  (:mod:`gemmlab.backends.cutlass.search`): ``search_order`` (listed, diverse), ``search_limit``
  (0 = all), ``search_groups``; then the ``search_scheduler_top`` fastest persistent kernels again
  with every ``search_swizzles`` x ``search_raster_orders``.
- ``compile_jobs``: nvcc processes at once, 0 = one per CPU core
  (:mod:`gemmlab.backends.cutlass.build`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from gemmlab.points import ConfigError

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
OPCLASSES = ("auto", "tensorop", "simt")
# kernel_cc values: CUTLASS 2.x SM80 kernels (they run on SM80 and every later GPU) and CUTLASS 3
# SM90 ones (sm_90a only). cutlass_cppgen has generators for older ones too, of no use here.
KERNEL_CCS = (80, 90)
LAYOUTS = {"row": "RowMajor", "col": "ColumnMajor"}
# the precisions (PrecisionConf.compute) this backend builds and the opcode class `auto` means for each
AUTO_OPCLASS = {"fp16": "tensorop", "bf16": "tensorop", "tf32": "tensorop", "fp32": "simt",
                "fp64": "tensorop", "fp8": "tensorop"}
# where the opcode class decides the math: float32 on tensor cores is TF32, on SIMT cores FP32
REQUIRED_OPCLASS = {"tf32": "tensorop", "fp32": "simt", "fp8": "tensorop"}


@dataclass(frozen=True)
class KernelOptions:
    opclass: str = "auto"
    kernel_cc: Optional[int] = None  # None = the default generation (see the module docstring)
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
    kernel_cc = conf.get("kernel_cc")
    if kernel_cc is not None and (isinstance(kernel_cc, bool) or kernel_cc not in KERNEL_CCS):
        raise ConfigError(f"{where}kernel_cc={kernel_cc!r} is not one of null, "
                          f"{', '.join(map(str, KERNEL_CCS))} (the CUTLASS kernel generations this "
                          "backend builds for its SM90 target: 80 = CUTLASS 2.x SM80 kernels, "
                          "90 = CUTLASS 3 SM90 kernels)")
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
        opclass=choice("opclass", OPCLASSES), kernel_cc=None if kernel_cc is None else int(kernel_cc),
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
    if opts.kernel_cc is not None and opts.kernel_cc < 90:
        sm90_only = [f"{k}={getattr(opts, k)}" for k in ("kernel_schedule", "epilogue_schedule", "tile_scheduler")
                     if getattr(opts, k) != "auto"]
        sm90_only += [f"cluster={list(opts.cluster)}"] if opts.cluster not in (None, (1, 1, 1)) else []
        sm90_only += ([f"swizzle={opts.swizzle}, raster_order={opts.raster_order}"]
                      if opts.scheduler_args_set else [])
        if sm90_only:
            raise ConfigError(f"{where}kernel_cc={opts.kernel_cc} takes CUTLASS 2.x kernels, which have no "
                              f"clusters, schedules or persistent tile scheduler: unset {', '.join(sm90_only)}")
    if opts.epilogue_schedule != "auto" and opts.kernel_schedule == "auto" and not opts.search:
        raise ConfigError(f"{where}epilogue_schedule={opts.epilogue_schedule} needs kernel_schedule set "
                          "as well: CUTLASS takes both schedules, or neither (auto)")
    return opts


def check_precision(variant: str, opts: KernelOptions, precision: str, compute: str) -> None:
    """Raise ConfigError where the variant asks for math the precision does not mean."""
    if compute not in AUTO_OPCLASS:
        raise ConfigError(f"variant {variant}: precision {precision} computes {compute}, which the "
                          f"cutlass backend does not build (it builds {', '.join(AUTO_OPCLASS)})")
    needed = REQUIRED_OPCLASS.get(compute)
    if needed and opts.opclass not in ("auto", needed):
        why = {"fp32": "tensor-op float32 math is TF32: use precision tf32, or opclass simt for true FP32",
               "tf32": "SIMT float32 math is FP32, not TF32: use precision fp32",
               "fp8": "FP8 runs on tensor cores only"}[compute]
        raise ConfigError(f"variant {variant}: cutlass.opclass={opts.opclass} cannot compute "
                          f"{precision} ({why})")
