"""CUTLASS FP8 (variant cutlass_fp8) without a GPU: the emitted sm_90a kernel (e4m3 x e4m3, FP32
accumulation, BF16 D with 16-byte alignment, no C), the alignment CUTLASS's own lookup gets wrong
for FP8, the skips (layouts other than nt, rowcol and block with what cutlass_cppgen lacks), and
one real compile of the kernel's device part (slow, about 70-100 s on 2 cores)."""
from __future__ import annotations

import importlib.util
import re
import sys
import types

import pytest
from conftest import compose_cfg
from omegaconf import open_dict

if importlib.util.find_spec("cutlass_cppgen") is None:
    pytest.skip("pip install nvidia-cutlass==4.2.0.0", allow_module_level=True)
from gemmlab import fp8  # noqa: E402
from gemmlab.backends.cutlass import Cutlass  # noqa: E402
from gemmlab.backends.cutlass.catalog import FP8_LAYOUT_REASON, find_alignment  # noqa: E402
from gemmlab.backends.nvcc import find_nvcc  # noqa: E402
from gemmlab.points import expand  # noqa: E402

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="emitting CUTLASS kernels needs nvcc")


def _backend(tmp_path, shape=(512, 512, 512), layout="nt", mode="tensor", variant="cutlass_fp8"):
    cfg = compose_cfg([f"variant=[{variant}]", "precision=[fp8]", f"layouts=[{layout}]", "sizes.square=[]",
                       f"sizes.shapes=[[{shape[0]},{shape[1]},{shape[2]}]]", f"measure.fp8_scaling={mode}"], tmp_path)
    with open_dict(cfg):
        cfg.paths.cache = str(tmp_path / "cache")
    b = Cutlass(cfg)
    b.out_dir = tmp_path / "run"
    (p,) = expand(cfg)
    return b, p


@needs_nvcc
def test_the_fp8_kernel_is_e4m3_tn_with_a_16_byte_bf16_output_and_no_c(tmp_path):
    b, p = _backend(tmp_path, shape=(64, 2112, 7168))  # DeepSeek-V3 attn_qkv_a at 64 tokens
    (k,) = b.kernels(p)
    device, _ = k.sources()
    assert "e4m3_e4m3_f32_void_bf16" in k.name and k.void_c
    assert k.config["alignment"] == [16, 16, 8]  # 16 bytes each: TMA for A, B and D
    main = device.split("gemm::collective::CollectiveBuilder<", 1)[1]
    assert re.search(r"cutlass::float_e4m3_t, cutlass::layout::RowMajor, 16,\s*"
                     r"cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, 16", main)
    epi = device.split("epilogue::collective::CollectiveBuilder<", 1)[1]
    assert re.search(r"void, cutlass::layout::RowMajor, 8,\s*cutlass::bfloat16_t, cutlass::layout::RowMajor, 8", epi)
    assert "KernelTmaWarpSpecializedCooperative" in device and "FastAccum" not in device
    assert k.config["tile"] == [128, 128, 128] and k.config["cluster"] == [2, 1, 1]


@needs_nvcc
def test_alignment_is_the_largest_listed_one_compared_as_numbers(tmp_path):
    b, p = _backend(tmp_path)
    b._setup()
    plan = b._catalog._plan(("e4m3", "e4m3", "void", "bf16", "f32"), ("row", "col"), "tensorop")
    ops = plan.possible_operations
    assert sorted(ops.kernels_by_alignment) == ["16 16 1", "4 4 1", "8 8 1"]
    # cutlass_cppgen's own lookup sorts "16 16 1" after "8 8 1" as strings: 8-byte kernels at K = 512
    assert ops.find_alignment((512, 512), plan._layout_a, "A") == 8
    assert find_alignment(b._cutlass, ops, p, plan._layout_a, plan._layout_b)[:2] == (16, 16)
    q = types.SimpleNamespace(m=512, n=512, k=520)  # K = 8 mod 16: 8-byte rows
    assert find_alignment(b._cutlass, ops, q, plan._layout_a, plan._layout_b)[:2] == (8, 8)
    # single-digit alignments (FP16): the same as cutlass_cppgen's for every shape tried
    h = b._catalog._plan(("f16", "f16", "void", "f16", "f32"), ("row", "row"), "tensorop")
    for m, n, k in ((512, 512, 512), (1023, 1022, 1020), (96, 36, 514)):
        s = types.SimpleNamespace(m=m, n=n, k=k)
        own = (h.possible_operations.find_alignment((m, k), h._layout_a, "A"),
               h.possible_operations.find_alignment((k, n), h._layout_b, "B"),
               h.possible_operations.find_alignment((m, n), b._cutlass.LayoutType.RowMajor, "C"))
        assert find_alignment(b._cutlass, h.possible_operations, s, h._layout_a, h._layout_b) == own


