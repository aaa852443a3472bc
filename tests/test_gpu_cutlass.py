"""The cutlass backend on a GPU: correct at square and odd sizes, fn = one launch, cache hits, search.

Compiles about 7 CUTLASS kernels (in parallel, one round on a 16-core host) into ``paths.cache``
(``$GEMMLAB_CACHE``): point it at the cache of the benchmark steps so they share it.

    GEMMLAB_CACHE=/tmp/gemmlab-cache pytest -m gpu tests/test_gpu_cutlass.py -q
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from omegaconf import open_dict

from conftest import compose_cfg, cuda_device_reason

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

PRECISIONS = ["fp64", "fp32", "tf32", "fp16", "bf16"]
# square, odd (no tile divides; 16-bit kernels need even sizes and skip these), non-square
SHAPES = [[128, 128, 128], [1024, 1024, 1024], [1000, 1000, 1000], [1023, 1023, 1023],
          [33, 65, 17], [512, 256, 1024]]
SEARCH_LIMIT = 2


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
    cfg = _cfg(tmp, ["cutlass_auto", "cutlass_search"], PRECISIONS, SHAPES,
               [f"variant.cutlass_search.cutlass.search_limit={SEARCH_LIMIT}",
                "variant.cutlass_search.precisions=[fp16]"])
    b = Cutlass(cfg)
    assert b.unavailable() is None
    b.out_dir = tmp / "run"
    points = [p for p in expand(cfg) if not p.skip_reason]
    runnable = [p for p in points if b.skip_reason(p) is None]
    # search only at one size (its candidates are listed per alignment)
    runnable = [p for p in runnable if p.variant == "cutlass_auto" or [p.m, p.n, p.k] == [1024, 1024, 1024]]
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
    ref = a.astype(dt_in).astype(np.float64) @ b.astype(dt_in).astype(np.float64)
    return a_d, b_d, c_d, ref


def _check(point, c_d, ref):
    import cupy

    from gemmlab import check
    from gemmlab.gpu import arrays

    out = arrays.to_float64(cupy, c_d).get()
    return check.compare(np, out, ref, point.tolerance)


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
    launch, res = _run_point(b, p)
    assert res.passed, res.failure()
    records = launch.info["extra"]["search"]
    assert len(records) == SEARCH_LIMIT
    ok = [r for r in records if r["status"] == "ok"]
    assert ok and sum(r["best"] for r in records) == 1
    best = next(r for r in records if r["best"])
    assert best["time_median_s"] == min(r["time_median_s"] for r in ok)
    assert launch.info["kernel_name"] == best["kernel"]


def test_runner_rows_through_the_gpu_executor(prepared, tmp_path):
    from gemmlab.gpu.executor import GpuExecutor

    from conftest import run_points

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
