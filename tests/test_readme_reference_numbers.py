"""Every number of the README's section "Reference data, figures and the chapter's claims" about the
top rungs of the ladder (stages 10, 12 and 13: the table of defines, the standalone and paired
readings, the input seeds, mma.sync's ceiling), recomputed from the committed rows each sentence
names. A failure names the README sentence (or table line) that no longer matches.

Also checked elsewhere: the power-limit paragraph (tests/test_paper_outputs.py::
test_readme_states_what_the_power_limit_costs_mma_sync) and the CUTLASS search's four percentages
(test_readme_quotes_the_tables_numbers). Tuning, LLM shapes, energy, inputs and roofs:
tests/test_readme_energy_numbers.py.
"""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from conftest import on_the_reference_worker
from readme_said import REFERENCE, ROOT, assert_said, dataset, folder, has, raw, readme_text, span

from analysis import ladder
from analysis.compare.match import Side
from analysis.compare.paired import compare_paired
from analysis.read import EVIDENCE_MIN_SAMPLES
from gemmlab import config
from gemmlab.rows import highest_clock_mhz

S5C, S4, S6B = "h200-2026-12-01/session5c", "h200-2026-12-01/session4", "h200-2026-12-02/session6b"
pytestmark = pytest.mark.skipif(not has(f"{S5C}/tune_wgmma_ws", f"{S4}/tune_wgmma_fp8", f"{S6B}/ws_seeds"),
                                reason="the H200 reference rows of 2026-12-01/02 are not in this checkout")


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"]


def _defines(variant: str) -> dict:
    return yaml.safe_load((ROOT / "conf" / "variant" / f"{variant}.yaml").read_text())["cuda"]["defines"]


def _cell(row) -> str:
    """A table cell: % of the interleaved cuBLAS(Lt), one decimal, * where the row is unreliable."""
    return f"{row['pct_of_baseline']:.1f}" + ("" if row["reliable"] in (True, "True") else "*")


def _line(label: str) -> str:
    """The README table line (folded) that holds ``label``: exactly one."""
    lines = [" ".join(l.split()) for l in (ROOT / "README.md").read_text().splitlines()
             if l.startswith("|") and label in l]
    assert len(lines) == 1, f"README: no single table line with {label!r}: {lines}"
    return lines[0]


# (table label, define overrides from the YAML default: one dict per reading of the line)
# session5c tuned stage 12's default of the time (the maps in the buffer: MAP_PARAMS came in session34c)
OLD_12 = {"MAP_PARAMS": 0}
STAGE_12 = [("| 12 `wgmma_ws` | the default until session34c:", [OLD_12]),
            ("`MBAR_CLUSTER_SCOPE` 1", [{**OLD_12, "MBAR_CLUSTER_SCOPE": 1}]),
            ("`CLUSTER_M` 1 (no clusters, all 132 SMs)", [{**OLD_12, "CLUSTER_M": 1, "GRID_CTAS": 0}]),
            ("`GRID_CTAS` 0 (66 clusters", [{**OLD_12, "GRID_CTAS": 0}]),
            ("`STAGES` 3, `EPI_BOXES` 0", [{**OLD_12, "STAGES": 3, "EPI_BOXES": 0}]),
            ("| `EPI_BOXES` 1 |", [{**OLD_12, "EPI_BOXES": 1}]),
            ("`EPI_TMA` 0 (direct stores)", [{**OLD_12, "EPI_TMA": 0}]),
            ("`GROUP_M` 16 / 4", [{**OLD_12, "GROUP_M": 16}, {**OLD_12, "GROUP_M": 4}]),
            ("the previous default (no clusters", [{**OLD_12, "CLUSTER_M": 1, "GRID_CTAS": 0, "STAGES": 3,
                                                    "EPI_BOXES": 0}])]
# session4 tuned stage 13's default of the time (3 stages, the staging tile in one round, the maps in the buffer)
OLD_13 = {"STAGES": 3, "EPI_BOXES": 0, "MAP_PARAMS": 0}
STAGE_13 = [("| 13 `wgmma_fp8` | the default until session40f:", [OLD_13]),
            ("| `GROUP_M` 16 |", [{**OLD_13, "GROUP_M": 16}]),
            ("`BN` 128 with `STAGES` 4", [{**OLD_13, "BN": 128, "STAGES": 4}]),
            ("`EPI_TMA` 0 with `STAGES` 4 / 3", [{**OLD_13, "EPI_TMA": 0, "STAGES": 4}, {**OLD_13, "EPI_TMA": 0}])]


