"""Scaled FP8 operands (``measure.fp8_scaling``), written once for NumPy and CuPy (``xp``).

Modes:

- ``none``: the FP32 inputs are cast to FP8 as they are, scales 1 (what every fp8 row measured
  before this setting did). Inputs beyond FP8's range (``measure.input_scale=1000``) overflow:
  the cast gives NaN and the point fails with the check's overflow reason.
- ``tensor``: one FP32 scale per operand from its amax, ``scale = amax(|x|) / FP8_MAX``; the
  stored operand is ``round_fp8(x / scale)`` (saturated at +-FP8_MAX: x / scale can round a hair
  past it), and the GEMM computes ``D = scale_a * scale_b * (A_fp8 @ B_fp8)`` in the output type.
- ``rowcol``: one scale per row of A and per column of B (cuBLASLt's outer-vector mode).
- ``block``: one scale per block of elements (MXFP8 on Blackwell; 128-element and 128x128 blocks
  on Hopper through cuBLASLt 12.9).

The check (gemmlab/measure/check.py) compares with the FP64 product of the *dequantized* inputs,
``x_fp8 (as FP64) * scale_x`` -- exact in FP64 (4 + 24 significant bits) -- so its bound covers only
what the GEMM does: FP8 products, the tensor cores' ~14-bit accumulation (``check.ACCUMULATE``)
and the output rounding (``check.UNIT_ROUNDOFF``); the constants live in check.py's tables. The
scale multiply itself (scale_a * scale_b * acc in FP32, at most 3 u_32 |R|) needs no term of its
own: the bound's ``gamma(K, 2^-14) (|A||B|)_ij`` is at least ``2^-14 |R_ij|``.

Which modes a device runs is :func:`skip_reason`'s to say (the H200 runs ``none`` and ``tensor``).
"""
from __future__ import annotations

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
    amax = np.float32(float(xp.abs(x).max()))
    if amax == 0 or not math.isfinite(float(amax)):
        return 1.0
    return float(amax / np.float32(fp8_max(dtype)))


def to_fp8_range(xp, x, scale: float, dtype: str = "float8_e4m3fn"):
    """``x / scale`` in FP32, saturated at +-FP8_MAX: what the cast to FP8 then rounds."""
    m = fp8_max(dtype)
    y = x if scale == 1.0 else (x / xp.float32(scale)).astype(xp.float32)
    return xp.clip(y, -m, m).astype(xp.float32)


def quantize_host(x, scale: float, dtype: str = "float8_e4m3fn"):
    """NumPy: round_fp8(x / scale) as an ml_dtypes FP8 array (saturated; RNE, as the GPU's cast)."""
    import ml_dtypes

    return to_fp8_range(np, np.asarray(x, dtype=np.float32), scale, dtype).astype(getattr(ml_dtypes, dtype))


def dequantize(xp, q, scale: float):
    """The exact values the scaled GEMM multiplies: ``q`` (FP8, or its exact FP32 copy) in FP64
    times the scale. Exact: an FP8 value has at most 4 significant bits, an FP32 scale 24."""
    if xp.__name__ == "cupy":
        from gemmlab.gpu import arrays

        q64 = arrays.to_float64(xp, q)
    else:
        q64 = xp.asarray(q).astype(xp.float64)
    return q64 if scale == 1.0 else q64 * float(scale)


@dataclass(frozen=True)
class Scales:
    """The scales one input set was quantized with, as the row records them."""

    mode: str
    a: float = 1.0
    b: float = 1.0
    amax_a: Optional[float] = None
    amax_b: Optional[float] = None
    dtype: str = "float8_e4m3fn"

    def extra(self) -> Dict[str, Any]:
        return {"mode": self.mode, "scale_a": self.a, "scale_b": self.b, "amax_a": self.amax_a,
                "amax_b": self.amax_b, "fp8_max": FP8_MAX.get(self.dtype)}


def scales_for(xp, mode: str, a32, b32, dtype: str = "float8_e4m3fn") -> Scales:
    """The per-tensor scales of A and B (FP32) for ``mode`` (``none``: 1 and 1)."""
    if mode == "none":
        return Scales("none", dtype=dtype)
    if mode != "tensor":
        raise ValueError(f"fp8_scaling={mode} has no scales here (only none and tensor are implemented)")
    amax_a, amax_b = float(xp.abs(a32).max()), float(xp.abs(b32).max())
    return Scales("tensor", tensor_scale(xp, a32, dtype), tensor_scale(xp, b32, dtype), amax_a, amax_b, dtype)


