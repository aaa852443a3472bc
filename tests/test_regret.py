"""What tuning buys (analysis.regret, the tuning_regret figure and table) on rows made here: the
regret and the winner computed by hand, rows that are not evidence left out, problems compared
inside one run, and the empty case saying what to run."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis import data, regret, style, tables
from analysis.figures import tuning_regret

DEV = "NVIDIA H200"
FLOPS = 2.0 * 4096 * 8192 * 8192


def _row(variant, backend, time_s, run="run-a", shape_name="llama3_70b.mlp_down.t4096", precision="bf16",
         m=4096, n=8192, k=8192, layout="nt", extra=None, **kw):
    r = {"run_id": run, "point_key": f"{variant}-{precision}-{shape_name}-{run}", "device": DEV, "backend": backend,
         "variant": variant, "precision": precision, "op": "gemm", "m": m, "n": n, "k": k, "layout": layout,
         "batch": 1, "shape_name": shape_name, "kind": "gpu", "status": "ok", "timer": "cuda_event", "cache": "flush",
         "flops": FLOPS, "bytes_min": 1.0, "time_median_s": time_s, "time_p20_s": time_s, "time_p80_s": time_s,
         "tflops": FLOPS / time_s / 1e12, "samples": 50, "extra": json.dumps(extra or {})}
    r.update(kw)
    return r


LT_ALGO = {"algorithm_id": 66, "tile": [128, 256], "stages": [64, 3], "split_k": 1, "heuristic_rank": 3}


def rows():
    return [
        # llama3_70b bf16: the CUTLASS search wins; regret = 1.2 / 1.0 - 1 = 0.2
        _row("cublaslt", "cublaslt", 1.2e-3, extra={"algorithm": {"algorithm_id": 21, "tile": [256, 128],
                                                                  "heuristic_rank": 0}}),
        _row("cublaslt_search", "cublaslt", 1.1e-3, extra={"algorithm": LT_ALGO, "search": [{}] * 16,
                                                           "search_s": 2.5}),
        _row("cutlass_search", "cutlass", 1.0e-3, kernel_name="cutlass3x_sm90_128x256", compile_s=400.0,
             extra={"search": [{}] * 10, "search_s": 30.0}),
        _row("wgmma_ws", "cuda", 1.05e-3, layout="nt"),
        # a hand-written row faster than all, but contended: not evidence, never the best
        _row("wgmma_tma", "cuda", 0.5e-3, contended="true"),
        # an autotuned cublaslt row is not the default
        _row("cublaslt", "cublaslt", 0.9e-3, run="run-b", kernel_name="cublasLtMatmul nt algo=3 autotuned"),
        # deepseek_v3 fp8: the default wins (regret 0); only the cuBLASLt search ran
        _row("cublaslt", "cublaslt", 2.0e-4, shape_name="deepseek_v3.attn_o.t16", precision="fp8", m=16,
             n=7168, k=16384),
        _row("cublaslt_search", "cublaslt", 2.1e-4, shape_name="deepseek_v3.attn_o.t16", precision="fp8", m=16,
             n=7168, k=16384, extra={"algorithm": {"algorithm_id": 5}, "search": [{}], "search_s": 0.8}),
        # a square problem whose only search ran in another run: not compared
        _row("cublaslt", "cublaslt", 1e-3, shape_name="", m=8192, n=8192, k=8192, layout="nn"),
        _row("cutlass_search", "cutlass", 0.9e-3, run="run-c", shape_name="", m=8192, n=8192, k=8192, layout="nn",
             extra={"search": [{}], "search_s": 10.0}),
    ]


@pytest.fixture
def ds():
    return data.Dataset(pd.DataFrame(rows()))


def test_shape_sets():
    assert regret.shape_set("llama3_70b.mlp_down.t4096", 4096, 8192, 28672) == "llama3_70b"
    assert regret.shape_set("", 1024, 1024, 1024) == "square"
    assert regret.shape_set(None, 1024, 512, 1024) == "other"


def test_regret_and_winner_by_hand(ds):
    f = regret.frame(ds)
    assert list(f.columns) == regret.COLUMNS
    assert len(f) == 2  # the square problem's search ran in another run
    llama = f[f["shape_set"] == "llama3_70b"].iloc[0]
    assert llama["regret"] == pytest.approx(0.2)
    assert llama["best_kind"] == regret.CUTLASS_SEARCH and llama["best_backend"] == "cutlass"
    assert llama["best_what"] == "cutlass3x_sm90_128x256"
    assert llama["handwritten_time_s"] == pytest.approx(1.05e-3)  # not the contended 0.5 ms
    assert llama["handwritten_what"] == "wgmma_ws"
    assert llama["lt_search_gain"] == pytest.approx(1.2 / 1.1 - 1)
    assert llama["cutlass_search_gain"] == pytest.approx(0.2)
    assert llama["lt_search_s"] == 2.5 and llama["cutlass_search_s"] == 30.0 and llama["cutlass_compile_s"] == 400.0
    assert llama["default_what"] == "algo 21, tile 256x128"
    assert llama["lt_search_what"] == "algo 66, tile 128x256, stages 64x3, split-K 1, heuristic rank 3"
    ds3 = f[f["shape_set"] == "deepseek_v3"].iloc[0]
    assert ds3["regret"] == 0 and ds3["best_kind"] == regret.DEFAULT and ds3["best_backend"] == "cublaslt"
    assert ds3["lt_search_gain"] == pytest.approx(2.0 / 2.1 - 1)  # the search's pick ran slower here
    assert pd.isna(ds3["cutlass_search_time_s"]) and pd.isna(ds3["handwritten_time_s"])
    assert regret.notes(ds, f) == []


def test_a_problem_two_runs_compared_comes_from_the_newer_run_once():
    """tuning_regret repeated (2026-12-01 twice): each problem counts once, from the newer run."""
    newer = [dict(r, run_id="20261202T000000Z-b", point_key=r["point_key"] + "-new",
                  time_median_s=r["time_median_s"] * (2 if r["variant"] == "cublaslt" else 1))
             for r in rows() if r["shape_name"] == "deepseek_v3.attn_o.t16"]
    r = [dict(x, run_id="20261201T000000Z-a") if x["shape_name"] == "deepseek_v3.attn_o.t16" else x
         for x in rows()] + newer
    ds2 = data.Dataset(pd.DataFrame(r))
    f = regret.frame(ds2)
    one = f[f["shape_set"] == "deepseek_v3"]
    assert len(one) == 1 and one.iloc[0]["run_id"] == "20261202T000000Z-b"
    assert one.iloc[0]["regret"] == pytest.approx(2 * 2.0 / 2.1 - 1)  # the newer run's default was slower
    assert len(regret.frame(ds2, every_run=True)) == len(f) + 1 and regret.superseded(ds2) == 1
    assert "1 problem lines of older runs are left out" in tables.regret_table(ds2).footnote


def test_a_search_that_picks_the_default_algorithm_buys_nothing():
    """The search's pick is the heuristic's rank-0 algorithm: a faster time of it is drift, no regret."""
    algo = {"algorithm_id": 66, "tile": [144, 128], "stages": [128, "AUTO"], "split_k": 1}
    r = [_row("cublaslt", "cublaslt", 4.16e-4, extra={"algorithm": dict(algo, heuristic_rank=0)}),
         _row("cublaslt_search", "cublaslt", 3.90e-4, extra={"algorithm": dict(algo, heuristic_rank=0,
                                                                                rank_tflops=1175.0),
                                                              "search": [{}] * 16, "search_s": 0.3})]
    f = regret.frame(data.Dataset(pd.DataFrame(r)))
    line = f.iloc[0]
    assert bool(line["lt_search_is_default"]) and line["best_kind"] == regret.DEFAULT and line["regret"] == 0
    r[1]["extra"] = json.dumps({"algorithm": dict(algo, tile=[128, 160], heuristic_rank=1), "search": [{}],
                                "search_s": 0.3})
    line = regret.frame(data.Dataset(pd.DataFrame(r))).iloc[0]
    assert not line["lt_search_is_default"] and line["best_kind"] == regret.LT_SEARCH
    assert line["regret"] == pytest.approx(4.16 / 3.90 - 1)


def test_an_unreliable_default_leaves_the_problem_out():
    r = rows()
    r[0]["reliable"] = "false"
    f = regret.frame(data.Dataset(pd.DataFrame(r)))
    assert set(f["shape_set"]) == {"deepseek_v3"}


def test_figure_series_and_table(ds):
    fig = tuning_regret.build(ds)
    series = style.series_of(fig)
    # coloured by what was best: the CUTLASS search at llama3_70b, the default itself at deepseek_v3
    assert "regret:llama3_70b:cutlass_search:bf16" in series
    assert "regret:deepseek_v3:cublaslt_heuristic:fp8" in series
    assert "box:llama3_70b" in series and "box:deepseek_v3" in series
    assert {"gain:cublaslt_search:bf16", "gain:cublaslt_search:fp8", "gain:cutlass_search:bf16"} <= set(series)
    assert not any(s.startswith("regret:") and ":hand_written:" in s for s in series)  # the stage never won
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert "the default was best" in labels and "CUTLASS search" in labels
    assert style.notes_of(fig) == []
    assert fig.axes[1].get_xscale() == "log"
    t = tables.regret_table(ds)
    headers = [c.header for c in t.columns]
    for h in ("Shape", "Prec.", "Default (heuristic)", "cuBLASLt search", "CUTLASS search", "Hand-written",
              "Best", "Regret %", "cuBLASLt search s", "CUTLASS search s"):
        assert h in headers, h
    md = tables.render_markdown([t])
    assert "llama3_70b.mlp_down.t4096" in md and "| 20.0 |" in md


def test_without_tuning_rows_the_figure_and_table_say_what_to_run():
    r = [x for x in rows() if "search" not in json.loads(x["extra"])]
    ds = data.Dataset(pd.DataFrame(r))
    fig = tuning_regret.build(ds)
    notes = "\n".join(style.notes_of(fig))
    assert "no cublaslt_search / tuning rows" in notes and "+experiment=tuning_regret" in notes
    assert not [s for s in style.series_of(fig) if s.startswith(("regret:", "gain:", "box:"))]
    md = tables.render_markdown([tables.regret_table(ds)])
    assert tables.NOT_MEASURED in md and "+experiment=tuning_regret" in md


# -- the experiment ------------------------------------------------------------------------------
def test_experiment_selects_the_llm_sets_both_precisions_and_every_kind():
    from collections import Counter

    from conftest import compose_cfg

    from gemmlab.backends.base import backend_class
    from gemmlab.points import expand

    cfg = compose_cfg(["+experiment=tuning_regret"])
    pts = expand(cfg)
    assert {p.shape_name.split(".")[0] for p in pts} == {"llama3_70b", "deepseek_v3"}
    assert {p.shape_name.rsplit(".t", 1)[1] for p in pts} == {"16", "4096"}
    assert {p.precision for p in pts} == {"bf16", "fp8"} and {p.layout for p in pts} == {"nt"}
    variants = Counter(p.variant for p in pts)
    assert {"cublaslt", "cublaslt_search", "cutlass_search", "wgmma_ws", "mma_sync"} <= set(variants)
    assert len({p.shape_name for p in pts}) == 30  # 4 + 11 projections x 2 token counts
    assert cfg.variant.cutlass_search.cutlass.search_scheduler_top == 1
    # the stages that read nn only skip nt with their reason; stage 12 (B_KMAJOR), the searches and
    # the default run it
    stage = next(p for p in pts if p.variant == "mma_sync" and p.precision == "bf16")
    assert "layout nt" in backend_class(stage.backend).workload_reason(stage)
    ws = next(p for p in pts if p.variant == "wgmma_ws" and p.precision == "bf16")
    assert backend_class(ws.backend).workload_reason(ws) is None and ws.skip_reason is None
    lt = next(p for p in pts if p.variant == "cublaslt_search" and p.precision == "bf16")
    assert backend_class(lt.backend).workload_reason(lt) is None and lt.skip_reason is None


def test_an_unknown_model_name_fails_at_compose():
    from conftest import compose_cfg

    from gemmlab.points import ConfigError, expand

    with pytest.raises(ConfigError, match="llama9"):
        expand(compose_cfg(["sizes=llm", "sizes.model_names=[llama9]"]))
