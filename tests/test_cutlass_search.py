"""The cutlass backend's kernel choice without a GPU: a fixed candidate order, the diverse search
space, TF32 layouts (NN through registers, TN from shared memory), and the tile scheduler's swizzle
and raster order in the argument struct handed to CUTLASS.

Emitting needs nvidia-cutlass (cutlass_cppgen) and nvcc, as in test_cutlass.py.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if importlib.util.find_spec("cutlass_cppgen") is None:
    pytest.skip("pip install nvidia-cutlass==4.2.0.0", allow_module_level=True)

from test_cutlass import backend_and_points, needs_nvcc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
N = 8192


def _configs(kernels):
    return [(tuple(k.config["tile"]), tuple(k.config["cluster"]), k.config["kernel_schedule"],
             k.config["epilogue_schedule"], k.config["tile_scheduler"]) for k in kernels]


# -- one order in every process -------------------------------------------------------------------
LIST_KERNELS = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from test_cutlass import backend_and_points
    out = {}
    for variant in ("cutlass_auto", "cutlass_search"):
        b, (p,) = backend_and_points(Path(sys.argv[1]) / variant, [f"variant=[{variant}]", "precision=[fp16]"],
                                     shape=(8192, 8192, 8192))
        out[variant] = [k.name for k in b.kernels(p)]
    print(json.dumps(out))
""")


