"""Inputs and the correctness check, written once for NumPy and CuPy (``xp`` is either module).

The verdict is element-wise. For every element of C = A @ B (K-long dot products) the error
|C_ij - R_ij| against the reference R must stay within a forward error bound (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., section 3.1; Higham & Mary, SIAM J. Sci.
Comput. 41 (2019), the probabilistic bound)::

    bound_ij = (gamma(K, u_acc) + 2 u_conv + gamma(K, u_ref)) * S_ij + u_out * |R_ij| + eta_out
    S = |A| @ |B|   (an FP64 product of the absolute values of the same inputs)
    gamma(K, u) = u * min(K / (1 - K u), LAMBDA * sqrt(K))

- ``u_acc``: unit roundoff of the accumulation (FP32 for the half-precision tensor-core paths).
  ``K u / (1 - K u)`` is the worst case of any summation order; ``LAMBDA sqrt(K) u`` is the
  probabilistic bound, which holds for rounding errors that are independent and of mean zero and
  is the tighter one once K > LAMBDA^2.
- ``u_conv``: inputs the unit rounds before multiplying (TF32 math on FP32 storage rounds each
  operand to 11 significant bits): at most ``2 u_conv |a| |b|`` per product, whatever the order.
- ``u_ref``: the reference's own FP64 arithmetic (it is not exact either).
- ``u_out``: rounding the result to the output type; ``eta_out``, half its smallest subnormal:
  results in the subnormal range round with an absolute error, fl(x) = x (1 + d) + e (Higham 2.2).

Every constant lives in this module's tables (``UNIT_ROUNDOFF``, ``LAMBDA``, ``ACCUMULATE``).
A point fails if any element exceeds its bound, is NaN or Inf, or if the relative Frobenius
error exceeds the precision's tolerance (kept as a second, global verdict). The row records the
largest error / bound (``check_elem_max``), how many elements failed (``check_elem_fail``) and,
in the reason, the first offending element with its value and reference.

With ``measure.distribution=exact`` the inputs are small integers: every product and partial
sum is exact in the accumulate type, so R is exact and the check demands C == round_out(R)
element by element (``check_elem_max`` is then the largest |C - round_out(R)| in units of
u_out * max(|R|, 1)).

Scaled FP8 (``measure.fp8_scaling=tensor``, gemmlab/fp8.py): A and B are the *dequantized*
inputs, x_fp8 in FP64 times its scale (exact), so the quantization error is the input's, not the
GEMM's; the fp8 model's constants are ``ACCUMULATE['fp8']`` and the output's ``UNIT_ROUNDOFF``.

The reference is an FP64 product of the exact values the kernel sees. Where that would be the
same library call as the point itself (cuBLAS FP64 on the GPU, the host BLAS's FP64 on the
CPU), it comes from another implementation (:func:`independent_reference`), named in the row's
``check_reference``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from gemmlab.measure.independent import batched, independent_reference, split_product

# Unit roundoff u = 2^-p, p = significand bits including the implicit one, round to nearest.
UNIT_ROUNDOFF = {
    "float64": 2.0 ** -53,
    "float32": 2.0 ** -24,
    "tf32": 2.0 ** -11,  # 10 stored mantissa bits
    "float16": 2.0 ** -11,
    "bfloat16": 2.0 ** -8,
    "float8_e4m3fn": 2.0 ** -4,
    "float8_e5m2": 2.0 ** -3,
}
# The probabilistic bound's lambda. For sequential round-to-nearest summation of random-sign
# products the error's standard deviation is about u K sigma^2 / sqrt(6) while S_ij is about
# 0.64 K sigma^2 (normal inputs): the bound sits ~1.6 LAMBDA sqrt(K) standard deviations out, and
# where K <= LAMBDA^2 the worst-case gamma takes over. 3 keeps a correct kernel's largest ratio
# under ~0.5 over 10^8 elements at every K.
LAMBDA = 3.0
# The accumulation unit per compute type, where it is not the precision's `accumulate` type:
# Hopper's FP8 tensor cores keep about 14 bits while accumulating (DeepSeek-V3 technical report,
# arXiv:2412.19437, section 3.3.2: "limited to retaining around 14 bits").
ACCUMULATE = {"fp8": 2.0 ** -14}
# Compute types whose units round FP32 operands before multiplying: TF32 tensor cores keep the top
# 19 bits of an FP32 operand, which truncates (2^-10) unless the kernel rounded it first (2^-11).
CONVERT = {"tf32": 2.0 ** -10}
# Half the smallest subnormal per storage type: the absolute part of rounding a tiny result.
ETA = {"float64": 2.0 ** -1075, "float32": 2.0 ** -150, "float16": 2.0 ** -25, "bfloat16": 2.0 ** -134,
       "float8_e4m3fn": 2.0 ** -10, "float8_e5m2": 2.0 ** -17}
# Largest finite value per storage type (overflow to Inf is named as such).
FINITE_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float8_e4m3fn": 448.0,
              "float8_e5m2": 57344.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
# Elements compared per chunk (bounds the temporaries on large outputs).
CHUNK_ELEMENTS = 1 << 25
# A batch's FP64 operands (and their absolute values) are built this many bytes of GEMMs at a time:
# DeepSeek-V3's 128 experts at 4096 x 7168 would take 60 GB at once (an 80 GB card ran out of memory)
REFERENCE_GROUP_BYTES = 1 << 30
EXACT_RANGE = 4  # distribution=exact draws integers in [-EXACT_RANGE, EXACT_RANGE]


class InputError(ValueError):
    """The inputs cannot be checked (e.g. they overflow the storage type at this input_scale)."""


# -- inputs --------------------------------------------------------------------------------------
SPARSE_ZERO_FRACTION = 0.9  # measure.distribution=sparse: this share of the inputs is zero


def random_matrix(xp, rng, shape, distribution: str, scale: float = 1.0):
    """Random FP32 values, times ``scale``: standard normal, uniform on [-1, 1], (``exact``)
    integers in [-4, 4], or (``sparse``) normal with SPARSE_ZERO_FRACTION of them zero. Never all
    zeros, which time faster and hide unwritten outputs (the check's bound is |A||B|-relative, so
    an element of C whose products are all zero must come out exactly zero)."""
    if distribution == "normal":
        x = rng.standard_normal(shape, dtype=xp.float32)
    elif distribution == "uniform":
        x = (rng.random(shape, dtype=xp.float32) * 2 - 1).astype(xp.float32)
    elif distribution == "exact":
        u = rng.random(shape, dtype=xp.float32)
        x = (xp.floor(u * (2 * EXACT_RANGE + 1)) - EXACT_RANGE).astype(xp.float32)
        x = xp.clip(x, -EXACT_RANGE, EXACT_RANGE)  # u == 1 - 2^-24 rounds up to 9 in float32
    elif distribution == "sparse":
        x = rng.standard_normal(shape, dtype=xp.float32)
        keep = rng.random(shape, dtype=xp.float32) >= SPARSE_ZERO_FRACTION
        x = (x * keep).astype(xp.float32)
    else:
        raise ValueError(f"unknown distribution {distribution!r} (normal | uniform | exact | sparse)")
    if scale != 1.0:
        x = (x * xp.float32(scale)).astype(xp.float32)
    return x


def is_power_of_two(x: float) -> bool:
    return x > 0 and math.frexp(x)[0] == 0.5


def poison(c) -> None:
    """Fill the output with NaN so an element the kernel never writes fails the check."""
    c.fill(float("nan"))


# -- the error model -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorModel:
    u_acc: float
    u_conv: float
    u_out: float
    u_ref: float = UNIT_ROUNDOFF["float64"]
    lam: float = LAMBDA
    eta_out: float = 0.0

    @staticmethod
    def gamma(k: int, u: float, lam: float = LAMBDA) -> float:
        if k <= 0 or u == 0:
            return 0.0
        worst = k * u / (1 - k * u) if k * u < 1 else math.inf
        return u * min(worst / u, lam * math.sqrt(k))

    def coefficient(self, k: int) -> float:
        """The factor of S_ij in the bound."""
        return (self.gamma(k, self.u_acc, self.lam) + 2 * self.u_conv + self.gamma(k, self.u_ref, self.lam))

    def describe(self, k: int) -> str:
        return (f"bound = {self.coefficient(k):.3g} * (|A||B|)_ij + {self.u_out:.3g} * |C_ref_ij| + {self.eta_out:.3g} "
                f"(K={k}, u_acc={self.u_acc:.3g}, u_conv={self.u_conv:.3g}, u_out={self.u_out:.3g})")


def error_model(compute: str, out_dtype: str, accumulate: str = "float32") -> ErrorModel:
    """The roundoffs of a precision: its compute type, output storage and accumulate type."""
    u_acc = ACCUMULATE.get(compute, UNIT_ROUNDOFF.get(accumulate, UNIT_ROUNDOFF["float32"]))
    if compute == "fp64":
        u_acc = UNIT_ROUNDOFF["float64"]
    return ErrorModel(u_acc=u_acc, u_conv=CONVERT.get(compute, 0.0), u_out=UNIT_ROUNDOFF[out_dtype],
                      eta_out=ETA.get(out_dtype, 0.0))


def model_of(point) -> ErrorModel:
    acc = "float32"
    pc = getattr(point, "precision_cfg", None)
    if pc is not None and pc.get("accumulate"):
        acc = str(pc.get("accumulate"))
    return error_model(point.compute, point.out_dtype, acc)


# -- the verdict ---------------------------------------------------------------------------------
@dataclass
class CheckResult:
    rel_error: float
    max_abs_error: float
    nonfinite: int
    tolerance: float
    elem_max: float = 0.0  # largest |C - R| / bound (exact: in units of u_out * max(|R|, 1))
    elem_fail: int = 0  # elements over their bound, NaN/Inf included
    first: Optional[Tuple[int, int, float, float, float]] = None  # (i, j, C, R, bound) of the first failure
    overflow: int = 0  # Inf elements where |R| exceeds the output type's range
    exact: bool = False
    reference: str = ""
    note: str = ""
    rows_per_batch: int = 0  # a batched GEMM's rows per GEMM: the failure names the batch index


    @property
    def passed(self) -> bool:
        # NaN compares False, so an unwritten (poisoned) element never passes.
        return self.nonfinite == 0 and self.elem_fail == 0 and self.rel_error <= self.tolerance

    def fields(self) -> Dict[str, Any]:
        """The row's check columns."""
        return {"rel_error": self.rel_error, "max_abs_error": self.max_abs_error,
                "check_elem_max": self.elem_max, "check_elem_fail": self.elem_fail,
                "check_reference": self.reference}

    def _where(self) -> str:
        if self.first is None:
            return ""
        i, j, got, want, bound = self.first
        where = f"row {i}, col {j}"
        if self.rows_per_batch:
            where = f"batch {i // self.rows_per_batch}, row {i % self.rows_per_batch}, col {j}"
        return f"; first at ({where}): C = {got:.6g}, C_ref = {want:.6g}" + (
            "" if self.exact else f", bound {bound:.3g}")

    def failure(self) -> Optional[str]:
        if self.overflow:
            return (f"overflow: {self.overflow} output elements are Inf where |C_ref| exceeds the output "
                    f"type's range{self._where()}")
        if self.nonfinite:
            return (f"{self.nonfinite} output elements are NaN/Inf after the run (unwritten: the output "
                    f"was poisoned with NaN before it; or overflow){self._where()}")
        if self.elem_fail:
            what = ("differ from round_out(C_ref) with exact inputs" if self.exact
                    else f"exceed their error bound (largest error/bound {self.elem_max:.3g})")
            return f"{self.elem_fail} elements {what}{self._where()}"
        if not self.rel_error <= self.tolerance:
            return f"rel_error {self.rel_error:.3e} exceeds tolerance {self.tolerance:.1e}"
        return None


