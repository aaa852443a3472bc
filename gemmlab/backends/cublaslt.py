"""cublaslt: cuBLASLt through nvmath-python: a planned (optionally autotuned) ``Matmul``, executed
in place into the harness's output buffer so the timed call allocates nothing.

Plans allow only reductions in the compute type (MatmulReductionScheme.COMPUTE_TYPE, or none):
the default mask also lets split-K partial sums be added in the output type (INPLACE, OUTPUT_TYPE),
which for FP16/BF16 is not the FP32 accumulation the precision asks for (see cublas.py).

Layouts and batches (gemmlab/operands.py): nvmath reads each operand's layout from its strides, so a
transposed operand is handed over as the transposed view of its stored array (column-major to
cuBLASLt, no copy) and a batch as 3-D arrays (cuBLASLt's strided batch, one call). The fp8 path
needs A row-major and B column-major (K-major both): it copies an nn point's B once (untimed), takes
an nt point's B as stored, and skips tn, tt and batches with the reason.

``cublaslt: {search: true}`` (variant ``cublaslt_search``) checks and ranks the heuristic's top
``search_limit`` algorithms and measures the fastest (:mod:`gemmlab.backends.cublaslt_search`); without
it the heuristic's first choice is measured (optionally autotuned). Rows name the algorithm:
``kernel_name`` (id, tile, stages, split-K) and ``extra.algorithm`` (its whole configuration).

bfloat16 operands are handed to nvmath as PyTorch tensors that alias the CuPy buffers (through a
uint16 DLPack view), because CuPy's bfloat16 arrays are not a type nvmath's CuPy wrapper knows.

FP8 scaling (``measure.fp8_scaling``, gemmlab/fp8.py): ``tensor`` quantizes each operand with its
amax scale and hands the two FP32 scales to nvmath as ``quantization_scales`` (Python floats:
nvmath-python 1.0.0 copies a scalar scale to a float32 device scalar when the Matmul is planned,
and sets cuBLASLt's SCALAR_32F scale mode); no D scale, the result being BF16. ``rowcol``
(OUTER_VEC_32F) and ``block`` (DeepSeek-V3: VEC128_32F activations x BLK128x128_32F weights), which
nvmath's Matmul does not reach, go through its raw bindings (:mod:`gemmlab.backends.cublaslt_scaled`:
the heuristic's first algorithm, no search); where a device, a cuBLASLt or a shape cannot run them
they are skipped with the reason (:func:`gemmlab.fp8.skip_reason`, ``cublaslt_scaled.constraints``).
nvmath's Matmul plans FP8 only at M, N and K multiples of 16; cuBLASLt needs that of K and N alone
(the leading dimensions), so an M that is no multiple of 16 (decode's 1 token) takes the raw path
with per-tensor (SCALAR_32F) scales (``cublaslt_scaled.nvmath_takes``; the search variant skips it).
"""
from __future__ import annotations

import logging
import time
from typing import Dict, List, Optional

from gemmlab import fp8, operands
from gemmlab.backends import cublaslt_scaled as scaled
from gemmlab.backends import cublaslt_search as lt_search
from gemmlab.backends.base import Backend, Launch

# nvmath logs every execute() at INFO to the root logger unless given its own logger: that would
# put logging (and, under Hydra, file writes) inside the timed call.
_QUIET = logging.getLogger("gemmlab.nvmath")
_QUIET.setLevel(logging.WARNING)

NVMATH_MODES = ("none", "tensor")  # measure.fp8_scaling modes nvmath's Matmul reaches
COMPUTE = {"tf32": "COMPUTE_32F_FAST_TF32", "fp16": "COMPUTE_32F", "bf16": "COMPUTE_32F",
           "fp8": "COMPUTE_32F"}


def _alias(x, dtype: Optional[str] = None):
    """A tensor nvmath accepts that shares ``x``'s memory (bfloat16 via torch, else CuPy itself);
    ``dtype``: the point's storage type, for FP8 operands another backend made as CuPy bytes."""
    if not hasattr(x, "data") or not hasattr(x.data, "ptr"):  # already a torch tensor (fp8)
        return x
    if dtype in fp8.FP8_MAX:  # 1-byte CuPy operands (a hand-written stage's set, as a baseline)
        import cupy
        import torch

        return torch.from_dlpack(x.view(cupy.uint8)).view(getattr(torch, dtype))
    if x.dtype.name == "bfloat16":
        import cupy
        import torch

        return torch.from_dlpack(x.view(cupy.uint16)).view(torch.bfloat16)
    return x


