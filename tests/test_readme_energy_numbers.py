"""Every number of the README's paragraphs on tuning, the LLM-shape experiment, energy, the inputs
study and the hierarchical roofline's roofs (section "Reference data, figures and the chapter's
claims"), recomputed from the committed rows each sentence names. A failure names the README
sentence that no longer matches.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from conftest import on_the_reference_worker
from readme_said import REFERENCE, ROOT, assert_said, dataset, folder, has, raw, span, tens

from analysis import energy, regret
from gemmlab import config

D = "h200-2026-12-01"
pytestmark = pytest.mark.skipif(not has(f"{D}/session4b/tuning_regret", f"{D}/energy_square", f"{D}/inputs_power"),
                                reason="the 2026-12-01 H200 reference rows are not in this checkout")


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"]


def _seconds(rows: pd.DataFrame) -> float:
    """Measuring time of a run: its first row's timestamp to its last."""
    t = pd.to_datetime(rows["timestamp"])
    return (t.max() - t.min()).total_seconds()


def _sci(x: float) -> str:
    """1.7e-3, as the README writes small numbers."""
    return f"{x:.1e}".replace("e-0", "e-")


# -- what tuning buys ---------------------------------------------------------------------------
@on_the_reference_worker  # reads the whole reference (conftest.whole_reference)
def test_readme_states_what_tuning_buys():
    rows = raw(folder(f"{D}/session4b/tuning_regret"))
    (run_id,) = rows["run_id"].unique()
    f = regret.frame(dataset(REFERENCE))
    run = f[f["run_id"] == run_id]
    problems = rows[rows["variant"] == "cublaslt"].drop_duplicates(["shape_name", "precision", "layout"])
    same = run[run["lt_search_is_default"]]
    said = [
        f"(the heuristic's top {config.CublasLtConf().search_limit} algorithms",
        f"the default's own algorithm ({len(same)} of {len(run)} problems in the last run) is a second measurement",
        f"the difference between such rows is drift, up to {100 * same['lt_search_gain'].abs().max():.1f}%",
        f"(`outputs/reference/h200-2026-12-01/session4b/tuning_regret`, {_seconds(rows):.0f} s of measuring",
        f"{len(run)} of {len(problems)} problems have reliable rows for the default and a search",
    ]
    names = {("deepseek_v3", "bf16"): "DeepSeek-V3 BF16", ("deepseek_v3", "fp8"): "DeepSeek-V3 FP8",
             ("llama3_70b", "bf16"): "Llama-3 70B BF16", ("llama3_70b", "fp8"): "Llama-3 70B FP8"}
    kinds = {regret.LT_SEARCH: "cuBLASLt search", regret.CUTLASS_SEARCH: "CUTLASS search",
             regret.HANDWRITTEN: "hand-written `wgmma_fp8`"}
    assert set(zip(run["shape_set"], run["precision"])) == set(names)
    for (shape_set, precision), label in names.items():
        g = run[(run["shape_set"] == shape_set) & (run["precision"] == precision)]
        worst = g.loc[g["regret"].idxmax()]
        won = g[g["best_kind"] != regret.DEFAULT]["best_kind"].value_counts()
        if len(won) == 1:
            who = f"{won.iloc[0]} ({kinds[won.index[0]]})"
        else:
            who = f"{won.sum()} (" + ", ".join(f"{n} {kinds[k]}" for k, n in won.items()) + ")"
        times = [f"cuBLASLt {span(g['lt_search_s'].dropna(), '.2f')} s"]
        if g["cutlass_search_s"].notna().any():
            times.append(f"CUTLASS {span(g['cutlass_search_s'].dropna(), '.2f')} s")
        said.append(f"| {label} | {len(g)} | {100 * g['regret'].median():.1f}% | {100 * worst['regret']:.1f}% "
                    f"(`{worst['shape_name'].split('.', 1)[1]}`) | {who} | {', '.join(times)} |")
    fp8 = run[(run["precision"] == "fp8") & run["handwritten_time_s"].notna()]
    won = fp8[fp8["best_kind"] == regret.HANDWRITTEN]
    decode = fp8[fp8["shape_name"].str.endswith(".t16")]
    speed = 100 * decode["default_time_s"] / decode["handwritten_time_s"]
    cut = run[run["cutlass_search_time_s"].notna() & run["shape_name"].str.endswith(".t16")]
    assert set(won["shape_set"]) == {"deepseek_v3"} and won["shape_name"].str.endswith(".t4096").all()
    said += [
        f"Stage 13 beat cuBLASLt's default on {({4: 'four'})[len(won)]} DeepSeek-V3 FP8 projections at 4096 tokens "
        f"(the default {span(100 * won['regret'], '.1f')}% slower)",
        f"leave most SMs idle at 16 tokens: {span(speed, '.0f')}% of the default's speed",
        f"CUTLASS's searched kernel won {({1: 'once'})[int((run['best_kind'] == regret.CUTLASS_SEARCH).sum())]} and "
        f"ran at {span(100 * (1 + cut['cutlass_search_gain']), '.0f')}% of the default's speed at decode sizes",
    ]
    assert_said(said, "tuning paragraphs and table")


