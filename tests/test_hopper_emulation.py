"""Hopper stages on the CPU: the stage's own code through the host emulation of TMA, mbarriers,
deferred wgmma and stmatrix (kernels/cuda/common/host_emulation/hopper_emu.h), checked element-wise
against FP64 before any GPU time is spent. The launch (grid, block, shared memory) and the tensor
maps are what the launcher makes of the variant's YAML for the point.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import compose_cfg
from test_hopper_kernels import FP8_BASE, FP8_SWEEP, WS_SWEEP, _fp8_overrides, _FakeArray


# ---- Hopper stages on the CPU: TMA, mbarriers, deferred wgmma, stmatrix (host_emulation/hopper_emu.h) ---
def emu_maps_args(point, build) -> str:
    """The emulated launch's tensor-map arguments, as the launcher passes them: the buffer's address, or with
    MAP_PARAMS 1 each map by value (gemmlab/gpu/tma.py)."""
    maps = "gemm_host::emu_tensor_maps(a.data(), b.data(), c.data())"
    if dict(build.defines).get("MAP_PARAMS"):
        return ", ".join(f"{maps}[{i}]" for i in range(len(point.variant_cfg.cuda.tensor_maps)))
    return maps


def hopper_emulator(point, folder: Path, extra_args: str = "") -> Path:
    """The host-emulation build of a Hopper stage's point (driver.cpp + hopper_emu.h); one per
    configuration and session (test_cuda_kernels.emulator): the shapes are run-time arguments."""
    from test_cuda_kernels import emulator

    from gemmlab.backends.cuda_kernels import build_for

    if shutil.which("g++") is None:
        pytest.skip("g++ not found (host emulation)")
    build = build_for(point)
    return emulator(build, str(folder.parent), "a.data(), b.data(), c.data(), M, N, K, " + emu_maps_args(point, build)
                    + extra_args)


def run_hopper_emulation(point, exe: Path, folder: Path, a_bytes, b_bytes, sm_count: int, env=None):
    """Run the emulated launch of ``point`` on stored operands; C as float64. The tensor maps are
    what the launcher resolves from the YAML for arrays of these shapes (gemmlab.gpu.tma.resolve)."""
    import numpy as np

    from gemmlab.backends.cuda_kernels import launch_shape
    from gemmlab.dtypes import numpy_dtype
    from gemmlab.gpu import tma

    shape = launch_shape(point, sm_count=sm_count)
    fake = {"A": _FakeArray(*a_bytes.shape, a_bytes.dtype.name), "B": _FakeArray(*b_bytes.shape, b_bytes.dtype.name),
            "C": _FakeArray(point.m, point.n, point.out_dtype)}
    specs = tma.resolve(point, fake, point.variant_cfg.cuda.tensor_maps)
    for spec in specs:
        tma.check(spec)
    maps = ";".join(f"{s.operand},{s.rows},{s.cols},{s.row_stride_bytes},{s.box_rows},{s.box_cols},"
                    f"{s.elem_bytes},{s.swizzle}" for s in specs)
    a_bytes.tofile(folder / "a.bin")
    b_bytes.tofile(folder / "b.bin")
    # the kernel's clusters along x (CLUSTER_M: its __cluster_dims__), run together by the driver
    cluster = int(point.expr_env().get("CLUSTER_M", 1))
    run_env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "GEMMLAB_EMU_MAPS": maps,
               "GEMMLAB_EMU_CLUSTER": str(cluster), **(env or {})}
    r = subprocess.run([str(exe), str(point.m), str(point.n), str(point.k), *map(str, shape.grid),
                        *map(str, shape.block), str(shape.smem_bytes), str(folder / "a.bin"), str(folder / "b.bin"),
                        str(folder / "c.bin")], capture_output=True, text=True, env=run_env, timeout=900)
    assert r.returncode == 0, (f"{point.variant} at {point.m}x{point.n}x{point.k}, grid {shape.grid}: exit "
                               f"{r.returncode}\n{r.stderr[-4000:]}")
    c = np.fromfile(folder / "c.bin", dtype=numpy_dtype(point.out_dtype)).reshape(point.m, point.n)
    return c.astype(np.float64)


# Partial tiles in M and N, a partial last k-tile, more k-tiles than stages; with sm_count 2 each CTA
# walks several tiles (the persistent schedule, ring slots and barrier phases wrapping across tiles).
# The default configuration (the sweep's first entry) runs them all; the others run the first,
# which has every one of those edges (with STAGES 4 its ring wraps across the tiles a CTA walks);
# the build, one per configuration, is most of a configuration's time (shapes are run-time arguments).
FP8_EMULATED_SHAPES = [
    (200, 264, 400),  # 2 x 2 tiles of 128 x 256, both edges partial; K = 3 x 128 + 16: 4 k-tiles, the last partial
    (64, 520, 128),  # 1 x 3 tiles (one CTA walks two) of one whole k-tile: ring slot and phase carry across tiles
    (1, 8, 16),  # one row, 8 columns, K = 16 (16-byte rows, the least TMA takes): one partial k-tile
]


def _fp8_case(point, folder, rng, sm_count=2, scales=None):
    """Emulate the FP8 stage at ``point`` on tensor-scaled random inputs; returns the check's result
    (against the FP64 product of the dequantized inputs). ``scales`` overrides what the launch is
    told (scale_a, scale_b)."""
    import numpy as np

    pytest.importorskip("ml_dtypes")
    from gemmlab import fp8
    from gemmlab.measure import check

    m, n, k = point.m, point.n, point.k
    a32 = rng.standard_normal((m, k), dtype=np.float32) * 3
    b32 = rng.standard_normal((k, n), dtype=np.float32) / 5
    sc = fp8.scales_for(np, "tensor", a32, b32)
    qa, qb = fp8.quantize_host(a32, sc.a), fp8.quantize_host(b32, sc.b)  # B logical, K x N
    told = scales or (sc.a, sc.b)
    exe = hopper_emulator(point, folder, ", gemm_host::emu_scale(0), gemm_host::emu_scale(1)")
    # layout nt: B goes over stored N x K, as gemmlab.fp8.gpu_operands hands it to the launcher
    c = run_hopper_emulation(point, exe, folder, qa.view(np.uint8), np.ascontiguousarray(qb.T).view(np.uint8),
                             sm_count, {"GEMMLAB_EMU_SCALES": "%.9g,%.9g" % told})
    assert not np.isnan(c).any(), f"{np.isnan(c).sum()} elements of C never written at {m}x{n}x{k}"
    ref = check.Reference.gemm(np, fp8.dequantize(np, qa, sc.a), fp8.dequantize(np, qb, sc.b),
                               check.model_of(point), point.tolerance, point.out_dtype)
    return ref.verify(c)


def _fp8_point(m, n, k, defines=None):
    from gemmlab.points import expand

    over = _fp8_overrides(defines) if defines else []
    (p,) = expand(compose_cfg([*FP8_BASE, "sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]", *over]))
    assert p.skip_reason is None, p.skip_reason
    return p


@pytest.mark.slow
@pytest.mark.parametrize("defines", FP8_SWEEP)
def test_fp8_sweep_configurations_compute_scaled_a_b_on_the_cpu(defines, tmp_path_factory):
    """The stage's own code through the host emulation: TMA boxes and swizzle, K-major descriptors
    of both operands, the k32 steps, the ring's barriers across tiles (wgmma deferred to the wait
    that retires it), both epilogues and the scales, checked element-wise against the FP64 product
    of the dequantized inputs."""
    import numpy as np

    folder, rng = tmp_path_factory.mktemp("emu-fp8"), np.random.default_rng(11)
    every_shape = defines in (FP8_SWEEP[0], "{STAGES:3,EPI_BOXES:0}")  # the default (the epilogue in rounds), and in one
    for m, n, k in FP8_EMULATED_SHAPES if every_shape else FP8_EMULATED_SHAPES[:1]:
        res = _fp8_case(_fp8_point(m, n, k, defines), folder, rng)
        assert res.passed, (f"{defines} at {m}x{n}x{k}: {res.failure()} (elem_max {res.elem_max:.3g}, "
                            f"rel_error {res.rel_error:.3g})")


@pytest.mark.slow
def test_fp8_emulation_fails_a_launch_that_forgets_the_scales(tmp_path_factory):
    """The check above can fail: the same launch told scales 1 and 1 fails element-wise."""
    import numpy as np

    m, n, k = FP8_EMULATED_SHAPES[0]
    res = _fp8_case(_fp8_point(m, n, k), tmp_path_factory.mktemp("emu-fp8-noscale"), np.random.default_rng(3),
                    scales=(1.0, 1.0))
    assert not res.passed and res.elem_fail > 0


@pytest.mark.slow
def test_the_emulated_cluster_launch_refuses_a_grid_it_cannot_split(tmp_path_factory):
    """GEMMLAB_EMU_CLUSTER=2 with an odd grid (the device refuses such a launch of a __cluster_dims__(2, 1, 1) kernel):
    the driver stops with exit status 2 and says why, before any block runs."""
    import numpy as np

    folder = tmp_path_factory.mktemp("emu-cluster-grid")
    p = _fp8_point(200, 264, 400, "{CLUSTER_M:2}")
    exe = hopper_emulator(p, folder, ", gemm_host::emu_scale(0), gemm_host::emu_scale(1)")
    np.zeros((200, 400), np.uint8).tofile(folder / "a.bin")
    np.zeros((264, 400), np.uint8).tofile(folder / "b.bin")
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0", "GEMMLAB_EMU_CLUSTER": "2",
           "GEMMLAB_EMU_MAPS": "A,200,400,400,128,128,1,128;B,264,400,400,128,128,1,128;C,200,264,528,64,64,2,128"}
    r = subprocess.run([str(exe), "200", "264", "400", "3", "1", "1", "384", "1", "1", "232448", str(folder / "a.bin"),
                        str(folder / "b.bin"), str(folder / "c.bin")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "does not split into clusters of 2 blocks" in r.stderr, (r.returncode, r.stderr[-2000:])


# ---- wgmma_ws (stage 12): B row-major K x N (layout nn), read N-major through the transpose bit ----------
# As FP8_EMULATED_SHAPES (all for the default, the first for the other entries), for 128 x 256 x 64
# tiles (sm_count 2: two CTAs; GRID_CTAS 128: one per tile).
WS_EMULATED_SHAPES = [
    (200, 520, 200),  # 2 x 3 tiles, both edges partial (each CTA walks 3); K = 3 x 64 + 8: 4 k-tiles, the last partial
    (129, 264, 72),  # 2 x 2 tiles, 1 row and 8 columns in the last (clipped TMA stores); 2 k-tiles, fewer than stages
    (1, 8, 64),  # one row, 8 columns (16-byte rows of B, the least TMA takes), one whole k-tile
]
UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


@pytest.mark.slow
@pytest.mark.parametrize("defines", WS_SWEEP)
def test_wgmma_ws_sweep_configurations_compute_a_b_on_the_cpu(defines, tmp_path_factory):
    """Stage 12's own code on the CPU: the N-major B descriptors (LBO between 64-column chunks), the
    ring across tiles of a persistent CTA, the stmatrix + TMA-store or direct epilogue."""
    import numpy as np

    ml_dtypes = pytest.importorskip("ml_dtypes")
    from gemmlab.backends.cuda_kernels import launch_shape
    from gemmlab.measure import check
    from gemmlab.points import expand

    folder, rng = tmp_path_factory.mktemp("emu-ws"), np.random.default_rng(7)
    # the default (2-CTA clusters: the driver runs a cluster's blocks together) and the first unclustered entry at
    # every shape, the others at the first
    every = (WS_SWEEP[0], next(d for d in WS_SWEEP if "CLUSTER_M:1" in d))
    for m, n, k in WS_EMULATED_SHAPES if defines in every else WS_EMULATED_SHAPES[:1]:
        (p,) = expand(compose_cfg(["variant=wgmma_ws", "precision=bf16", "sizes.square=[]",
                                   f"sizes.shapes=[[{m},{n},{k}]]", f"variant.wgmma_ws.cuda.defines={defines}"]))
        assert p.skip_reason is None, p.skip_reason
        a = rng.standard_normal((m, k), dtype=np.float32).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((k, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
        # the stage takes the launcher's workspace last (read with STREAM_K only; tests/test_wgmma_ws_nt.py)
        exe = hopper_emulator(p, folder, ", gemm_host::emu_workspace()")
        workspace = {"GEMMLAB_EMU_WORKSPACE_BYTES": str(launch_shape(p, sm_count=2).workspace_bytes)}
        c = run_hopper_emulation(p, exe, folder, a, b, sm_count=2, env=workspace)
        assert not np.isnan(c).any(), f"{defines}: {np.isnan(c).sum()} elements of C never written at {m}x{n}x{k}"
        ref = a.astype(np.float64) @ b.astype(np.float64)
        rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
        assert rel < UNIT_ROUNDOFF[p.out_dtype], f"{defines} at {m}x{n}x{k}: rel_error {rel:.2e}"
        res = check.Reference.gemm(np, a, b, check.model_of(p), p.tolerance, p.out_dtype).verify(c)
        assert res.passed, f"{defines} at {m}x{n}x{k}: {res.failure()}"
