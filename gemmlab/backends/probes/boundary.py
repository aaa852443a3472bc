"""The boundary GPU probe ``sgemm32_unguarded``: the chapter's sgemm32 without guards (the
variant's ``probe.source``, kernels/cuda/92_sgemm32_as_written.cu) at any size, inside padded
buffers whose padding is checked afterwards."""
from __future__ import annotations

import numpy as np

from gemmlab.backends.probes.common import Probe, need_memory
from gemmlab.measure import check

SGEMM32_TILE = 32


class Sgemm32Unguarded(Probe):
    """The chapter's sgemm32 (kernels/cuda/92_sgemm32_as_written.cu) at any size, with the grid
    the chapter computes (``params.grid: floor``, N / 32 x M / 32) or rounded up (``ceil``, the
    obvious fix without guards). A, B and C sit inside buffers padded by 32 * max(M, N, K) + 32
    elements, enough for every out-of-range index the kernel can form: A and B's padding holds
    other random values (what memory past an array holds), C's buffer is NaN before the run.
    Afterwards: elements of C never written, elements written past C, and the error."""

    op = "boundary"
    compiles = True

    def skip(self, p, params):
        if params.get("grid", "floor") not in ("floor", "ceil"):
            return f"sgemm32_unguarded params.grid must be floor or ceil, not {params.get('grid')!r}"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        t = SGEMM32_TILE
        pad = t * max(p.m, p.n, p.k) + t
        need_memory(4 * (p.m * p.k + p.k * p.n + p.m * p.n + 3 * pad) + 8 * (p.m * p.k + p.k * p.n + 3 * p.m * p.n))
        rng = cp.random.default_rng(seed)
        m = ex.measure
        a_buf = check.random_matrix(cp, rng, (p.m * p.k + pad,), m.distribution.value, m.input_scale)
        b_buf = check.random_matrix(cp, rng, (p.k * p.n + pad,), m.distribution.value, m.input_scale)
        c_buf = cp.full((p.m * p.n + pad,), float("nan"), dtype=cp.float32)
        a = a_buf[: p.m * p.k].reshape(p.m, p.k)
        b = b_buf[: p.k * p.n].reshape(p.k, p.n)
        grid_rule = params.get("grid", "floor")
        gx, gy = (p.n // t, p.m // t) if grid_rule == "floor" else (-(-p.n // t), -(-p.m // t))
        kern = backend.function(ex, p, "sgemm32")
        if gx and gy:
            kern((gx, gy), (t, t), (a_buf, b_buf, c_buf, np.int32(p.m), np.int32(p.n), np.int32(p.k)))
        ex.stream.synchronize()
        c = c_buf[: p.m * p.n].reshape(p.m, p.n)
        reference = ex.reference(p, a, b)
        res = reference.verify(c)
        ref = reference.r
        written = cp.isfinite(c)
        unwritten = int(c.size - int(written.sum()))
        oob_writes = int(cp.isfinite(c_buf[p.m * p.n:]).sum())
        diff = cp.where(written, c.astype(cp.float64) - ref, 0.0)
        ref_norm = float(cp.linalg.norm(cp.where(written, ref, 0.0)))
        err_written = float(cp.linalg.norm(diff)) / ref_norm if ref_norm > 0 else float("nan")
        extra = {"grid_rule": grid_rule, "grid": [gx, gy], "unwritten_elements": unwritten,
                 "writes_past_c": oob_writes, "rel_error_of_written_elements": err_written,
                 "padding_elements": pad}
        row = {**res.fields(), "rel_error": res.rel_error if not unwritten else float("nan"), "flops": p.flops,
               "kernel_name": f"sgemm32 (chapter 5.3, as printed), grid {grid_rule}", "extra": extra}
        problems = []
        if unwritten:
            problems.append(f"{unwritten} elements of C never written")
        if oob_writes:
            problems.append(f"{oob_writes} elements written past the end of C")
        if not unwritten and not res.passed:
            problems.append(res.failure())
        elif unwritten and err_written > p.tolerance:
            problems.append(f"rel_error of the written elements {err_written:.3e}")
        if problems:
            return {**row, "status": "failed", "reason": "; ".join(problems)}
        return {**row, "status": "ok"}
