"""The ladder: TFLOP/s of each hand-written stage at one size, per precision, with the share of
cuBLAS written at each bar, and CUTLASS and cuBLAS beside them (chapter 5.2-5.5, C3-C10).
"""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .. import data, ladder, style

BAR_HEIGHT_IN = 0.14


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds, ladder.build(ds))


def _label(e) -> str:
    if e["group"] == ladder.GROUP_STAGE:
        return e["variant"] if pd.isna(e["stage"]) else f"{int(e['stage'])}  {e['variant']}"
    return e["variant"]  # CUTLASS and cuBLAS variants say what they are in their names


def _build(ds: data.Dataset, lad: ladder.Ladder) -> Figure:
    precisions = lad.precisions
    n_bars = len(lad.entries)
    height = 0.75 + BAR_HEIGHT_IN * max(n_bars, 2) + 0.35 * max(len(precisions), 1)
    fig = style.figure(height)
    if not precisions:
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_xlim(1e-3, 1e3)
        ax.set_yticks([])
        ax.set_xlabel("Throughput (TFLOP/s)")
        style.note(ax, lad.notes.get("", []) + _missing(ds), where="center")
        return fig
    sizes = [int((lad.entries["precision"] == p).sum()) for p in precisions]
    axes = fig.subplots(len(precisions), 1, squeeze=False, gridspec_kw={"height_ratios": sizes})[:, 0]
    for i, (ax, p) in enumerate(zip(axes, precisions)):
        e = lad.entries[lad.entries["precision"] == p].reset_index(drop=True)
        ys = list(range(len(e)))[::-1]  # first rung on top
        for y, (_, row) in zip(ys, e.iterrows()):
            color = style.variant_color(row["variant"], row["backend"])
            ax.barh(y, row["tflops"], height=0.7, color=color, gid=style.gid("bar", row["variant"], p))
            pct = row["pct_of_cublas"]
            text = "–" if pd.isna(pct) else f"{pct:.0f}%" if pct >= 10 else f"{pct:.1f}%"
            ax.text(row["tflops"] * 1.06, y, text, va="center", ha="left", fontsize=5.5,
                    gid=style.gid("pct", row["variant"], p))
        ax.set_yticks(ys, [_label(r) for _, r in e.iterrows()])
        ax.set_xscale("log")
        lo, hi = e["tflops"].min(), e["tflops"].max()
        ax.set_xlim(min(lo / 3, hi / 30), hi * 3.5)  # at least a decade and a half; room for the %
        style.log_axis(ax, "x")
        ax.set_ylim(-0.6, len(e) - 0.4)
        ax.grid(axis="y", visible=False)
        ax.set_title(f"{p}, N = {int(e['n'].iloc[0])}", loc="left")
        lines = lad.notes.get(p, []) + (lad.notes.get("", []) + _missing(ds) if i == 0 else [])
        style.note(ax, lines, where="upper right")  # the first rungs, on top, are the short bars
    # across the figure: the axes are narrow beside long variant names
    fig.supxlabel("Throughput (TFLOP/s); bar labels: % of cuBLAS", fontsize=7)
    return fig


def _missing(ds: data.Dataset):
    gpu_backends = [b for b in data.configured_backends() if data.backend_kind(b) == "gpu"]
    gone = data.missing(data.gemm(ds.gpu)["backend"], gpu_backends)
    return [f"no GPU rows of {', '.join(gone)}"] if gone else []
