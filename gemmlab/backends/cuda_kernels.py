"""The ``cuda`` backend: the hand-written kernels under ``kernels/cuda``, one launcher for all.

Every kernel has the same ABI (see ``kernels/cuda/common/gemm_common.cuh``)::

    extern "C" __global__ void <entry>(const TIN* A, const TIN* B, TOUT* C, int M, int N, int K)

(kernels with TMA tensor maps get ``const TensorMap* maps`` after K, see :mod:`gemmlab.gpu.tma`;
fp8 points then get ``float scale_a, float scale_b``, the per-tensor scales of ``measure.fp8_scaling``,
1 and 1 when unscaled, or under ``block`` ``const float* scale_a, const float* scale_b``, the grids of
:mod:`gemmlab.fp8` in cuBLASLt's layouts (:func:`_block_grids`); a YAML with ``workspace_bytes`` gives the kernel a zeroed scratch buffer as its
last argument, made once per launch object), and its variant YAML (``cuda:`` block, schema ``CudaKernelConf``) says how to build and launch
it: the source, the defines (passed as ``-D`` flags, with ``-DTIN``/``-DTOUT`` from the point's
storage types unless the YAML sets them, and the ``point_defines`` the YAML computes from the point,
e.g. from its layout, or from the device config's ``sm_count``; one that refines a define replaces its
value), the arch, and ``block``/``grid``/``smem_bytes`` as
expressions over m, n, k, the defines, ``sm_count`` and the YAML's named ``let`` expressions. ``prepare`` compiles every distinct build of the run
with nvcc before anything is timed (cached on disk, see :mod:`gemmlab.backends.nvcc`); a build that fails
fails only its own points, with the path of nvcc's log in the reason. ``make_launch`` loads the
cubin with CuPy and returns an ``fn`` that only enqueues the kernel on the current stream.

Layouts (gemmlab/operands.py): a stage reads A and B as stored; its YAML's ``layouts:`` names the
layouts it reads (default nn), the others are skipped with the reason. FP8 operands are made as
cuBLASLt's are (:func:`gemmlab.fp8.gpu_operands`: A row-major, B N x K), so a stage that reads them
declares ``layouts: [nt]`` and cuBLASLt, its baseline, is timed on the same bytes and scales.
"""
from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from gemmlab import fp8, operands
from gemmlab.backends import nvcc
from gemmlab.backends.base import Backend, Launch
from gemmlab.cache import cache_dir
from gemmlab.config import ROOT
from gemmlab.expr import evaluate
from gemmlab.points import gpu_sm_count

log = logging.getLogger("gemmlab")

# Storage type name -> the C type the kernels see as TIN / TOUT.
C_TYPES = {
    "float64": "double",
    "float32": "float",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "float8_e4m3fn": "__nv_fp8_e4m3",
    "float8_e5m2": "__nv_fp8_e5m2",
}
# The measure.fp8_scaling modes the FP8 stages implement: none and tensor pass two float scales
# (stage 13), block two float32 grids (stage 15); each stage's `requires` names the modes its kernel reads.
FP8_MODES = ("none", "tensor", "block")
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in (cudaFuncSetAttribute)
MAX_BLOCK_THREADS = 1024


@dataclass(frozen=True)
class KernelBuild:
    """Everything that decides the cubin of one point: two points with equal builds share it."""

    source: Path
    entry: str
    arch: str
    # YAML defines first (a point define that refines one in its place), then the other point
    # defines, then TIN/TOUT unless the YAML set them: what nvcc gets, each name once
    defines: Tuple[Tuple[str, Any], ...]
    extra_flags: Tuple[str, ...]
    yaml_defines: Tuple[Tuple[str, Any], ...]  # as the YAML (and its overrides) give them
    point_defines: Tuple[Tuple[str, Any], ...] = ()  # cuda.point_defines' values for the point (in defines too)

    @property
    def flags(self) -> List[str]:
        return nvcc.build_flags(self.arch, self.defines, self.extra_flags)

    @property
    def kernel_name(self) -> str:
        """'smem_tiled<TILE=32>': the entry, the YAML's defines and the point defines, so sweep rows
        are readable."""
        defs = nvcc.describe_defines(dict(self.yaml_defines + self.point_defines))
        return f"{self.entry}<{defs}>" if defs else self.entry


@dataclass(frozen=True)
class LaunchShape:
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    smem_bytes: int  # dynamic shared memory per block
    workspace_bytes: Optional[int] = None  # the kernel's scratch argument (None: it takes none)
    let: Tuple[Tuple[str, Any], ...] = ()  # the YAML's named expressions, evaluated for this point

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


