"""A decode kernel's cost per launch and per byte (analysis.decode_cost): time = t0 + bytes / bw fitted
over one run's decode points, and the bytes from which a bar on "% of the copy probe" can be met. Rows
written here with known t0 and bw, and the H200's session34c decode experiment."""
from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import ROOT
from test_decode_figure import _copy, _gemm

from analysis import data
from analysis.decode_cost import (MIN_COPY_SIZES, MIN_POINTS, bar_room, bytes_for, copy_curve, copy_time_at, fit,
                                   launch_costs, main)

# (n, k) of 64 MiB and more in bf16 at 1 token: 70B mlp_down, mlp_gate_up, DeepSeek-V3 dense_gate_up, attn_o, 8B
# mlp_gate_up
MATRICES = [(8192, 28672), (57344, 8192), (36864, 7168), (7168, 16384), (28672, 4096)]


def _line_rows(variant, run, t0_s, bw, roof_gbs, matrices=MATRICES, m=1):
    rows = [_copy(run, roof_gbs)]
    for i, (n, k) in enumerate(matrices):
        r = _gemm(variant, "cuda", f"model.p{i}.t{m}", m, n, k, 1.0, run)
        r["time_median_s"] = t0_s + r["bytes_min"] / bw
        rows.append(r)
    return rows


def _ds(tmp_path, rows):
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    return data.Dataset.from_paths([tmp_path])


def test_the_fit_recovers_the_launch_cost_and_the_streaming_rate(tmp_path):
    ds = _ds(tmp_path, _line_rows("decode_wgmma", "run-a", 8e-6, 4.4e12, 4280.0))
    (c,) = launch_costs(ds).itertuples()
    assert (c.variant, c.precision, c.tokens, c.points) == ("decode_wgmma", "bf16", 1, len(MATRICES))
    assert c.t0_us == pytest.approx(8.0, rel=1e-6) and c.bw_gbs == pytest.approx(4400.0, rel=1e-6)
    assert c.roof_gbs == pytest.approx(4280.0) and c.worst_residual_pct < 1e-6
    # 90% of 4280 GB/s from t0 / (1 / 3852e9 - 1 / 4400e9) bytes: ~250 MB
    assert c.mb_for_pct == pytest.approx(8e-6 / (1 / (0.9 * 4280e9) - 1 / 4400e9) / 1e6, rel=1e-6)
    assert 240 < c.mb_for_pct < 260
    # a kernel that streams under the bar never meets it, whatever its size
    assert math.isnan(bytes_for(90.0, 1e-6, 0.85 * 4280e9, 4280e9))
    assert bytes_for(90.0, 0.0, 4400e9, 4280e9) == 0.0


def test_groups_too_small_or_too_narrow_are_not_fitted(tmp_path):
    few = _line_rows("decode_wgmma", "run-a", 8e-6, 4.4e12, 4280.0, matrices=MATRICES[:MIN_POINTS - 1])
    narrow = _line_rows("decode_rows", "run-b", 8e-6, 4.4e12, 4280.0,
                        matrices=[(8192, 28672), (8192, 28000), (8192, 27000), (8192, 26000)])
    small = _line_rows("decode_splitk", "run-c", 8e-6, 4.4e12, 4280.0,
                       matrices=[(4096, 4096), (4096, 2048), (2048, 2048), (1024, 2048)])  # under 64 MiB
    assert launch_costs(_ds(tmp_path, few + narrow + small)).empty
    t0, bw, worst = fit([1e8, 2e8, 4e8], [1e-5, 1e-5, 1e-5])  # times that do not grow with the bytes
    assert bw == math.inf and t0 == pytest.approx(1e-5)


def test_each_run_token_count_and_variant_is_its_own_fit(tmp_path):
    rows = (_line_rows("decode_wgmma", "run-a", 8e-6, 4.4e12, 4280.0)
            + _line_rows("cublas", "run-a", 6.5e-6, 4.2e12, 4280.0)[1:]
            + _line_rows("decode_wgmma", "run-a", 9e-6, 4.4e12, 4280.0, m=16)[1:]
            + _line_rows("decode_wgmma", "run-b", 7e-6, 4.3e12, 4200.0))
    costs = launch_costs(_ds(tmp_path, rows)).set_index(["run_id", "variant", "tokens"])
    assert costs.loc[("run-a", "cublas", 1), "t0_us"] == pytest.approx(6.5, rel=1e-6)
    assert costs.loc[("run-a", "decode_wgmma", 16), "t0_us"] == pytest.approx(9.0, rel=1e-6)
    assert costs.loc[("run-b", "decode_wgmma", 1), "roof_gbs"] == pytest.approx(4200.0)
    assert costs.loc[("run-a", "cublas", 1), "mb_for_pct"] > costs.loc[("run-a", "decode_wgmma", 1), "mb_for_pct"]