@pytest.mark.slow
@needs_nvcc
def test_kernel_choice_does_not_depend_on_the_hash_seed(tmp_path):
    """cutlass_cppgen lists 128x256 (2x1) and 256x128 (1x2) in an order set by PYTHONHASHSEED
    (seeds 0 and 1 give the two orders); the backend's choice must not follow it."""
    chosen = []
    for seed in ("0", "1"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", LIST_KERNELS, str(tmp_path / seed), str(ROOT / "tests")],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        chosen.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert chosen[0] == chosen[1]
    # the default is the 128x256 CTA tile with a 2x1 cluster (256x256 cluster tile, 2x1x1)
    assert "_256x256x64_2x1x1_" in chosen[0]["cutlass_auto"][0]


# -- the diverse search space ---------------------------------------------------------------------
@needs_nvcc
def test_diverse_search_spans_tiles_with_preferred_schedules(tmp_path):
    b, points = backend_and_points(tmp_path, ["variant=[cutlass_search,cutlass_auto]", "precision=[fp16]",
                                              "variant.cutlass_search.cutlass.search_groups=6",
                                              "variant.cutlass_search.cutlass.search_limit=10"],
                                   shape=(N, N, N))
    by = {q.variant: q for q in points}
    kernels = b.kernels(by["cutlass_search"])
    configs = _configs(kernels)
    assert len(kernels) == 10 and len({k.key for k in kernels}) == 10
    groups = [(tile, cluster) for tile, cluster, *_ in configs]
    # round-robin: the first six kernels are six different (tile, cluster) groups
    assert len(set(groups[:6])) == 6 and set(groups) == set(groups[:6])
    assert groups[:2] == [((128, 256, 64), (2, 1, 1)), ((256, 128, 64), (1, 2, 1))]
    # the large tiles first try cooperative + TMA epilogue, the data-parallel scheduler
    assert configs[0][2:] == ("TmaWarpSpecializedCooperative", "TmaWarpSpecializedCooperative", "Default")
    for k in kernels:
        c = k.config
        assert c["persistent"] and c["tile_scheduler"] == "Default"
        if "Pingpong" in c["kernel_schedule"]:  # a whole tile's accumulators per warp group
            assert c["tile"][0] * c["tile"][1] // 128 <= 128, c
    # ScheduleAuto resolves to cooperative + no-smem epilogue for these tiles: never both
    for tile, cluster, ks, es, _ in configs:
        assert not (ks == "TmaWarpSpecializedCooperative" and es == "NoSmemWarpSpecialized")
    # the auto kernel is one of the candidates (compiled once for both variants)
    (auto,) = b.kernels(by["cutlass_auto"])
    assert auto.key in {k.key for k in kernels}


@needs_nvcc
def test_listed_search_keeps_cutlass_order(tmp_path):
    b, (p,) = backend_and_points(tmp_path, ["variant=[cutlass_search]", "precision=[fp16]",
                                            "variant.cutlass_search.cutlass.search_order=listed",
                                            "variant.cutlass_search.cutlass.search_limit=5"],
                                 shape=(N, N, N))
    configs = _configs(b.kernels(p))
    assert {c[:2] for c in configs} == {((128, 256, 64), (2, 1, 1))}  # one tile's schedules
    assert configs[0][2] == "ScheduleAuto"


# -- TF32: NN through registers, TN from shared memory ----------------------------------------------
@needs_nvcc
def test_tf32_nn_transposes_and_tn_reads_k_major(tmp_path):
    b, points = backend_and_points(tmp_path, ["variant=[cutlass_auto,cutlass_tf32_tn]", "precision=[tf32]"],
                                   shape=(N, N, N))
    by = {q.variant: q for q in points}
    (nn,) = b.kernels(by["cutlass_auto"])
    nn_src, _ = nn.sources()
    assert "cutlass::gemm::EpilogueTransposed" in nn_src and "_ttt_" in nn.name
    assert nn.config["wgmma_operands"].startswith("registers x smem (A and B swapped")
    assert (nn.config["layout_a"], nn.config["layout_b"]) == ("row", "row")

    tn = b.kernels(by["cutlass_tf32_tn"])
    assert len(tn) == 6 and len({(tuple(k.config["tile"]), tuple(k.config["cluster"])) for k in tn}) == 6
    src, _ = tn[0].sources()
    block = src.split("gemm::collective::CollectiveBuilder<", 1)[1]
    assert "float, cutlass::layout::RowMajor, 4,\n    float, cutlass::layout::ColumnMajor, 4" in block
    assert "EpilogueTransposed" not in src and "_tnt_" in tn[0].name
    for k in tn:
        assert (k.config["layout_a"], k.config["layout_b"], k.config["layout_c"]) == ("row", "col", "row")
        assert k.config["wgmma_operands"] == "smem x smem" and k.config["persistent"]


# -- swizzle and raster order -----------------------------------------------------------------------
@needs_nvcc
def test_swizzle_is_a_run_time_argument_not_a_new_kernel(tmp_path):
    base = ["variant=[cutlass_coop_128x256_c2x1]", "precision=[fp16]"]
    b1, (p1,) = backend_and_points(tmp_path / "a", base, shape=(N, N, N))
    b2, (p2,) = backend_and_points(tmp_path / "b", base + [
        "variant.cutlass_coop_128x256_c2x1.cutlass.swizzle=8",
        "variant.cutlass_coop_128x256_c2x1.cutlass.raster_order=along_n"], shape=(N, N, N))
    assert b2.skip_reason(p2) is None
    assert [k.key for k in b1.kernels(p1)] == [k.key for k in b2.kernels(p2)]
    assert b2._scheduler_args(b2.kernels(p2)[0], b2.options[p2.variant]) == (8, "along_n")


@needs_nvcc
@pytest.mark.parametrize("variant, precision, why", [
    ("cutlass_simt_128x128", "fp32", "cutlass_simt_sgemm"),  # CUTLASS 2.x: swizzle compiled in
    ("cutlass_auto", "fp16", "_warpspecialized_epi_nosmem"),  # non-persistent TmaWarpSpecialized
])
def test_swizzle_on_a_kernel_that_ignores_it_skips_with_the_reason(tmp_path, variant, precision, why):
    overrides = [f"variant=[{variant}]", f"precision=[{precision}]", f"variant.{variant}.cutlass.swizzle=2"]
    if variant == "cutlass_auto":
        overrides += [f"variant.{variant}.cutlass.kernel_schedule=tma_warp_specialized",
                      f"variant.{variant}.cutlass.epilogue_schedule=nosmem"]
    b, (p,) = backend_and_points(tmp_path, overrides, shape=(1024, 1024, 1024))
    reason = b.skip_reason(p)
    assert reason and "run-time arguments" in reason and why in reason


@needs_nvcc
@pytest.mark.parametrize("variant, fields", [
    ("cutlass_coop_128x256_c2x1", ("max_swizzle_size", "raster_order_option")),
    ("cutlass_streamk_128x256_c2x1", ("splits", "max_swizzle_size", "raster_order_option",
                                      "reduction_mode", "decomposition_mode")),
])
def test_scheduler_arguments_reach_the_struct_cutlass_reads(tmp_path, monkeypatch, variant, fields):
    """The bytes at the ``scheduler`` member of the arguments (what the host library's get_args and
    get_grid_shape read as TileScheduler::Arguments) hold the swizzle and the raster order."""
    from gemmlab.backends.cutlass.launch import scheduler_arguments_class
    from gemmlab.backends.cutlass.options import RASTER_ORDERS

    b, (p,) = backend_and_points(tmp_path, [f"variant=[{variant}]", "precision=[fp16]"], shape=(N, N, N))
    (kernel,) = b.kernels(p)
    from cuda.bindings import driver
    from cutlass_cppgen.backend import gemm_operation
    from cutlass_cppgen.shape import GemmCoord

    cls = scheduler_arguments_class()
    assert issubclass(cls, gemm_operation.GemmArguments3x)
    # without a GPU: no argument initialisation through the (not loaded) host library, a fixed SM count
    monkeypatch.setattr(cls, "initialize", lambda self: None)
    monkeypatch.setattr(gemm_operation, "device_sm_count", lambda: 132)
    monkeypatch.setattr(kernel.operation.rt_module, "uses_default_epilogue", lambda: True, raising=False)
    op = kernel.operation
    for swizzle, raster in [(8, "along_n"), (2, "along_m"), (1, "heuristic")]:
        args = cls(operation=op, problem_size=GemmCoord(N, N, N), A=driver.CUdeviceptr(0x1000),
                   B=driver.CUdeviceptr(0x2000), C=None, D=driver.CUdeviceptr(0x3000),
                   output_op=op.epilogue_type(1.0, 0.0), swizzle=swizzle, raster_order=raster)
        arguments = args.get_arguments()
        offset = type(arguments).scheduler.offset
        raw = (ctypes.c_int * len(fields)).from_buffer_copy(
            ctypes.string_at(ctypes.addressof(arguments) + offset, 4 * len(fields)))
        values = dict(zip(fields, raw))
        assert values["max_swizzle_size"] == swizzle
        assert values["raster_order_option"] == RASTER_ORDERS[raster]
        assert values.get("splits", 1) == 1
        assert type(arguments)._fields_[-1][0] == "scheduler"  # Arguments' last member, as in CUTLASS


@needs_nvcc
def test_raster_values_and_scheduler_fields_match_the_cutlass_headers(tmp_path):
    """RASTER_ORDERS are RasterOrderOptions' values, and the persistent scheduler's Arguments are
    (int max_swizzle_size, RasterOrderOptions raster_order), as cutlass_cppgen's ctypes struct has them."""
    import re

    from gemmlab.backends.cutlass.options import RASTER_ORDERS

    b, _ = backend_and_points(tmp_path, ["variant=[cutlass_auto]", "precision=[fp16]"], shape=(64, 64, 64))
    b._setup()
    kernel_dir = Path(b._cutlass.CUTLASS_PATH) / "include" / "cutlass" / "gemm" / "kernel"
    detail = (kernel_dir / "tile_scheduler_detail.hpp").read_text()
    members = re.search(r"enum class RasterOrderOptions\s*\{([^}]*)\}", detail).group(1)
    names = [m.strip() for m in members.split(",") if m.strip()]
    assert names == ["Heuristic", "AlongM", "AlongN"]  # no explicit values: 0, 1, 2
    assert RASTER_ORDERS == {"heuristic": 0, "along_m": 1, "along_n": 2}
    static = (kernel_dir / "static_tile_scheduler.hpp").read_text()
    arguments = re.search(r"struct Arguments\s*\{([^}]*)\}", static).group(1)
    assert re.findall(r"(\w+)\s+(\w+)\s*=", arguments) == [("int", "max_swizzle_size"),
                                                           ("RasterOrderOptions", "raster_order")]
    from cutlass_cppgen.backend.c_types import _PersistentTileSchedulerArguments

    assert [f for f, _ in _PersistentTileSchedulerArguments._fields_] == ["max_swizzle_size", "raster_order_option"]


def test_the_search_tells_the_watchdog_each_round_of_trials(monkeypatch):
    """run_search with CuPy, the check and the timer simulated: before the kernels are checked
    and ranked the watchdog hears how many there are, and again before the scheduler's trials (the
    top persistent kernels x swizzles x raster orders), so each round runs under a limit of its own."""
    import types

    import numpy as np

    from gemmlab.backends.cutlass import search
    from gemmlab.backends.cutlass.options import KernelOptions
    from gemmlab.measure import check

    class Ref:
        def release(self):
            pass

    def kernel(i):
        return types.SimpleNamespace(key_hash=f"k{i}", name=f"kernel{i}", config={"persistent": True})

    class Launch:
        def __init__(self, k, point=None, a=None, b=None, c=None, swizzle=1, raster="heuristic"):
            self.kernel, self.swizzle, self.raster_order, self.grid = k, swizzle, raster, (1, 1, 1)

        def close(self):
            pass

    launches = [Launch(kernel(i)) for i in range(3)]
    records = [{"kernel": l.kernel.name, "key_hash": l.kernel.key_hash, "status": "compiled"} for l in launches]
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    monkeypatch.setattr(check, "gemm_reference", lambda *a, **k: Ref())
    monkeypatch.setattr(search, "_check_candidate", lambda point, launch, rec, ref, c: True)
    monkeypatch.setattr(search, "_time_interleaved", lambda ls, point: [
        {"rank_time_median_s": 1e-3 * (1 + i), "rank_tflops": 1.0} for i in range(len(ls))])
    monkeypatch.setattr(search, "KernelLaunch", Launch)
    opts = KernelOptions(search=True, search_scheduler_top=2, search_swizzles=(1, 2, 4),
                         search_raster_orders=("along_m", "along_n"))
    point = types.SimpleNamespace(layout="nn", compute="bf16", flops=1e9)
    heard = []
    best, pick = search.run_search(point, opts, launches, records, np.zeros((8, 4)), np.zeros((4, 16)), "C",
                                   exact=False, watch=heard.append)
    assert heard == [3, 2 * 3 * 2]  # the kernels, then 2 kernels x 3 swizzles x 2 raster orders
    assert len(pick.scheduler_records) == 12 and best.kernel.key_hash == "k0"
