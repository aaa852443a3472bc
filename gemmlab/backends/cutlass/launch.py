"""A compiled CUTLASS kernel bound to its operands: arguments built once, a call is one launch.

The backend's ``make_launch`` loads the kernel (a cache hit costs milliseconds) and makes a
:class:`KernelLaunch`, which builds the kernel arguments once (CUTLASS's Params, TMA descriptors,
workspace) and a ready launch configuration; the returned ``fn`` only calls ``cuLaunchKernelEx`` on
the current CuPy stream. (``plan.run()`` would rebuild arguments and look the kernel up in the
cache on every call.) The one exception: a kernel with a device workspace (the stream-K tile
scheduler) gets it zeroed by a ``cuMemsetD32Async`` before each launch, as CUTLASS's own adapter
does, since its barrier counters are not reset by the kernel; the row's ``extra.cutlass.launch``
says so.

The persistent tile schedulers' ``swizzle`` and ``raster_order`` are run-time arguments: the same
kernel launched with other arguments (and a launch grid computed from them). cutlass_cppgen always
passes 1 and heuristic; :func:`scheduler_arguments_class` sets them.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Dict

from gemmlab import fp8
from gemmlab.backends.cutlass.catalog import Kernel, enum_name
from gemmlab.backends.cutlass.options import RASTER_ORDERS


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

    def __init__(self, kernel: Kernel, point, a, b, c, swizzle: int = 1, raster_order: str = "heuristic",
                 alpha: float = 1.0):
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
        # import torch to ask whether an array is a torch tensor). FP8 operands are PyTorch tensors.
        def ptr(x):
            return driver.CUdeviceptr(fp8.device_ptr(x))

        # alpha: 1, or an FP8 point's scale_a * scale_b (D = alpha acc + 0 C)
        self.alpha = float(alpha)
        arguments = dict(
            operation=op, problem_size=GemmCoord(point.m, point.n, point.k), A=ptr(a), B=ptr(b),
            C=None if kernel.void_c else ptr(c), D=ptr(c), output_op=op.epilogue_type(self.alpha, 0.0),
            gemm_mode=GemmUniversalMode.Gemm, split_k_slices=1, stream=driver.CUstream(stream_ptr))
        if point.batch > 1:
            # a strided batch (gemmlab/operands.py): every operand a contiguous stack of matrices,
            # whatever its layout (a transposed one holds as many elements), C row-major
            arguments.update(gemm_mode=GemmUniversalMode.Batched, batch=point.batch,
                             batch_strides=batch_strides(point))
            del arguments["split_k_slices"]
        self.swizzle, self.raster_order = int(swizzle), str(raster_order)
        if enum_name(op.api) == "v3x":
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


def batch_strides(point) -> Dict[str, int]:
    """Elements between consecutive GEMMs of a batch, per operand (cutlass_cppgen's
    ``batch_strides`` argument of a Batched GEMM)."""
    mn = point.m * point.n
    return {"A": point.m * point.k, "B": point.k * point.n, "C": mn, "D": mn}


def _check(result, what: str):
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver call {what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest
