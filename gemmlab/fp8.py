"""Scaled FP8 operands (``measure.fp8_scaling``), written once for NumPy and CuPy (``xp``).

Modes:

- ``none``: the FP32 inputs are cast to FP8 as they are, scales 1 (what every fp8 row measured
  before this setting did). Inputs beyond FP8's range (``measure.input_scale=1000``) overflow:
  the cast gives NaN and the point fails with the check's overflow reason.
- ``tensor``: one FP32 scale per operand from its amax, ``scale = amax(|x|) / FP8_MAX``; the
  stored operand is ``round_fp8(x / scale)`` (saturated at +-FP8_MAX: x / scale can round a hair
  past it), and the GEMM computes ``D = scale_a * scale_b * (A_fp8 @ B_fp8)`` in the output type.
- ``rowcol``: one FP32 scale per row of A and per column of B (cuBLASLt's ``OUTER_VEC_32F``): the
  amax of that row / column over FP8_MAX; ``D[i, j] = sa[i] sb[j] (A_fp8 @ B_fp8)[i, j]``.
- ``block``: DeepSeek-V3's fine-grained scaling (arXiv:2412.19437, section 3.3.2; cuBLASLt's
  ``VEC128_32F`` for A and ``BLK128x128_32F`` for B on Hopper): the activations A get one scale per
  1 x 128 block along K (per row and k-block), the weights B one per 128 x 128 block (per k-block
  and n-block); the GEMM multiplies each k-block's partial sum by ``sa[i, kb] sb[kb, nb]``.

Every scale is ``amax(|block|) / FP8_MAX`` in FP32 (an all-zero block: 1) and the stored value
``round_fp8(x / scale)`` (x / scale in FP32, saturated at +-FP8_MAX, then rounded to nearest even).
Scales are kept as a *grid* in each operand's logical orientation (A is m x k, B is k x n; B's
grid is (k-block, n-block) whatever the layout stores B as): ``tensor`` (1, 1) and (1, 1),
``rowcol`` (m, 1) and (1, n), ``block`` (m, ceil(k/128)) and (ceil(k/128), ceil(n/128)). Tail
rule: where K or N is not a multiple of 128 the last block is partial (it holds the remaining
k % 128 columns or n % 128 rows) and its scale is the amax of what it holds. The memory layout a
library wants is the backend's business (:func:`cublaslt_scale_layout` for cuBLASLt's).

The check (gemmlab/measure/check.py) compares with the FP64 product of the *dequantized* inputs,
``x_fp8 (as FP64) * scale_x`` -- exact in FP64 (4 + 24 significant bits) -- so its bound covers only
what the GEMM does: FP8 products, the tensor cores' ~14-bit accumulation (``check.ACCUMULATE``)
and the output rounding (``check.UNIT_ROUNDOFF``); the constants live in check.py's tables. The
scale multiply itself (scale_a * scale_b * acc in FP32, at most 3 u_32 |R|) needs no term of its
own: the bound's ``gamma(K, 2^-14) (|A||B|)_ij`` is at least ``2^-14 |R_ij|``.

Which modes a device and backend run is :func:`skip_reason`'s to say (on the H200 cuBLASLt runs all
four: ``none`` and ``tensor`` through nvmath's Matmul, ``rowcol`` and ``block`` through its raw
bindings, gemmlab/backends/cublaslt_scaled.py).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional

import numpy as np

# Largest finite value per FP8 storage type (OCP FP8: e4m3fn has no Inf; e5m2 is IEEE-like).
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
MODES = ("none", "tensor", "rowcol", "block")
MXFP8_MIN_CC = 100  # nvmath-python 1.0.0 matmulmod.py: "MXFP8 requires ... compute capability 10.0"


def fp8_max(dtype: str) -> float:
    try:
        return FP8_MAX[dtype]
    except KeyError:
        raise ValueError(f"{dtype!r} is not an FP8 storage type ({', '.join(FP8_MAX)})") from None


def tensor_scale(xp, x, dtype: str = "float8_e4m3fn") -> float:
    """The per-tensor scale of ``x`` (FP32 values): amax(|x|) / FP8_MAX, computed in FP32 (the
    value handed to the library, exactly). All zeros: 1 (nothing to scale)."""
    amax = np.float32(amax_of(x))
    if amax == 0 or not math.isfinite(float(amax)):
        return 1.0
    return float(amax / np.float32(fp8_max(dtype)))


def to_fp8_range(xp, x, scale, dtype: str = "float8_e4m3fn", block=None):
    """``x / scale`` in FP32, saturated at +-FP8_MAX: what the cast to FP8 then rounds. ``scale``:
    a float, or (with ``block``) a grid of FP32 scales, one per block of ``x`` (:func:`expand`)."""
    m = fp8_max(dtype)
    if block is not None:
        y = (x / expand(xp, scale, block, x.shape)).astype(xp.float32, copy=False)
    elif scale == 1.0:
        return xp.clip(x, -m, m).astype(xp.float32, copy=False)  # a new array: ``x`` stays as drawn
    else:
        y = (x / xp.float32(scale)).astype(xp.float32, copy=False)
    return xp.clip(y, -m, m, out=y)  # in place: one operand-sized array (FP32 x / scale) and no copy of it


def amax_of(x) -> float:
    """max |x| as a float, without an operand-sized |x| (NumPy or CuPy; finite values)."""
    return float(max(float(x.max()), -float(x.min())))


def quantize_host(x, scale, dtype: str = "float8_e4m3fn", block=None):
    """NumPy: round_fp8(x / scale) as an ml_dtypes FP8 array (saturated; RNE, as the GPU's cast)."""
    import ml_dtypes

    y = to_fp8_range(np, np.asarray(x, dtype=np.float32), scale, dtype, block)
    return y.astype(getattr(ml_dtypes, dtype))


def dequantize(xp, q, scale, block=None):
    """The exact values the scaled GEMM multiplies: ``q`` (FP8, or its exact FP32 copy) in FP64
    times the scale (a float, or with ``block`` a grid of scales over ``q``'s blocks). Exact: an
    FP8 value has at most 4 significant bits, an FP32 scale 24."""
    if xp.__name__ == "cupy":
        from gemmlab.gpu import arrays

        q64 = arrays.to_float64(xp, q)
    else:
        q64 = xp.asarray(q).astype(xp.float64)
    return scale_in_place(xp, q64, scale, block)


def scale_in_place(xp, x64, scale, block=None):
    """``x64`` (FP64, the exact FP8 values) times the scale, in place, and returned: the same
    products as :func:`dequantize`'s, with no second operand-sized FP64 array."""
    if block is not None:
        x64 *= expand(xp, scale, block, x64.shape)  # FP32 scales, exact in FP64
    elif scale != 1.0:
        x64 *= float(scale)
    return x64


def exact_values(xp, bits, dtype: str, out=np.float64):
    """The values of the FP8 codes ``bits`` (uint8, any shape and strides, NumPy or CuPy) as
    ``out`` (FP32 or FP64, both exact for every FP8 value), by a 256-entry table that ml_dtypes
    decodes: one C-contiguous array of ``out`` and no temporaries. On the GPU this replaces a cast
    through PyTorch's FP32, whose copies PyTorch's allocator took beside CuPy's pool."""
    import ml_dtypes

    table = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, dtype)).astype(out)
    values = xp.empty(bits.shape, dtype=out)  # C order, whatever the codes' strides
    if xp.__name__ != "cupy":
        return np.take(table, bits, out=values)
    return _lookup_kernel(xp)(bits, xp.asarray(table), values)


@functools.lru_cache(maxsize=None)
def _lookup_kernel(cupy):
    return cupy.ElementwiseKernel("uint8 q, raw T table", "T y", "y = table[q]", "gemmlab_fp8_values")


# -- scales per block (rowcol, block) ------------------------------------------------------------------
BLOCK = 128  # DeepSeek-V3's block edge, and cuBLASLt's (VEC128_32F, BLK128x128_32F)
# Block shapes per mode in each operand's logical orientation, A (m x k) and B (k x n); None: the
# operand's whole extent along that axis.
BLOCKS = {"tensor": ((None, None), (None, None)),
          "rowcol": ((1, None), (None, 1)),
          "block": ((1, BLOCK), (BLOCK, BLOCK))}


def block_shape(block, shape):
    """``block`` with None replaced by the operand's extent: (rows, cols) of one block."""
    return tuple(int(n) if b is None else int(b) for b, n in zip(block, shape))


def grid_shape(block, shape):
    """Blocks per axis, partial last blocks included: (ceil(rows / br), ceil(cols / bc))."""
    br, bc = block_shape(block, shape)
    return -(-int(shape[0]) // br), -(-int(shape[1]) // bc)


def block_amax(xp, x, block):
    """amax(|x|) per block of the 2-D ``x`` (FP32 grid of :func:`grid_shape`); a partial last
    block's amax is over the elements it holds (padded with zeros, which leave the amax alone)."""
    (br, bc), (gr, gc) = block_shape(block, x.shape), grid_shape(block, x.shape)
    ax = xp.abs(xp.asarray(x, dtype=xp.float32))
    if (gr * br, gc * bc) != tuple(x.shape):
        ax = xp.pad(ax, ((0, gr * br - x.shape[0]), (0, gc * bc - x.shape[1])))
    return ax.reshape(gr, br, gc, bc).max(axis=(1, 3)).astype(xp.float32)


def block_scales(xp, x, block, dtype: str = "float8_e4m3fn"):
    """(scales, amax) per block: amax / FP8_MAX in FP32 (the values handed to the library); an
    all-zero or non-finite block gets 1, as :func:`tensor_scale` gives a whole operand."""
    amax = block_amax(xp, x, block)
    s = (amax / xp.float32(fp8_max(dtype))).astype(xp.float32)
    bad = (amax == 0) | ~xp.isfinite(amax)
    return xp.where(bad, xp.float32(1), s).astype(xp.float32), amax


def expand(xp, grid, block, shape):
    """The grid of scales repeated over its blocks, cut to ``shape`` (partial last blocks)."""
    br, bc = block_shape(block, shape)
    full = xp.repeat(xp.repeat(xp.asarray(grid), br, axis=0), bc, axis=1)
    return full[: shape[0], : shape[1]]


def _xp_of(x):
    """numpy for a NumPy array, else cupy (the grids live where their operands do)."""
    if isinstance(x, np.ndarray):
        return np
    import cupy

    return cupy


def _summary(xp, amax) -> Dict[str, float]:
    return {"max": float(amax.max()), "min": float(amax.min()), "median": float(xp.median(amax))}


@dataclass(frozen=True, eq=False)
class Scales:
    """The scales one input set was quantized with, as the row records them. ``a``/``b``: floats
    (``none``, ``tensor``), or grids of FP32 scales (``rowcol``, ``block``) in the operands'
    logical orientation over blocks ``block_a``/``block_b`` (resolved: no None)."""

    mode: str
    a: Any = 1.0
    b: Any = 1.0
    amax_a: Any = None  # tensor: a float; rowcol / block: the grid of block amaxes
    amax_b: Any = None
    dtype: str = "float8_e4m3fn"
    block_a: Optional[tuple] = None
    block_b: Optional[tuple] = None

    @property
    def per_block(self) -> bool:
        return self.block_a is not None

    def dequantize(self, xp, qa, qb):
        """The logical dequantized operands (FP64) of the logical FP8 values ``qa``, ``qb``."""
        return dequantize(xp, qa, self.a, self.block_a), dequantize(xp, qb, self.b, self.block_b)

    def scale_in_place(self, xp, a64, b64) -> None:
        """:meth:`dequantize` on the logical operands' exact FP64 values, in place."""
        scale_in_place(xp, a64, self.a, self.block_a)
        scale_in_place(xp, b64, self.b, self.block_b)

    def extra(self) -> Dict[str, Any]:
        if not self.per_block:
            return {"mode": self.mode, "scale_a": self.a, "scale_b": self.b, "amax_a": self.amax_a,
                    "amax_b": self.amax_b, "fp8_max": FP8_MAX.get(self.dtype)}
        xp = _xp_of(self.a)
        sa, sb = _summary(xp, self.amax_a), _summary(xp, self.amax_b)
        return {"mode": self.mode, "fp8_max": FP8_MAX.get(self.dtype),
                "block_a": list(self.block_a), "block_b": list(self.block_b),
                "scale_a_shape": list(self.a.shape), "scale_b_shape": list(self.b.shape),
                "amax_a": sa["max"], "amax_b": sb["max"],
                "block_amax_a": sa, "block_amax_b": sb,
                "scale_a_range": [float(self.a.min()), float(self.a.max())],
                "scale_b_range": [float(self.b.min()), float(self.b.max())]}


def scales_for(xp, mode: str, a32, b32, dtype: str = "float8_e4m3fn") -> Scales:
    """The scales of the *logical* A (m x k) and B (k x n), FP32, for ``mode`` (``none``: 1 and 1)."""
    if mode == "none":
        return Scales("none", dtype=dtype)
    if mode == "tensor":
        amax_a, amax_b = amax_of(a32), amax_of(b32)
        return Scales("tensor", tensor_scale(xp, a32, dtype), tensor_scale(xp, b32, dtype), amax_a, amax_b, dtype)
    if mode not in BLOCKS:
        raise ValueError(f"unknown fp8_scaling {mode!r} ({' | '.join(MODES)})")
    ba, bb = (block_shape(b, x.shape) for b, x in zip(BLOCKS[mode], (a32, b32)))
    (sa, amax_a), (sb, amax_b) = block_scales(xp, a32, ba, dtype), block_scales(xp, b32, bb, dtype)
    return Scales(mode, sa, sb, amax_a, amax_b, dtype, ba, bb)


def quantize_operands(xp, sc: Scales, a32, b32):
    """The logical A and B in FP8's range for ``sc`` (FP32, x / scale saturated; ``none``: as
    drawn), ready for the cast to FP8 (RNE): NumPy through ml_dtypes, CuPy through PyTorch."""
    if sc.mode == "none":  # unscaled inputs beyond FP8's range overflow (NaN) instead
        return a32, b32
    return (to_fp8_range(xp, a32, sc.a, sc.dtype, sc.block_a),
            to_fp8_range(xp, b32, sc.b, sc.dtype, sc.block_b))


def cublaslt_scale_layout(grid, mode: Optional[str] = None):
    """The grid of a ``block`` or ``rowcol`` operand as cuBLASLt reads it on Hopper, where (row-major
    GEMM on column-major cuBLAS) our B is cuBLAS's A and our A its B, both K-major ("TN"):

    - ``VEC128_32F`` (our A, grid (m, kb)): element (kb, m) at ``m + kb * roundup(m, 4)``: m-major,
      each k-block's column padded to 16 bytes;
    - ``BLK128x128_32F`` (our B, grid (kb, nb)): element (kb, nb) at ``kb + nb * roundup(kb, 4)``:
      k-block-major, padded likewise;
    - ``OUTER_VEC_32F``: a plain vector, m scales for A, n for B.

    ``mode`` (``"block"`` or ``"rowcol"``) says which; without it a grid with a dimension of 1 is taken
    for a vector, which misplaces a block grid of one row of A (m = 1) or one k-block of B (k <= 128):
    callers that know the mode pass it.

    Returns the contiguous FP32 array to hand over (2-D: rows padded; the padding is 0, never read).
    Source: the cuBLAS docs' scaling-factor layouts (cuBLAS 12.9+), as cuBLASMp's tests index them
    (``scale_layout_offset``: VEC128 ``sc + sr * roundup(cols, 4)``, BLK ``sr + sc * roundup(rows/128, 4)``
    with sr the k-block) and as PyTorch's ``is_blockwise_1x128_scaling`` (strides (1, m)) checks."""
    xp = _xp_of(grid)
    g = xp.asarray(grid, dtype=xp.float32)
    if mode not in (None, "block", "rowcol"):
        raise ValueError(f"cuBLASLt scale layouts exist for block and rowcol scaling, not {mode!r}")
    if mode == "rowcol" or (mode is None and 1 in g.shape):  # rowcol: (m, 1) or (1, n)
        return xp.ascontiguousarray(g.reshape(-1))
    t = g.T  # A: (kb, m); B: (nb, kb) -- the fast index last
    out = xp.zeros((t.shape[0], -(-t.shape[1] // 4) * 4), dtype=xp.float32)
    out[:, : t.shape[1]] = t
    return out


# -- what a device and library offer ----------------------------------------------------------------
# cuBLASLt added OUTER_VEC_32F, VEC128_32F and BLK128x128_32F in cuBLAS 12.9, for Hopper (cuBLAS docs,
# cublasLtMatmulMatrixScale_t; NVIDIA's cuBLAS 12.9 blog: "on Hopper GPUs"); cublasLtGetVersion()
# is major * 10000 + minor * 100 + patch.
SCALED_MIN_LT_VERSION = 120900
SCALED_CC = 90
HOPPER_ONLY_REASON = ("fp8_scaling={mode}: cuBLASLt's {what} scale modes run on compute capability 9.0 (Hopper) "
                      "only (cuBLAS 12.9+); this device: {cc}")
BLOCK_TODO_REASON = ("block-scaled FP8 on {cc}: Blackwell's own block scaling (MXFP8, VEC32_UE8M0 per 32 elements, "
                     "nvmath's block_scaling=True) is not implemented in gemmlab's cuBLASLt path yet, and the "
                     "DeepSeek-V3 128 / 128x128 modes are Hopper's only")
OLD_LT_REASON = ("fp8_scaling={mode} needs cuBLASLt 12.9 or newer ({what} scale modes); this one is {version}")
NOT_IMPLEMENTED_REASON = "fp8_scaling={mode} is not implemented by {who} (it runs {modes})"
WHAT = {"rowcol": "OUTER_VEC_32F (per row of A, per column of B)",
        "block": "VEC128_32F (A: 1 x 128 blocks) and BLK128x128_32F (B: 128 x 128 blocks)"}

E5M2_REASON = ("cuBLASLt has no e5m2 x e5m2 FP8 GEMM (its FP8 A x B types are e4m3 x e4m3, e4m3 x e5m2 and "
               "e5m2 x e4m3), and a precision gives A and B one in_dtype")
CUTLASS_REASON = ("this cutlass variant builds no FP8 GEMM: variant cutlass_fp8 does (CUTLASS's default SM90 e4m3 "
                  "kernel, per-tensor scales as the epilogue's alpha, layout nt)")
CUTLASS_MODES = ("none", "tensor")  # what the cutlass backend's FP8 GEMM implements
# Read in nvidia-cutlass 4.2.0.0 (site-packages): why rowcol and block are not built from Python.
CUTLASS_SCALED_REASON = {
    "block": ("block-scaled FP8 through cutlass_cppgen 4.2: CUTLASS has SM90 FP8 blockwise kernels "
              "(cutlass_library/generator.py:5825 GenerateSM90_TensorOp_fp8_WGMMA_gemm_with_blockwise, "
              "GemmKind.BlockwiseUniversal3x, KernelTmaWarpSpecializedCooperativeFP8Blockwise), but "
              "cutlass_cppgen's registry loads only GemmKind.Universal and Universal3x "
              "(cutlass_cppgen/library_defaults.py:560), its GemmOperationUniversal is always GemmKind.Universal "
              "(cutlass_cppgen/backend/gemm_operation.py:1747), and its 3.x mainloop arguments carry ptr_A, "
              "stride_A, ptr_B, stride_B and mma_promotion_interval only, no scale-factor pointers or layouts "
              "(cutlass_cppgen/backend/c_types.py:180-187)"),
    "rowcol": ("per-row/column FP8 scales in CUTLASS need an epilogue visitor tree (acc times a column broadcast "
               "of A's scales times a row broadcast of B's; cutlass_cppgen has Sm90 Row/ColumnBroadcast nodes), "
               "which the cutlass backend does not build: its epilogue is LinearCombination with alpha = "
               "scale_a scale_b"),
}

def skip_reason(mode: str, cc: int, implemented=MODES, who: str = "this backend",
                lt_version: Optional[int] = None) -> Optional[str]:
    """Why ``mode`` cannot run on a device of compute capability ``cc`` (e.g. 90 for the H200), or
    None. ``implemented``: the modes the asking backend implements (``who`` names it); ``rowcol``
    and ``block`` are cuBLASLt's Hopper scale modes, so they also need cc 9.0 and, where the
    backend knows it, a cuBLASLt (``lt_version``) of 12.9 or newer."""
    why = not_implemented(mode, implemented, who)
    if why or mode in ("none", "tensor"):
        return why
    if mode == "block" and cc >= MXFP8_MIN_CC:
        return BLOCK_TODO_REASON.format(cc=_cc(cc))
    if cc != SCALED_CC:
        return HOPPER_ONLY_REASON.format(mode=mode, what=WHAT[mode], cc=_cc(cc))
    if lt_version is not None and int(lt_version) < SCALED_MIN_LT_VERSION:
        return OLD_LT_REASON.format(mode=mode, what=WHAT[mode], version=lt_version)
    return None


def not_implemented(mode: str, implemented=MODES, who: str = "this backend") -> Optional[str]:
    """Why a backend that implements only ``implemented`` skips ``mode`` (on any device), or None."""
    if mode not in MODES:
        raise ValueError(f"unknown fp8_scaling {mode!r} ({' | '.join(MODES)})")
    if mode not in implemented:
        return NOT_IMPLEMENTED_REASON.format(mode=mode, who=who, modes=", ".join(implemented))
    return None


def _cc(cc: int) -> str:
    return f"sm_{int(cc)}"


# -- FP8 operands on the GPU, shared by every backend that multiplies them -------------------------------
def gpu_operands(layout: str, dtype: str, mode: str, a32, b32):
    """FP8 operands from the stored FP32 ones (CuPy), A row-major and B K-major, as cuBLASLt's FP8
    kernels and the hand-written FP8 stages read them, quantized as ``mode`` says (``none``: cast as
    drawn; else :func:`scales_for` over the logical operands). Returns (a, b, a_ref, b_ref,
    scales): PyTorch FP8 tensors (``b`` is N x K row-major in memory: an ``nn`` point's B copied
    once, an ``nt`` point's as stored, which the caller only takes for ``nn`` and ``nt``), the
    stored-layout references (the exact values: FP64 dequantized, or FP32 under ``none``) and the
    scales, also recorded for :func:`recorded`.

    Memory (E elements of A and B; gemmlab/measure/footprint.py counts it): the FP32 draw (4E, the
    caller's) and the FP32 x / scale (4E) make the FP8 copies (1E); the x / scale goes, then the
    references (8E; 4E under ``none``) are decoded from the FP8 bytes. Two allocators share the
    device here, and neither can use what the other keeps cached: CuPy's pool is emptied before
    the FP8 copies and before the references. Before (h100-2026-12-07/session50b, DeepSeek-V3's
    expert_down, 256 experts): PyTorch's FP32 copy of B ran out of memory on an H100 with 70 GiB
    in CuPy's hands, most of it cached temporaries."""
    import cupy
    import torch

    pool = cupy.get_default_memory_pool()
    la, lb = a32, (b32.T if layout == "nt" else b32)  # logical A (m x k) and B (k x n)
    sc = scales_for(cupy, mode, la, lb, dtype)
    qa, qb = quantize_operands(cupy, sc, la, lb)  # saturated; unscaled (none) inputs overflow instead
    f8 = getattr(torch, dtype)
    pool.free_all_blocks()
    ta = torch.from_dlpack(cupy.ascontiguousarray(qa)).to(f8)
    tb = torch.from_dlpack(cupy.ascontiguousarray(qb.T)).to(f8)  # (n, k) row-major: K-major
    del qa, qb
    pool.free_all_blocks()
    if layout != "nt":
        tb = tb.t()  # an nn point's B: (k, n) with strides (1, k)
    record(ta.data_ptr(), tb.data_ptr(), sc)
    ref = np.float32 if mode == "none" else np.float64
    a_ref = exact_values(cupy, cupy.from_dlpack(ta.view(torch.uint8)), dtype, ref)
    b_ref = exact_values(cupy, cupy.from_dlpack(tb.view(torch.uint8)), dtype, ref)  # C-contiguous, as stored
    if mode != "none":
        sc.scale_in_place(cupy, a_ref, b_ref.T if layout == "nt" else b_ref)
    return ta, tb, a_ref, b_ref, sc


# The scales each FP8 input set of the current point was quantized with, by the operands' device
# addresses: the backend that made the set records them, and whichever backend launches on the set
# (the point's own, or a baseline timed on the same inputs) reads them. Backends forget them when a
# point is over (``release``), so an address reused by a later point never finds stale scales.
_RECORDED: Dict[tuple, Scales] = {}


def record(a_ptr: int, b_ptr: int, sc: Scales) -> None:
    _RECORDED[(int(a_ptr), int(b_ptr))] = sc


def recorded(a_ptr: int, b_ptr: int) -> Optional[Scales]:
    return _RECORDED.get((int(a_ptr), int(b_ptr)))


def scales_of(a, b, scaling: str, in_dtype: str) -> Scales:
    """The scales the set (a, b) was quantized with, recorded by whichever backend made it (the
    point's own, or the point's when timed as its baseline); scale 1 only where ``scaling`` is
    ``none``: never a silent scale of 1 under a scaled reference."""
    sc = recorded(device_ptr(a), device_ptr(b))
    if sc is None:
        if scaling != "none":
            raise RuntimeError(f"no fp8 scales recorded for these operands (fp8_scaling={scaling})")
        sc = Scales("none", dtype=in_dtype)
    return sc


def forget_recorded() -> None:
    _RECORDED.clear()


def device_ptr(x) -> int:
    """The device address of a PyTorch tensor or a CuPy array."""
    return int(x.data_ptr()) if hasattr(x, "data_ptr") else int(x.data.ptr)