def _tuned(path: str, variant: str, precision: str, overrides: dict) -> dict:
    """{N: row} of the tuning run's rows at 4096 and 8192 whose defines are the default plus
    ``overrides``."""
    rows = _ok(raw(folder(path)))
    rows = rows[(rows["variant"] == variant) & (rows["precision"] == precision)]
    want = {**_defines(variant), **overrides}
    # a define a row lacks came later: the row ran what the YAML's defines_before says, else the
    # default (as analysis.ladder.current_configuration reads rows)
    before = yaml.safe_load((ROOT / "conf" / "variant" / f"{variant}.yaml").read_text())["cuda"].get("defines_before") or {}
    hit = rows[[{**_defines(variant), **before, **json.loads(d)} == want for d in rows["defines"]]]
    assert sorted(hit["m"]) == [4096, 8192], (path, overrides, sorted(hit["m"]))
    return {int(r["m"]): r for _, r in hit.iterrows()}


def _readings(path, variant, precision, overrides):
    return ", ".join(" / ".join(_cell(_tuned(path, variant, precision, o)[n]) for n in (4096, 8192))
                     for o in overrides)


def test_readme_table_of_the_top_rungs_is_what_the_tuning_runs_measured():
    """Each line of the table: % of the cuBLAS(Lt) timed interleaved with the stage at 4096 / 8192,
    * where the row is unreliable (session5c/tune_wgmma_ws, session4/tune_wgmma_fp8)."""
    for label, overrides in STAGE_12:
        assert_said([f"| {_readings(f'{S5C}/tune_wgmma_ws', 'wgmma_ws', 'bf16', overrides)}"],
                    f"table of the top rungs (line {label!r})", _line(label))
    for label, overrides in STAGE_13:
        line = _line(label)
        assert_said([f"| {_readings(f'{S4}/tune_wgmma_fp8', 'wgmma_fp8', 'fp8', overrides)} |"],
                    f"table of the top rungs (line {label!r})", line)


def _seeds():
    """Stage 12's default BF16 over three seeds (session5c/ws_repeat) and five more at 8192
    (session6b/ws_seeds), as {N: rows}."""
    rep = _ok(raw(folder(f"{S5C}/ws_repeat")))
    rep = rep[(rep["variant"] == "wgmma_ws") & (rep["precision"] == "bf16")]
    more = _ok(raw(folder(f"{S6B}/ws_seeds")))
    assert sorted(more["seed"]) == [4, 5, 6, 7, 8] and (more["m"] == 8192).all()
    assert (more["baseline_variant"] == "cublaslt").all()
    return {n: rep[rep["m"] == n] for n in (4096, 8192)}, more


def _reliable(rows):
    return rows[rows["reliable"].astype(str) == "True"]


