"""Storage types by name: their size in bytes and the NumPy / ml_dtypes dtype behind them."""
from __future__ import annotations

import numpy as np

ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


def itemsize(name: str) -> int:
    try:
        return ITEMSIZE[name]
    except KeyError:
        raise ValueError(f"unknown storage type {name!r}; known: {sorted(ITEMSIZE)}") from None


def numpy_dtype(name: str) -> np.dtype:
    """The dtype for ``name``; bfloat16 and float8 need the ``ml_dtypes`` package."""
    itemsize(name)
    if name in ("float64", "float32", "float16"):
        return np.dtype(name)
    try:
        import ml_dtypes
    except ImportError as e:  # pragma: no cover - depends on the install
        raise RuntimeError(f"storage type {name} needs the ml_dtypes package (pip install ml_dtypes)") from e
    return np.dtype(getattr(ml_dtypes, name))
