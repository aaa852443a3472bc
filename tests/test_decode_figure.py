"""The memory-bound half of the roofline (issue 30): the decode figure, the roofline's decode label
and the ladder's memory-bound rung, on result files written here (a decode run with its own copy
row, a library run without one, and a faster copy row of another run) and on the reference data.
Expected numbers are recomputed from the rows with plain arithmetic, not with analysis.decode.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, evidence, on_the_reference_worker
from readme_said import assert_said

from analysis import data, decode, ladder, style, tables
from analysis.figures import FIGURES, roofline

DEV = "NVIDIA H200"
STAGE_TAGS = json.dumps(["ladder", "memory_bound", "hopper"])
SAME_RUN_GBS, OTHER_RUN_GBS = 4000.0, 4400.0  # the decode run's copy row; another run's, faster


def _copy(run, gbs):
    n = 1 << 28
    b = 8.0 * n
    return {"run_id": run, "point_key": f"copy-{run}", "device": DEV, "backend": "gpu_probe", "variant": "copy_gpu",
            "kind": "gpu", "precision": "fp32", "op": "copy", "m": n, "n": 1, "k": 1, "status": "ok",
            "timer": "cuda_event", "flops": 0.0, "bytes_min": b, "time_median_s": b / (gbs * 1e9), "samples": 50,
            "reliable": "true"}


def _gemm(variant, backend, name, m, n, k, gbs, run, key="", batch=1, **kw):
    b = 2.0 * batch * (n * k + m * k + m * n)  # bf16 in and out
    t = b / (gbs * 1e9)
    r = {"run_id": run, "point_key": f"{variant}-{name}-{m}-{run}{key}", "device": DEV, "backend": backend,
         "variant": variant, "kind": "gpu", "precision": "bf16", "op": "gemm", "m": m, "n": n, "k": k,
         "layout": "nt", "batch": batch, "shape_name": name, "status": "ok", "timer": "cuda_event",
         "flops": 2.0 * batch * m * n * k, "bytes_min": b, "intensity": 2.0 * m * n * k / b * batch,
         "time_median_s": t, "time_p20_s": t, "time_p80_s": t, "tflops": 2.0 * batch * m * n * k / t / 1e12,
         "samples": 200, "reliable": "true", "rel_error": 1e-3}
    r.update(kw)
    return r


def _stage(name, m, n, k, gbs, run="decode-bf16", baseline_pct=None, **kw):
    row = _gemm("decode_splitk", "cuda", name, m, n, k, gbs, run, stage=14, tags=STAGE_TAGS, **kw)
    if baseline_pct is not None:  # the cuBLAS timed interleaved with it: the stage at baseline_pct % of it
        row.update(baseline_variant="cublaslt", baseline_time_median_s=row["time_median_s"] * baseline_pct / 100)
    return row


def decode_rows():
    lib = json.dumps(["library"])
    return [
        _copy("decode-bf16", SAME_RUN_GBS), _copy("copy-other", OTHER_RUN_GBS),
        _stage("llama3_8b.attn_qkv.t1", 1, 6144, 4096, 3000.0, baseline_pct=110.0),
        _stage("llama3_8b.mlp_down.t64", 64, 4096, 14336, 3800.0, baseline_pct=125.0),
        _stage("llama3_8b.mlp_down.t64", 64, 4096, 14336, 3500.0, key="-slower"),  # not the point's best row
        _stage("llama3_70b.attn_o.t16", 16, 8192, 8192, 4300.0, reliable="false", unreliable_reason="noise 9%"),
        _gemm("cublas", "cublas", "llama3_8b.mlp_down.t64", 64, 4096, 14336, 3000.0, "decode-bf16", tags=lib),
        # a run without a copy row: against the device's best copy row, the other run's
        _gemm("cublaslt", "cublaslt", "llama3_8b.attn_o.t16", 16, 4096, 4096, 4100.0, "lib-only", tags=lib),
        # not decode points: a small square GEMM and routed experts at 1024 tokens (m = 32 per expert)
        _gemm("cublas", "cublas", "", 64, 64, 64, 10.0, "lib-only", tags=lib),
        _gemm("cublas", "cublas", "deepseek_v3.expert_down.t1024", 32, 7168, 2048, 4000.0, "lib-only",
              batch=256, tags=lib),
    ]


def _write(tmp_path, rows) -> data.Dataset:
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    return data.Dataset.from_paths([tmp_path])


def _artists(fig, prefix):
    return {a.get_gid(): a for ax in fig.axes for a in list(ax.collections) + list(ax.texts) + list(ax.lines)
            if (a.get_gid() or "").startswith(prefix)}


def _pct(gbs, roof):
    return 100.0 * gbs / roof


# -- the rule -----------------------------------------------------------------------------------
def test_which_rows_are_decode_points():
    df = pd.DataFrame([dict(op="gemm", m=1, n=4096, k=4096, shape_name=""),
                       dict(op="gemm", m=64, n=32768, k=512, shape_name="deepseek_v3.attn_kv_b.t64"),
                       dict(op="gemm", m=2, n=7168, k=2048, shape_name="deepseek_v3.expert_down.t64"),
                       dict(op="gemm", m=32, n=7168, k=2048, shape_name="deepseek_v3.expert_down.t1024"),
                       dict(op="gemm", m=64, n=64, k=64, shape_name=""),
                       dict(op="gemm", m=65, n=8192, k=8192, shape_name=""),
                       dict(op="copy", m=1, n=1 << 20, k=1 << 20, shape_name="")])
    assert list(decode.decode_mask(df)) == [True, True, True, False, False, False, False]
    assert list(decode.tokens_of(df)[:4]) == [1, 64, 64, 1024]


# -- rows written here --------------------------------------------------------------------------
def test_decode_figure_places_each_point_against_its_runs_copy_roof(tmp_path):
    """Each point at (bytes moved, its best row's GB/s as % of the copy row of its own run), the
    library run without a copy row against the device's best; labelled with its %; an unreliable
    row hollow and unlabelled; the square and the 1024-token expert GEMMs absent. Were the roof
    taken from the faster copy row of the other run, the stage's point would sit at 86%, not 95%."""
    ds = _write(tmp_path, decode_rows())
    fig = FIGURES["decode"](ds)
    points = _artists(fig, "point:")
    assert set(points) == {"point:decode_splitk:bf16:1", "point:decode_splitk:bf16:64", "point:cublas:bf16:64",
                           "point:cublaslt:bf16:16"}
    assert set(_artists(fig, "unreliable:")) == {"unreliable:decode_splitk:bf16:16"}
    b64 = 2.0 * (4096 * 14336 + 64 * 14336 + 64 * 4096)
    x, y = points["point:decode_splitk:bf16:64"].get_offsets()[0]
    assert x == pytest.approx(b64 / 1e6) and y == pytest.approx(_pct(3800.0, SAME_RUN_GBS))  # 95, its best row
    assert y != pytest.approx(_pct(3800.0, OTHER_RUN_GBS))
    assert points["point:cublas:bf16:64"].get_offsets()[0][1] == pytest.approx(_pct(3000.0, SAME_RUN_GBS))
    assert points["point:cublaslt:bf16:16"].get_offsets()[0][1] == pytest.approx(_pct(4100.0, OTHER_RUN_GBS))
    labels = {g: t.get_text() for g, t in _artists(fig, "pct:").items()}
    assert labels == {"pct:decode_splitk:bf16:1": "75%", "pct:decode_splitk:bf16:64": "95%",
                      "pct:cublas:bf16:64": "75%", "pct:cublaslt:bf16:16": f"{_pct(4100, OTHER_RUN_GBS):.0f}%*"}
    notes = " ".join(style.notes_of(fig))
    assert "own run (4 points; 4 TB/s)" in notes  # the hollow one too
    assert "best copy row, 4.4 TB/s (run copy-other), for the 1 point whose run has no copy row" in notes
    assert [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")] == \
        ["1 token", "16 tokens", "64 tokens"]


def test_roofline_labels_the_best_decode_point_with_its_runs_roof(tmp_path):
    """The stage at 64 tokens is the decode point closest to its roof (95% of its run's copy);
    against the other run's faster copy row cuBLASLt's 93% would win instead."""
    fig = roofline.build(_write(tmp_path, decode_rows()))
    label = _artists(fig, "label:decode-best")["label:decode-best"]
    assert label.get_text() == f"decode {_pct(3800, SAME_RUN_GBS):.0f}%"
    assert set(_artists(fig, "decode-best:")) == {"decode-best:decode_splitk:bf16"}
    notes = " ".join(style.notes_of(fig))
    assert "decode_splitk bf16 llama3_8b.mlp_down.t64, 3.8 TB/s = 95% of its run's copy probe (4 TB/s)" in notes


def test_no_decode_rows_no_decode_label(tmp_path):
    rows = [r for r in decode_rows() if not (r["op"] == "gemm" and r["m"] <= 64 and r["n"] > 64 and r["m"] != 32)]
    fig = roofline.build(_write(tmp_path, rows))
    assert not _artists(fig, "label:decode-best") and not _artists(fig, "decode-best:")
    fig = FIGURES["decode"](data.Dataset.from_paths([tmp_path]))
    assert not _artists(fig, "point:") and "no decode GEMM rows" in " ".join(style.notes_of(fig))


def test_memory_rung_gives_the_numbers_with_decode_rows_and_not_measured_without(tmp_path):
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    ds = _write(tmp_path / "with", decode_rows())
    rungs = ladder.memory_rungs(ds)
    # every memory stage this checkout offers has a line (stage 16's: not measured in these rows)
    assert set(rungs.loc[rungs["variant"] == "decode_rows", "status"]) == {ladder.NOT_MEASURED}
    rung = rungs[rungs["variant"] == "decode_splitk"].set_index("precision")
    bf16 = rung.loc["bf16"]
    assert bf16["status"] == ladder.MEASURED and bf16["variant"] == "decode_splitk" and bf16["stage"] == 14
    assert bf16["shape"] == "llama3_8b.mlp_down.t64" and bf16["roof"] == decode.SAME_RUN
    assert bf16["pct_of_roof"] == pytest.approx(95.0) and bf16["pct_of_cublas"] == pytest.approx(125.0)
    assert bf16["gbs"] == pytest.approx(3800.0) and bf16["roof_gbs"] == pytest.approx(SAME_RUN_GBS)
    assert bf16["decode_rows"] == 3  # t1, t64 and the unreliable t16 (in no number)
    assert rung.loc["fp8", "status"] == ladder.NOT_MEASURED and np.isnan(rung.loc["fp8", "pct_of_roof"])
    md = tables.render_markdown([tables.memory_rung_table(ds)])
    assert re.search(r"\| bf16 \| 14 \| decode_splitk \| llama3_8b\.mlp_down\.t64 \| 64 \| 3800 \| 4000 \| "
                     r"same run, run decode-bf16 \| 95\.0 \| cublaslt \| 125\.0 \|", md)
    assert "| fp8 | 14 | decode_splitk | not measured |" in md

    ds = _write(tmp_path / "without", [r for r in decode_rows() if r["variant"] != "decode_splitk"])
    rung = ladder.memory_rungs(ds)
    assert set(rung["status"]) == {ladder.NOT_MEASURED} and rung["pct_of_roof"].isna().all()
    assert rung["pct_of_cublas"].isna().all()
    md = tables.render_markdown([tables.memory_rung_table(ds)])
    line = next(l for l in md.splitlines() if l.startswith("| bf16 | 14 | decode_splitk"))
    assert line.count("not measured") == 3 and not re.search(r"\d+\.\d", line)


# -- the reference data ---------------------------------------------------------------------------
# The whole of outputs/reference/ (16 s to read on 2 cores) is read by tests/test_paper_outputs.py's
# tests on one pytest-xdist worker: these run there too and take the same Dataset (conftest's
# reference_dataset) and the figures the paper was written with (conftest's reference_paper).


@pytest.fixture(scope="module")
def reference(reference_dataset):
    return reference_dataset


def _plain_decode(df: pd.DataFrame) -> pd.DataFrame:
    """Decode rows in plain pandas: GEMMs on the H200 of <= 64 tokens (the name's t<T>, else m),
    8 m <= min(n, k)."""
    tokens = df["shape_name"].fillna("").astype(str).str.extract(r"\.t(\d+)$", expand=False).astype(float)
    tokens = tokens.fillna(df["m"].astype(float))
    return df[(df["op"].fillna("gemm") == "gemm") & (df["device"] == DEV) & (tokens <= 64)
              & (8 * df["m"] <= np.minimum(df["n"], df["k"]))].assign(tokens=tokens)


@pytest.mark.slow
@on_the_reference_worker
def test_reference_decode_points_and_label(reference, reference_paper):
    rows = evidence(reference.rows)  # conftest's plain-pandas evidence rule
    copies = rows[(rows["op"] == "copy") & (rows["device"] == DEV)]
    gbs = copies["bytes_min"] / copies["time_median_s"] / 1e9
    roof = float(gbs.max())
    own = gbs.groupby(copies["run_id"]).max()  # a run's own copy probe, where it has one
    dec = _plain_decode(rows)
    assert set(dec["run_id"]) & set(own.index)  # the decode experiment's runs carry their copy row
    assert set(dec["run_id"]) - set(own.index)  # ... and the other runs' points take the device's best
    fig = reference_paper[1]["decode"]  # FIGURES["decode"](reference), as the paper drew it
    lib = dec[(dec["variant"] == "cublas") & (dec["precision"] == "bf16") & (dec["tokens"] == 1)].copy()
    lib["roof"] = lib["run_id"].map(own).fillna(roof)
    lib["pct"] = 100 * lib["bytes_min"] / lib["time_median_s"] / 1e9 / lib["roof"]
    # each problem's fastest row (rows of two runs may tie: the events tick in 32 ns), against its roof
    fastest = lib["time_median_s"] == lib.groupby(["layout", "batch", "m", "n", "k", "shape_name"],
                                                  dropna=False)["time_median_s"].transform("min")
    want = {(round(b / 1e6, 6), round(p, 6)) for b, p in zip(lib.loc[fastest, "bytes_min"], lib.loc[fastest, "pct"])}
    got = [(round(x, 6), round(y, 6)) for x, y in _artists(fig, "point:cublas:bf16:1")["point:cublas:bf16:1"].get_offsets()]
    assert len(got) == lib.groupby(["layout", "batch", "m", "n", "k"]).ngroups and set(got) <= want, (got, want)
    dec = dec.assign(pct=100 * dec["bytes_min"] / dec["time_median_s"] / 1e9 / dec["run_id"].map(own).fillna(roof))
    label = _artists(reference_paper[1]["roofline"], "label:decode-best")["label:decode-best"]  # roofline.build's
    assert label.get_text() == f"decode {dec['pct'].max():.0f}%", label.get_text()
    rung = ladder.memory_rungs(reference)  # stage 14 measured on the H200 (session9): no longer "not measured"
    # stages 14, 16 and 17 (offered by this checkout: a line each precision, "not measured" until it has rows)
    assert set(rung["variant"]) == {"decode_splitk", "decode_rows", "decode_wgmma"}
    assert ladder.NOT_MEASURED not in set(rung.loc[rung["variant"] == "decode_splitk", "status"])


@pytest.mark.slow
@on_the_reference_worker
def test_readme_quotes_the_reference_decode_numbers(reference):
    """The README's decode paragraph: the copy roof, how many decode points that count lie above it
    and the highest, recomputed from the rows in plain pandas."""
    text = " ".join((ROOT / "README.md").read_text().split())
    rows = evidence(reference.rows)
    copies = rows[(rows["op"] == "copy") & (rows["device"] == DEV)]
    roof = float((copies["bytes_min"] / copies["time_median_s"]).max() / 1e9)
    dec = _plain_decode(rows)
    keys = ["variant", "precision", "layout", "batch", "m", "n", "k", "shape_name"]
    best = dec.loc[dec.fillna({"shape_name": ""}).groupby(keys, dropna=False)["time_median_s"].idxmin()]
    pct = 100 * best["bytes_min"] / best["time_median_s"] / 1e9 / roof
    top = best.loc[pct.idxmax()]
    said = (f"against the device's best copy row, {roof / 1e3:.3g} TB/s, {int((pct > 100).sum())} of "
            f"the {len(best)} decode points that count lie above it, up to {pct.max():.0f}% (cuBLASLt's searched "
            f"algorithm at DeepSeek-V3's `{top['shape_name'].split('.', 1)[1]}`, "
            f"{top['batch'] * top['n'] * top['k'] * 2 / 1e9:.2g} GB of weights)")
    assert top["variant"] == "cublaslt_search" and said in text, said
