"""Stage 13 (wgmma_fp8) without a GPU: its layout (nt) and size rules, the tensor maps over the stored
N x K B, and the launcher's FP8 ABI. Its builds, SASS and sweep are in test_hopper_kernels.py, its
code on the CPU in test_hopper_emulation.py, on a GPU in test_gpu_hopper_fp8.py.
"""
from __future__ import annotations

import re

from conftest import ROOT, compose_cfg
from test_hopper_kernels import FP8_BASE, _FakeArray

import pytest


def test_fp8_stage_runs_layout_nt_only_and_skips_what_tma_cannot_stride():
    from gemmlab.backends.base import backend_class
    from gemmlab.points import expand

    cfg = compose_cfg(["variant=wgmma_fp8", "precision=fp8", "layouts=[nn,nt,tn,tt]", "sizes.square=[]"])
    cfg.sizes.shapes = [[1000, 1000, 1000], [1, 4096, 4096], [4096, 16, 4096], [4096, 1, 4096], [130, 200, 48]]
    cuda = backend_class("cuda")
    ran = 0
    for p in expand(cfg):
        layout_reason = cuda.workload_reason(p)
        if p.layout != "nt":
            assert layout_reason and "declares layouts nt" in layout_reason, (p.layout, layout_reason)
            continue
        assert layout_reason is None
        if p.k % 16 == 0 and p.n % 8 == 0:
            assert p.skip_reason is None, (p.m, p.n, p.k, p.skip_reason)
            ran += 1
        else:
            assert p.skip_reason and "TMA" in p.skip_reason, (p.m, p.n, p.k)
    assert ran == 3
    # a precision the stage does not read is skipped by the precision list, not attempted
    (bf16,) = expand(compose_cfg(["variant=wgmma_fp8", "precision=bf16", "layouts=[nt]", "sizes.square=[256]",
                                  "sizes.shapes=[]"]))
    assert bf16.skip_reason and "does not support bf16" in bf16.skip_reason


def test_fp8_tensor_maps_are_over_the_stored_n_by_k_b():
    from gemmlab.gpu import tma
    from gemmlab.points import expand

    m, n, k = 1000, 264, 272
    cfg = compose_cfg([*FP8_BASE, "sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]"])
    (p,) = expand(cfg)
    specs = cfg.variant.wgmma_fp8.cuda.tensor_maps
    arrays = {"A": _FakeArray(m, k, "uint8"), "B": _FakeArray(n, k, "uint8"), "C": _FakeArray(m, n)}
    a, b, c = tma.resolve(p, arrays, specs)
    # A: M x K bytes, box BM x 128 B; B as stored, N x K bytes, box BN x 128 B; C bf16, 64 x 64.
    assert (a.rows, a.cols, a.row_stride_bytes, a.box_rows, a.box_cols) == (m, k, k, 128, 128)
    assert (b.rows, b.cols, b.row_stride_bytes, b.box_rows, b.box_cols) == (n, k, k, 256, 128)
    assert (c.rows, c.cols, c.box_rows, c.box_cols, c.elem_bytes) == (m, n, 64, 64, 2)
    for s in (a, b, c):
        tma.check(s)
        assert s.swizzle == 128 and s.box_cols * s.elem_bytes == 128
    d = p.variant_cfg.cuda.defines  # expect_tx of a stage: the two loaded boxes
    assert a.box_bytes + b.box_bytes == (d.BM + d.BN) * d.BK
    # B handed over as K x N (an nn set) is refused with a sentence, not encoded wrongly
    with pytest.raises(tma.TensorMapError, match="array shape"):
        tma.resolve(p, {**arrays, "B": _FakeArray(k, n, "uint8")}, specs)


def test_fp8_points_get_fp32_inputs_and_the_scales_after_the_maps():
    """The launcher's fp8 ABI: the backend quantizes the FP32 inputs itself (as cuBLASLt does) and
    appends scale_a, scale_b; the kernel declares them after the tensor maps."""
    from gemmlab.backends.cuda_kernels import CudaKernels
    from gemmlab.points import expand

    cfg = compose_cfg([*FP8_BASE, "sizes.square=[256]", "sizes.shapes=[]"])
    (p,) = expand(cfg)
    assert CudaKernels(cfg).wants_fp32_inputs(p)
    src = (ROOT / "kernels/cuda/13_wgmma_fp8.cu").read_text()
    # the scales after the maps, whichever way the maps come (MAP_PARAMS: by value, or a buffer's address)
    assert re.search(r"HOPPER_MAPS_ABC_PARAMS, float scale_a, float scale_b\)", src)
    assert "scale_a * scale_b" in src


def test_the_launcher_passes_the_recorded_scales_and_refuses_a_scaled_set_without_them(monkeypatch):
    """CudaKernels._fp8_args: the scales fp8.gpu_operands recorded for the set's addresses, as float32
    launch arguments; under fp8_scaling=tensor a set nobody recorded is an error, never scales 1."""
    import sys
    import types

    import numpy as np

    from gemmlab import fp8
    from gemmlab.backends.cuda_kernels import CudaKernels
    from gemmlab.points import expand

    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))  # imported, not used, for CuPy sets
    a, b = _FakeArray(256, 256, "uint8", ptr=1 << 21), _FakeArray(256, 256, "uint8", ptr=1 << 22)
    for mode in ("tensor", "none"):
        cfg = compose_cfg([*FP8_BASE, "sizes.square=[256]", "sizes.shapes=[]", f"measure.fp8_scaling={mode}"])
        (p,) = expand(cfg)
        backend = CudaKernels(cfg)
        fp8.forget_recorded()
        if mode == "tensor":
            with pytest.raises(RuntimeError, match="no fp8 scales"):
                backend._fp8_args(p, a, b)
            fp8.record(a.data.ptr, b.data.ptr, fp8.Scales("tensor", 0.25, 0.0078125, 112.0, 3.5))
            _, _, args, extra = backend._fp8_args(p, a, b)
            assert args == (np.float32(0.25), np.float32(0.0078125)) and all(x.dtype == np.float32 for x in args)
            assert extra["mode"] == "tensor" and extra["scale_b"] == 0.0078125
            backend.release()  # the point is over: its addresses may be reused with other scales
            assert fp8.recorded(a.data.ptr, b.data.ptr) is None
        else:
            _, _, args, extra = backend._fp8_args(p, a, b)
            assert args == (np.float32(1.0), np.float32(1.0)) and extra["mode"] == "none"
