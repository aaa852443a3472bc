"""A variant's ``cutlass:`` block (:class:`gemmlab.config.CutlassConf`), checked without CUTLASS.

:func:`kernel_options` turns the block into :class:`KernelOptions`, or raises ConfigError naming
the key and the valid values; :func:`check_precision` refuses math a precision does not mean. The
tables below map the names in the YAML to CUTLASS's enum members. The fields:

- ``opclass`` (auto, tensorop, simt), ``layout_a``/``layout_b`` (row or col; ``layout_c`` must be
  row).
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
LAYOUTS = {"row": "RowMajor", "col": "ColumnMajor"}
# the precisions (PrecisionConf.compute) this backend builds and the opcode class `auto` means for each
AUTO_OPCLASS = {"fp16": "tensorop", "bf16": "tensorop", "tf32": "tensorop", "fp32": "simt",
                "fp64": "tensorop"}
# where the opcode class decides the math: float32 on tensor cores is TF32, on SIMT cores FP32
REQUIRED_OPCLASS = {"tf32": "tensorop", "fp32": "simt"}


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
