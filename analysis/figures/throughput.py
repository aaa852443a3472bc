"""Throughput against size: TFLOP/s of every variant (the CPU BLAS included) against N for square
N x N x N products, one panel per precision; bars span each point's p20-p80 (chapter 5.6, C11).
"""
from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, style

PANEL_HEIGHT_IN = 1.2


def points(ds: data.Dataset) -> pd.DataFrame:
    rows = pd.concat([ds.gpu, ds.cpu])
    rows = data.square(data.gemm(rows))
    rows = rows[rows["tflops"] > 0]
    return data.summarize_points(rows, ["variant", "backend", "precision", "n"])


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds)


def size_axis(ax, sizes) -> None:
    """Log-2 N axis ticked at the measured sizes (every other one when crowded)."""
    ax.set_xscale("log", base=2)
    sizes = sorted(set(int(n) for n in sizes))
    if not sizes:
        return
    step = max(1, math.ceil(len(sizes) / 4))  # four labels fit a half-column panel
    ticks = sizes[::step]
    ax.set_xticks(ticks, [str(n) for n in ticks])
    ax.set_xticks([], minor=True)
    ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.4)


def _build(ds: data.Dataset) -> Figure:
    pts = points(ds)
    precisions = data.precision_order(pts["precision"])
    ncols = 1 if len(precisions) <= 2 else 2
    nrows = max(1, math.ceil(len(precisions) / ncols))
    order = data.variant_order(pts[["variant", "backend"]].drop_duplicates())
    backend_of = dict(zip(pts["variant"], pts["backend"]))
    handles = [Line2D([], [], marker="o", ms=2.5, color=style.variant_color(v, backend_of[v]), label=v)
               for v in order]
    labels = [h.get_label() for h in handles]
    # an odd panel count leaves a slot for the legend, if it fits there
    legend_slot = ncols == 2 and len(precisions) % 2 == 1 and \
        style.legend_height(labels, style.COLUMN_WIDTH_IN / 2) <= PANEL_HEIGHT_IN
    fig = style.figure(0.45 + PANEL_HEIGHT_IN * nrows + (0 if legend_slot else style.legend_height(labels)))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, p in zip(axes, precisions):
        sub = pts[pts["precision"] == p]
        for v in order:
            g = sub[sub["variant"] == v].sort_values("n")
            if g.empty:
                continue
            color = style.variant_color(v, backend_of[v])
            ax.plot(g["n"].astype(float), g["tflops"], marker="o", ms=2.5, color=color,
                    gid=style.gid("line", v, p))
            ax.vlines(g["n"].astype(float), g["tflops_lo"], g["tflops_hi"], color=color, lw=0.5,
                      gid=style.gid("range", v, p))
        style.log_axis(ax, "y")
        size_axis(ax, sub["n"])
        ax.set_title(p, loc="left")
    for i, ax in enumerate(axes[: max(len(precisions), 1)]):
        if i % ncols == 0:
            ax.set_ylabel("Throughput (TFLOP/s)")
        if i >= len(precisions) - ncols or not precisions:
            ax.set_xlabel("N (m = n = k)")
    if not precisions:
        axes[0].set_yscale("log")
        axes[0].set_xscale("log", base=2)
        axes[0].set_xlabel("N (m = n = k)")
    style.note(axes[0], _notes(ds, pts), where="lower right" if precisions else "center")

    if legend_slot:
        spare = axes[len(precisions)]
        spare.axis("off")
        spare.legend(handles=handles, loc="center", ncol=style.legend_columns(labels, style.COLUMN_WIDTH_IN / 2))
    else:
        for ax in axes[len(precisions) or 1:]:
            ax.set_visible(False)
        style.legend_below(fig, handles)
    return fig


def _notes(ds: data.Dataset, pts: pd.DataFrame):
    notes = []
    if pts.empty:
        notes.append("no square GEMM rows in the data")
    gone = data.missing(pts["backend"], data.configured_backends())
    if gone:
        notes.append(f"no rows of {', '.join(gone)}")
    gone = data.missing(pts["precision"], data.configured_precisions())
    if gone and not pts.empty:
        notes.append(f"no rows at {', '.join(gone)}")
    return notes
