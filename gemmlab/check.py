"""Inputs and the FP64 check, written once for NumPy and CuPy (``xp`` is either module)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional


@dataclass
class CheckResult:
    rel_error: float
    max_abs_error: float
    nonfinite: int
    tolerance: float

    @property
    def passed(self) -> bool:
        # NaN compares False, so an unwritten (poisoned) element never passes.
        return self.nonfinite == 0 and self.rel_error <= self.tolerance

    def failure(self) -> Optional[str]:
        if self.nonfinite:
            return (f"{self.nonfinite} output elements are NaN/Inf after the run "
                    "(unwritten: the output was poisoned with NaN before it; or overflow)")
        if not self.rel_error <= self.tolerance:
            return f"rel_error {self.rel_error:.3e} exceeds tolerance {self.tolerance:.1e}"
        return None


def random_matrix(xp, rng, shape, distribution: str):
    """Random FP32 values (normal, or uniform on [-1, 1]); never zeros, which time faster."""
    if distribution == "normal":
        return rng.standard_normal(shape, dtype=xp.float32)
    if distribution == "uniform":
        return (rng.random(shape, dtype=xp.float32) * 2 - 1).astype(xp.float32)
    raise ValueError(f"unknown distribution {distribution!r} (normal | uniform)")


def poison(c) -> None:
    """Fill the output with NaN so an element the kernel never writes fails the check."""
    c.fill(float("nan"))


def fp64_reference(xp, a64, b64):
    """C_ref = A @ B in FP64, from the exact values the kernel sees (upcast by the caller)."""
    return xp.matmul(a64, b64)


def compare(xp, out64, ref, tolerance: float) -> CheckResult:
    """Compare the output (already upcast to FP64) with the FP64 reference, element by element."""
    o = out64
    finite = xp.isfinite(o)
    nonfinite = int(o.size - int(finite.sum()))
    diff = xp.where(finite, o - ref, 0.0)
    ref_norm = float(xp.linalg.norm(ref))
    rel = float(xp.linalg.norm(diff)) / ref_norm if ref_norm > 0 else float(xp.linalg.norm(diff))
    max_abs = float(xp.abs(diff).max()) if diff.size else 0.0
    if nonfinite:
        rel, max_abs = float("nan"), float("nan")
    return CheckResult(rel, max_abs, nonfinite, tolerance)


def worst(results: List[CheckResult]) -> CheckResult:
    """The repeat with the largest error (NaN counts as the largest)."""
    return max(results, key=lambda r: (r.nonfinite, float("inf") if r.rel_error != r.rel_error else r.rel_error))


def spread(results: List[CheckResult]) -> dict:
    """rel_error over repeated runs on the same inputs: a deterministic kernel gives one value."""
    errs = [r.rel_error for r in results]
    return {"check_repeats": len(errs), "rel_error_min": min(errs), "rel_error_max": max(errs),
            "rel_error_distinct": len(set(errs))}