def test_readme_states_the_llm_shape_experiment():
    rows = raw(folder(f"{D}/session4/llm_shapes"))
    counts = rows["status"].value_counts()
    memory = rows[rows["reason"].astype(str).str.contains("GiB of device memory")]
    shapes = memory.drop_duplicates(["shape_name", "precision"])
    batched = shapes[shapes["shape_name"].str.startswith("deepseek_v3.expert_gate_up.")]
    rest = shapes.drop(batched.index)
    assert (batched["batch"] == 256).all() and (batched["precision"] == "bf16").all()
    assert rest["shape_name"].tolist() == ["llama3_405b.mlp_gate_up.t16384"] and rest["precision"].tolist() == ["fp8"]
    assert "need <= 0.9 * free" in (ROOT / "gemmlab/measure/footprint.py").read_text()  # the 90% rule
    stage = _ok(raw(folder(f"{D}/session4/llm_wgmma_fp8")))
    ok = _ok(rows)
    lt8 = ok[(ok["variant"] == "cublaslt") & (ok["precision"] == "fp8")]
    assert len(lt8) and (stage["precision"] == "fp8").all()
    assert (ok["check_elem_fail"].fillna(0) == 0).all() and (stage["check_elem_fail"].fillna(0) == 0).all()
    assert_said([
        f"ran in {_seconds(rows):.0f} s of measuring on one H200 (`session4/llm_shapes`): {counts.get('ok', 0)} points "
        f"ok, {counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped",
        f"{len(memory)} points would need more than 90% of the GPU's free memory: DeepSeek-V3's 256-expert batched "
        f"gate_up at {len(batched)} token counts in BF16 and Llama-3 405B's FP8 gate_up at 16384 tokens",
        f"relative error at most {_sci(lt8['rel_error'].max())} for cuBLASLt over every LLM shape and "
        f"{_sci(stage['rel_error'].max())} for stage 13",
    ], "LLM-shape paragraph")


# -- energy -------------------------------------------------------------------------------------
def _energy_ratio(rows: pd.DataFrame) -> pd.DataFrame:
    rows = _ok(rows)
    rows = rows[rows["energy_j"].notna()]
    e = [json.loads(x)["energy"] for x in rows["extra"]]
    return rows.assign(ratio=[x["energy_vs_power_x_time"] for x in e], window=[x["window_s"] for x in e])


@on_the_reference_worker  # reads the whole reference (conftest.whole_reference)
def test_readme_states_the_energy_numbers():
    table = energy.energy_table_frame(dataset(REFERENCE)).set_index(["precision", "backend"])
    tc = table.drop(index=[("fp32", "cublas")])
    fp32 = table.loc[("fp32", "cublas")]
    best = {p: table.loc[p]["gflops_per_joule"].max() for p in ("tf32", "fp16", "bf16")}
    assert table.loc["fp8"].index.tolist() == ["cublaslt"]
    assert (tc["power_limit_w"] == 700).all() and tc["throttle_reasons"].str.contains("sw_power_cap").all()
    assert fp32["throttle_reasons"] in ("none", "", None) or pd.isna(fp32["throttle_reasons"])
    square = _energy_ratio(raw(folder(f"{D}/energy_square")))
    big, mid = square[square["m"] == 8192], square[square["m"] == 2048]
    inputs = _energy_ratio(raw(folder(f"{D}/inputs_power")))
    near = lambda r: int(((r - 1).abs() <= 0.05).sum())  # noqa: E731
    lad = _ok(raw(folder(f"{D}/energy_ladder")))
    stages = lad[lad["backend"] == "cuda"]
    low, high = stages.loc[stages["gflops_per_joule"].idxmin()], stages.loc[stages["gflops_per_joule"].idxmax()]
    cub = lad[(lad["variant"] == "cublas") & (lad["precision"] == "bf16")]["gflops_per_joule"]
    sq = _ok(raw(folder(f"{D}/energy_square")))
    sq = sq[(sq["variant"] == "cublas") & (sq["precision"] == "bf16") & (sq["m"] == 4096)]["gflops_per_joule"]
    assert len(cub) == len(sq) == 1 and (low["variant"], high["variant"]) == ("naive", "wgmma_ws")
    assert_said([
        f"FP32 {fp32['gflops_per_joule']:.0f} GFLOP/J ({fp32['power_avg_w']:.0f} W, {fp32['clock_mhz']:.0f} MHz, no "
        f"throttling), TF32 {best['tf32']:.0f}, FP16 {best['fp16']:.0f}, BF16 {best['bf16']:.0f}, FP8 "
        f"{table.loc[('fp8', 'cublaslt'), 'gflops_per_joule']:.0f} (cuBLASLt), every tensor-core precision at the "
        f"{tc['power_limit_w'].max():.0f} W power limit (`sw_power_cap`, {span(tc['power_avg_w'], '.0f')} W) with the "
        f"SM clock pulled down to {span(tc['clock_mhz'], '.0f')} MHz",
        f"within 5% at {near(big['ratio'])} of {len(big)} points at N = 8192 with {span(big['window'], '.0f')} s windows "
        f"({span(big['ratio'], '.2f')}) and at {near(inputs['ratio'])} of {len(inputs)} with the inputs experiment's "
        f"{span(inputs['window'], '.0f')} s windows ({span(inputs['ratio'], '.2f')}, median {inputs['ratio'].median():.3f})",
        f"at N = 2048, where the power still ramps inside a 1 s window, up to {mid['ratio'].max():.2f}",
        f"GFLOP/J climbs from {low['gflops_per_joule']:.1f} (naive FP32) to {high['gflops_per_joule']:.0f} (wgmma_ws "
        f"{high['precision'].upper()}), beside {cub.iloc[0]:.0f} for the cuBLAS BF16 of that run ({sq.iloc[0]:.0f} in "
        "`energy_square`",
    ], "energy paragraph")