def test_readme_states_what_the_input_seeds_gave():
    """The three sustained seeds and the five more, in the table and in the text: every row's %
    of the faster library, and which rows are reliable."""
    rep, more = _seeds()
    good = _reliable(more)
    unsure = more.drop(good.index)
    r8 = _reliable(rep[8192])
    table = (f"three seeds, sustained: {span(rep[4096]['pct_of_baseline'], '.1f')} / "
             f"{span(rep[8192]['pct_of_baseline'], '.1f')} (8192: {len(r8)} of {len(rep[8192])} rows reliable); "
             f"five more at 8192 (2026-12-02): {span(more['pct_of_baseline'], '.1f')} ({len(good)} of {len(more)} "
             f"reliable: {', '.join(f'{x:.1f}' for x in sorted(good['pct_of_baseline']))})")
    assert_said([table], "table of the top rungs (stage 12 default's seeds)", _line("| 12 `wgmma_ws` | the default until session34c:"))
    noisy = unsure["unreliable_reason"].str.startswith("noise")
    drift = unsure.loc[~noisy, "unreliable_reason"].str.extract(r"drifted ([-+]?\d+\.\d)%")[0].astype(float).abs()
    assert_said([
        f"Five more input seeds at 8192 (`outputs/reference/h200-2026-12-02/session6b/ws_seeds`) gave "
        f"{span(more['pct_of_baseline'], '.1f')}% of cuBLASLt ({len(good)} reliable rows: "
        f"{' and '.join(f'{x:.1f}%' for x in sorted(good['pct_of_baseline']))}; {int(noisy.sum())} noisier than 5% and "
        f"{int((~noisy).sum())} whose clock drifted {span(drift, '.1f')}% are unreliable)",
    ], "paragraph on stage 12 over input seeds")
    by_seed = more.sort_values("seed")
    assert_said([f"**{', '.join(f'{x:.1f}' for x in by_seed['pct_of_baseline'])}%** of the faster (cuBLASLt each time; "
                 f"seeds {' and '.join(str(s) for s in good['seed'])} reliable: "
                 f"{' and '.join(f'{x:.1f}' for x in good['pct_of_baseline'])}%), "
                 f"{span(more['tflops'], '.0f')} TFLOP/s at {more['sm_clock_min_mhz'].min():.0f}-"
                 f"{more['sm_clock_max_mhz'].max():.0f} MHz"],
                "session6b/ws_seeds line of outputs/reference/h200-2026-12-02/README.md",
                " ".join((REFERENCE / "h200-2026-12-02" / "README.md").read_text().split()))


def test_readme_states_the_standalone_rows_of_the_top_rungs():
    fp8 = _ok(raw(folder(f"{S4}/standalone_fp8"))).set_index(["variant", "m"])
    ws = _ok(raw(folder(f"{S5C}/ws_standalone")))
    ws = ws[ws["precision"] == "bf16"].set_index(["variant", "m"])

    def t(rows, v, n):
        r = rows.loc[(v, n)]
        return f"{r['tflops']:.0f}" + ("" if r["reliable"] in (True, "True") else "*")

    ratio = [fp8.loc[("wgmma_fp8", n), "tflops"] / fp8.loc[("cublaslt", n), "tflops"] for n in (4096, 8192)]
    r8 = [ws.loc[("wgmma_ws", 8192), "tflops"] / ws.loc[(v, 8192), "tflops"] for v in ("cublas", "cublaslt")]
    clock = ws.loc[("wgmma_ws", 4096), "sm_clock_min_mhz"], ws.loc[[("cublas", 4096), ("cublaslt", 4096)], "sm_clock_max_mhz"]
    assert_said([
        f"`wgmma_fp8` {t(fp8, 'wgmma_fp8', 4096)} and {t(fp8, 'wgmma_fp8', 8192)} TFLOP/s at 4096 and 8192 against "
        f"cuBLASLt FP8's {t(fp8, 'cublaslt', 4096)} and {t(fp8, 'cublaslt', 8192)} ({ratio[0]:.3f}x, {ratio[1]:.3f}x)",
        f"{t(ws, 'wgmma_ws', 4096)} and {t(ws, 'wgmma_ws', 8192)} TFLOP/s against cuBLAS's {t(ws, 'cublas', 4096)} and "
        f"{t(ws, 'cublas', 8192)} and cuBLASLt's {t(ws, 'cublaslt', 4096)} and {t(ws, 'cublaslt', 8192)}: "
        f"{ws.loc[('wgmma_ws', 4096), 'tflops'] / ws.loc[('cublas', 4096), 'tflops']:.3f}x and {span(r8, '.2f')}x",
        f"(the stage at {clock[0]:.0f} MHz, the libraries at {span(clock[1], '.0f')} at 4096)",
    ], "paragraph on standalone rows of stages 12 and 13")


def _paired(path):
    return compare_paired(Side.load("B", folder(path))).compared