def resolve_source(source: str, root: Optional[str] = None) -> Path:
    """A YAML source path: absolute, or relative to the project root (cfg.paths.root, else the
    package's checkout, so run.py works from any working directory)."""
    p = Path(source)
    if p.is_absolute():
        return p
    if root:
        candidate = Path(root) / p
        if candidate.exists():
            return candidate.resolve()
    return (ROOT / p).resolve()


def build_for(point, root: Optional[str] = None) -> KernelBuild:
    cuda = point.variant_cfg.cuda
    if cuda is None:
        raise ValueError(f"variant {point.variant} has backend cuda but no `cuda:` block")
    yaml_defines = tuple((str(k), v) for k, v in cuda.defines.items())
    point_defines = tuple(point.point_defines().items())
    # a point define that refines a define (stage 15's BN 0: by waves) replaces its value: one -D each
    defines = list({**dict(yaml_defines), **dict(point_defines)}.items())
    names = {k for k, _ in defines}
    for name, dtype in (("TIN", point.in_dtype), ("TOUT", point.out_dtype)):
        if name not in names:
            if dtype not in C_TYPES:
                raise ValueError(f"no C type for storage type {dtype!r} (known: {sorted(C_TYPES)})")
            defines.append((name, C_TYPES[dtype]))
    return KernelBuild(source=resolve_source(cuda.source, root), entry=str(cuda.entry), arch=str(cuda.arch),
                       defines=tuple(defines), extra_flags=tuple(str(f) for f in cuda.extra_flags),
                       yaml_defines=yaml_defines, point_defines=point_defines)


def launch_shape(point, sm_count: Optional[int] = None) -> LaunchShape:
    """The YAML's block / grid / smem_bytes rules evaluated for this point; ``sm_count`` (the
    device's multiprocessors, read from the device when not given) sizes persistent grids. The
    point defines were chosen with the point's own ``sm_count`` (the device config's, as the build
    was): this one sizes the launch only."""
    cuda = point.variant_cfg.cuda
    env = point.expr_env()
    env["sm_count"] = sm_count if sm_count is not None else gpu_sm_count(point.variant)
    let = []
    for name, rule in (cuda.get("let") or {}).items():  # in order: each may use the ones before
        if name in env:
            raise ValueError(f"{point.variant}: cuda.let.{name} would hide the name {name!r} "
                             "(m, n, k, sm_count and the defines are taken)")
        env[str(name)] = evaluate(rule, env)
        let.append((str(name), env[str(name)]))

    def dims(rule, what) -> Tuple[int, int, int]:
        vals = [int(evaluate(e, env)) for e in rule]
        if not 1 <= len(vals) <= 3:
            raise ValueError(f"{point.variant}: cuda.{what} must have 1 to 3 entries, got {list(rule)}")
        vals += [1] * (3 - len(vals))
        if min(vals) < 1:
            raise ValueError(f"{point.variant}: cuda.{what} {list(rule)} gives {vals} for "
                             f"m={point.m}, n={point.n}, k={point.k}; every entry must be >= 1")
        return tuple(vals)

    workspace = cuda.get("workspace_bytes")
    if workspace is not None:
        workspace = int(evaluate(workspace, env))
        if workspace < 0:
            raise ValueError(f"{point.variant}: cuda.workspace_bytes gives {workspace} for m={point.m}, "
                             f"n={point.n}, k={point.k}")
    return LaunchShape(grid=dims(cuda.grid, "grid"), block=dims(cuda.block, "block"),
                       smem_bytes=int(evaluate(cuda.smem_bytes, env)), workspace_bytes=workspace,
                       let=tuple(let))


_warned_sm_counts: set = set()


def _rules_sm_count(point) -> Optional[int]:
    """The SM count the point's build was chosen for, where its point defines read one (the row's
    extra.rules_sm_count; None otherwise). A GPU with another count is said once in the log: the
    build is right, its choice was made for the device config's count (device.sm_count)."""
    if not point.rules_read_sm_count():
        return None
    gpu = gpu_sm_count(point.variant)
    chosen = point.sm_count if point.sm_count is not None else gpu
    if chosen != gpu and (point.variant, chosen, gpu) not in _warned_sm_counts:
        _warned_sm_counts.add((point.variant, chosen, gpu))
        log.warning("%s: its point defines chose the build for %d SMs (device.sm_count) but this GPU has %d; "
                    "run with device.sm_count=%d for builds chosen for it", point.variant, chosen, gpu, gpu)
    return int(chosen)


