"""Scaled FP8 through cuBLASLt on the GPU (gemmlab/fp8.py, measure.fp8_scaling). Written for the
H200 (sm_90, nvmath-python 1.0.0); not yet run there."""
from __future__ import annotations

import json

import pytest
from conftest import compose_cfg, run_points

pytestmark = pytest.mark.gpu

BASE = ["variant=cublaslt", "precision=fp8", "measure=quick", "run.progress=false", "sizes.shapes=[]"]


def _extra(row):
    return json.loads(row["extra"]) if row.get("extra") else {}


def test_cublaslt_fp8_tensor_scaled_at_4096_passes_the_check_with_real_scales(tmp_path):
    cfg = compose_cfg(BASE + ["sizes.square=[4096]", "measure.fp8_scaling=tensor", "measure.input_scale=1000"],
                      tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    (row,) = rows
    assert row["status"] == "ok", row["reason"]
    assert float(row["check_elem_max"]) < 1
    fs = _extra(row)["fp8_scaling"]
    assert fs["mode"] == "tensor" and fs["fp8_max"] == 448.0
    assert fs["scale_a"] != 1.0 and fs["scale_b"] != 1.0
    assert fs["scale_a"] == pytest.approx(fs["amax_a"] / 448.0, rel=1e-6)


def test_cublaslt_fp8_unscaled_inputs_beyond_the_range_fail_as_overflow(tmp_path):
    cfg = compose_cfg(BASE + ["sizes.square=[1024]", "measure.input_scale=1000"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    (row,) = rows
    assert row["status"] == "failed" and "overflow" in row["reason"], row["reason"]


def test_cublaslt_fp8_search_checks_its_candidates_against_the_dequantized_inputs(tmp_path):
    cfg = compose_cfg(["variant=cublaslt_search", "precision=fp8", "measure=quick", "run.progress=false",
                       "sizes.shapes=[]", "sizes.square=[1024]", "measure.fp8_scaling=tensor",
                       "measure.input_scale=1000"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    (row,) = rows
    assert row["status"] == "ok", row["reason"]
    assert _extra(row)["fp8_scaling"]["scale_a"] != 1.0


@pytest.mark.parametrize("mode,words", [("block", "not implemented"), ("rowcol", "not implemented")])
def test_block_and_rowcol_scaling_are_skipped_on_hopper_with_the_reason(tmp_path, mode, words):
    import cupy

    if int(cupy.cuda.Device().compute_capability) >= 100:
        pytest.skip("the Hopper skip: this device is Blackwell or newer")
    cfg = compose_cfg(BASE + ["sizes.square=[1024]", f"measure.fp8_scaling={mode}"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    (row,) = rows
    assert row["status"] == "skipped" and words in row["reason"], row["reason"]