def test_readme_states_stage_12_paired_with_the_libraries():
    rep = _paired(f"{S5C}/ws_repeat")
    rep = rep[(rep["precision"] == "bf16")].set_index(["m", "baseline"])
    lt, cu = rep.loc[(8192, "cublaslt")], rep.loc[(8192, "cublas")]
    at4096 = rep.loc[4096]
    seeds = _paired(f"{S6B}/ws_seeds").set_index("baseline").loc["cublaslt"]
    assert lt["verdict"] == cu["verdict"] == seeds["verdict"] == "SAME" and (at4096["ci_lo"] > 1).all()
    assert cu["ci_hi"] < 1 and seeds["ci_hi"] < 1
    assert_said([
        f"stage 12 against cuBLASLt is SAME at 8192 (time ratio {lt['time_ratio']:.3f}, 95% interval "
        f"[{lt['ci_lo']:.3f}, {lt['ci_hi']:.3f}]); against cuBLAS it is faster by "
        f"{100 * (1 - cu['ci_hi']):.1f}-{100 * (1 - cu['ci_lo']):.1f}%",
        f"SAME under that point's ±{100 * cu['threshold']:.1f}% noise threshold); at 4096 it is "
        f"{100 * (at4096['ci_lo'].min() - 1):.1f}-{100 * (at4096['ci_hi'].max() - 1):.1f}% slower than either",
        f"paired, a time ratio of {seeds['time_ratio']:.3f} [{seeds['ci_lo']:.3f}, {seeds['ci_hi']:.3f}] against "
        f"cuBLASLt: faster by {100 * (1 - seeds['ci_hi']):.1f}-{100 * (1 - seeds['ci_lo']):.1f}%",
    ], "paragraph on stage 12 paired with cuBLAS / cuBLASLt")


def test_readme_states_what_the_cluster_fence_and_the_tma_store_cost():
    ws = {k: _tuned(f"{S5C}/tune_wgmma_ws", "wgmma_ws", "bf16", o) for k, o in
          (("default", OLD_12), ("fence", {**OLD_12, "MBAR_CLUSTER_SCOPE": 1}), ("no_tma", {**OLD_12, "EPI_TMA": 0}))}
    f8 = {k: _tuned(f"{S4}/tune_wgmma_fp8", "wgmma_fp8", "fp8", o) for k, o in
          (("default", OLD_13), ("no_tma", {**OLD_13, "EPI_TMA": 0}))}

    def ratio(runs, a, b):
        return [runs[a][n]["pct_of_baseline"] / runs[b][n]["pct_of_baseline"] for n in (4096, 8192)]

    lost = [100 * (1 - r) for r in ratio(ws, "fence", "default")]
    tuned = _ok(raw(folder(f"{S5C}/tune_wgmma_ws")))
    assert ws["default"][4096]["pct_of_baseline"] == tuned[tuned["m"] == 4096]["pct_of_baseline"].max()
    assert_said([
        f"clusters had lost {span(lost, '.0f')}% to one PTX qualifier",
        "makes them the fastest configuration at 4096",
        f"The TMA-store epilogue is worth {span([100 * (r - 1) for r in ratio(ws, 'default', 'no_tma')], '.0f')}% in "
        f"stage 12 and {span([100 * (r - 1) for r in ratio(f8, 'default', 'no_tma')], '.0f')}% in stage 13",
    ], "paragraph on the cluster-scope fence and the TMA-store epilogue")


def test_readme_states_stage_10_beside_cutlass_sm80():
    rows = _ok(raw(folder("h200-2026-12-01/session4b/sm80_reference")))
    rows = rows[rows["precision"] == "bf16"]

    def pct(v):
        r = rows[rows["variant"] == v].set_index("m")["pct_of_baseline"]
        return f"{r[4096]:.1f}% / {r[8192]:.1f}%"

    tiles = {len(json.loads(e)["search"]) for e in rows[rows["variant"] == "cutlass_sm80_search"]["extra"]}
    assert_said([
        f"Stage 10 `mma_sync` stays at {pct('mma_sync')} of cuBLAS BF16",
        f"m16n8k16 + ldmatrix + cp.async design: {pct('cutlass_sm80_tensorop')}; the best of "
        f"{ {6: 'six'}.get(tiles.pop()) } SM80 tiles, `cutlass_sm80_search`: {pct('cutlass_sm80_search')}",
    ], "paragraph on stage 10 and CUTLASS's SM80 kernel")
    assert not tiles


