"""gemmlab.bench.decode_trace without a GPU: its summary of a launch's stamps, its stream-K ranges
(the kernel's), and the stamps' place in the workspace (where stage 16 writes them with TRACE 1)."""
from __future__ import annotations

import numpy as np
import pytest
from test_decode_rows import rows_point

from gemmlab.backends.cuda_kernels import launch_shape
from gemmlab.bench import decode_trace as dt


def test_defines_round_trip():
    assert dt.parse_defines("{DEFER:0, XSHARE:1}") == {"DEFER": 0, "XSHARE": 1}
    assert dt.parse_defines("{}") == {}
    assert dt.define_override({"DEFER": 1, "TRACE": 1}) == "{DEFER:1,TRACE:1}"


def test_active_warps_are_the_kernels_non_empty_ranges():
    # moe_router at 1 token: 16 units x 28 steps = 448 positions over 1056 warps
    act = dt.active_warps(16, 28, 1056)
    assert sum(act) == 448 and len(act) == 1056
    assert all(dt.active_warps(384, 16, 1056))  # 6144 positions: every warp has some


def test_trace_stats_of_a_known_launch():
    # three active warps (ns): starts 0, 100, 200; first data +1000; last MMA at 5000, 6000, 9000;
    # ends 500 ns after; a fourth, inactive warp is left out
    stamps = np.array([[0, 1000, 5000, 5500], [100, 1100, 6000, 6500], [200, 1200, 9000, 9500],
                       [50, 50, 50, 50]], dtype=np.uint64)
    st = dt.trace_stats(stamps, [True, True, True, False])
    assert st["span_us"] == pytest.approx(9.5)
    assert st["start_skew_us"] == pytest.approx(0.2)
    assert st["first_data_med_us"] == pytest.approx(1.0) and st["first_data_max_us"] == pytest.approx(1.0)
    assert st["stream_p50_us"] == pytest.approx(6.0) and st["stream_max_us"] == pytest.approx(9.0)
    assert st["tail_us"] == pytest.approx(3.5)
    assert st["finish_max_us"] == pytest.approx(0.5)
    assert st["clock_step_ns"] == 100
    with pytest.raises(ValueError, match="no active warp"):
        dt.trace_stats(stamps, [False] * 4)
    # the SM column is not a time; the dump is relative to the first active start
    with_sm = np.concatenate([stamps, np.array([[7], [3], [7], [1]], dtype=np.uint64)], axis=1)
    assert dt.trace_stats(with_sm, [True, True, True, False]) == st
    assert dt.dump_warps(with_sm, [True, True, True, False])[1] == [100, 1100, 6000, 6500, 3, 1]


@pytest.mark.parametrize("m,n,k", [(1, 6144, 4096), (16, 8192, 28672)])
def test_stamps_end_the_workspace(m, n, k):
    """TRACE 1 grows the workspace by 40 bytes a warp, right after the partials, where the probe reads."""
    p0, p1 = rows_point(m, n, k), rows_point(m, n, k, defines="{TRACE:1}")
    s0, s1 = launch_shape(p0, sm_count=132), launch_shape(p1, sm_count=132)
    let, nt = dict(s1.let), dict(p1.point_defines())["NT"]
    warps = let["G"] * 8
    trace_off = 4 * ((let["UNITS"] + 63) // 64) * 64 + warps * 2 * nt * 512
    assert s0.workspace_bytes == trace_off
    assert s1.workspace_bytes == trace_off + warps * 8 * dt.WORDS


@pytest.mark.parametrize("m,n,k,defines", [(1, 6144, 4096, "{}"), (64, 8192, 28672, "{CLUSTER:2}"),
                                           (16, 57344, 8192, "{CONSUMERS:1}")])
def test_stage_17_stamps_end_its_workspace(m, n, k, defines):
    """Stage 17's TRACE 1 adds 40 bytes per consumer warpgroup of the grid right after its partials, where the probe
    reads them (--variant decode_wgmma)."""
    from test_decode_wgmma import wgmma_point

    trace = defines[:-1] + ("," if defines != "{}" else "") + "TRACE:1}"
    p0, p1 = wgmma_point(m, n, k, "bf16", defines), wgmma_point(m, n, k, "bf16", trace)
    s0, s1 = launch_shape(p0, sm_count=132), launch_shape(p1, sm_count=132)
    lay = dt.wgmma_trace_layout(dict(s1.let), p1.expr_env(), n)
    assert s0.workspace_bytes == lay["offset"]
    assert lay["records"] == dict(s1.let)["G"] * p1.expr_env()["CONSUMERS"]
    assert s1.workspace_bytes == lay["offset"] + lay["records"] * 8 * dt.WORDS


def test_probe_defaults_per_stage():
    assert dt.TRACED["decode_wgmma"] == ["{}"] and dt.TRACED["decode_rows"] == ["{RING:0}", "{RING:3}"]
