"""cuBLASLt's Hopper FP8 scale modes (``measure.fp8_scaling=rowcol|block``) through nvmath-python's
raw bindings, ``nvmath.bindings.cublasLt``: a matmul descriptor, three matrix layouts, a preference,
the heuristic's first algorithm, a workspace, and ``cublasLtMatmul`` on the current CuPy stream.

Why raw: nvmath-python 1.0.0's ``Matmul`` sets only ``SCALAR_32F`` scale modes, or with
``block_scaling=True`` ``VEC32_UE8M0`` / ``VEC16_UE4M3`` (matmulmod.py,
``_prepare_single_validated_scale``); the modes cuBLAS 12.9 added for Hopper (``OUTER_VEC_32F`` = 3,
``VEC128_32F`` = 4, ``BLK128x128_32F`` = 5 in ``cublasLtMatmulMatrixScale_t``) are not reachable
through it, but its bindings expose every descriptor attribute (``A_SCALE_MODE`` = 31,
``B_SCALE_MODE`` = 32, ``A_SCALE_POINTER`` = 17, ``B_SCALE_POINTER`` = 18).

Row-major on column-major cuBLAS: C (m x n, row-major) is D = B^T A^T (n x m, column-major, ld n).
cuBLAS's A is our B, stored n x k row-major (= k x n column-major, ld k, ``TRANSA = T``), cuBLAS's B
our A, m x k row-major (= k x m column-major, ld k, ``TRANSB = N``): the "TN" form Hopper's FP8
kernels need; an ``nn`` point's B was copied to n x k once (:func:`gemmlab.fp8.gpu_operands`).
cuBLAS's m, n are our n, m. So cuBLAS's A scale is our B's and its B scale our A's:

- ``rowcol``: both ``OUTER_VEC_32F``; A scale: n floats (a column of our B each), B scale: m floats.
- ``block`` (DeepSeek-V3): A (our weights B) ``BLK128x128_32F``, B (our activations A) ``VEC128_32F``
  (the docs' table allows VEC128 x VEC128, VEC128 x BLK and BLK x VEC128, not BLK x BLK). Layouts
  (:func:`gemmlab.fp8.cublaslt_scale_layout`): BLK k-block-major, ceil(k/128) rounded up to 4 per
  n-block; VEC128 m-major, m per k-block.

cuBLAS docs, section "Narrow precision data types usage" (3.1.4.3 outer vector, 3.1.4.5 128-element 1D
and 128x128 2D block scaling): compute capability 9.0 only, D type FP16 / BF16 / FP32 (ours BF16),
scale start addresses 16-byte aligned (CuPy allocates at 256), M and N multiples of 4 for the block
modes, partial last blocks (L = ceil(K / 128)), every other scale mode (C, D) left as it is.
:func:`constraints` turns these into skip reasons. The descriptor plan (:class:`LtPlan`) is plain
data, built without a GPU and checked by tests/test_cublaslt_scaled.py with the bindings mocked;
:class:`ScaledMatmul` applies it. Written without a GPU: tests/test_gpu_fp8_scaling.py runs it on
the H200.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from gemmlab import fp8

RAW_MODES = ("rowcol", "block")  # the measure.fp8_scaling modes only this path runs
# per-tensor scales (cuBLAS's default SCALAR_32F: one float each): nvmath's Matmul runs them, except
# where it refuses the shape (M, N and K multiples of 16 for FP8, matmulmod.py); cuBLASLt itself needs
# only the leading dimensions K and N aligned (PyTorch's _scaled_mm checks K and N % 16), so any M,
# 1 token included, runs here (:func:`nvmath_takes`)
SCALAR_MODES = ("none", "tensor")
# cudaDataType_t, cublasComputeType_t, cublasOperation_t (nvmath.CudaDataType, nvmath.bindings.cublas)
CUDA_R_32F, CUDA_R_16BF, CUDA_R_8F_E4M3 = 0, 14, 28
COMPUTE_32F = 68
OP_N, OP_T = 0, 1
# (cuBLAS's A = our B, cuBLAS's B = our A) scale modes, by MatmulMatrixScale name
SCALE_MODES = {"rowcol": ("OUTER_VEC_32F", "OUTER_VEC_32F"), "block": ("BLK128x128_32F", "VEC128_32F"),
               "none": ("SCALAR_32F", "SCALAR_32F"), "tensor": ("SCALAR_32F", "SCALAR_32F")}
WORKSPACE_BYTES = 32 << 20  # cuBLAS's recommended workspace for Hopper
HEURISTIC_LIMIT = 8  # algorithms asked for; the first is run (the cublaslt variant's choice)


def constraints(point, mode: str) -> Optional[str]:
    """Why this path cannot run ``point`` under ``mode`` (known before anything runs), or None."""
    if point.in_dtype != "float8_e4m3fn":
        return f"the scaled FP8 path runs e4m3 operands (got {point.in_dtype})"
    if point.out_dtype != "bfloat16":
        return "the scaled FP8 path writes a bfloat16 result (cuBLAS allows FP16, BF16 or FP32 there)"
    if point.layout not in ("nn", "nt") or point.batch != 1:
        return ("cuBLASLt's FP8 kernels read A and B K-major (TN): the scaled path runs layouts nn (B copied "
                f"once) and nt, one GEMM per call (this point: layout {point.layout}, batch {point.batch})")
    if mode == "block" and (point.m % 4 or point.n % 4):
        return (f"cuBLASLt's VEC128_32F / BLK128x128_32F scales need M and N multiples of 4 "
                f"(cuBLAS docs 3.1.4.5.1; this point: m={point.m}, n={point.n})")
    return None


@dataclass(frozen=True)
class LtPlan:
    """Everything the raw call sets, as plain data. Layouts are (type, rows, cols, ld) in cuBLAS's
    column-major terms; ``desc`` the matmul descriptor's attributes in the order they are set, by
    ``MatmulDescAttribute`` name, enum values by name (``("enum", "MatmulMatrixScale", "VEC128_32F")``)
    or as ints, the two scale pointers by the array they point at (``("scale", "a")``: cuBLAS's A
    scale). ``scale_a`` / ``scale_b``: the arrays handed over as cuBLAS's A / B scales."""

    mode: str
    m: int  # cuBLAS's m (our n), n (our m), k
    n: int
    k: int
    a_layout: Tuple[int, int, int, int]
    b_layout: Tuple[int, int, int, int]
    d_layout: Tuple[int, int, int, int]
    desc: Tuple[Tuple[str, Any], ...]
    preference: Tuple[Tuple[str, Any], ...]
    scale_a: Any = field(repr=False)
    scale_b: Any = field(repr=False)

    def record(self) -> Dict[str, Any]:
        """What a row says of the call (``extra.cublaslt_scaled``)."""
        modes_a, modes_b = SCALE_MODES[self.mode]
        return {"bindings": "nvmath.bindings.cublasLt", "transa": "T", "transb": "N",
                "scale_mode_a": modes_a, "scale_mode_b": modes_b,
                "scale_a_shape": list(self.scale_a.shape), "scale_b_shape": list(self.scale_b.shape),
                "note": "cuBLAS's A is our B (weights), its B our A (activations)"}


def plan(point, sc: fp8.Scales) -> LtPlan:
    """The call for ``point`` with the scales ``sc`` (their grids on NumPy or CuPy)."""
    if sc.mode not in SCALE_MODES:
        raise ValueError(f"the raw cuBLASLt path runs fp8_scaling {', '.join(SCALE_MODES)} (got {sc.mode})")
    m, n, k = point.m, point.n, point.k
    mode_a, mode_b = SCALE_MODES[sc.mode]
    # per-tensor: the scale modes stay cuBLAS's default (SCALAR_32F), as nvmath and PyTorch leave them
    modes = () if sc.mode in SCALAR_MODES else (("A_SCALE_MODE", ("enum", "MatmulMatrixScale", mode_a)),
                                                 ("B_SCALE_MODE", ("enum", "MatmulMatrixScale", mode_b)))
    desc = (("TRANSA", OP_T), ("TRANSB", OP_N), *modes,
            ("A_SCALE_POINTER", ("scale", "a")), ("B_SCALE_POINTER", ("scale", "b")))
    pref = (("MAX_WORKSPACE_BYTES", WORKSPACE_BYTES),
            # split-K partial sums in the compute type only, as every cublaslt plan (cublaslt.py)
            ("REDUCTION_SCHEME_MASK", ("enum", "ReductionScheme", "COMPUTE_TYPE")))
    return LtPlan(sc.mode, n, m, k,
                  a_layout=(CUDA_R_8F_E4M3, k, n, k), b_layout=(CUDA_R_8F_E4M3, k, m, k),
                  d_layout=(CUDA_R_16BF, n, m, n), desc=desc, preference=pref,
                  scale_a=_scale_array(sc.b, sc.mode), scale_b=_scale_array(sc.a, sc.mode))


def nvmath_takes(point) -> bool:
    """Whether nvmath-python's Matmul plans this FP8 point (it raises "M=.. N=.. K=.. must be
    divisible by 16 for FP8 operations" otherwise: measured on an H100 in session42)."""
    return point.m % 16 == 0 and point.n % 16 == 0 and point.k % 16 == 0


def _scale_array(scale, mode: str):
    """The FP32 array cuBLASLt reads a scale from: one float per tensor, else the grid's layout."""
    if mode in SCALAR_MODES:
        return np.array([float(scale)], dtype=np.float32)
    return fp8.cublaslt_scale_layout(scale, mode)


def _value(lt, v, scale_ptrs):
    if isinstance(v, tuple) and v[0] == "enum":
        return int(getattr(getattr(lt, v[1]), v[2]))
    if isinstance(v, tuple) and v[0] == "scale":
        return int(scale_ptrs[v[1]])
    return int(v)


def _set(setter, dtype_of, obj, attr, value) -> None:
    buf = np.array(value, dtype=dtype_of(attr))  # the attribute's own C type, as nvmath sets it
    setter(obj, int(attr), buf.ctypes.data, buf.itemsize)


class ScaledMatmul:
    """One planned call: ``lt`` is ``nvmath.bindings.cublasLt`` (a fake in the CPU tests);
    ``ptrs``: device addresses of ``a`` (our A), ``b`` (our B, n x k in memory) and ``d`` (C);
    ``scale_ptrs``: of the plan's ``scale_a`` / ``scale_b``; ``alloc(nbytes)`` -> (address, owner)
    for the workspace. ``run(stream_ptr)`` only enqueues ``cublasLtMatmul``."""

    def __init__(self, lt, handle: int, p: LtPlan, ptrs: Dict[str, int], scale_ptrs: Dict[str, int], alloc):
        self.lt, self.handle, self.plan = lt, handle, p
        self.ptrs = dict(ptrs)
        self._made = []  # (destroy function, object), destroyed in reverse
        try:
            self.desc = self._make(lt.matmul_desc_create(COMPUTE_32F, CUDA_R_32F), lt.matmul_desc_destroy)
            for name, v in p.desc:
                _set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype, self.desc,
                     getattr(lt.MatmulDescAttribute, name), _value(lt, v, scale_ptrs))
            self.layouts = [self._make(lt.matrix_layout_create(*lay), lt.matrix_layout_destroy)
                            for lay in (p.a_layout, p.b_layout, p.d_layout)]
            self.pref = self._make(lt.matmul_preference_create(), lt.matmul_preference_destroy)
            for name, v in p.preference:
                _set(lt.matmul_preference_set_attribute, lt.get_matmul_preference_attribute_dtype, self.pref,
                     getattr(lt.MatmulPreferenceAttribute, name), _value(lt, v, scale_ptrs))
            self.results = np.zeros(HEURISTIC_LIMIT, dtype=lt.matmul_heuristic_result_dtype)
            # cublasLtMatmulHeuristicResult_t starts with its cublasLtMatmulAlgo_t: the first
            # result's address is its algorithm's, which run() hands to cublasLtMatmul
            assert self.results.dtype.fields["algo"][1] == 0
            count = np.zeros(1, dtype=np.int32)
            adesc, bdesc, ddesc = self.layouts
            lt.matmul_algo_get_heuristic(handle, self.desc, adesc, bdesc, ddesc, ddesc, self.pref,
                                         HEURISTIC_LIMIT, self.results.ctypes.data, count.ctypes.data)
            self.returned = int(count[0])
            if self.returned == 0:
                raise RuntimeError(f"cuBLASLt's heuristic has no algorithm for fp8_scaling={p.mode} "
                                   f"(m={p.n} n={p.m} k={p.k}, scale modes {p.record()['scale_mode_a']} x "
                                   f"{p.record()['scale_mode_b']})")
            self.workspace_bytes = int(self.results[0]["workspace_size"])
            self.workspace, self._ws_owner = alloc(self.workspace_bytes) if self.workspace_bytes else (0, None)
        except BaseException:
            self.free()
            raise
        self.alpha, self.beta = np.ones(1, np.float32), np.zeros(1, np.float32)  # CUDA_R_32F, host pointers

    def _make(self, obj, destroy):
        self._made.append((destroy, obj))
        return obj

    def algorithm_record(self):
        """The chosen algorithm as nvmath's NumPy record (``Algorithm.from_numpy`` reads it)."""
        return self.results[:1].copy()

    def run(self, stream_ptr: int) -> None:
        adesc, bdesc, ddesc = self.layouts
        # cuBLAS's A is our B, its B our A; C is D (beta 0), both our row-major C
        self.lt.matmul(self.handle, self.desc, self.alpha.ctypes.data, self.ptrs["b"], adesc,
                       self.ptrs["a"], bdesc, self.beta.ctypes.data, self.ptrs["d"], ddesc, self.ptrs["d"], ddesc,
                       self.results.ctypes.data, self.workspace, self.workspace_bytes, stream_ptr)

    def free(self) -> None:
        while self._made:
            destroy, obj = self._made.pop()
            try:
                destroy(obj)
            except Exception:
                pass
        self._ws_owner = None


