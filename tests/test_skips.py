"""Library constraints are `requires` skips with a reason, not failures."""
from __future__ import annotations

import pytest

from conftest import compose_cfg, run_points
from gemmlab.points import expand

FP8_REASON = "cuBLASLt's FP8 kernels need 16-byte aligned dimensions"


@pytest.mark.parametrize("shape,skipped", [
    ((1024, 1024, 1024), False), ((4096, 2048, 512), False), ((1040, 1040, 1040), False),
    ((1023, 1023, 1023), True), ((4097, 4097, 4097), True), ((1000, 1000, 1000), True),  # K % 16
    ((1024, 1024, 1000), True), ((1024, 1001, 1024), True), ((1001, 1024, 1024), True),
])
def test_cublaslt_fp8_needs_16_byte_aligned_dimensions(shape, skipped):
    m, n, k = shape
    (p,) = expand(compose_cfg(["variant=cublaslt", "precision=fp8", "sizes.square=[]",
                               f"sizes.shapes=[[{m},{n},{k}]]"]))
    if skipped:
        assert p.skip_reason and p.skip_reason.startswith(FP8_REASON), p.skip_reason
        assert f"m={m}, n={n}, k={k}" in p.skip_reason
    else:
        assert p.skip_reason is None


@pytest.mark.parametrize("precision", ["tf32", "fp16", "bf16"])
def test_cublaslt_other_precisions_run_at_odd_sizes(precision):
    pts = expand(compose_cfg(["variant=cublaslt", f"precision={precision}", "sizes=odd"]))
    assert pts and all(p.skip_reason is None for p in pts)


def test_fp8_points_at_odd_sizes_are_skipped_rows_with_the_reason(tmp_path):
    cfg = compose_cfg(["variant=cublaslt", "precision=fp8", "sizes=odd", "measure=quick",
                       "run.progress=false"], tmp_path)
    runner, rows = run_points(cfg, tmp_path / "run")
    assert len(rows) == 3
    assert all(r["status"] == "skipped" and r["reason"].startswith(FP8_REASON) for r in rows), rows
    assert runner.counts["failed"] == 0
