"""CuPy arrays in every storage type the harness uses, bfloat16 included.

CuPy stores ``ml_dtypes.bfloat16`` arrays and cuBLAS multiplies them, but elementwise casts to and
from bfloat16 may not be compiled for it; the bit-level conversions below need only uint views.
"""
from __future__ import annotations

from gemmlab import dtypes


def _bf16_from_f32(cp, x):
    """Round-to-nearest-even float32 -> bfloat16 bits (NaN kept quiet)."""
    bits = x.view(cp.uint32)
    rounding = ((bits >> 16) & 1) + cp.uint32(0x7FFF)
    out = ((bits + rounding) >> 16).astype(cp.uint16)
    out = cp.where(cp.isnan(x), cp.uint16(0x7FC0), out)
    return out.view(dtypes.numpy_dtype("bfloat16"))


def _f32_from_bf16(cp, x):
    return (x.view(cp.uint16).astype(cp.uint32) << 16).view(cp.float32)


def cast(cp, x32, name: str):
    """float32 array -> storage type ``name``."""
    if name == "bfloat16":
        try:
            return x32.astype(dtypes.numpy_dtype(name))
        except Exception:
            return _bf16_from_f32(cp, x32)
    return x32.astype(dtypes.numpy_dtype(name))


def to_float64(cp, x):
    if _has_bf16() and x.dtype == dtypes.numpy_dtype("bfloat16"):
        try:
            return x.astype(cp.float64)
        except Exception:
            return _f32_from_bf16(cp, x).astype(cp.float64)
    return x.astype(cp.float64)


def empty(cp, shape, name: str):
    return cp.empty(shape, dtype=dtypes.numpy_dtype(name))


def poison(cp, x) -> None:
    """NaN in every element, so an element the kernel never writes fails the check."""
    if _has_bf16() and x.dtype == dtypes.numpy_dtype("bfloat16"):
        x.view(cp.uint16).fill(0x7FC0)
    else:
        x.fill(float("nan"))


def _has_bf16() -> bool:
    try:
        import ml_dtypes  # noqa: F401

        return True
    except ImportError:
        return False