class Reference:
    """The reference R (FP64) of one output and each element's bound, kept for repeated checks
    (before and after timing)."""

    def __init__(self, xp, r, s, k: int, model: ErrorModel, name: str, tolerance: float,
                 out_dtype: str, exact: bool = False):
        self.xp, self.k, self.model, self.name = xp, int(k), model, name
        self.tolerance, self.out_dtype, self.exact = float(tolerance), out_dtype, exact
        if not bool(xp.isfinite(r).all()):
            raise InputError("the FP64 reference has NaN/Inf: the inputs overflow at this input_scale")
        self.ref_norm = float(xp.linalg.norm(r))
        if exact:
            self.target = round_to(xp, r, out_dtype)  # what a kernel with exact sums writes
            self.bound = None
        else:
            self.target = r
            s *= model.coefficient(self.k)  # in place: the bound takes S's memory
            s += model.u_out * xp.abs(r)
            s += model.eta_out
            self.bound = s
        self.r = r
        self.rows_per_batch = 0  # > 0: the rows are a batch of GEMMs of this many rows each

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def gemm(cls, xp, a_ref, b_ref, model: ErrorModel, tolerance: float, out_dtype: str,
             exact: bool = False, reference=None, name: str = ""):
        """R = A @ B in FP64 (``reference(a64, b64)`` computes it when given: another
        implementation) and S = |A| @ |B|, from the exact values the kernel sees. A batch (3-D
        operands) is built a group of GEMMs at a time (:func:`reference_group`): only R and S
        are kept for the whole batch."""
        k = a_ref.shape[-1]
        if a_ref.ndim == 3 or b_ref.ndim == 3:
            batch = max(x.shape[0] for x in (a_ref, b_ref) if x.ndim == 3)
            m, n = a_ref.shape[-2], b_ref.shape[-1]
            g = reference_group(batch, m, n, k)
            r = xp.empty((batch, m, n), dtype=xp.float64)
            s = None if exact else xp.empty((batch, m, n), dtype=xp.float64)
            for i in range(0, batch, g):  # (an operand of one matrix, or a batch of one, is every GEMM's)
                part = [x[i:i + g] if x.ndim == 3 and x.shape[0] > 1 else x for x in (a_ref, b_ref)]
                r[i:i + g], s_part = _products(xp, *part, reference, exact)
                if s is not None:
                    s[i:i + g] = s_part
                del part, s_part
        else:
            r, s = _products(xp, a_ref, b_ref, reference, exact)
        rows_per_batch = 0
        if r.ndim == 3:  # a strided batch: checked as one (batch * m) x n matrix, element by element
            rows_per_batch = r.shape[1]
            r = r.reshape(-1, r.shape[2])
            s = None if s is None else s.reshape(-1, s.shape[2])
        ref = cls(xp, r, s, k, model, name or default_name(xp), tolerance, out_dtype, exact)
        ref.rows_per_batch = rows_per_batch
        return ref

    def release(self) -> None:
        self.r = self.target = self.bound = None

    # -- checking ------------------------------------------------------------------------------
    def verify(self, out) -> CheckResult:
        """Compare ``out`` (any storage type) with the reference, element by element."""
        xp = self.xp
        o64 = _as_f64(xp, out).reshape(self.target.shape)
        rows = self.target.shape[0] if self.target.ndim > 1 else 1
        per = max(1, CHUNK_ELEMENTS // max(1, self.target.size // max(rows, 1)))
        sq, nonfinite, elem_fail, overflow = 0.0, 0, 0, 0
        max_abs, elem_max = 0.0, 0.0
        first = None
        t2, o2 = self.target.reshape(rows, -1), o64.reshape(rows, -1)
        b2 = None if self.bound is None else self.bound.reshape(rows, -1)
        r2 = self.r.reshape(rows, -1)
        fmax = FINITE_MAX.get(self.out_dtype, math.inf)
        for lo in range(0, rows, per):
            t, o, r = t2[lo:lo + per], o2[lo:lo + per], r2[lo:lo + per]
            finite = xp.isfinite(o)
            bad_nf = ~finite
            n_nf = int(bad_nf.sum())
            diff = xp.where(finite, o - r, 0.0)
            sq += float((diff * diff).sum())
            max_abs = max(max_abs, float(xp.abs(diff).max()) if diff.size else 0.0)
            if self.exact:
                err = xp.where(finite, xp.abs(o - t), 0.0)
                bad = (err > 0) | bad_nf
                scale = self.model.u_out * xp.maximum(xp.abs(t), 1.0)
                ratio = err / scale
            else:
                b = b2[lo:lo + per]
                err = xp.where(finite, xp.abs(o - t), 0.0)
                bad = (err > b) | bad_nf
                ratio = xp.where(b > 0, err / xp.where(b > 0, b, 1.0), xp.where(err > 0, math.inf, 0.0))
            nbad = int(bad.sum())
            if n_nf:
                overflow += int((xp.isinf(o) & (xp.abs(r) > fmax)).sum())
            if ratio.size:
                elem_max = max(elem_max, float(ratio.max()))
            if nbad and first is None:
                flat = int(xp.argmax(bad.reshape(-1)))
                cols = t.shape[1]
                i, j = lo + flat // cols, flat % cols
                bnd = 0.0 if b2 is None else float(b2[i, j])
                first = (int(i), int(j), float(o2[i, j]), float(r2[i, j]), bnd)
            nonfinite += n_nf
            elem_fail += nbad
        rel = math.sqrt(sq) / self.ref_norm if self.ref_norm > 0 else math.sqrt(sq)
        if nonfinite:
            rel, max_abs, elem_max = float("nan"), float("nan"), math.inf
        if first is not None and self.target.ndim == 1:  # vectors: (index, 0)
            first = (first[1], 0, *first[2:])
        return CheckResult(rel, max_abs, nonfinite, self.tolerance, elem_max, elem_fail, first, overflow,
                           self.exact, self.name, rows_per_batch=self.rows_per_batch)


def compare(xp, out, r, tolerance: float, s=None, k: int = 0, model: Optional[ErrorModel] = None,
            out_dtype: Optional[str] = None, name: str = "", exact: bool = False) -> CheckResult:
    """``out`` against a reference ``r`` (FP64) already computed, with the same element-wise
    verdict as a GEMM: ``s`` is the sum of |terms| behind each element (None: the output must
    equal R up to the output rounding), ``k`` the number of terms. For the probes (copy, vector
    add, GEMV) and the CUTLASS search's candidates."""
    if out_dtype is None:
        out_dtype = _dtype_name(out)
    if model is None:
        model = ErrorModel(u_acc=0.0, u_conv=0.0, u_out=UNIT_ROUNDOFF.get(out_dtype, 0.0), u_ref=0.0,
                           eta_out=ETA.get(out_dtype, 0.0))
    if s is None:
        s = xp.zeros_like(r)
    else:
        s = s.copy()
    return Reference(xp, r, s, k, model, name or default_name(xp), tolerance, out_dtype, exact).verify(out)


def relative_error(xp, out, r) -> float:
    """||out - r||_F / ||r||_F: a diagnostic number (never a verdict on its own)."""
    d = _as_f64(xp, out) - r
    n = float(xp.linalg.norm(r))
    return float(xp.linalg.norm(d)) / n if n > 0 else float(xp.linalg.norm(d))


def _dtype_name(x) -> str:
    name = str(x.dtype)
    return {"float8_e4m3fn": "float8_e4m3fn"}.get(name, name)


def reference_group(batch: int, m: int, n: int, k: int) -> int:
    """GEMMs of a batch whose FP64 operands and absolute values (16 bytes an element of A and B)
    are built at once: REFERENCE_GROUP_BYTES' worth, one at least (gemmlab/measure/footprint.py
    counts the same)."""
    return max(1, min(batch, REFERENCE_GROUP_BYTES // max(1, 16 * (m * k + k * n))))


def _products(xp, a_ref, b_ref, reference, exact: bool):
    """R and S (None where ``exact``) of one GEMM or a group of a batch, from FP64 copies of the
    operands that are dropped before returning."""
    a64, b64 = _as_f64(xp, a_ref), _as_f64(xp, b_ref)
    if not (bool(xp.isfinite(a64).all()) and bool(xp.isfinite(b64).all())):
        raise InputError("inputs overflow their storage type at this input_scale (Inf after the cast)")
    r = reference(a64, b64) if reference is not None else xp.matmul(a64, b64)
    s = None if exact else xp.matmul(xp.abs(a64), xp.abs(b64))
    return r, s


def fp64_reference(xp, a64, b64):
    """C_ref = A @ B in FP64 (probes that need the product itself)."""
    return xp.matmul(a64, b64)


def default_name(xp) -> str:
    return "cuBLAS FP64 (CuPy matmul)" if xp.__name__ == "cupy" else "NumPy FP64 (host BLAS)"


def _as_f64(xp, x):
    """FP64 copy of any storage type (bfloat16 through its bits where the array library can't cast)."""
    if xp.__name__ == "cupy":
        from gemmlab.gpu import arrays

        return arrays.to_float64(xp, x)
    return xp.asarray(x).astype(xp.float64)


def round_to(xp, r64, out_dtype: str):
    """FP64 values rounded (to nearest) to ``out_dtype`` and back: what an exact accumulator
    writes. Integers below 2^24 pass through float32 unchanged, so the one rounding is the last."""
    if out_dtype == "float64":
        return r64
    if xp.__name__ == "cupy":
        from gemmlab.gpu import arrays

        return arrays.to_float64(xp, arrays.cast(xp, r64.astype(xp.float32), out_dtype))
    from gemmlab import dtypes

    return r64.astype(xp.float32).astype(dtypes.numpy_dtype(out_dtype)).astype(xp.float64)


def gemm_reference(xp, point, kind: str, a_ref, b_ref, exact: bool) -> Reference:
    """The one way every executor and backend builds the reference of a GEMM point."""
    model = model_of(point)
    alt = independent_reference(kind, point.backend, point.compute)
    if alt is None:
        return Reference.gemm(xp, a_ref, b_ref, model, point.tolerance, point.out_dtype, exact)
    name, fn = alt
    if fn is None:  # CPU FP64
        fn = lambda a, b: batched(xp, split_product, a, b)  # noqa: E731
    return Reference.gemm(xp, a_ref, b_ref, model, point.tolerance, point.out_dtype, exact,
                          reference=fn, name=name)


def recheck(reference: Reference, out, row: Dict[str, Any]) -> Optional[str]:
    """The output the timed calls left, checked again against the same reference (a kernel right
    on its first call and wrong when repeated, or under a cold L2, fails here). Records the result
    in ``row['extra']['check_after_timing']`` and releases the reference; returns the failure."""
    res = reference.verify(out)
    reference.release()
    row["extra"] = {**(row.get("extra") or {}), "check_after_timing": {
        "check_elem_max": res.elem_max, "check_elem_fail": res.elem_fail, "rel_error": res.rel_error}}
    return None if res.passed else f"after timing: {res.failure()}"


# -- repeats ---------------------------------------------------------------------------------------
def checked_calls(call, poison_out, verify, repeats: int) -> Tuple[CheckResult, List[CheckResult]]:
    """The checked call, ``repeats`` times on the same inputs, each on a freshly poisoned output:
    (the worst result, all of them). One rule for every executor: the worst repeat decides (a race
    shows as an error that moves, and one bad repeat is a bad kernel)."""
    results = []
    for _ in range(max(1, int(repeats))):
        poison_out()
        call()
        results.append(verify())
    return worst(results), results


def worst(results: List[CheckResult]) -> CheckResult:
    """The repeat with the largest error (NaN and failed elements count as the largest)."""
    def key(r):
        return (r.nonfinite, r.elem_fail, r.elem_max if r.elem_max == r.elem_max else math.inf,
                math.inf if r.rel_error != r.rel_error else r.rel_error)
    return max(results, key=key)


def spread(results: List[CheckResult]) -> dict:
    """rel_error over repeated runs on the same inputs: a deterministic kernel gives one value."""
    errs = [r.rel_error for r in results]
    return {"check_repeats": len(errs), "rel_error_min": min(errs), "rel_error_max": max(errs),
            "rel_error_distinct": len(set(errs))}