@needs_nvcc
def test_fp8_needs_layout_nt(tmp_path):
    b, p = _backend(tmp_path, layout="nn")
    assert "declares layouts nt" in Cutlass.workload_reason(p)
    from gemmlab.backends.cutlass.catalog import Unsupported

    with pytest.raises(Unsupported, match=re.escape(FP8_LAYOUT_REASON)):
        b.kernels(p)


@pytest.mark.parametrize("mode,where", [
    ("block", ["cutlass_cppgen/library_defaults.py:560", "cutlass_cppgen/backend/gemm_operation.py:1747",
               "cutlass_cppgen/backend/c_types.py:180-187", "GenerateSM90_TensorOp_fp8_WGMMA_gemm_with_blockwise"]),
    ("rowcol", ["epilogue visitor tree", "LinearCombination"])])
def test_rowcol_and_block_are_skipped_naming_what_cutlass_cppgen_lacks(tmp_path, monkeypatch, mode, where):
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))  # past the PyTorch check
    b, p = _backend(tmp_path, mode=mode)
    why = b.skip_reason(p)
    assert why.startswith(f"fp8_scaling={mode} is not implemented by the cutlass backend (it runs none, tensor)")
    assert all(w in why for w in where), why


def test_the_block_reason_points_at_the_installed_lines():
    """The file:line the reason names hold what it says (nvidia-cutlass 4.2.0.0)."""
    from pathlib import Path

    root = Path(importlib.util.find_spec("cutlass_cppgen").origin).parent.parent
    lines = {f: (root / f).read_text().splitlines() for f in (
        "cutlass_cppgen/library_defaults.py", "cutlass_cppgen/backend/gemm_operation.py",
        "cutlass_cppgen/backend/c_types.py", "cutlass_library/generator.py")}
    assert "GemmKind.Universal, cutlass_library.GemmKind.Universal3x]" in lines["cutlass_cppgen/library_defaults.py"][559]
    assert "__init__(GemmKind.Universal," in lines["cutlass_cppgen/backend/gemm_operation.py"][1746]
    fields = "\n".join(lines["cutlass_cppgen/backend/c_types.py"][179:187])
    assert "ptr_A" in fields and "mma_promotion_interval" in fields and "SF" not in fields
    assert "def GenerateSM90_TensorOp_fp8_WGMMA_gemm_with_blockwise" in lines["cutlass_library/generator.py"][5824]
    assert "cutlass_cppgen/library_defaults.py:560" in fp8.CUTLASS_SCALED_REASON["block"]


def test_other_cutlass_variants_point_to_cutlass_fp8():
    cfg = compose_cfg(["variant=cutlass_auto", "precision=fp8", "sizes.square=[1024]", "sizes.shapes=[]"])
    (p,) = expand(cfg)
    assert p.skip_reason.endswith(fp8.CUTLASS_REASON) and "cutlass_fp8" in fp8.CUTLASS_REASON


# -- one real compile (device part) ---------------------------------------------------------------------
@needs_nvcc
@pytest.mark.slow
def test_fp8_device_part_compiles_for_sm90a_without_spills(tmp_path):
    from gemmlab.backends.cutlass.build import _ptxas_usage, _run_timed

    b, p = _backend(tmp_path, shape=(4096, 7168, 2048))
    (kernel,) = b.kernels(p)
    build = tmp_path / "build"
    build.mkdir()
    device, _ = kernel.sources()
    (build / "device.cu").write_text(device)
    device_cmd, _ = b._cache.commands(kernel, build)
    assert "-gencode=arch=compute_90a,code=sm_90a" in device_cmd
    rc, seconds, output = _run_timed(device_cmd)
    assert rc == 0, output[-3000:]
    assert kernel.name.encode() in (build / "device.cubin").read_bytes()
    spill, regs = _ptxas_usage(output)
    assert regs and regs > 0 and spill == 0, output[-2000:]
