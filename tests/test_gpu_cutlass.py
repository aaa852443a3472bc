"""The cutlass backend on a GPU: correct at square and odd sizes, fn = one launch, cache hits, search
(kernels, then swizzle x raster order), swizzled launches, TF32 with a column-major B (TN).

Compiles about 9 CUTLASS kernels (in parallel, one or two rounds on a 16-core host) into
``paths.cache`` (``$GEMMLAB_CACHE``); 4 of them (the FP16 and TF32 auto kernels, the first two FP16
search candidates, the first TN one) are kernels the N = 8192 sweep builds too: point both at one
cache and run the sweep first.

    GEMMLAB_CACHE=/tmp/gemmlab-cache pytest -m gpu tests/test_gpu_cutlass.py -q
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from conftest import compose_cfg, cuda_device_reason
from omegaconf import open_dict

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

PRECISIONS = ["fp64", "fp32", "tf32", "fp16", "bf16"]
# square, odd (no tile divides; 16-bit kernels need even sizes and skip these), non-square
SHAPES = [[128, 128, 128], [1024, 1024, 1024], [1000, 1000, 1000], [1023, 1023, 1023],
          [33, 65, 17], [512, 256, 1024], [384, 768, 256]]
SEARCH_LIMIT = 2
SWIZZLE_SHAPE = [384, 768, 256]  # 3 x 3 tiles of 128x256: a swizzle of 4 changes the launch grid
TN_SHAPES = [[1024, 1024, 1024], [512, 256, 1024]]


def _cfg(tmp_path: Path, variants, precisions, shapes, overrides=()):
    cfg = compose_cfg([f"variant=[{','.join(variants)}]", f"precision=[{','.join(precisions)}]",
                       "sizes=smoke", "measure=quick", *overrides], tmp_path)
    with open_dict(cfg):
        cfg.sizes.square = []
        cfg.sizes.shapes = [list(s) for s in shapes]
    return cfg


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """One backend that has compiled every kernel this module needs, in one parallel build."""
    if cuda_device_reason():
        pytest.skip(cuda_device_reason())
    from gemmlab.backends.cutlass import Cutlass
    from gemmlab.points import expand

    tmp = tmp_path_factory.mktemp("cutlass")
    cfg = _cfg(tmp, ["cutlass_auto", "cutlass_search", "cutlass_tf32_tn"], PRECISIONS, SHAPES,
               [f"variant.cutlass_search.cutlass.search_limit={SEARCH_LIMIT}",
                "variant.cutlass_search.precisions=[fp16]",
                "variant.cutlass_tf32_tn.cutlass.search_limit=1"])
    b = Cutlass(cfg)
    assert b.unavailable() is None
    b.out_dir = tmp / "run"
    points = [p for p in expand(cfg) if not p.skip_reason]
    runnable = [p for p in points if b.skip_reason(p) is None]
    # search only at aligned sizes (its candidates are listed per alignment)
    runnable = [p for p in runnable if p.variant == "cutlass_auto"
                or (p.variant == "cutlass_search" and [p.m, p.n, p.k] == [1024, 1024, 1024])
                or (p.variant == "cutlass_tf32_tn" and [p.m, p.n, p.k] in TN_SHAPES)]
    t0 = time.perf_counter()
    b.prepare(runnable)
    return {"cfg": cfg, "backend": b, "points": points, "runnable": runnable, "tmp": tmp,
            "prepare_s": time.perf_counter() - t0}


def _inputs(point, seed=0):
    import cupy

    from gemmlab import dtypes

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((point.m, point.k), dtype=np.float32)
    b = rng.standard_normal((point.k, point.n), dtype=np.float32)
    from gemmlab.gpu import arrays

    dt_in = dtypes.numpy_dtype(point.in_dtype)
    a_d = arrays.cast(cupy, cupy.asarray(a), point.in_dtype)
    b_d = arrays.cast(cupy, cupy.asarray(b), point.in_dtype)
    c_d = arrays.empty(cupy, (point.m, point.n), point.out_dtype)
    from gemmlab.measure import check

    # the harness's own reference and element-wise bound, on the host (NumPy's BLAS, not CUTLASS)
    ref = check.Reference.gemm(np, a.astype(dt_in), b.astype(dt_in), check.model_of(point), point.tolerance,
                               point.out_dtype)
    return a_d, b_d, c_d, ref


def _check(point, c_d, ref):
    import cupy

    from gemmlab.gpu import arrays

    return ref.verify(arrays.to_float64(cupy, c_d).get())


def _run_point(backend, point):
    import cupy

    from gemmlab.gpu import arrays

    a, b, c, ref = _inputs(point)
    a2, b2, _, _ = backend.make_inputs(point, a, b)
    launch = backend.make_launch(point, a2, b2, c)
    arrays.poison(cupy, c)
    launch.fn()
    cupy.cuda.get_current_stream().synchronize()
    res = _check(point, c, ref)
    backend.release()
    return launch, res


def test_auto_kernels_are_correct_at_square_and_odd_sizes(prepared):
    b = prepared["backend"]
    failures, seen = [], set()
    for p in prepared["points"]:
        if p.variant != "cutlass_auto":
            continue
        reason = b.skip_reason(p)
        if reason:
            # only alignment may skip a point, and only for 16-bit types at odd sizes
            assert p.precision in ("fp16", "bf16") and "even sizes" in reason, (p, reason)
            assert any(x % 2 for x in (p.k, p.n)), (p, reason)
            continue
        launch, res = _run_point(b, p)
        seen.add(p.precision)
        if not res.passed:
            failures.append(f"{p.precision} {p.m}x{p.n}x{p.k} {launch.info['kernel_name']}: {res.failure()}")
        if p.precision == "tf32":
            assert "tf32" in launch.info["kernel_name"] and p.compute == "tf32"
        if p.precision == "fp32":
            assert "simt" in launch.info["kernel_name"] and p.compute == "fp32"
        assert launch.info["registers"] > 0 and launch.info["smem_bytes"] >= 0
    assert not failures, "\n".join(failures)
    assert seen == set(PRECISIONS)


def test_fn_is_one_launch_on_the_current_stream(prepared):
    """Captured into a CUDA graph: fails if fn syncs, allocates through CuPy or uses another stream."""
    import cupy

    from gemmlab.gpu import arrays

    b = prepared["backend"]
    (p,) = [p for p in prepared["points"]
            if p.variant == "cutlass_auto" and p.precision == "fp16" and p.m == 1024]
    a, bb, c, ref = _inputs(p, seed=1)
    launch = b.make_launch(p, a, bb, c)
    pool = cupy.get_default_memory_pool()
    used = pool.used_bytes()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        arrays.poison(cupy, c)
        stream.begin_capture()
        launch.fn()
        graph = stream.end_capture()
        graph.launch()
        stream.synchronize()
    assert _check(p, c, ref).passed
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        launch.fn()
    host_us = (time.perf_counter() - t0) / n * 1e6
    cupy.cuda.get_current_stream().synchronize()
    assert pool.used_bytes() == used
    assert host_us < 200, f"fn spends {host_us:.0f} us on the host per launch"
    b.release()


def test_cache_hit_costs_under_a_second(prepared):
    from gemmlab.backends.cutlass import Cutlass

    again = Cutlass(prepared["cfg"])
    again.out_dir = prepared["tmp"] / "run_again"
    runnable = prepared["runnable"]
    for p in runnable:
        again.kernels(p)  # listing and emitting is not compiling: done before the clock starts
    t0 = time.perf_counter()
    again.prepare(runnable)
    prepare_s = time.perf_counter() - t0
    assert all(r.status == "cached" and r.compile_s == 0 for r in again._results.values())
    assert prepare_s < 1.0, prepare_s
    (p,) = [p for p in runnable if p.variant == "cutlass_auto" and p.precision == "bf16" and p.m == 1024]
    a, b, c, _ = _inputs(p)
    t0 = time.perf_counter()
    launch = again.make_launch(p, a, b, c)
    assert time.perf_counter() - t0 < 1.0
    assert launch.info["compile_s"] == 0
    again.release()


def test_search_times_every_candidate_and_keeps_the_fastest(prepared):
    b = prepared["backend"]
    (p,) = [p for p in prepared["runnable"] if p.variant == "cutlass_search"]
    opts = b.options[p.variant]
    launch, res = _run_point(b, p)
    assert res.passed, res.failure()
    extra = launch.info["extra"]
    records = extra["search"]
    assert len(records) == SEARCH_LIMIT
    ok = [r for r in records if r["status"] == "ok"]
    assert ok and sum(r["best"] for r in records) == 1
    best = next(r for r in records if r["best"])
    assert launch.info["kernel_name"] == best["kernel"]
    # second round: the best kernels again with every swizzle x raster order, the fastest kept
    trials = extra["search_scheduler"]
    combos = len(opts.search_swizzles) * len(opts.search_raster_orders)
    assert len(trials) == combos * min(len(ok), opts.search_scheduler_top)
    assert {r["kernel"] for r in trials} <= {r["kernel"] for r in ok}
    timed = [r for r in trials if r["status"] == "ok"]
    assert len(timed) == len(trials), [r.get("error") for r in trials if r["status"] != "ok"]
    (won,) = [r for r in trials if r["best"]]
    assert won["rank_time_median_s"] == min(r["rank_time_median_s"] for r in timed)
    assert won["kernel"] == best["kernel"]
    cutlass = extra["cutlass"]
    assert (cutlass["swizzle"], cutlass["raster_order"], cutlass["grid"]) == \
        (won["swizzle"], won["raster_order"], won["grid"])


def test_swizzle_and_raster_order_reach_the_kernel(prepared):
    """Run-time tile-scheduler arguments: every launch is correct, and the launch grid, which CUTLASS
    computes from the same arguments, follows them (rounded up to the swizzle, oriented by the
    raster order)."""
    import math

    import cupy

    from gemmlab.gpu import arrays

    b = prepared["backend"]
    (p,) = [p for p in prepared["points"] if p.variant == "cutlass_auto" and p.precision == "fp16"
            and [p.m, p.n, p.k] == SWIZZLE_SHAPE]
    (kernel,) = b.kernels(p)
    assert kernel.config["persistent"], kernel.config
    a, bb, c, ref = _inputs(p, seed=2)
    grids, failures = {}, []
    for swizzle, raster in [(1, "heuristic"), (1, "along_m"), (1, "along_n"), (4, "along_m"), (8, "along_n")]:
        launch = b._load(kernel, p, a, bb, c, swizzle, raster)
        arrays.poison(cupy, c)
        launch()
        cupy.cuda.get_current_stream().synchronize()
        res = _check(p, c, ref)
        if not res.passed:
            failures.append(f"swizzle {swizzle} {raster} grid {launch.grid}: {res.failure()}")
        grids[swizzle, raster] = launch.grid
        launch.close()
    assert not failures, "\n".join(failures)
    cluster_m, cluster_n = kernel.config["cluster"][:2]
    # along m: clusters side by side in x; along n: in y
    assert grids[1, "along_m"][1] == cluster_n and grids[1, "along_n"][0] == cluster_m, grids
    assert grids[1, "along_m"] != grids[1, "along_n"], grids
    assert grids[1, "heuristic"] in (grids[1, "along_m"], grids[1, "along_n"]), grids
    # the tile grid is rounded up to the swizzle: more (idle) CTAs than tiles for this small problem
    assert math.prod(grids[4, "along_m"]) > math.prod(grids[1, "along_m"]), grids

    # the same through the variant's options, recorded in the row
    from gemmlab.backends.cutlass import Cutlass
    from gemmlab.points import expand

    cfg = _cfg(prepared["tmp"] / "swizzled", ["cutlass_auto"], ["fp16"], [SWIZZLE_SHAPE],
               ["variant.cutlass_auto.cutlass.swizzle=4", "variant.cutlass_auto.cutlass.raster_order=along_m"])
    swizzled = Cutlass(cfg)
    swizzled.out_dir = prepared["tmp"] / "run_swizzled"
    (sp,) = [q for q in expand(cfg) if not q.skip_reason]
    launch, res = _run_point(swizzled, sp)
    assert res.passed, res.failure()
    info = launch.info["extra"]["cutlass"]
    assert (info["swizzle"], info["raster_order"], info["grid"]) == (4, "along_m", grids[4, "along_m"])
    assert launch.info["compile_s"] == 0  # the same kernel as without a swizzle: no compile


def test_tn_tf32_is_correct_and_says_its_layout(prepared):
    b = prepared["backend"]
    tn = [p for p in prepared["runnable"] if p.variant == "cutlass_tf32_tn"]
    assert sorted([p.m, p.n, p.k] for p in tn) == sorted(TN_SHAPES)
    failures = []
    for p in tn:
        launch, res = _run_point(b, p)  # B handed over column-major by make_inputs
        if not res.passed:
            failures.append(f"{p.m}x{p.n}x{p.k} {launch.info['kernel_name']}: {res.failure()}")
        info = launch.info["extra"]["cutlass"]
        assert (info["layout_a"], info["layout_b"], info["layout_c"]) == ("row", "col", "row")
        assert info["wgmma_operands"] == "smem x smem"
        assert "tf32" in launch.info["kernel_name"] and "_tnt_" in launch.info["kernel_name"]
    assert not failures, "\n".join(failures)


def test_runner_rows_through_the_gpu_executor(prepared, tmp_path):
    from conftest import run_points

    from gemmlab.measure.gpu import GpuExecutor

    reason = GpuExecutor(prepared["cfg"]).unavailable()
    if reason:
        pytest.skip(f"GPU executor: {reason}")
    cfg = _cfg(tmp_path, ["cutlass_auto"], ["tf32", "fp16"], [[1024, 1024, 1024], [1023, 1023, 1023]])
    with open_dict(cfg):
        cfg.run.progress = False
    _, rows = run_points(cfg, tmp_path / "run")
    by = {(r["precision"], r["m"]): r for r in rows}
    for key in [("tf32", "1024"), ("tf32", "1023"), ("fp16", "1024")]:
        assert by[key]["status"] == "ok", by[key]
        assert by[key]["kernel_name"] and by[key]["compile_s"] not in ("", None)
    assert by[("tf32", "1024")]["compute"] == "tf32"
    assert by[("fp16", "1023")]["status"] == "skipped" and "even sizes" in by[("fp16", "1023")]["reason"]