def test_the_h200_decode_experiment_stage_17_pays_more_a_launch_and_streams_faster(capsys):
    """session34c (H200, the committed defaults): stage 17 at 1 token fits ~8 us and more GB/s than the copy probe,
    the libraries less a launch and less GB/s; 90% of the copy probe from ~250 MB on, above 70B mlp_down's 235."""
    folder = ROOT / "outputs" / "reference" / "h200-2026-12-05" / "session34c" / "decode_wgmma_experiment"
    costs = launch_costs(data.Dataset.from_paths([folder])).set_index(["variant", "precision", "tokens"])
    stage = costs.loc[("decode_wgmma", "fp8", 1)]
    assert 7.0 < stage["t0_us"] < 9.5 and stage["bw_gbs"] > stage["roof_gbs"] and stage["worst_residual_pct"] < 6
    assert 235 < stage["mb_for_pct"] < 270
    for lib in (("cublaslt", "fp8", 16), ("cublas", "bf16", 1)):
        assert costs.loc[lib, "t0_us"] < stage["t0_us"] and costs.loc[lib, "bw_gbs"] < stage["bw_gbs"], lib
    assert main([str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| run | variant |") and "| decode_wgmma | fp8 | 1 |" in out


def test_readme_quotes_the_fit_of_the_h200_decode_experiment():
    from readme_said import assert_said

    folder = ROOT / "outputs" / "reference" / "h200-2026-12-05" / "session34c" / "decode_wgmma_experiment"
    costs = launch_costs(data.Dataset.from_paths([folder])).set_index(["variant", "precision", "tokens"])
    s, lt = costs.loc[("decode_wgmma", "fp8", 1)], costs.loc[("cublaslt", "fp8", 16)]
    assert_said([f"stage 17 **t0 {s['t0_us']:.1f} us, bw {s['bw_gbs']:.0f} GB/s** (worst point "
                 f"{s['worst_residual_pct']:.1f}% off the line)",
                 f"90% of the copy probe ({s['roof_gbs']:.0f} GB/s) from **{s['mb_for_pct']:.0f} MB** on",
                 f"cuBLASLt at 16 tokens t0 {lt['t0_us']:.1f} us, bw {lt['bw_gbs']:.0f} GB/s (90% from "
                 f"{lt['mb_for_pct']:.0f} MB)"], "decode cost paragraph")


# -- bar_room: what a bar of FACTOR x the library asks, beside a bare copy of the same bytes ------------------
def _copy_at(run, nbytes, time_s):
    r = _copy(run, 1.0)
    r.update(m=int(nbytes // 8), bytes_min=float(nbytes), time_median_s=time_s, point_key=f"copy-{run}-{nbytes}")
    return r


def test_bar_room_reads_the_copy_probe_at_the_points_bytes(tmp_path):
    # the copy's ramp: 10 us at 25 MB, 17 us at 50 MB, 22 us at 67 MB (no line: read measured, log-log between)
    copies = [_copy_at("copies", b, t) for b, t in ((8e6, 6.5e-6), (25e6, 10e-6), (50e6, 17e-6), (67e6, 22e-6))]
    stage = _gemm("decode_wgmma", "cuda", "llama3_8b.attn_qkv.t1", 1, 6144, 4096, 2500.0, "dec",
                  baseline_variant="cublaslt", baseline_time_median_s=26e-6)
    lib_only = _gemm("cublaslt", "cuda", "llama3_8b.mlp_down.t1", 1, 4096, 14336, 2500.0, "dec")  # no baseline
    huge = _gemm("decode_wgmma", "cuda", "llama3_70b.mlp_down.t1", 1, 8192, 28672, 2500.0, "dec",
                 baseline_variant="cublas", baseline_time_median_s=1e-4)  # 470 MB: past the copy sizes
    ds = _ds(tmp_path, copies + [stage, lib_only, huge])
    (r,) = bar_room(ds, 1.3).itertuples()
    assert (r.variant, r.point, r.tokens, r.library) == ("decode_wgmma", "llama3_8b.attn_qkv.t1", 1, "cublaslt")
    assert r.needed_us == pytest.approx(20.0) and r.library_us == pytest.approx(26.0)
    mb = stage["bytes_min"] / 1e6  # 50.4 MB: just past the 50 MB copy, on the log-log segment to 67 MB
    want = 17e-6 * math.exp(math.log(22 / 17) * math.log(mb / 50) / math.log(67 / 50))
    assert r.copy_us == pytest.approx(1e6 * want) and r.needed_over_copy == pytest.approx(20e-6 / want)
    assert bar_room(ds, 1.3, shapes="mlp_down").empty and len(bar_room(ds, 1.3, shapes="1x6144x4096")) == 1
    with pytest.raises(ValueError, match="positive"):
        bar_room(ds, 0)
    # a run with the copy at fewer than MIN_COPY_SIZES sizes gives no curve: nothing to read
    assert bar_room(_ds(tmp_path, copies[:MIN_COPY_SIZES - 1] + [stage]), 1.3).empty
    assert copy_time_at(copy_curve(ds.gpu), 4e6) != copy_time_at(copy_curve(ds.gpu), 4e6)  # NaN under the sizes


def test_the_copy_curve_is_one_runs_the_one_with_most_sizes(tmp_path):
    a = [_copy_at("20261206T1000Z-a", b, b / 3e15) for b in (1e7, 2e7, 4e7)]
    b = [_copy_at("20261206T1100Z-b", x, x / 2e15) for x in (1e7, 2e7, 4e7, 8e7)]
    c = [_copy_at("20261206T1200Z-c", x, x / 1e15) for x in (1e7, 2e7, 4e7)]
    curve = copy_curve(_ds(tmp_path, a + b + c).gpu)
    assert set(curve["run_id"]) == {"20261206T1100Z-b"} and list(curve["bytes_min"]) == [1e7, 2e7, 4e7, 8e7]
    curve = copy_curve(_ds(tmp_path, a + c).gpu)  # a tie: the latest run
    assert set(curve["run_id"]) == {"20261206T1200Z-c"}


def test_on_the_h100_the_1_3x_bar_asks_a_decode_gemm_for_about_a_bare_copys_time(capsys):
    """session43 (H100): the decode experiment and the copy probe from 8 MB to 1 GiB. At Llama-3 8B attn_qkv the
    1.3x bar asks 5-7% more time than a cudaMemcpy of the same bytes at 1 token, and less than it in bf16 at 64."""
    day = ROOT / "outputs" / "reference" / "h100-2026-12-06"
    folders = [day / "session43" / "decode_default", day / "session43c" / "copy_sizes"]
    room = bar_room(data.Dataset.from_paths(folders), 1.3, shapes=r"llama3_8b\.attn_qkv").set_index(
        ["precision", "tokens"])
    assert len(room) == 6 and (room["variant"] == "decode_wgmma").all()
    assert 1.0 < room.loc[("fp8", 1), "needed_over_copy"] < 1.1
    assert 1.0 < room.loc[("bf16", 1), "needed_over_copy"] < 1.1
    assert room.loc[("bf16", 64), "needed_over_copy"] < 1.0
    assert room.loc[("fp8", 1), "copy_us"] == pytest.approx(10.63, abs=0.02)
    from readme_said import assert_said

    f1, b1, b64 = room.loc[("fp8", 1)], room.loc[("bf16", 1)], room.loc[("bf16", 64)]
    assert_said([f"**{f1['needed_us']:.2f} us at fp8 and 1 token, where a bare copy of the same {f1['mb']:.1f} MB "
                 f"takes {f1['copy_us']:.2f} us** ({f1['needed_over_copy']:.3f}), {b1['needed_over_copy']:.3f} in "
                 f"bf16, and **{b64['needed_over_copy']:.3f} in bf16 at 64 tokens**"], "decode room paragraph")
    args = [str(f) for f in folders]
    assert main(args + ["--room", "1.3", "--shapes", "attn_qkv"]) == 0
    assert "| llama3_8b.attn_qkv.t1 | fp8 | decode_wgmma | 25.2 |" in capsys.readouterr().out
    # one copy size in session43's run: no curve, so the fits alone (the copy's columns "-")
    assert main([str(folders[0]), "--room", "1.3", "--shapes", "attn_qkv"]) == 0
    assert "| llama3_8b.attn_qkv.t1 | fp8 | decode_wgmma | 25.2 |" in capsys.readouterr().out
    assert main(args + ["--room", "0"]) == 2 and "must be positive, not 0.0" in capsys.readouterr().err
    assert main(args + ["--room", "1.3", "--shapes", "attn_(qkv"]) == 2
    assert "missing ), unterminated subpattern" in capsys.readouterr().err


def test_bar_room_reads_the_fixed_cost_the_bar_leaves_at_the_fitted_rate(tmp_path):
    """Without a copy curve, a point whose run fits its variant: the bar's time less its bytes at the fitted bw,
    beside the lowest t0 the run fits at that precision and token count (here the library's)."""
    rows = (_line_rows("decode_wgmma", "run-a", 8e-6, 4.4e12, 4280.0)
            + _line_rows("cublas", "run-a", 5e-6, 4.2e12, 4280.0)[1:]
            + _line_rows("cublaslt", "run-a", 4e-6, 4.0e12, 4280.0, m=16)[1:])  # another token count: not a peer
    stage = _gemm("decode_wgmma", "cuda", "llama3_8b.attn_qkv.t1", 1, 6144, 4096, 2500.0, "run-a",
                  baseline_variant="cublas", baseline_time_median_s=17.5e-6)
    alone = _gemm("decode_rows", "cuda", "llama3_8b.attn_qkv.t1", 1, 6144, 4096, 2400.0, "run-a",
                  baseline_variant="cublas", baseline_time_median_s=17.5e-6)  # no fit, no copy curve: left out
    ds = _ds(tmp_path, rows + [stage, alone])
    (r,) = bar_room(ds, 1.3, shapes="attn_qkv").itertuples()
    assert r.variant == "decode_wgmma" and math.isnan(r.copy_us) and math.isnan(r.needed_over_copy)
    assert r.t0_us == pytest.approx(8.0, rel=1e-6) and r.bw_gbs == pytest.approx(4400.0, rel=1e-6)
    assert r.t0_room_us == pytest.approx(17.5 / 1.3 - 1e6 * stage["bytes_min"] / 4.4e12, rel=1e-6)
    assert (r.best_t0_variant, r.best_t0_us) == ("cublas", pytest.approx(5.0, rel=1e-6))
    assert r.t0_room_us < r.best_t0_us  # 2.0 us: less than any fitted launch


def test_on_the_h200_the_1_3x_bar_leaves_less_fixed_cost_than_any_kernel_fits(capsys):
    """session40j (H200, bf16, stage 17 at its defaults, the libraries interleaved; no copy sizes on the H200):
    at Llama-3 8B attn_qkv the 1.3x bar leaves ~2 us of fixed cost at stage 17's fitted rate, under half the
    lowest t0 any kernel of that run fits (cuBLAS at 1 token 4.9 us, cuBLASLt at 64 tokens 6.1)."""
    folder = ROOT / "outputs" / "reference" / "h200-2026-12-06" / "session40j"
    room = bar_room(data.Dataset.from_paths([folder]), 1.3, shapes=r"llama3_8b\.attn_qkv").set_index("tokens")
    assert list(room.index) == [1, 16, 64] and (room["precision"] == "bf16").all()
    assert room["copy_us"].isna().all()
    for t in (1, 64):  # the bar's two shapes
        r = room.loc[t]
        assert 1.5 < r["t0_room_us"] < 3.0 and r["t0_room_us"] < 0.5 * r["best_t0_us"] < r["t0_us"], t
    from readme_said import assert_said

    one, last = room.loc[1], room.loc[64]
    assert_said([f"the 1.3x bar asks **{one['needed_us']:.2f} us at 1 token and {last['needed_us']:.2f} at 64**",
                 f"at stage 17's fitted {one['bw_gbs']:.0f}-{last['bw_gbs']:.0f} GB/s leaves "
                 f"**{one['t0_room_us']:.1f} / {last['t0_room_us']:.1f} us** of fixed cost",
                 f"the lowest t0 any kernel of that run fits is {one['best_t0_us']:.1f} us ({one['best_t0_variant']}, "
                 f"1 token) and {last['best_t0_us']:.1f} ({last['best_t0_variant']}, 64 tokens)"],
                "decode room paragraph")
