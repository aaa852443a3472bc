"""The CUTLASS SM80 tensor-op reference for stage 10 (variant cutlass_sm80_tensorop), without a GPU.

``kernel_cc: 80`` makes the cutlass backend take CUTLASS 2.x's SM80 kernels (the multistage GEMM:
mma.sync m16n8k16 + ldmatrix + cp.async) and compile them for the SM90 target (sm_90a). Here: the
variant composes and validates, bad ``kernel_cc`` values fail with the allowed ones named, the
emitted C++ is the 2.x SM80 kernel with a real C operand, the default generation (kernel_cc null)
is unchanged, and (slow, one nvcc compile of the device part, 20-45 s on 2 cores) it builds for
sm_90a without spills and its SASS has HMMA (mma.sync), LDSM (ldmatrix), LDGSTS (cp.async) and no
wgmma.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from conftest import compose_cfg
from test_hopper_kernels import sass as hopper_sass
from omegaconf import open_dict

if importlib.util.find_spec("cutlass_cppgen") is None:
    pytest.skip("pip install nvidia-cutlass==4.2.0.0", allow_module_level=True)
from gemmlab.backends.cutlass import Cutlass  # noqa: E402
from gemmlab.backends.cutlass.catalog import Catalog, Unsupported  # noqa: E402
from gemmlab.backends.cutlass.options import KERNEL_CCS, kernel_options  # noqa: E402
from gemmlab.backends.nvcc import find_nvcc  # noqa: E402
from gemmlab.points import ConfigError, expand  # noqa: E402

VARIANT = "cutlass_sm80_tensorop"
needs_nvcc = pytest.mark.skipif(
    find_nvcc() is None,
    reason="emitting CUTLASS kernels needs nvcc (its kernel list depends on the CUDA version)")


def backend_and_points(tmp_path: Path, overrides, square=(4096,)):
    cfg = compose_cfg(list(overrides), tmp_path)
    with open_dict(cfg):
        cfg.paths.cache = str(tmp_path / "cache")
        cfg.sizes.square = list(square)
        cfg.sizes.shapes = []
    b = Cutlass(cfg)
    b.out_dir = tmp_path / "run"
    return b, [p for p in expand(cfg) if not p.skip_reason]


def one_kernel(tmp_path: Path, overrides):
    b, points = backend_and_points(tmp_path, overrides)
    (point,) = points
    (kernel,) = b.kernels(point)
    return b, point, kernel


# -- config --------------------------------------------------------------------------------------
def test_variant_composes_with_kernel_cc_80(tmp_path):
    cfg = compose_cfg([f"variant=[{VARIANT}]", "sizes=smoke"], tmp_path)
    v = cfg.variant[VARIANT]
    assert v.backend.value == "cutlass" and list(v.precisions) == ["bf16", "fp16"]
    assert list(v.tags) == ["cutlass"] and v.in_default_sweep is False
    opts = kernel_options(VARIANT, v.cutlass)
    assert opts.opclass == "tensorop" and opts.kernel_cc == 80
    assert opts.tile == (128, 256, 64) and opts.stages == 3 and opts.cluster is None
    assert (opts.layout_a, opts.layout_b) == ("row", "row")
    Cutlass(cfg)  # checks the options against both precisions
    assert VARIANT not in compose_cfg(["sizes=smoke"], tmp_path).variant  # not in the default sweep


def test_kernel_cc_defaults_to_null(tmp_path):
    cfg = compose_cfg(["variant=[cutlass_auto,cutlass_simt_128x128]", "sizes=smoke"], tmp_path)
    for name in ("cutlass_auto", "cutlass_simt_128x128"):
        assert kernel_options(name, cfg.variant[name].cutlass).kernel_cc is None


@pytest.mark.parametrize("value", [75, 70, 100, 0])
def test_unsupported_kernel_cc_names_the_allowed_values(tmp_path, value):
    cfg = compose_cfg([f"variant=[{VARIANT}]", "precision=[bf16]", "sizes=smoke",
                       f"variant.{VARIANT}.cutlass.kernel_cc={value}"], tmp_path)
    allowed = ", ".join(map(str, KERNEL_CCS))
    with pytest.raises(ConfigError, match=rf"cutlass\.kernel_cc={value} is not one of null, {allowed}"):
        Cutlass(cfg)
    assert 80 in KERNEL_CCS


@pytest.mark.parametrize("override, named", [
    ("cluster=[2,1,1]", r"cluster=\[2, 1, 1\]"),
    ("kernel_schedule=cooperative", "kernel_schedule=cooperative"),
    ("tile_scheduler=stream_k", "tile_scheduler=stream_k"),
    ("swizzle=2", "swizzle=2"),
])
def test_kernel_cc_80_refuses_cutlass3_only_fields(tmp_path, override, named):
    cfg = compose_cfg([f"variant=[{VARIANT}]", "precision=[bf16]", "sizes=smoke",
                       f"variant.{VARIANT}.cutlass.{override}"], tmp_path)
    with pytest.raises(ConfigError, match=rf"kernel_cc=80 takes CUTLASS 2\.x kernels.*{named}"):
        Cutlass(cfg)


# -- emitted C++ ---------------------------------------------------------------------------------
@needs_nvcc
@pytest.mark.parametrize("precision, element", [("bf16", "cutlass::bfloat16_t"), ("fp16", "cutlass::half_t")])
def test_emits_the_cutlass2_sm80_multistage_gemm(tmp_path, precision, element):
    b, point, kernel = one_kernel(tmp_path, [f"variant=[{VARIANT}]", f"precision=[{precision}]"])
    assert (point.m, point.n, point.k) == (4096, 4096, 4096)
    device, host = kernel.sources()
    # CUTLASS 2.x GemmUniversal, SM80 tensor-op: mma.sync m16n8k16, 128x256x64 CTA tile of 64x64 warp
    # tiles, 3 stages
    args = device.split("cutlass::gemm::kernel::DefaultGemmUniversal<", 1)[1].split(">::GemmKernel", 1)[0]
    assert "cutlass::arch::OpClassTensorOp" in args and "cutlass::arch::Sm80" in args
    shapes = re.findall(r"cutlass::gemm::GemmShape<(\d+), (\d+), (\d+)>", args)
    assert shapes == [("128", "256", "64"), ("64", "64", "64"), ("16", "8", "16")]
    assert re.search(r",\s*3,\s*cutlass::arch::OpMultiplyAdd", args)
    # a real C operand, the output type (2.x has no void C), FP32 accumulation
    ab_c = re.findall(r"^\s*([\w:]+), cutlass::layout::RowMajor", args, flags=re.M)
    assert ab_c[2] == element and "void" not in ab_c and not kernel.void_c
    assert re.search(rf"LinearCombination<{re.escape(element)}, 8, float, float>", args)
    # no CUTLASS 3 / SM90 kernel
    for sm90 in ("cutlass::arch::Sm90", "CollectiveBuilder", "KernelTmaWarpSpecialized"):
        assert sm90 not in device
    assert not re.search(r"cutlass::gemm::kernel::GemmUniversal<[^;]*Sm90", device)
    assert re.search(rf"__global__ void\s+{kernel.name}\(", device)
    assert f"{kernel.name}_get_param_size" in host
    assert kernel.name.startswith("cutlass_tensorop_") and "s16816gemm" in kernel.name
    c = kernel.config
    assert c["arch"] == 80 and c["opclass"] == "TensorOp" and c["in_cutlass_list"] is True
    assert (c["tile"], c["stages"], c["warp_count"], c["instruction_shape"]) == \
        ([128, 256, 64], 3, [2, 4, 1], [16, 8, 16])
    assert c["persistent"] is False and "wgmma_operands" not in c
    assert kernel.key == kernel.operation.rt_module.emit() + kernel.name + "nvcc"


@needs_nvcc
def test_cutlass_default_for_sm80_is_the_variants_tile(tmp_path):
    """With tile and stages unset the variant takes the first of CUTLASS's SM80 list (in the
    catalog's fixed order): the same kernel as the YAML's explicit 128x256x64, 3 stages."""
    _, _, explicit = one_kernel(tmp_path / "a", [f"variant=[{VARIANT}]", "precision=[bf16]"])
    _, _, default = one_kernel(tmp_path / "b", [f"variant=[{VARIANT}]", "precision=[bf16]",
                                                f"variant.{VARIANT}.cutlass.tile=[]",
                                                f"variant.{VARIANT}.cutlass.stages=null"])
    assert default.key == explicit.key


@needs_nvcc
def test_kernel_cc_null_keeps_the_sm90_kernels(tmp_path):
    """kernel_cc null (every other variant): CUTLASS 3 SM90 kernels without C for 16-bit, as
    before; an explicit 90 is the same kernel (same cache key); 80 another one."""
    auto = ["variant=[cutlass_auto]", "precision=[bf16]"]
    _, _, default = one_kernel(tmp_path / "a", auto)
    _, _, sm90 = one_kernel(tmp_path / "b", [*auto, "+variant.cutlass_auto.cutlass.kernel_cc=90"])
    _, _, sm80 = one_kernel(tmp_path / "c", [*auto, "+variant.cutlass_auto.cutlass.kernel_cc=80"])
    assert default.void_c and default.config["arch"] == 90 and default.name.startswith("cutlass3x_sm90_")
    assert "cutlass::arch::Sm90" in default.sources()[0]
    assert sm90.key == default.key
    assert not sm80.void_c and sm80.config["arch"] == 80 and sm80.key != default.key


@needs_nvcc
def test_kernel_cc_above_the_target_is_skipped_with_the_reason(tmp_path):
    b, point, _ = one_kernel(tmp_path, ["variant=[cutlass_auto]", "precision=[bf16]",
                                        "+variant.cutlass_auto.cutlass.kernel_cc=90"])
    ampere = Catalog(b._cutlass, 80)  # an SM80 target: SM90 kernels cannot run there
    with pytest.raises(Unsupported, match=r"kernel_cc=90: SM90 kernels do not run on this target "
                                          r"\(compute capability 8\.0\)"):
        ampere.kernels(point, b.point_options(point))


# -- one real compile (device part) ----------------------------------------------------------------
@pytest.fixture(scope="module")
def sm80_build(tmp_path_factory):
    """The sm_90a cubin of the bf16 4096^3 kernel, built with the backend's own nvcc command
    (device part): (kernel, cubin path, nvcc output)."""
    from gemmlab.backends.cutlass.build import _run_timed

    tmp = tmp_path_factory.mktemp("cutlass_sm80")
    b, _, kernel = one_kernel(tmp, [f"variant=[{VARIANT}]", "precision=[bf16]"])
    build = tmp / "build"
    build.mkdir()
    (build / "device.cu").write_text(kernel.sources()[0])
    device_cmd, _ = b._cache.commands(kernel, build)
    assert "-gencode=arch=compute_90a,code=sm_90a" in device_cmd
    rc, _, output = _run_timed(device_cmd)
    assert rc == 0, output[-3000:]
    return kernel, build / "device.cubin", output


@needs_nvcc
@pytest.mark.slow
def test_sm80_kernel_builds_for_sm90a_as_mma_sync_without_spills(sm80_build):
    """One test on the one compile (pytest-xdist would run the module fixture once per worker)."""
    from gemmlab.backends.cutlass.build import _ptxas_usage

    kernel, cubin, output = sm80_build
    assert kernel.name.encode() in cubin.read_bytes()
    assert f"Compiling entry function '{kernel.name}' for 'sm_90a'" in output
    spill, regs = _ptxas_usage(output)
    assert spill == 0 and regs and regs <= 255
    sass = hopper_sass(cubin)  # skips without cuobjdump / nvdisasm
    assert re.search(r"\bHMMA\.16816\.F32\.BF16\b", sass)  # mma.sync m16n8k16, BF16 in, FP32 accumulate
    assert re.search(r"\bLDSM\.16\.M", sass)  # ldmatrix
    assert re.search(r"\bLDGSTS\b", sass)  # cp.async
    assert not re.search(r"\b(HGMMA|WARPGROUP|UTMALDG)", sass)  # no wgmma, no TMA
