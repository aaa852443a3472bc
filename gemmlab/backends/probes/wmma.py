"""WMMA GPU probes on the chapter's wmma_gemm of the variant's ``probe.source``
(kernels/cuda/probes/wmma_layout.cu): ``wmma_layout`` (B's layout declared wrong) and
``wmma_alignment`` (shifted pointers, each offset in a child process, :mod:`.child`)."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from gemmlab.backends.probes.child import run_child
from gemmlab.backends.probes.common import Probe, ProbeSkip, checked, need_memory
from gemmlab.measure import check

WMMA_WARPS_PER_BLOCK = 4


def tile_transpose(b, tile: int = 16):
    """B with every tile x tile block transposed in place: what a WMMA fragment declared
    col_major reads from a row-major B at row-major addresses (works for NumPy and CuPy)."""
    k, n = b.shape
    return b.reshape(k // tile, tile, n // tile, tile).transpose(0, 3, 2, 1).reshape(k, n)


class WmmaProbe(Probe):
    precisions = ("fp16",)
    compiles = True

    def skip(self, p, params):
        if p.m % 16 or p.n % 16 or p.k % 16:
            return "the chapter's wmma_gemm needs M, N, K multiples of 16 (no bounds checks)"
        if (p.m // 16) * (p.n // 16) % WMMA_WARPS_PER_BLOCK:
            return f"one warp per 16 x 16 tile in whole blocks of {WMMA_WARPS_PER_BLOCK} warps"
        return super().skip(p, params)

    @staticmethod
    def grid(p) -> int:
        return (p.m // 16) * (p.n // 16) // WMMA_WARPS_PER_BLOCK


class WmmaLayout(WmmaProbe):
    """The chapter's wmma_gemm, its error against the FP32 data the halves were rounded from,
    and two kernels that declare B col_major while B is row-major (see wmma_layout.cu)."""

    op = "wmma_layout"

    def skip(self, p, params):
        if p.n != p.k:
            return "wmma_layout compares a col-major reading of B with A @ B^T: needs N == K"
        return super().skip(p, params)

    def run(self, backend, p, ex, seed, params):
        cp = ex.cp
        need_memory(8 * (3 * p.m * p.k + 3 * p.k * p.n + 6 * p.m * p.n))
        rng = cp.random.default_rng(seed)
        m = ex.measure
        a32 = check.random_matrix(cp, rng, (p.m, p.k), m.distribution.value, m.input_scale)
        b32 = check.random_matrix(cp, rng, (p.k, p.n), m.distribution.value, m.input_scale)
        a16, b16 = a32.astype(cp.float16), b32.astype(cp.float16)
        c = cp.empty((p.m, p.n), dtype=cp.float32)
        grid, block = (self.grid(p),), (32 * WMMA_WARPS_PER_BLOCK,)
        dims = (np.int32(p.m), np.int32(p.n), np.int32(p.k))
        a64, b64 = a16.astype(cp.float64), b16.astype(cp.float64)
        ref = a64 @ b64  # the exact product of the halves the kernel multiplies
        ref_fp32_data = a32.astype(cp.float64) @ b32.astype(cp.float64)

        def run_kernel(entry):
            c.fill(float("nan"))
            backend.function(ex, p, entry)(grid, block, (a16, b16, c, *dims))
            ex.stream.synchronize()
            return c.copy()

        right = run_kernel("wmma_gemm")
        same = ex.reference(p, a16, b16).verify(right)  # the verdict: the exact product of the halves
        vs_fp32 = check.relative_error(cp, right, ref_fp32_data)
        # cuBLAS in true FP32 on the FP32 data, for scale: what "against FP32" means without halves
        c32 = cp.empty((p.m, p.n), dtype=cp.float32)
        from dataclasses import replace

        p32 = replace(p, precision="fp32", in_dtype="float32", out_dtype="float32", compute="fp32")
        backend.gemm_launch(p32, a32, b32, c32).fn()
        ex.stream.synchronize()
        fp32_sgemm = check.relative_error(cp, c32, ref_fp32_data)
        del ref_fp32_data, c32

        extra: Dict[str, Any] = {
            "rel_error_vs_fp64_of_fp16_inputs": same.rel_error,
            "rel_error_vs_fp64_of_fp32_data": vs_fp32,
            "rel_error_fp32_sgemm_vs_fp64_of_fp32_data": fp32_sgemm,
        }
        for entry, wrong_ref_name, wrong_ref in (
                ("wmma_gemm_bcol_flag", "a_times_tile_transposed_b", lambda: a64 @ tile_transpose(b64)),
                ("wmma_gemm_bcol", "a_times_b_transposed", lambda: a64 @ b64.T)):
            out = run_kernel(entry)
            other = wrong_ref()
            extra[entry] = {"ran_without_error": True, "nonfinite": int((~cp.isfinite(out)).sum()),
                            "rel_error_vs_a_times_b": check.relative_error(cp, out, ref),
                            f"rel_error_vs_{wrong_ref_name}": check.relative_error(cp, out, other),
                            "std_ratio_to_right_result": float(out.std() / right.std())}
            del other
        row = {"flops": p.flops, "kernel_name": "wmma_gemm (chapter 5.5, as printed)", "extra": extra}
        failed = checked(row, same)
        return failed or {**row, "status": "ok"}


class WmmaAlignment(WmmaProbe):
    """wmma_gemm on A and B shifted by ``params.offsets_bytes`` (default 2 and 16 bytes) from
    their 256-byte aligned allocations, each in a child process: a misaligned access is a sticky
    CUDA error that would end every later point of this run. Per offset: crashed, wrong, or
    correct and how fast against the aligned call measured in the same child."""

    op = "wmma_alignment"

    def run(self, backend, p, ex, seed, params):
        offsets = [int(o) for o in params.get("offsets_bytes", [2, 16])]
        if any(o % 2 for o in offsets):
            raise ProbeSkip("offsets_bytes must be whole halves (multiples of 2)")
        cubin = backend.cubin(ex, p)
        results: Dict[str, Any] = {}
        for off in offsets:
            args = {"cubin": str(cubin), "device": int(ex.dev["ordinal"]), "m": p.m, "n": p.n, "k": p.k,
                    "offset_bytes": off, "seed": seed, "tolerance": p.tolerance,
                    "warps_per_block": WMMA_WARPS_PER_BLOCK}
            results[str(off)] = run_child("wmma-alignment", args)
        aligned = [r.get("aligned_s") for r in results.values() if r.get("aligned_s")]
        row = {"flops": p.flops, "kernel_name": "wmma_gemm (chapter 5.5) on shifted pointers",
               "timer": "cuda_event", "cache": "warm", "extra": {"offsets": results}}
        if aligned:
            row.update(time_median_s=float(np.median(aligned)), tflops=p.flops / float(np.median(aligned)) / 1e12)
        return {**row, "status": "ok"}
