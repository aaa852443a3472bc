"""The README's numbers about decode GEMMs (issue 30: stages 14 and 16, the libraries, the copy probe
and the read-pattern probe) and about the default run (issue 31), recomputed from the committed rows
each sentence names. A failure names the README sentence that no longer matches."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from readme_said import assert_said, folder, has, span

S10B, S10C = "h200-2026-12-03/session10b", "h200-2026-12-03/session10c"
S11 = "h200-2026-12-03/session11"  # the default run at the final spin rule
S11C = "h200-2026-12-03/session11c"  # the decode experiment with stage 16 at its default (one CTA per SM)
pytestmark = pytest.mark.skipif(not has(S10B, S10C, S11, S11C), reason="the H200 reference rows of 2026-12-03 are not in this checkout")


def _decode_run(precision: str):
    return _decode_run_in(S11C, precision)


def _decode_run_in(sess: str, precision: str):
    d = pd.read_csv(folder(f"{sess}/decode_rows/{precision}") / "results.csv")
    ok = d[d["status"] == "ok"].copy()
    copy = ok[ok["variant"] == "copy_gpu"].iloc[0]
    copy_gbs = copy["bytes_min"] / copy["time_median_s"] / 1e9
    ok["pct_copy"] = 100 * ok["bytes_min"] / ok["time_median_s"] / 1e9 / copy_gbs
    return ok, copy_gbs


def decode_phrases() -> list:
    bf, copy_bf = _decode_run("bf16")
    fp, copy_fp = _decode_run("fp8")
    out = [f"{copy_bf:.0f} GB/s"]
    lib = bf[bf["variant"].isin(["cublas", "cublaslt"])]
    small = lib[(lib["n"] == 6144) & (lib["k"] == 4096) & lib["m"].isin([1, 64])]
    out.append(f"{span(small['pct_copy'], '.0f')}% of it at Llama-3 8B's (1, 6144, 4096) and (64, 6144, 4096) "
               f"({span(small['time_median_s'] * 1e6, '.1f')} us for 50 MB)")
    for v, name in (("decode_splitk", "stage 14"), ("decode_rows", "stage 16")):
        x = bf[bf["variant"] == v]
        by_m = {m: x[x["m"] == m] for m in (1, 16, 64)}
        out.append(f"{name}: {span(by_m[1]['pct_copy'], '.1f')}% at 1 token, {span(by_m[16]['pct_copy'], '.1f')}% at 16, "
                   f"{span(by_m[64]['pct_copy'], '.1f')}% at 64")
    rows = bf[bf["variant"] == "decode_rows"]
    best = rows.loc[rows["pct_copy"].idxmax()]
    out.append(f"{best['pct_copy']:.1f}% of the copy probe at `{best['shape_name']}` ({best['pct_of_baseline']:.1f}% of the "
               f"faster library timed beside it)")
    out.append(f"{int((rows['pct_copy'] >= 90).sum())} of {len(rows)} BF16 points at >= 90%")
    f16 = fp[fp["variant"] == "decode_rows"]
    out.append(f"FP8 {span(f16[f16['m'] == 1]['pct_copy'], '.1f')}% at 1 token (copy probe {copy_fp:.0f} GB/s)")
    return out


def sweep_phrases() -> list:
    d = pd.read_csv(folder(f"{S10C}/decode_rows_sweep") / "results.csv")
    d = d[(d["status"] == "ok") & (d["precision"] == "bf16")]
    d["blocks"] = d["defines"].map(lambda s: json.loads(s)["BLOCKS_SMALL"])
    base = d[d["defines"].map(lambda s: all(json.loads(s)[k] == 1 for k in ("PREFETCH", "SWIZZLE", "W_HINT")))]
    t16 = base[base["m"] == 16].pivot_table(index=["n", "k"], columns="blocks", values="pct_of_baseline")
    return [f"{span(t16[2], '.0f')}% of the faster library at 16 tokens with two CTAs per SM, "
            f"{span(t16[1], '.0f')}% with one"]


def read_phrases() -> list:
    rows = [json.loads(l) for l in (folder(f"{S10B}/logs") / "read_patterns.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "gbps" in r]
    best = lambda pat, **kw: [max(r["pct_of_contig"] for r in rows if r["pattern"] == pat and r["n"] == n
                                  and all(r[k] == v for k, v in kw.items())) for n in (6144, 8192, 57344)]
    tile = [r["pct_of_contig"] for r in rows if r["pattern"] == "tile"]
    return [f"a warp per row reads at {span(best('rowwarp', BPS=4) + best('rowwarp', BPS=2), '.1f')}% of a copy-like read "
            f"with 16 or more warps per SM",
            f"stage 14's pattern at {span(tile, '.1f')}%",
            f"{min(r['launch_us'] for r in rows if r['pattern'] == 'contig' and r['n'] == 6144):.1f} us a launch"]


def default_run_phrases() -> list:
    d = pd.read_csv(folder(f"{S11}/default_run") / "results.csv")
    ok = d[d["status"] == "ok"]
    rel = ok["reliable"].astype(str).eq("True")
    wall = next(l for l in (folder(f"{S11}/logs") / "default_run.log").read_text().splitlines()
                if l.startswith("default_run wall"))
    return [f"{int(rel.sum())} of its {len(ok)} ok rows reliable ({100 * rel.mean():.1f}%)",
            f"in {int(wall.split()[2]) / 1000:.1f} s"]


S12, S12B, S12E = "h200-2026-12-03/session12", "h200-2026-12-03/session12b", "h200-2026-12-03/session12e"  # stage 16's stamps
S12F = "h200-2026-12-03/session12f"  # stage 16 under ncu


def _trace(sess: str) -> list:
    return [json.loads(x) for x in (folder(f"{sess}/logs") / "decode_trace.jsonl").read_text().splitlines() if x]


def trace_phrases() -> list:
    """Where stage 16's time goes: session12's stamps at (1, 8192, 28672) (DEFER 0, one launch between
    the events), cuBLAS there, every traced launch's time outside the warps, session12b's warps by SM."""
    import numpy as np

    rows = _trace(S12)
    r = next(x for x in rows if x["variant"] == "decode_rows" and (x["m"], x["n"], x["k"]) == (1, 8192, 28672)
             and x["defines"] == "{DEFER:0}" and x["mode"] == "single")
    lib = next(x for x in rows if x["variant"] == "cublas" and (x["m"], x["n"], x["k"]) == (1, 8192, 28672)
               and x["mode"] == "single")
    outside = [x["outside_us"] for x in rows if "outside_us" in x]
    out = [f"{r['event_us']:.1f} us between the events, of which {r['outside_us']:.1f} us lie outside",
           f"({span(outside, '.1f')} us in every traced launch",
           f"the first weights come {r['first_data_med_us']:.1f} us after",
           f"spread from {r['stream_p10_us']:.1f} us (the first tenth) to {r['stream_max_us']:.1f} us (the last warp)",
           f"add up to {r['finish_max_us']:.1f} us; cuBLAS takes {lib['event_us']:.1f} us"]
    w = next(x for x in _trace(S12B) if x.get("defines") == "{RING:0}" and (x["m"], x["n"], x["k"]) == (1, 8192, 28672)
             and isinstance(x.get("warps"), list))
    a = np.array(w["warps"])
    end, sm = a[:, 2] / 1e3, a[:, 4]
    sms = np.unique(sm)
    out.append(f"{np.median([np.ptp(end[sm == s]) for s in sms]):.1f} us between an SM's first and last warp")
    out.append(f"standard deviation of {np.std([end[sm == s].mean() for s in sms]):.1f} us between the SMs'")
    # BALANCE (session12e): its traces at (1, 8192, 28672) and its sweep against cuBLAS at 1 token (bf16)
    by = {x["defines"]: np.array(x["warps"]) for x in _trace(S12E)
          if isinstance(x.get("warps"), list) and (x["m"], x["n"], x["k"]) == (1, 8192, 28672)}
    ptp = {d: np.median([np.ptp(a[a[:, 4] == s, 2]) for s in np.unique(a[:, 4])]) / 1e3 for d, a in by.items()}
    out.append(f"within {ptp['{BAL:1}']:.1f} us of each other ({ptp['{BAL:0}']:.1f} us without it)")
    fin = by["{BAL:1}"]
    out.append(f"(up to {np.max(fin[:, 3] - fin[:, 2]) / 1e3:.1f} us after a warp's")
    sw = pd.read_csv(folder(f"{S12E}/decode_rows_sweep") / "results.csv")
    sw = sw[(sw["status"] == "ok") & (sw["precision"] == "bf16") & (sw["m"] == 1)]
    bal = sw["defines"].map(lambda t: json.loads(t)["BALANCE"])
    out.append(f"({span(sw[bal == 1]['pct_of_baseline'], '.1f')}% of cuBLAS timed beside it at 1 token, "
               f"against {span(sw[bal == 0]['pct_of_baseline'], '.1f')}%")
    # session12f: stage 16 under ncu at 1 and 16 tokens
    def metric(log: str, name: str) -> float:
        import re

        text = (folder(f"{S12F}/logs") / log).read_text()
        return float(re.search(rf"^\s*{re.escape(name)}\s+%\s+([\d.]+)", text, re.M).group(1))

    t1, t16 = "ncu_rows_decode_rows_t1.log", "ncu_rows_decode_rows_t16.log"
    out.append(f"DRAM runs at {metric(t1, 'DRAM Throughput'):.1f}% of its peak at 1 token and "
               f"{metric(t16, 'DRAM Throughput'):.1f}% at 16")
    out.append(f"(L1 hit rate {metric(t16, 'L1/TEX Hit Rate'):.1f}%;")
    out.append(f"the L2 runs at {metric(t16, 'L2 Cache Throughput'):.1f}% of its throughput")
    return out


@pytest.mark.skipif(not has(S12, S12B, S12E, S12F), reason="session12's traces are not in this checkout")
def test_readme_states_where_stage_16s_time_goes():
    assert_said(trace_phrases(), "paragraph on where stage 16's time goes")


def test_readme_states_the_decode_stages_as_measured():
    assert_said(decode_phrases() + sweep_phrases() + read_phrases(), "decode paragraph")


S18C = "h200-2026-12-04/session18c"  # Llama-3 8B's decode points timed by CUPTI, then by events


def cupti_phrases() -> list:
    """cuBLAS at Llama-3 8B's 50 MB shapes by CUPTI's kernel records, against the copy probe of the
    same run: the time a kernel reading W, X and C once at the copy probe's rate would take, and so
    the most any kernel could gain on cuBLAS there."""
    d = pd.read_csv(folder(f"{S18C}/decode_cupti/bf16_cupti") / "results.csv")
    ok = d[d["status"] == "ok"]
    assert set(ok["timer"]) == {"cupti_kernel"}
    copy = ok[ok["variant"] == "copy_gpu"].iloc[0]
    copy_gbs = copy["bytes_min"] / copy["time_median_s"] / 1e9
    lib = ok[(ok["variant"] == "cublas") & (ok["n"] == 6144) & (ok["k"] == 4096)].set_index("m")
    t1, t64 = lib.loc[1, "time_median_s"], lib.loc[64, "time_median_s"]
    pct = 100 * lib.loc[[1, 64], "bytes_min"] / lib.loc[[1, 64], "time_median_s"] / 1e9 / copy_gbs
    at_copy = lib.loc[[1, 64], "bytes_min"] / (copy_gbs * 1e9)  # bytes_min: W, X and C once each
    gain = lib.loc[[1, 64], "time_median_s"] / at_copy
    return [f"cuBLAS's kernel takes {t1 * 1e6:.2f} us at (1, 6144, 4096) and {t64 * 1e6:.2f} us at (64, 6144, 4096)",
            f"{span(pct, '.1f')}% of the copy probe ({copy_gbs:.0f} GB/s)",
            f"would take {span(at_copy * 1e6, '.1f')} us there, at most {span(gain, '.2f')}x cuBLAS"]


@pytest.mark.skipif(not has(S18C), reason="session18c's CUPTI rows are not in this checkout")
def test_readme_states_what_cuptis_kernel_times_say_of_the_1_3x_bar():
    assert_said(cupti_phrases(), "decode paragraph (CUPTI)")


def test_readme_states_the_default_run_on_the_h200():
    assert_said(default_run_phrases(), "default run sentence")


S13, S13B, S13C = "h200-2026-12-03/session13", "h200-2026-12-03/session13b", "h200-2026-12-03/session13c"  # XSTAGE, XSHARE
S13D = "h200-2026-12-03/session13d"  # the decode experiment again, cuBLASLt beside it too


def _flag(defines: str, key: str) -> int:
    return json.loads(defines)[key]


def shared_x_phrases() -> list:
    """What the activations in shared memory bought: session13's XSTAGE sweep, session13b's XSHARE
    sweep (both against cuBLAS interleaved, bf16), session13c's decode experiment at the new defaults."""
    out = []
    a = pd.read_csv(folder(f"{S13}/decode_rows_sweep") / "results.csv")
    a = a[(a["status"] == "ok") & (a["precision"] == "bf16") & (a["variant"] == "decode_rows")]
    a = a[a["defines"].map(lambda t: _flag(t, "XSHARE") == 0)]
    t16 = a[a["m"] == 16].pivot_table(index=["n", "k"], columns=a["defines"].map(lambda t: _flag(t, "XS")),
                                      values="pct_of_baseline")
    out.append(f"at 16 tokens {span(t16[1], '.1f')}% of cuBLAS timed beside it, against {span(t16[0], '.1f')}% "
               f"without (`session13`)")
    b = pd.read_csv(folder(f"{S13B}/decode_rows_sweep") / "results.csv")
    b = b[(b["status"] == "ok") & (b["precision"] == "bf16") & (b["variant"] == "decode_rows")]
    large = b[(b["m"] == 16) & (b["n"] * b["k"] > 100e6)]
    x = large.pivot_table(index=["n", "k"], columns=large["defines"].map(lambda t: _flag(t, "XSHARE")),
                          values="pct_of_baseline")
    out.append(f"{span(x[1], '.1f')}% of cuBLAS at 16 tokens at the four largest shapes, against {span(x[0], '.1f')}%")
    bf, copy_bf = _decode_run_in(S13C, "bf16")
    fp, copy_fp = _decode_run_in(S13C, "fp8")
    rows = bf[bf["variant"] == "decode_rows"].sort_values("pct_copy", ascending=False)
    top = rows[rows["pct_copy"] >= 90]
    out.append(f"copy probe {copy_bf:.0f} GB/s): {len(top)} BF16 points at >= 90% of it: "
               + ", ".join(f"`{r['shape_name']}` {r['pct_copy']:.1f}% ({r['pct_of_baseline']:.1f}% of cuBLAS)"
                           for _, r in top.iterrows()))
    by_m = {m: rows[rows["m"] == m] for m in (1, 16, 64)}
    out.append(f"{span(by_m[1]['pct_copy'], '.1f')}% at 1 token, {span(by_m[16]['pct_copy'], '.1f')}% at 16, "
               f"{span(by_m[64]['pct_copy'], '.1f')}% at 64 ({span(by_m[64]['pct_of_baseline'], '.1f')}% of cuBLAS)")
    f16 = fp[fp["variant"] == "decode_rows"]
    out.append(f"FP8 (copy probe {copy_fp:.0f} GB/s) reaches {f16[f16['m'] == 1]['pct_copy'].max():.1f}% at 1 token, "
               f"{f16[f16['m'] == 16]['pct_copy'].max():.1f}% at 16 and {f16[f16['m'] == 64]['pct_copy'].max():.1f}% at 64")
    d, copy_d = _decode_run_in(S13D, "bf16")
    rows = d[d["variant"] == "decode_rows"]
    top = rows[rows["pct_copy"] >= 90]
    small = rows[(rows["n"] == 6144) & (rows["k"] == 4096) & rows["m"].isin([1, 64])].sort_values("m")
    out.append(f"(`session13d/decode_rows`, copy probe {copy_d:.0f} GB/s): again {len(top)} BF16 points at >= 90% "
               f"({span(top['pct_copy'], '.1f')}%), at {span(top['pct_of_baseline'], '.1f')}% of the faster library "
               f"timed beside each; {' and '.join(f'{v:.1f}%' for v in small['pct_of_baseline'])} of it at Llama-3 8B's")
    return out


@pytest.mark.skipif(not has(S13, S13B, S13C, S13D), reason="session13's rows are not in this checkout")
def test_readme_states_what_the_shared_activations_bought():
    assert_said(shared_x_phrases(), "paragraph on the activations in shared memory")


if __name__ == "__main__":  # print what the README should say
    for p in decode_phrases() + sweep_phrases() + read_phrases() + default_run_phrases() + shared_x_phrases():
        print(p)
