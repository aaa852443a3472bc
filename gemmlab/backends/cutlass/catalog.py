"""Which CUTLASS kernels a point gets: CUTLASS's list for its operands, filtered by the options.

:class:`Catalog` turns a point and its :class:`~gemmlab.backends.cutlass.options.KernelOptions`
into :class:`Kernel` objects (the emitted C++ and cutlass_cppgen's cache key), or raises
:class:`Unsupported` with the row's skip reason.

- precision -> types: fp16 / bf16 (FP32 accumulation), tf32 (``float32`` storage on tensor cores:
  CUTLASS's ``element=float32`` with the tensor-op class *is* TF32 math, so such points are
  labelled tf32), fp32 (true FP32: the SIMT opcode class, CUTLASS 2.x SIMT kernels generated for
  SM80; for SM90 cutlass_cppgen lists only one 2-stage fallback), fp64 (DMMA tensor cores), fp8
  (e4m3 x e4m3, FP32 accumulation, BF16 D, no C: CUTLASS 3's SM90 FP8 wgmma kernels, which read both
  operands K-major, so A row-major and B column-major, layout ``nt``; the per-tensor scales are the
  epilogue's alpha, see backend.py). Blockwise FP8 is not reachable through cutlass_cppgen 4.2
  (:data:`gemmlab.fp8.CUTLASS_SCALED_REASON` says where it stops).
- Tiles: the options' ``tile`` is the CTA tile; cutlass_cppgen's own
  ``TileDescription.threadblock_shape`` is the *cluster* tile on SM90, CTA tile x cluster; this
  module converts. Every field left ``auto``/empty keeps CUTLASS's default: the first kernel CUTLASS
  lists for the operands' alignment. Fields that are set pick the first listed kernel that matches
  them, or, when CUTLASS lists none, a tile description built from the default with those fields
  changed. CUTLASS's list is put in a fixed order first (cutlass_cppgen orders tiles of equal size
  by Python's hash seed, so its "first kernel" changed between processes; see
  ``Catalog._deterministic``).
- Search candidates: ``search_order: listed`` takes the first ``search_limit`` (0 = all) of
  CUTLASS's list, which are the schedules of one tile; ``diverse`` goes round-robin over the first
  ``search_groups`` (CTA tile, cluster) groups, each group's schedules by
  :func:`schedule_preference`, duplicates of ``ScheduleAuto`` dropped.
- Alignment: the largest alignment CUTLASS offers that divides the leading dimensions (like
  ``plan.run``). Odd sizes get the lower-alignment kernels where CUTLASS has them (TF32, FP32, FP64:
  alignment 1); FP16/BF16 need even leading dimensions and are skipped with the reason otherwise.
- Layouts: ``layout_a``/``layout_b`` row or col (a col operand is copied once, outside the timed
  region, by the backend's ``make_inputs``; the check uses the same values); C is row-major. SM90
  16-bit kernels are built with no C operand (``element_C = void``: D = A @ B, as cuBLAS computes
  it with beta = 0); the others (CUTLASS 2.x kernels among them, whose epilogue has no void-C form)
  get C = D and beta = 0, so their epilogue never reads C.
- Kernel generation (``kernel_cc``): by default the target's own (cutlass_cppgen's closest
  generator to the target cc: CUTLASS 3 SM90 kernels for tensorop on an H200), and SM80 for simt
  (:data:`SIMT_KERNEL_CC`). ``kernel_cc: 80`` with tensorop takes CUTLASS 2.x's SM80 list instead
  (the multistage mma.sync + ldmatrix + cp.async GEMM), compiled for the target (sm_90a) like any
  other kernel; its emitted source, and so its cache key, differs from every SM90 kernel's. A
  kernel_cc above the target's is skipped with the reason.
- TF32 and layouts: SM90 wgmma reads 16-bit operands from shared memory in either major order, but
  32-bit (TF32) ones only K-major, i.e. A row-major and B column-major ("TN"). With the usual
  row-major B ("NN") CUTLASS's builder swaps A and B (computing the transposed problem, hence
  ``EpilogueTransposed`` in its TF32 list) and transposes B from shared memory into registers every
  k-step for the register-A form of wgmma (:func:`wgmma_operands`); that ran at ~60% of cuBLAS TF32
  at N = 8192. The ``cutlass_tf32_tn`` variant stores B column-major instead (copied once, untimed);
  the row says so (``extra.cutlass.layout_b``, ``wgmma_operands``). Its baselines get the same
  buffers: cuBLAS runs NN on them (reading B's storage as row-major), cuBLASLt (nvmath reads
  strides) runs TN; see the variant's YAML.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from gemmlab.measure.ranking import first_line  # noqa: F401  (build, backend and search use it from here)
from gemmlab.backends.cutlass.options import (
    AUTO_OPCLASS,
    EPILOGUE_SCHEDULES,
    KERNEL_SCHEDULES,
    LAYOUTS,
    TILE_SCHEDULERS,
    KernelOptions,
)

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
# storage type name (gemmlab.dtypes) -> cutlass DataType member
ELEMENTS = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "float8_e4m3fn": "e4m3"}
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "e4m3": 1}
FP8_LAYOUT_REASON = ("CUTLASS's SM90 FP8 GEMMs read both operands K-major (A row-major, B column-major): "
                     "the cutlass backend runs fp8 at layout nt (B stored n x k, as PyTorch keeps weights)")
FP8_SEARCH_REASON = ("the CUTLASS search checks its candidates against the stored operands, not the dequantized "
                     "FP8 ones the fp8 check needs: fp8 runs CUTLASS's default kernel (variant cutlass_fp8)")
SIMT_KERNEL_CC = 80  # CUTLASS generates its SIMT GEMMs for SM80; they run unchanged on SM90


def fp8_d_alignment(point, ein: str) -> Optional[int]:
    """The D alignment an FP8 kernel is built with. cutlass_cppgen lists its SM90 FP8 kernels with
    void C at C alignment 1 ("16 16 1") and emits D with C's alignment, which for a BF16 D would be
    one element (2 bytes) per access; the widest of 8, 4, 2, 1 BF16 elements (16 bytes) that divides
    N is what its 16-bit kernels get ("8 8 8")."""
    if ein != "e4m3":
        return None
    return next(a for a in (8, 4, 2, 1) if point.n % a == 0)


def find_alignment(cutlass_module, ops, point, lay_a, lay_b) -> Tuple[int, int, int]:
    """The largest alignments (A, B, C) CUTLASS lists whose every one divides its operand's leading
    dimension. cutlass_cppgen's own ``KernelsForDataType.find_alignment`` walks its alignment keys
    ("16 16 1", "8 8 1", ...) sorted as *strings*, so for FP8 it tries "8 8 1" before "16 16 1" and
    picks 8-byte (cp.async) kernels where 16-byte (TMA) ones fit; for the single-digit alignments of
    the other types both orders agree. Here the keys are compared as numbers."""
    def ld(shape, layout):
        return shape[-2] if layout == cutlass_module.LayoutType.ColumnMajor else shape[-1]

    lds = (ld((point.m, point.k), lay_a), ld((point.k, point.n), lay_b), point.n)  # C row-major
    keys = sorted((tuple(int(x) for x in k.split()) for k in ops.kernels_by_alignment), reverse=True)
    best = []
    for i, n in enumerate(lds):
        fits = [k[i] for k in keys if n % k[i] == 0]
        best.append(fits[0] if fits else 1)
    return tuple(best)


class Unsupported(Exception):
    """This point cannot be built with this variant (the message is the row's skip reason)."""


# -- kernels: emitted C++ and cutlass_cppgen's cache key -------------------------------------------
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
    def _plan(self, elements: Tuple[str, str, str, str, str], layouts: Tuple[str, str], opclass: str,
              kernel_cc: Optional[int] = None):
        # the default generation keeps the key it always had; a set kernel_cc is part of it
        key = (elements, layouts, opclass) + ((kernel_cc,) if kernel_cc is not None else ())
        if key not in self._plans:
            c = self.cutlass
            dt = [getattr(c.DataType, e) for e in elements]
            lay = [getattr(c.LayoutType, LAYOUTS[x]) for x in layouts]
            generation = kernel_cc
            if generation is None:
                generation = SIMT_KERNEL_CC if opclass == "simt" else None
            try:
                plan = c.op.Gemm(element_A=dt[0], element_B=dt[1], element_C=dt[2], element_D=dt[3],
                                 element_accumulator=dt[4], layout_A=lay[0], layout_B=lay[1],
                                 layout_C=c.LayoutType.RowMajor, cc=self.cc, kernel_cc=generation)
                plan.opclass = c.OpcodeClass.Simt if opclass == "simt" else c.OpcodeClass.TensorOp
            except Exception as e:  # cutlass_cppgen raises bare Exceptions for unsupported types
                sm = f" (SM{kernel_cc} kernels)" if kernel_cc is not None else ""
                raise Unsupported(f"CUTLASS has no {opclass} GEMM{sm} for {elements[0]} x {elements[1]} "
                                  f"-> {elements[3]} ({layouts[0]}, {layouts[1]}): {first_line(e)}")
            self._plans[key] = plan
        return self._plans[key]

    # -- kernels for a point -------------------------------------------------------------------
    def kernels(self, point, opts: KernelOptions) -> List[Kernel]:
        """The kernels to build for ``point``: one, or the search candidates. Raises Unsupported."""
        if point.compute == "fp8":
            if point.in_dtype != "float8_e4m3fn":
                raise Unsupported(f"the cutlass backend builds e4m3 FP8 GEMMs (got {point.in_dtype})")
            if (opts.layout_a, opts.layout_b) != ("row", "col"):
                raise Unsupported(f"{FP8_LAYOUT_REASON} (this point: layout {point.layout})")
            if opts.search:
                raise Unsupported(FP8_SEARCH_REASON)
        opclass = opts.opclass if opts.opclass != "auto" else AUTO_OPCLASS[point.compute]
        acc = (point.precision_cfg.get("accumulate") if point.precision_cfg is not None else None) \
            or ("float64" if point.compute == "fp64" else "float32")
        try:
            ein, eout, eacc = ELEMENTS[point.in_dtype], ELEMENTS[point.out_dtype], ELEMENTS[acc]
        except KeyError as e:
            raise Unsupported(f"the cutlass backend has no CUTLASS type for {e.args[0]}") from None
        if opts.kernel_cc is not None and opts.kernel_cc > self.cc:
            raise Unsupported(f"kernel_cc={opts.kernel_cc}: SM{opts.kernel_cc} kernels do not run on "
                              f"this target (compute capability {self.cc // 10}.{self.cc % 10})")
        # CUTLASS 3 (SM90+) 16-bit and FP8 tensor-op kernels are built without C; CUTLASS 2.x ones
        # (kernel_cc 80) have no void-C epilogue and get a real C (= D, beta 0)
        kernel_gen = opts.kernel_cc if opts.kernel_cc is not None else self.cc
        sm90_16bit = opclass == "tensorop" and ein in ("f16", "bf16", "e4m3") and kernel_gen >= 90
        ec = "void" if sm90_16bit else eout
        with self._lock:
            plan = self._plan((ein, ein, ec, eout, eacc), (opts.layout_a, opts.layout_b), opclass,
                              opts.kernel_cc)
            ops_all = plan.possible_operations
            lay_a, lay_b = plan._layout_a, plan._layout_b
            align = find_alignment(self.cutlass, ops_all, point, lay_a, lay_b)
            cache_key = (point.variant, point.compute, ein, eout, eacc, opts, align)
            if cache_key not in self._kernels:
                self._kernels[cache_key] = self._select(plan, opts, align, point, sm90_16bit,
                                                        ELEMENT_BYTES[ein], fp8_d_alignment(point, ein))
            kernels = self._kernels[cache_key]
        if not opts.search and opts.scheduler_args_set and not kernels[0].config["persistent"]:
            raise Unsupported(
                f"swizzle={opts.swizzle}, raster_order={opts.raster_order}: these are run-time arguments "
                "of the persistent tile schedulers of CUTLASS 3 (SM90 cooperative / ping-pong kernels); "
                f"{kernels[0].name} is not one (set swizzle: 1, raster_order: heuristic)")
        return kernels

    def _select(self, plan, opts: KernelOptions, align, point, void_c: bool, elem_bytes: int,
                d_align: Optional[int] = None) -> List[Kernel]:
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
                                  layouts=(opts.layout_a, opts.layout_b), d_align=d_align)
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
                layouts: Tuple[str, str], d_align: Optional[int] = None) -> Kernel:
        if d_align is not None:  # FP8: the output's own alignment, not the listed void C's 1
            align = (align[0], align[1], d_align)
        if listed:
            # construct() re-validates a passed td with a rule CUTLASS's own TF32 descriptions fail
            # (auto kernel schedule with the transposed epilogue); one set on the plan is used as is.
            plan._tile_description = td
        else:
            try:
                plan.tile_description = td  # the public setter validates stages, cluster, schedules
            except Exception as e:
                raise Unsupported(f"CUTLASS rejects this tile description: {first_line(e)}") from None
        op = plan.construct(None, *align)
        name = op.procedural_name()
        from cutlass_cppgen.backend import compiler

        key = op.rt_module.emit() + name + compiler.backend  # = cutlass_cppgen's ArtifactManager key
        d = self.describe(td)
        cutlass3 = enum_name(op.api) == "v3x"
        schedule = resolved_schedule(d, align, elem_bytes) if cutlass3 else None
        config = {**d, "alignment": list(align), "opclass": enum_name(td.math_instruction.opcode_class),
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
                "kernel_schedule": enum_name(td.kernel_schedule) or "ScheduleAuto",
                "epilogue_schedule": enum_name(td.epilogue_schedule) or "ScheduleAuto",
                "tile_scheduler": enum_name(td.tile_scheduler) or "Default",
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
            elif enum_name(base.epilogue_schedule) == "EpilogueTransposed":
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


# -- CUTLASS's enums and exceptions in messages ------------------------------------------------------
def enum_name(v) -> Optional[str]:
    return None if v is None else getattr(v, "name", str(v))
