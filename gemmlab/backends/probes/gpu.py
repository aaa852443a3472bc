"""The ``gpu_probe`` backend: :class:`GpuProbe`, the registry of probe kinds (:data:`PROBES`) and
the kernels the probes compile.

A variant with ``backend: gpu_probe`` names a ``probe.kind`` (a key of :data:`PROBES`; the probes
are listed in the package docstring) and its ``probe.params``. The GPU executor calls
:meth:`GpuProbe.measure_point`, which hands the point to its probe; the probe owns the inputs,
the check and the timing of its point, and the dict it returns overrides the row's GEMM defaults
(``op``, ``flops``, ``bytes_min``, ``intensity``, ...).

A probe that runs a kernel of its own (``Probe.compiles``) finds it in the variant's
``probe.source``, resolved as the cuda backend resolves ``cuda.source``; without one its point
fails, saying so. Kernels are compiled with nvcc (:mod:`gemmlab.backends.nvcc`) into cubins cached
under ``paths.cache``/probes and loaded with ``cupy.RawModule(path=...)``, once per source and
process.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from gemmlab import cache
from gemmlab.backends.base import Backend
from gemmlab.backends.probes import probe_of
from gemmlab.backends.cuda_kernels import resolve_source
from gemmlab.backends.probes.boundary import Sgemm32Unguarded
from gemmlab.backends.probes.cache import L1Bandwidth, L2Bandwidth
from gemmlab.backends.probes.common import Probe, ProbeSkip
from gemmlab.backends.probes.memory import Copy, Gemv, VecAdd
from gemmlab.backends.probes.mma import MmaSyncPeak, WgmmaPeak
from gemmlab.backends.probes.smem import SmemBandwidth, SmemBank, SmemLatency
from gemmlab.backends.probes.transfer import FirstRun, GemmEndToEnd, Transfer
# tile_transpose: tests/test_claims.py reaches it here, as it did in the one-module gpu_probe
from gemmlab.backends.probes.wmma import WmmaAlignment, WmmaLayout, tile_transpose  # noqa: F401
from gemmlab.config import ROOT

KERNELS_DIR = ROOT / "kernels" / "cuda"  # on the include path of every probe kernel


# -- building kernels ---------------------------------------------------------------------------
def compile_probe(source: Path, arch: str, cache_root: str) -> Path:
    """nvcc ``source`` into a cubin for ``arch`` through :mod:`gemmlab.backends.nvcc` (the ladder's
    compiler: cached by source, included headers, flags and nvcc version)."""
    from gemmlab.backends import nvcc

    flags = nvcc.build_flags(arch, extra=(f"-I{KERNELS_DIR}",))
    return nvcc.compile_cubin(source, flags, cache.cache_dir(cache_root, "probes")).path


def device_arch(cc: str) -> str:
    """'9.0' -> 'sm_90'."""
    major, minor = cc.split(".")
    return f"sm_{major}{minor}"


def probe_arch(point, cc: str) -> str:
    """The variant's ``probe.arch`` (sm_90a for wgmma) where it names one, else the device's own target;
    an architecture-specific target runs on its own compute capability only."""
    arch = point.variant_cfg.probe.get("arch")
    if not arch:
        return device_arch(cc)
    if arch.rstrip("af") != device_arch(cc):
        raise ProbeSkip(f"{point.variant} is built for {arch}: it runs on compute capability "
                        f"{arch[3:-2]}.{arch[-2]} only, not {cc}")
    return str(arch)


# -- the backend ----------------------------------------------------------------------------------
class GpuProbe(Backend):
    name = "gpu_probe"
    kind = "gpu"
    layouts = ("nn",)
    layout_reason = "probes measure their own operation on their own operands: the layout axis does not apply"
    batched = False
    batch_reason = "probes measure their own operation: the batch axis does not apply"

    def __init__(self, cfg):
        super().__init__(cfg)
        self._modules: Dict[Path, Any] = {}
        self._blas_handle = None
        self._cublas = None  # gemmlab.backends.cublas.Cublas, for the GEMM of gemm_e2e / first_run

    # -- configuration ----------------------------------------------------------------------
    @staticmethod
    def _probe(point):
        return probe_of(point, "gpu_probe")

    def skip_reason(self, p) -> Optional[str]:
        kind, params = self._probe(p)
        if kind not in PROBES:
            return f"unknown gpu_probe kind {kind!r}; known: {sorted(PROBES)}"
        return PROBES[kind].skip(p, params)

    def measure_point(self, point, executor, seed: int) -> Dict[str, Any]:
        kind, params = self._probe(point)
        probe = PROBES[kind]
        if probe.compiles:
            why = self._source_problem(point, kind)
            if why:
                return {"status": "failed", "reason": why, "op": probe.op}
        try:
            fields = probe.run(self, point, executor, seed, params)
        except ProbeSkip as e:
            return {"status": "skipped", "reason": str(e), "op": probe.op}
        return {"op": probe.op, **fields}

    def release(self) -> None:
        if self._cublas is not None:
            self._cublas.release()

    # -- kernels ----------------------------------------------------------------------------
    def kernel_source(self, point) -> Optional[Path]:
        """The variant's ``probe.source`` resolved as the cuda backend resolves ``cuda.source``
        (relative to ``paths.root``, else to this checkout), or None where it names none."""
        source = point.variant_cfg.probe.get("source")
        return resolve_source(str(source), self._root()) if source else None

    def _root(self) -> Optional[str]:
        try:
            return str(self.cfg.paths.root)
        except Exception:
            return None

    def _source_problem(self, point, kind: str) -> Optional[str]:
        """Why the point's kernel source cannot be compiled (none named, no such file), or None."""
        source = self.kernel_source(point)
        if source is None:
            return (f"gpu_probe kind {kind!r} runs a kernel of its own and variant {point.variant} names none: "
                    f"set probe.source in its YAML (a .cu file, relative to the project root)")
        if not source.is_file():
            return f"variant {point.variant}: probe.source {source} is not a file"
        return None

    def _module(self, ex, point):
        """(RawModule, cubin path) of the point's ``probe.source``, compiled for this device once."""
        source = self.kernel_source(point)
        if source is None:
            raise ValueError(f"variant {point.variant} (backend gpu_probe) has no probe.source")
        if source not in self._modules:
            import cupy

            cubin = compile_probe(source, probe_arch(point, ex.dev["cc"]), self.cfg.paths.cache)
            self._modules[source] = (cupy.RawModule(path=str(cubin)), cubin)
        return self._modules[source]

    def function(self, ex, point, entry: str):
        """Kernel ``entry`` of the point's ``probe.source``."""
        return self._module(ex, point)[0].get_function(entry)

    def cubin(self, ex, point) -> Path:
        """The cubin of the point's ``probe.source`` (for child processes that load it)."""
        return self._module(ex, point)[1]

    # -- shared resources -------------------------------------------------------------------
    def blas_handle(self, ex) -> int:
        from cupy_backends.cuda.libs import cublas

        if self._blas_handle is None:
            self._blas_handle = cublas.create()
            cublas.setPointerMode(self._blas_handle, cublas.CUBLAS_POINTER_MODE_HOST)
        cublas.setStream(self._blas_handle, ex.stream.ptr)
        return self._blas_handle

    def gemm_launch(self, p, a, b, c):
        """cuBLAS C = A @ B for the point (the cublas backend's launch, on the current stream)."""
        from gemmlab.backends.cublas import Cublas

        if self._cublas is None:
            self._cublas = Cublas(self.cfg)
        reason = self._cublas.unavailable() or self._cublas.skip_reason(p)
        if reason:
            raise ProbeSkip(reason)
        return self._cublas.make_launch(p, a, b, c)


PROBES: Dict[str, Probe] = {
    "copy": Copy(), "vecadd": VecAdd(), "gemv": Gemv(), "transfer": Transfer(),
    "gemm_e2e": GemmEndToEnd(), "first_run": FirstRun(), "smem_bandwidth": SmemBandwidth(),
    "smem_bank": SmemBank(), "smem_latency": SmemLatency(), "wmma_layout": WmmaLayout(),
    "wmma_alignment": WmmaAlignment(), "sgemm32_unguarded": Sgemm32Unguarded(),
    "l2_bandwidth": L2Bandwidth(), "l1_bandwidth": L1Bandwidth(), "mma_sync_peak": MmaSyncPeak(),
    "wgmma_peak": WgmmaPeak(),
}
# params that set a probe's size (tests shrink them for a smoke run)
SIZE_PARAMS = ("iters", "hops", "idle_s", "passes")


BACKEND = GpuProbe