def test_readme_states_what_the_inputs_do():
    """The inputs paragraph: every row of the inputs_power experiment (cuBLAS / cuBLASLt at 8192):
    power, the SM clock over the energy window, and exact / sparse inputs against normal inputs of
    the same library, precision and scale."""
    rows = _ok(raw(folder(f"{D}/inputs_power")))
    rows = rows.assign(clock=energy.clock_mhz(rows))
    study = rows["distribution"].isin(["exact", "sparse"])
    dense, odd = rows[~study], rows[study]
    key = ["variant", "precision", "input_scale"]
    normal = dense[dense["distribution"] == "normal"].set_index(key)
    against = normal.loc[pd.MultiIndex.from_frame(odd[key])]
    faster = 100 * (odd["tflops"].to_numpy() / against["tflops"].to_numpy() - 1)
    joule = 100 * (odd["gflops_per_joule"].to_numpy() / against["gflops_per_joule"].to_numpy() - 1)

    def lib(df, variant, precision):
        return df[(df["variant"] == variant) & (df["precision"] == precision)]["tflops"]

    assert set(dense["input_scale"]) == {1.0, 0.0625} and (rows["m"] == 8192).all()
    assert (dense["power_limit_w"] == 700).all() and dense["throttle_reasons"].str.contains("sw_power_cap").all()
    f8o, f8d = lib(odd, "cublaslt", "fp8"), lib(dense, "cublaslt", "fp8")
    assert_said([
        f"all ran at the power limit ({span(dense['power_avg_w'], '.0f')} W) and {span(dense['clock'], '.0f')} MHz; "
        f"exact small integers and mostly-zero (sparse) inputs drew {span(odd['power_avg_w'], '.0f')} W, ran at "
        f"{span(odd['clock'], '.0f')} MHz and {span(faster, '.0f')}% faster than normal inputs of the same library, "
        f"precision and scale (BF16 cuBLAS {span(lib(odd, 'cublas', 'bf16'), '.0f')} against "
        f"{span(lib(dense, 'cublas', 'bf16'), '.0f')} TFLOP/s; FP8 {tens(f8o.min())}-{tens(f8o.max())} against "
        f"{tens(f8d.min())}-{tens(f8d.max())}) with {span(joule, '.0f')}% more GFLOP/J",
    ], "inputs paragraph (What the inputs do)")


# -- the roofs ----------------------------------------------------------------------------------
@on_the_reference_worker  # reads the whole reference (conftest.whole_reference)
def test_readme_states_the_measured_roofs():
    roofs = _ok(raw(folder(f"{D}/cache_roofs"))).set_index("variant")
    tbps = roofs["bytes_min"] / roofs["time_median_s"] / 1e12
    ds = dataset(REFERENCE)
    copy = ds.gpu[(ds.gpu["op"] == "copy") & (ds.gpu["status"] == "ok")]
    assert len(copy), "no copy-probe rows in the reference data"
    l2 = yaml.safe_load((ROOT / "conf/variant/l2_bandwidth.yaml").read_text()).get("params", {})
    fraction, passes = float(l2.get("l2_fraction", 0.25)), int(l2.get("passes", 64))
    assert roofs.loc["l2_bandwidth", "bytes_min"] == fraction * passes * 60 * 2 ** 20  # the H200's 60 MiB L2
    said = [f"L2 {tbps['l2_bandwidth']:.1f} TB/s (`l2_bandwidth`, a {({0.25: 'quarter'})[fraction]} of the L2 read "
            f"{passes} times), L1 {tbps['l1_bandwidth']:.1f} TB/s",
            f"the shared-memory probe reads {tbps['smem_bandwidth']:.1f} TB/s"]
    best = (copy["bytes_min"] / copy["time_median_s"]).max() / 1e12
    said.append(f"DRAM {best:.2f} TB/s (copy probe)")
    assert_said(said, "roofs sentence (hierarchical roofline)")