class CudaKernels(Backend):
    name = "cuda"
    kind = "gpu"
    layouts = ("nn",)
    layout_reason = "hand-written stages read row-major A and B (layout nn)"
    batched = False
    batch_reason = "hand-written stages compute one GEMM per launch (batch 1)"

    def __init__(self, cfg):
        super().__init__(cfg)
        self._builds: Dict[KernelBuild, Union[nvcc.Cubin, nvcc.CompileError]] = {}
        self._modules: Dict[Path, Any] = {}  # cubin path -> cupy.RawModule
        self._reported_compile: set = set()  # builds whose compile time went into a row already
        self._device_limits: Optional[Dict[str, int]] = None

    # -- availability --------------------------------------------------------------------------
    def unavailable(self) -> Optional[str]:
        path = nvcc.find_nvcc()
        if path is None:
            return (f"nvcc not found (searched {nvcc.SEARCHED}); "
                    "the cuda backend compiles kernels/cuda/*.cu with it")
        try:
            nvcc.nvcc_version(path)
        except nvcc.NvccError as e:
            return str(e)
        return None

    def skip_reason(self, point) -> Optional[str]:
        if point.compute == "fp8":
            try:
                import torch  # noqa: F401  (fp8.gpu_operands quantizes through PyTorch, as cuBLASLt's path)
            except ImportError:
                return "fp8 operands are made through PyTorch (pip install torch)"
            why = fp8.not_implemented(self._scaling(), FP8_MODES, "the cuda backend's FP8 stages")
            if why:  # no kernel takes per-row / per-column scales
                return why
        try:
            shape = launch_shape(point)
        except Exception:  # a broken rule is a failure of this point, reported by make_launch
            return None
        if shape.threads > MAX_BLOCK_THREADS:
            return f"block {list(shape.block)} has {shape.threads} threads, more than {MAX_BLOCK_THREADS}"
        limits = self._limits()
        if limits and shape.smem_bytes > limits["smem_optin"]:
            return (f"needs {shape.smem_bytes} bytes of dynamic shared memory per block; "
                    f"this device allows {limits['smem_optin']}")
        if limits and (shape.grid[1] > limits["grid_y"] or shape.grid[2] > limits["grid_z"]):
            return f"grid {list(shape.grid)} exceeds the device's limits"
        return None

    def _limits(self) -> Optional[Dict[str, int]]:
        if self._device_limits is None:
            try:
                import cupy

                attrs = cupy.cuda.Device().attributes
                self._device_limits = {"smem_optin": int(attrs["MaxSharedMemoryPerBlockOptin"]),
                                       "grid_y": int(attrs["MaxGridDimY"]), "grid_z": int(attrs["MaxGridDimZ"])}
            except Exception:  # no CuPy or no device: the executor reports that, not us
                self._device_limits = {}
        return self._device_limits or None

    # -- compile -------------------------------------------------------------------------------
    def _root(self) -> Optional[str]:
        try:
            return str(self.cfg.paths.root)
        except Exception:
            return None

    def _cache_folder(self) -> Path:
        return cache_dir(self.cfg.paths.cache, "cuda")

    def prepare(self, points: Iterable) -> None:
        """Compile every distinct build of the run (in parallel where there are cores)."""
        todo: Dict[KernelBuild, None] = {}
        for p in points:
            try:
                b = build_for(p, self._root())
            except Exception as e:  # reported again by make_launch for this point
                log.warning("%s: %s", p.variant, e)
                continue
            if b not in self._builds:
                todo[b] = None
        if not todo:
            return
        workers = max(1, min(len(todo), (os.cpu_count() or 2) // 2))
        log.info("cuda: compiling %d kernel build(s) with nvcc (%d at a time)", len(todo), workers)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for build, result in zip(todo, pool.map(self._compile, todo)):
                self._builds[build] = result

    def _compile(self, build: KernelBuild) -> Union[nvcc.Cubin, nvcc.CompileError]:
        try:
            cubin = nvcc.compile_cubin(build.source, build.flags, self._cache_folder())
            if cubin.compile_s:
                log.info("cuda: compiled %s in %.1f s", build.kernel_name, cubin.compile_s)
            return cubin
        except nvcc.CompileError as e:
            log.error("cuda: %s", e)
            return e
        except nvcc.NvccError as e:
            return nvcc.CompileError(str(e))

    def cubin_for(self, build: KernelBuild) -> nvcc.Cubin:
        """The compiled build; raises its CompileError (the reason names nvcc's log)."""
        if build not in self._builds:
            self._builds[build] = self._compile(build)
        result = self._builds[build]
        if isinstance(result, Exception):
            raise result
        return result

    # -- fp8 inputs ----------------------------------------------------------------------------
    def wants_fp32_inputs(self, point) -> bool:
        return point.compute == "fp8"

    def make_inputs(self, point, a32, b32):
        """FP8 operands quantized as ``measure.fp8_scaling`` says, exactly as the cuBLASLt baseline
        makes them (:func:`gemmlab.fp8.gpu_operands`); other precisions as the executor made them."""
        if point.compute != "fp8":
            return a32, b32, a32, b32
        ta, tb, a_ref, b_ref, _sc = fp8.gpu_operands(point.layout, point.in_dtype, self._scaling(), a32, b32)
        return ta, tb, a_ref, b_ref

    def _scaling(self) -> str:
        return self.cfg.measure.fp8_scaling.value  # the schema types it at compose

    def _fp8_args(self, point, a, b):
        """(CuPy bytes of A, of B, (scale_a, scale_b) as float32 arguments -- numbers, or under
        ``block`` the grids --, the row's fp8_scaling)."""
        import cupy
        import numpy as np

        sc = fp8.scales_of(a, b, self._scaling(), point.in_dtype)
        as_bytes = [x if hasattr(x, "data") and hasattr(x.data, "ptr") else _torch_bytes(x) for x in (a, b)]
        if sc.per_block:  # block: the two grids, laid out as cuBLASLt reads them
            scale_args = _block_grids(point, sc)
        else:
            scale_args = (np.float32(sc.a), np.float32(sc.b))
        return as_bytes[0], as_bytes[1], scale_args, sc.extra()

    # -- launch --------------------------------------------------------------------------------
    def make_launch(self, point, a, b, c) -> Launch:
        build = build_for(point, self._root())
        cubin = self.cubin_for(build)  # raises for a build that did not compile
        report = cubin.report(build.entry)
        shape = launch_shape(point)
        scale_args, scaling = (), None
        keep = (a, b)  # PyTorch FP8 tensors own the memory the CuPy views below alias
        if point.compute == "fp8":
            a, b, scale_args, scaling = self._fp8_args(point, a, b)
        _check_operands(point, a, b, c)

        import numpy as np

        kernel = self._kernel(cubin.path, build.entry)
        needed = self._declared_smem(cubin.path)
        if needed is not None and shape.smem_bytes < needed:
            raise ValueError(f"{point.variant}: cuda.smem_bytes gives {shape.smem_bytes} bytes but "
                             f"{build.source.name} needs {needed} with these defines; fix the YAML rule")
        if shape.smem_bytes + report.smem_bytes > DEFAULT_DYNAMIC_SMEM_LIMIT:
            kernel.max_dynamic_shared_size_bytes = shape.smem_bytes

        args = (a, b, c, np.int32(point.m), np.int32(point.n), np.int32(point.k))
        specs = list(point.variant_cfg.cuda.tensor_maps)
        if specs:
            from gemmlab.gpu.tma import (
                tensor_map_args,  # Hopper kernels only; CPU machines never import it
            )

            by_value = bool(dict(build.defines).get("MAP_PARAMS", 0))  # the kernel's signature (gemmlab/gpu/tma.py)
            args = args + tuple(tensor_map_args(point, a, b, c, specs, by_value=by_value))
        args = args + scale_args
        workspace = None
        if shape.workspace_bytes is not None:  # zeroed once here; the kernel leaves it ready for its next call
            import cupy

            workspace = cupy.zeros(max(shape.workspace_bytes, 1), dtype=cupy.uint8)
            args = args + (workspace,)

        fn_kernel = kernel.kernel  # the cupy.cuda.Function behind the RawKernel, for this device
        grid, block, smem = shape.grid, shape.block, shape.smem_bytes

        def fn() -> None:  # enqueue on the current stream, nothing else
            fn_kernel(grid, block, args, shared_mem=smem)

        fn.keepalive = (keep, workspace)

        rules_sm = _rules_sm_count(point)
        first = build not in self._reported_compile
        self._reported_compile.add(build)
        info = {
            "kernel_name": build.kernel_name,
            "registers": report.registers,
            "smem_bytes": report.smem_bytes + shape.smem_bytes,
            "spill_bytes": report.spill_bytes,
            "compile_s": cubin.compile_s if first else 0.0,
            "library_version": f"nvcc {nvcc.nvcc_version(nvcc.find_nvcc())}",
            "extra": {"grid": list(grid), "block": list(block), "dynamic_smem_bytes": smem,
                      "static_smem_bytes": report.smem_bytes, "stack_frame_bytes": report.stack_frame_bytes,
                      "arch": build.arch, "cubin": cubin.path.name,
                      **({"padding": point.variant_cfg.cuda.padding}
                         if point.variant_cfg.cuda.padding else {}),
                      **({"let": dict(shape.let)} if shape.let else {}),
                      **({"workspace_bytes": shape.workspace_bytes} if shape.workspace_bytes is not None else {}),
                      **({"rules_sm_count": rules_sm} if rules_sm is not None else {}),
                      **({"fp8_scaling": scaling} if scaling is not None else {})},
        }
        return Launch(fn=fn, info=info)

    def release(self) -> None:
        fp8.forget_recorded()  # the point's fp8 input sets are gone; their addresses may be reused

    def _kernel(self, cubin: Path, entry: str):
        import cupy

        module = self._modules.get(cubin)
        if module is None:
            module = self._modules[cubin] = cupy.RawModule(path=str(cubin))
        return module.get_function(entry)

    def _declared_smem(self, cubin: Path) -> Optional[int]:
        """The dynamic shared memory the kernel says it needs (GEMMLAB_DECLARE_DYNAMIC_SMEM), if any."""
        import cupy

        try:
            ptr = self._modules[cubin].get_global("gemmlab_dynamic_smem_bytes")
        except Exception:  # the kernel declares nothing (cuModuleGetGlobal: not found)
            return None
        return int(cupy.ndarray((1,), dtype=cupy.int32, memptr=ptr).get()[0])


def _check_operands(point, a, b, c) -> None:
    shape_a, shape_b = operands.stored_shapes(point.m, point.n, point.k, point.layout)
    for name, arr, shape in (("A", a, shape_a), ("B", b, shape_b), ("C", c, (point.m, point.n))):
        if tuple(arr.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(arr.shape)}, expected {shape}")
        if not arr.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous (row-major, densely packed)")
    for name, arr, dtype in (("A", a, point.in_dtype), ("B", b, point.in_dtype), ("C", c, point.out_dtype)):
        if arr.dtype.itemsize != _itemsize(dtype):
            raise ValueError(f"{name} holds {arr.dtype} but the point's storage type is {dtype}")


def _block_grids(point, sc):
    """The block scales as the block-scaled stage reads them: gemmlab.fp8's grids, scale_a (m,
    ceil(k/128)) and scale_b (ceil(k/128), ceil(n/128)), in the layouts cuBLASLt reads on Hopper
    (:func:`gemmlab.fp8.cublaslt_scale_layout`: A k-block-major (ceil(k/128), roundup(m, 4)), B n-block-major
    (ceil(n/128), roundup(ceil(k/128), 4)); float32, C-contiguous): the stage and its baseline get the same
    input. A grid of another shape or block is refused, never passed."""
    kb, nb = -(-point.k // fp8.BLOCK), -(-point.n // fp8.BLOCK)
    want = {"a": (point.m, kb), "b": (kb, nb)}
    if sc.mode != "block" or tuple(sc.block_a) != (1, fp8.BLOCK) or tuple(sc.block_b) != (fp8.BLOCK, fp8.BLOCK):
        raise ValueError(f"the cuda backend passes block scales of 1 x {fp8.BLOCK} (A) and {fp8.BLOCK} x "
                         f"{fp8.BLOCK} (B) only; got {sc.mode} with blocks {sc.block_a} and {sc.block_b}")
    out = []
    for name, grid in (("a", sc.a), ("b", sc.b)):
        if tuple(grid.shape) != want[name]:
            raise ValueError(f"scale_{name} grid has shape {tuple(grid.shape)}, expected {want[name]}")
        out.append(fp8.cublaslt_scale_layout(grid, "block"))
    return tuple(out)


def _torch_bytes(t):
    """A CuPy uint8 view of a PyTorch FP8 tensor's memory (CuPy has no FP8 type to launch with)."""
    import cupy
    import torch

    return cupy.from_dlpack(t.view(torch.uint8))


def _itemsize(dtype: str) -> int:
    from gemmlab.dtypes import itemsize

    return itemsize(dtype)


BACKEND = CudaKernels
