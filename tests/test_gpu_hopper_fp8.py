"""Stage 13 (wgmma_fp8) on a GPU (`pytest -m gpu`): FP8 e4m3 with per-tensor scales against the FP64
product of the dequantized inputs at square, odd and rectangular sizes through the real runner, at
layout nt (the other layouts skipped with the reason), both epilogues, and cuBLASLt's fp8 kernel
timed as the baseline on the stage's own input set (pct_of_baseline).

The correctness runs use GEMMLAB_DEBUG=1 (a hung barrier traps with a printf instead of hanging the
GPU); a trap poisons the CUDA context, so run this file in a pytest process of its own, after
tests/test_hopper_kernels.py and tests/test_hopper_emulation.py have passed on the CPU.
"""
from __future__ import annotations

import json

import pytest
from conftest import compose_cfg, run_points

pytestmark = pytest.mark.gpu

SQUARE = [64, 256, 1024, 2048, 4096]
SHAPES = [
    [8, 8, 16],  # far smaller than one tile
    [1, 4096, 4096],  # M = 1
    [4096, 16, 4096],  # N = 16: one partial tile column
    [129, 264, 80],  # one row / 8 columns / 80 of K past a tile boundary (partial last k-tile)
    [300, 1032, 4112],
    [8192, 256, 512],  # one tile column: the grouped raster's narrow case
    [256, 8192, 256],  # one tile row, many columns
    [1000, 1000, 1000],  # K % 16 != 0: skipped (TMA row stride of the 1-byte operands)
    [4096, 1, 4096],  # N = 1: skipped (16-byte rows of the bf16 C)
    [1023, 1023, 1023],  # skipped
]
DEBUG = "+variant.wgmma_fp8.cuda.defines.GEMMLAB_DEBUG=1"


def _run(tmp, square, shapes, extra=(), layouts="[nt]", baseline="[]"):
    cfg = compose_cfg(["variant=[wgmma_fp8]", "precision=[fp8]", f"layouts={layouts}", "measure=quick",
                       "measure.fp8_scaling=tensor", "run.progress=false", "run.fail_on_error=false",
                       f"measure.baseline={baseline}", *extra], tmp)
    cfg.sizes.square = square
    cfg.sizes.shapes = shapes
    _, out = run_points(cfg, tmp / "run")
    return out


def _shape(r):
    return int(r["m"]), int(r["n"]), int(r["k"])


def _failures(rows):
    return [(_shape(r), r["status"], r["rel_error"], r["reason"]) for r in rows if r["status"] not in ("ok", "skipped")]


# (the default: the staging tiles two boxes a round with a fourth stage; before session40f three stages and one round;
# issue 32's 2-CTA clusters with B multicast, whose second CTA lies past M at 8 x 8, 129 rows, 300 rows and M = 1: it
# loads zeros and stores nothing)
@pytest.mark.parametrize("defines", ["{EPI_TMA:1,STAGES:3,EPI_BOXES:0}", "{EPI_TMA:0,STAGES:4}", "{}",
                                     "{CLUSTER_M:2,STAGES:3,EPI_BOXES:0}", "{CLUSTER_M:2}", "{MAP_PARAMS:0}",
                                     "{EPI_TMA:0,STAGES:4}"])  # the maps in the buffer; by value with C's map unread
def test_fp8_stage_matches_the_dequantized_fp64_product(tmp_path, defines):
    rows = _run(tmp_path, SQUARE, SHAPES, [f"variant.wgmma_fp8.cuda.defines={defines}", DEBUG])
    assert len(rows) == len(SQUARE) + len(SHAPES)
    assert not _failures(rows), _failures(rows)
    for r in rows:
        m, n, k = _shape(r)
        should_skip = k % 16 != 0 or n % 8 != 0
        assert (r["status"] == "skipped") == should_skip, ((m, n, k), r["reason"])
        if should_skip:
            assert "TMA" in r["reason"], r["reason"]
        else:
            scaling = json.loads(r["extra"])["fp8_scaling"]
            assert scaling["mode"] == "tensor" and scaling["scale_a"] != 1.0, scaling


def test_fp8_stage_skips_the_layouts_it_cannot_read(tmp_path):
    rows = _run(tmp_path, [256], [], layouts="[nn,tn,tt]")
    assert len(rows) == 3 and all(r["status"] == "skipped" and "declares layouts nt" in r["reason"] for r in rows)


def test_cublaslt_is_timed_as_the_baseline_on_the_stage_inputs(tmp_path):
    """pct_of_baseline at 4096 (no debug build): cuBLASLt reads the stage's own FP8 set and scales."""
    rows = _run(tmp_path, [4096], [], baseline="[cublaslt]")
    (r,) = rows
    assert r["status"] == "ok", r["reason"]
    assert r.get("pct_of_baseline") not in (None, ""), r
    print(f"wgmma_fp8 at 4096: {float(r['tflops']):.0f} TFLOP/s, {float(r['pct_of_baseline']):.1f}% of cuBLASLt fp8")