# -- what a device and library offer ----------------------------------------------------------------
ROWCOL_REASON = ("per-row/column FP8 scales (cuBLASLt's OUTER_VEC_32F, on Hopper since cuBLAS 12.9) are not "
                 "reachable through nvmath-python 1.0.0's Matmul, which sets only SCALAR_32F (per-tensor) "
                 "or, with block_scaling=True, VEC32_UE8M0 / VEC16_UE4M3 scale modes")
BLOCK_HOPPER_REASON = ("block-scaled FP8: nvmath-python 1.0.0's block_scaling=True is MXFP8 (UE8M0 scales per "
                       "32 elements), which needs compute capability 10.0 or newer (Blackwell; this device: {cc}); "
                       "Hopper's own block modes (cuBLASLt VEC128_32F / BLK128x128_32F, cuBLAS 12.9) are not "
                       "reachable through nvmath's Matmul")
BLOCK_TODO_REASON = ("block-scaled FP8 (MXFP8) is not implemented in gemmlab's cuBLASLt path yet (the device, "
                     "{cc}, would offer it)")

E5M2_REASON = ("cuBLASLt has no e5m2 x e5m2 FP8 GEMM (its FP8 A x B types are e4m3 x e4m3, e4m3 x e5m2 and "
               "e5m2 x e4m3), and a precision gives A and B one in_dtype")
CUTLASS_REASON = ("the cutlass backend builds no FP8 GEMM, unscaled or scaled (measure.fp8_scaling): no CUTLASS "
                  "FP8 kernel is wired in yet (CUTLASS's SM90 FP8 GEMMs need a K-major B and take the per-tensor "
                  "scales as epilogue alpha)")


def skip_reason(mode: str, cc: int) -> Optional[str]:
    """Why the cuBLASLt path cannot run ``mode`` on a device of compute capability ``cc``
    (e.g. 90 for the H200), or None."""
    if mode in ("none", "tensor"):
        return None
    if mode == "rowcol":
        return ROWCOL_REASON
    if mode == "block":
        return (BLOCK_HOPPER_REASON if cc < MXFP8_MIN_CC else BLOCK_TODO_REASON).format(cc=_cc(cc))
    raise ValueError(f"unknown fp8_scaling {mode!r} ({' | '.join(MODES)})")


def _cc(cc: int) -> str:
    return f"sm_{int(cc)}"


# -- FP8 operands on the GPU, shared by every backend that multiplies them -------------------------------
def gpu_operands(layout: str, dtype: str, mode: str, a32, b32):
    """FP8 operands from the stored FP32 ones (CuPy), A row-major and B K-major, as cuBLASLt's FP8
    kernels and the hand-written FP8 stage read them, quantized as ``mode`` says (``none``: cast as
    drawn; ``tensor``: x / amax scale). Returns (a, b, a_ref, b_ref, scales): PyTorch FP8 tensors
    (``b`` is N x K row-major in memory: an ``nn`` point's B copied once, an ``nt`` point's as
    stored, which the caller only takes for ``nn`` and ``nt``), the stored-layout references (the
    exact values, dequantized) and the scales, also recorded for :func:`recorded`."""
    import cupy
    import torch

    sc = scales_for(cupy, mode, a32, b32, dtype)
    if mode != "none":  # saturated at +-FP8_MAX; unscaled inputs beyond it overflow (NaN) instead
        a32, b32 = to_fp8_range(cupy, a32, sc.a, dtype), to_fp8_range(cupy, b32, sc.b, dtype)
    f8 = getattr(torch, dtype)
    ta = torch.from_dlpack(a32).to(f8)
    if layout == "nt":  # B stored transposed, (n, k) row-major: already K-major, as it is
        tb = torch.from_dlpack(b32).to(f8)
    else:
        tb = torch.from_dlpack(b32).t().contiguous().to(f8).t()  # (k, n) with strides (1, k)
    record(ta.data_ptr(), tb.data_ptr(), sc)
    a_ref = cupy.from_dlpack(ta.to(torch.float32))
    b_ref = cupy.from_dlpack(tb.to(torch.float32).contiguous())
    if mode != "none":
        a_ref, b_ref = dequantize(cupy, a_ref, sc.a), dequantize(cupy, b_ref, sc.b)
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


def forget_recorded() -> None:
    _RECORDED.clear()


def device_ptr(x) -> int:
    """The device address of a PyTorch tensor or a CuPy array."""
    return int(x.data_ptr()) if hasattr(x, "data_ptr") else int(x.data.ptr)
