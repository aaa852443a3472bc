"""The ladder: TFLOP/s of each hand-written stage at one size, per precision (linear axis), with
its share of cuBLAS written at each bar, both readings (timed interleaved with it / the best
standalone cuBLAS row), and CUTLASS and cuBLAS beside them (chapter 5.2-5.5, C3-C10). A stage
with an instruction ceiling (analysis.ladder) has it drawn across its bar as a dotted line.
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
    n_rows = sum(max(int((lad.entries["precision"] == p).sum()), 3) for p in precisions)
    height = 0.75 + BAR_HEIGHT_IN * max(n_rows, n_bars, 2) + 0.35 * max(len(precisions), 1)
    fig = style.figure(height)
    if not precisions:
        ax = fig.add_subplot()
        ax.set_xlim(0, 1)
        ax.set_yticks([])
        ax.set_xlabel("Throughput (TFLOP/s)")
        style.note(ax, lad.notes.get("", []) + _missing(ds), where="center")
        return fig
    # a panel of one or two rungs still has room for its title and notes
    sizes = [max(int((lad.entries["precision"] == p).sum()), 3) for p in precisions]
    axes = fig.subplots(len(precisions), 1, squeeze=False, gridspec_kw={"height_ratios": sizes})[:, 0]
    drew_ceiling = False
    for i, (ax, p) in enumerate(zip(axes, precisions)):
        e = lad.entries[lad.entries["precision"] == p].reset_index(drop=True)
        rows = max(len(e), 3)  # as the panel's height ratio: room below a short ladder for notes
        ys = [rows - 1 - i for i in range(len(e))]  # first rung on top
        hi = float(e["tflops"].max())
        for y, (_, row) in zip(ys, e.iterrows()):
            color = style.variant_color(row["variant"], row["backend"])
            ax.barh(y, row["tflops"], height=0.7, color=color, gid=style.gid("bar", row["variant"], p))
            end = row["tflops"]
            if pd.notna(row.get("ceiling_tflops")):  # the instruction's rate at the row's clock
                end = max(end, row["ceiling_tflops"])
                ax.plot([row["ceiling_tflops"]] * 2, [y - 0.42, y + 0.42], color="0.15", lw=0.9, ls=(0, (1, 1)),
                        gid=style.gid("ceiling", row["variant"], p))
                drew_ceiling = True
            ax.text(end + 0.02 * hi, y, pct_text(row), va="center", ha="left", fontsize=5.5,
                    gid=style.gid("pct", row["variant"], p))
        ax.set_yticks(ys, [_label(r) for _, r in e.iterrows()])
        ax.set_xlim(0, hi * LABEL_ROOM)  # linear: bar lengths compare; room for the labels
        ax.set_ylim(-0.6, rows - 0.4)
        ax.grid(axis="y", visible=False)
        layout = str(e["layout"].iloc[0])
        ax.set_title(f"{p}, N = {int(e['n'].iloc[0])}" + ("" if layout == "nn" else f", layout {layout}"), loc="left")
        lines = lad.notes.get(p, []) + (lad.notes.get("", []) + _missing(ds) if i == 0 else [])
        style.note(ax, lines, where="lower right")  # the last rungs, at the bottom, are the long bars
    # across the figure: the axes are narrow beside long variant names
    fig.supxlabel("Throughput (TFLOP/s)\nat each bar: % of the cuBLAS timed interleaved with it / "
                  "% of the best\nstandalone cuBLAS row at that size" +
                  ("\ndotted: the stage's instruction issue rate at its clock (ceiling: that as %\n"
                   "of the interleaved cuBLAS, the most the stage could show)" if drew_ceiling else ""), fontsize=6)
    return fig


LABEL_ROOM = 1.45  # x range past the longest bar, for its "% / %" label


def pct_text(row) -> str:
    """``interleaved% / standalone%`` ("–" where one is missing; the cuBLAS bar: its 100 %), and
    the stage's instruction ceiling as % of the interleaved cuBLAS where it has one."""
    def one(v):
        return "–" if pd.isna(v) else f"{v:.0f}%" if v >= 10 else f"{v:.1f}%"

    if row["group"] == ladder.GROUP_CUBLAS:
        return one(row["pct_of_standalone"])
    text = f"{one(row['pct_of_cublas'])} / {one(row['pct_of_standalone'])}"
    ceiling = row.get("ceiling_pct_of_cublas")
    return text if ceiling is None or pd.isna(ceiling) else f"{text}, ceiling {one(ceiling)}"


def _missing(ds: data.Dataset):
    gpu_backends = [b for b in data.configured_backends() if data.backend_kind(b) == "gpu"]
    gone = data.missing(data.gemm(ds.gpu)["backend"], gpu_backends)
    return [f"no GPU rows of {', '.join(gone)}"] if gone else []