class CublasLt(Backend):
    name = "cublaslt"
    kind = "gpu"

    def __init__(self, cfg):
        super().__init__(cfg)
        self._plans: List = []
        self._raw: List[scaled.ScaledMatmul] = []  # rowcol / block calls (cublaslt_scaled.py)
        self._searched: Dict[str, lt_search.LtSearchPick] = {}  # point key -> the search's pick

    def unavailable(self) -> Optional[str]:
        try:
            import nvmath  # noqa: F401
            from nvmath.linalg import advanced  # noqa: F401
        except Exception as e:
            return f"nvmath-python unavailable ({type(e).__name__}: {e}); pip install -e '.[gpu]'"
        return None

    def skip_reason(self, p) -> Optional[str]:
        if p.compute not in COMPUTE:
            return f"cublaslt backend supports {sorted(COMPUTE)} (got {p.compute})"
        if p.compute == "fp8" and p.in_dtype == "float8_e5m2":
            return fp8.E5M2_REASON
        if p.in_dtype in ("bfloat16", "float8_e4m3fn"):
            try:
                import torch
            except ImportError:
                return f"{p.in_dtype} through nvmath needs PyTorch (pip install torch)"
            if p.compute == "fp8":
                import cupy

                cc = cupy.cuda.Device().compute_capability
                if int(cc) < 89:
                    return f"FP8 tensor cores need compute capability 8.9 or newer (this device: {cc})"
                if p.out_dtype != "bfloat16":
                    return "the fp8 path writes a bfloat16 result"
                why = self._scaling_reason(p, int(cc))
                if why:
                    return why
        if p.compute == "fp8" and (p.layout not in ("nn", "nt") or p.batch != 1):
            return ("cuBLASLt's FP8 kernels read A and B K-major: the fp8 path runs A as stored (layout nn, "
                    "or nt, whose B is already K-major) and one GEMM per call (batch 1)")
        return None

    def _scaling_reason(self, p, cc: int) -> Optional[str]:
        """Why ``measure.fp8_scaling`` cannot run here: per-tensor through nvmath's Matmul, rowcol and
        block through the raw bindings (cublaslt_scaled.py), which the search variant does not use."""
        mode = self._scaling()
        lt = p.variant_cfg.get("cublaslt") if p.variant_cfg is not None else None
        if lt and lt.get("search"):
            return fp8.skip_reason(mode, cc, NVMATH_MODES, "the cuBLASLt search (it ranks nvmath Matmul plans, "
                                   "whose scales are SCALAR_32F only)")
        if mode not in scaled.RAW_MODES:
            return fp8.skip_reason(mode, cc, NVMATH_MODES, "nvmath-python 1.0.0's Matmul")
        return (fp8.skip_reason(mode, cc, scaled.RAW_MODES, "the raw cuBLASLt path", scaled.lt_version())
                or scaled.constraints(p, mode))

    def wants_fp32_inputs(self, p) -> bool:
        return p.compute == "fp8"

    def make_inputs(self, p, a32, b32):
        """FP8 operands, A row-major and B column-major as cuBLASLt's FP8 kernels want, quantized
        as ``measure.fp8_scaling`` says (``none``: cast as drawn; ``tensor``: x / amax scale); the
        references hold the exact values the GEMM multiplies (dequantized: FP64 times the scale)."""
        if p.compute != "fp8":
            return a32, b32, a32, b32
        ta, tb, a_ref, b_ref, _sc = fp8.gpu_operands(p.layout, p.in_dtype, self._scaling(), a32, b32)
        return ta, tb, a_ref, b_ref

    def _scaling(self) -> str:
        """``measure.fp8_scaling`` as a name (the schema types it at compose)."""
        return self.cfg.measure.fp8_scaling.value

    def _scales_of(self, p, a, b) -> Optional[fp8.Scales]:
        if p.compute != "fp8":
            return None
        return fp8.scales_of(a, b, self._scaling(), p.in_dtype)

    def make_launch(self, p, a, b, c) -> Launch:
        import cupy
        import nvmath
        from nvmath.linalg.advanced import Algorithm, MatmulPlanPreferences, MatmulReductionScheme

        stream = cupy.cuda.get_current_stream()
        ptr = stream.ptr
        lt = p.variant_cfg.get("cublaslt") if p.variant_cfg is not None else None
        search = bool(lt and lt.get("search"))
        if p.compute == "fp8" and (self._scaling() in scaled.RAW_MODES
                                   or (not search and not scaled.nvmath_takes(p))):
            return self._raw_launch(p, a, b, c, ptr)
        mask = MatmulReductionScheme.COMPUTE_TYPE  # every plan, every candidate: see the module's doc
        autotuned = False
        started = time.perf_counter()
        if search:
            pick = self._searched.get(p.key)
            if pick is None:  # the first input set searches; the others (cache=rotate) reuse its pick
                limit = int(lt.search_limit)
                seeker, _ = self._matmul(p, a, b, c, ptr)
                self.watch_search(limit)
                try:
                    seeker.plan(preferences=MatmulPlanPreferences(reduction_scheme_mask=mask, limit=limit),
                                stream=ptr)
                    pick = lt_search.run_search(p, seeker, a, b, c, self._exact(), ptr, limit, started,
                                                scales=self._scales_of(p, a, b))
                finally:  # its workspace (the largest of all candidates') goes before the timing
                    self._plans.remove(seeker)
                    seeker.free()
                    self.watch_search(None)
                self._searched[p.key] = pick
            mm, held = self._matmul(p, a, b, c, ptr)
            mm.plan(algorithms=[Algorithm.from_numpy(pick.algorithm)], stream=ptr)  # the winner alone
            config = dict(pick.extra()["algorithm"])
            extra = pick.extra()
        else:
            mm, held = self._matmul(p, a, b, c, ptr)
            mm.plan(preferences=MatmulPlanPreferences(reduction_scheme_mask=mask), stream=ptr)
            autotuned = bool(lt and lt.autotune)
            if autotuned:
                mm.autotune(iterations=int(lt.autotune_iterations), stream=ptr)
            config = {"heuristic_rank": None if autotuned else 0,
                      **(lt_search.algorithm_config(mm.algorithms[0]) if mm.algorithms else {})}
            extra = {"algorithm": config}

        sc = self._scales_of(p, a, b)
        if sc is not None:
            extra = {**extra, "fp8_scaling": sc.extra()}

        def fn():
            mm.execute(stream=ptr)

        fn.keepalive = (mm, held, a, b, c)
        workload = ("" if p.layout == "nn" else f" {p.layout}") + ("" if p.batch == 1 else f" batch={p.batch}")
        how = (f" searched (heuristic rank {config.get('heuristic_rank')} of {extra['search_limit']})" if search
               else " autotuned" if autotuned else "")
        info = {"kernel_name": f"cublasLtMatmul{workload} {COMPUTE[p.compute]} {lt_search.describe(config)}"
                               + how + " (compute-type reduction)",
                "library_version": f"nvmath-python {nvmath.__version__}", "extra": extra}
        return Launch(fn, info)

    def _raw_launch(self, p, a, b, c, stream_ptr: int) -> Launch:
        """rowcol / block: cublasLtMatmul through nvmath's raw bindings with the Hopper scale modes
        (cublaslt_scaled.py), the heuristic's first algorithm; per-tensor too where nvmath's Matmul
        refuses the shape (an M that is no multiple of 16: decode's 1 token)."""
        import nvmath

        sc = self._scales_of(p, a, b)
        mm, held = scaled.make_call(p, sc, a, b, c)
        self._raw.append(mm)
        config = {"heuristic_rank": 0, "heuristic_returned": mm.returned, "workspace_bytes": mm.workspace_bytes}
        try:
            from nvmath.linalg.advanced import Algorithm

            config.update(lt_search.algorithm_config(Algorithm.from_numpy(mm.algorithm_record())))
        except Exception as e:  # the description only; the call itself does not need it
            config["unreadable"] = f"{type(e).__name__}: {e}"
        record = mm.plan.record()

        def fn():
            mm.run(stream_ptr)

        fn.keepalive = (mm, held, a, b, c)
        info = {"kernel_name": f"cublasLtMatmul {p.layout} {COMPUTE[p.compute]} {record['scale_mode_a']} x "
                               f"{record['scale_mode_b']} {lt_search.describe(config)} (compute-type reduction)",
                "library_version": f"nvmath-python {nvmath.__version__} bindings, cuBLASLt {scaled.lt_version()}",
                "extra": {"algorithm": config, "fp8_scaling": sc.extra(), "cublaslt_scaled": record}}
        return Launch(fn, info)

    def _matmul(self, p, a, b, c, stream_ptr: int):
        """The point's Matmul (not yet planned): logical operands, C written in place; and the
        operand views it was given, which the launch keeps alive."""
        from nvmath.linalg import ComputeType
        from nvmath.linalg.advanced import Matmul, MatmulOptions

        opts = MatmulOptions(inplace=True, compute_type=getattr(ComputeType, COMPUTE[p.compute]), logger=_QUIET)
        trans_a, trans_b = operands.transposed(p.layout)
        ta, tb = operands.logical(_alias(a, p.in_dtype), trans_a), operands.logical(_alias(b, p.in_dtype), trans_b)
        sc = self._scales_of(p, a, b)  # per-tensor FP32 scales; no D scale: BF16 result
        scales = None if sc is None else {"a": sc.a, "b": sc.b}
        tc = _alias(c)
        mm = Matmul(ta, tb, c=tc, alpha=1.0, beta=0.0, quantization_scales=scales, options=opts,
                    stream=stream_ptr)
        self._plans.append(mm)
        return mm, (ta, tb, tc)

    def _exact(self) -> bool:
        """The inputs are small integers (``measure.distribution: exact``), as the reference takes it."""
        return self.cfg.measure.distribution.value == "exact"

    def release(self) -> None:
        for mm in self._plans:
            try:
                mm.free()
            except Exception:
                pass
        self._plans = []
        for mm in self._raw:
            mm.free()
        self._raw = []
        fp8.forget_recorded()


BACKEND = CublasLt