@on_the_reference_worker  # reads the whole reference (conftest.whole_reference)
def test_readme_states_mma_sync_issue_rate_and_ceiling():
    """mma_sync_peak's rows (every probe row of the reference data, as the ladder takes them), and
    stage 10's rung of the ladder: the highest clock its row saw, the ceiling there, its share."""
    probe = pd.concat([raw(p) for p in sorted(REFERENCE.glob("h200-*/**/mma_sync_peak")) if (p / "results.csv").exists()])
    probe = _ok(probe.drop_duplicates(["run_id", "point_key"]))
    probe = probe[probe["variant"] == "mma_sync_peak"]
    assert set(probe["precision"]) == {"bf16", "fp16"}
    rungs = ladder.build(dataset(REFERENCE)).entries
    rungs = rungs[rungs["variant"] == "mma_sync"].set_index("precision")
    # the ceiling is the precision's best probed TFLOP/s per MHz at the highest clock the rung's row saw
    rate = {p: max(r["tflops"] / highest_clock_mhz(r) for _, r in probe[probe["precision"] == p].iterrows())
            for p in ("fp16", "bf16")}
    clock = {p: rungs.loc[p, "ceiling_tflops"] / rate[p] for p in rate}
    r = rungs.loc[["fp16", "bf16"]]
    pair = lambda col, fmt: " / ".join(format(x, fmt) for x in r[col])  # noqa: E731
    assert_said([
        f"issues {span(probe['tflops'], '.0f')} TFLOP/s at {span(probe['sm_clock_max_mhz'], '.0f')} MHz in BF16 and in "
        f"FP16: {span(100 * probe['tflops'] / probe['peak_at_clock_tflops'], '.0f')}% of the dense wgmma rate",
        f"(FP16 / BF16 at {span(r['n'], '.0f')}: {clock['fp16']:.0f} / {clock['bf16']:.0f} MHz",
        f"that is {pair('ceiling_tflops', '.0f')} TFLOP/s, **{pair('ceiling_pct_of_cublas', '.1f').replace(' / ', '% / ')}% "
        "of the cuBLAS timed with them**",
        f"Stage 10 reaches {pair('pct_of_ceiling', '.1f').replace(' / ', '% / ')}% of that rate",
        f"0.70x of cuBLAS would need {' / '.join(f'{7000 / x:.0f}%' for x in r['ceiling_pct_of_cublas'])} of it",
    ], "paragraph on mma.sync's issue rate and stage 10's ceiling")


def test_readme_states_what_nsight_compute_read():
    logs = folder("h200-2026-12-02/session6c/logs")
    if not logs.is_dir():
        pytest.skip("the session6c Nsight Compute logs are not here")
    busy = {}
    for name in ("peak", "gemm"):
        text = (logs / f"ncu_mma_sync_{name}.log").read_text()
        busy[name] = re.search(r"Tensor is the highest-utilized pipeline \((\d+\.\d)%\)", text).group(1)
    assert_said([f"keeps the tensor pipe busy {busy['peak']}% of the cycles, stage 10 {busy['gemm']}%"],
                "Nsight Compute sentence")


def test_readme_states_how_the_cutlass_search_is_run_and_what_counts():
    defaults = vars(config.CutlassConf())
    correctness = _ok(raw(folder("h200-2026-12-01/correctness")))
    correctness = correctness[correctness["variant"].isin(["cublas", "cublaslt"]) & (correctness["m"] == 8192)
                              & correctness["precision"].isin(["fp16", "bf16"])]
    assert (correctness["samples"].dropna() < EVIDENCE_MIN_SAMPLES).all()
    three = {"3": "three"}[str(defaults["search_scheduler_top"])]
    assert_said([
        f"the tile scheduler's swizzle ({', '.join(str(s) for s in defaults['search_swizzles'])}) and raster "
        f"order on the best {three}",
        f"(rows of at least {EVIDENCE_MIN_SAMPLES} samples: the 2026-12-01 correctness sweep's "
        f"{span(correctness['samples'].dropna(), '.0f')}-sample rows are left out",
    ], "CUTLASS search paragraph")
    assert "102.6% of the cuBLASLt timed interleaved" in readme_text()  # the numbers: test_paper_outputs