# -- on the GPU ---------------------------------------------------------------------------------
_HANDLES: Dict[int, int] = {}


def bindings():
    from nvmath.bindings import cublasLt

    return cublasLt


def lt_version() -> Optional[int]:
    """cublasLtGetVersion() (major * 10000 + minor * 100 + patch), or None where it cannot load."""
    try:
        return int(bindings().get_version())
    except Exception:
        return None


def handle(device: int) -> int:
    """One cuBLASLt handle per device for the process (cublasLtCreate), as nvmath caches its own."""
    if device not in _HANDLES:
        _HANDLES[device] = int(bindings().create())
    return _HANDLES[device]


def make_call(point, sc: fp8.Scales, a, b, c):
    """(ScaledMatmul, the device arrays it reads) for operands ``a``, ``b`` (PyTorch FP8 tensors or
    CuPy bytes, as :func:`gemmlab.fp8.gpu_operands` made them) and ``c`` (CuPy, bfloat16)."""
    import cupy

    p = plan(point, sc)
    # a grid's layout comes on the device (its scales are); a per-tensor scale is a host float: asarray first
    scale_a, scale_b = (cupy.ascontiguousarray(cupy.asarray(x)) for x in (p.scale_a, p.scale_b))
    ptrs = {"a": fp8.device_ptr(a), "b": fp8.device_ptr(b), "d": fp8.device_ptr(c)}

    def alloc(nbytes):
        mem = cupy.cuda.alloc(nbytes)
        return int(mem.ptr), mem

    mm = ScaledMatmul(bindings(), handle(cupy.cuda.Device().id), p, ptrs,
                      {"a": scale_a.data.ptr, "b": scale_b.data.ptr}, alloc)
    return mm, (scale_a, scale_b)
