"""Energy efficiency against size (issue 21): GFLOP/J against N for square N x N x N GEMMs, one
panel per precision, for cuBLAS, cuBLASLt and the best hand-written stage at each N. Each point is
the best evidence row with energy columns at that N (:func:`analysis.data.best_rows`), its GFLOP/J
that row's own (``measure.energy=true``: NVML's energy counter over back-to-back calls).
"""
from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, energy, style
from .throughput import plot_by_size, size_axis

PANEL_HEIGHT_IN = 1.15
HANDWRITTEN_LABEL = "best hand-written stage (its name at each point)"


def series_color(series: str) -> str:
    return style.backend_color(data.HANDWRITTEN_BACKEND) if series == energy.HANDWRITTEN \
        else style.variant_color(series)


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds, energy.efficiency_points(ds))


def _build(ds: data.Dataset, pts: pd.DataFrame) -> Figure:
    precisions = data.precision_order(pts["precision"])
    series = [s for s in (*data.CUBLAS_VARIANTS, energy.HANDWRITTEN) if s in set(pts["series"])]
    handles = [Line2D([], [], marker="o", ms=2.5, color=series_color(s),
                      label=HANDWRITTEN_LABEL if s == energy.HANDWRITTEN else s) for s in series]
    ncols = 1 if len(precisions) <= 2 else 2
    nrows = max(1, math.ceil(len(precisions) / ncols))
    fig = style.figure(0.45 + PANEL_HEIGHT_IN * nrows + style.legend_height([h.get_label() for h in handles]))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, p in zip(axes, precisions):
        sub = pts[pts["precision"] == p]
        for s in series:
            g = sub[sub["series"] == s].sort_values("n")
            if g.empty:
                continue
            plot_by_size(ax, g["n"], g["gflops_per_joule"], style.gid("eff", s, p), marker="o", ms=2.5,
                         color=series_color(s))
            if s == energy.HANDWRITTEN:
                for n, y, v in zip(g["n"], g["gflops_per_joule"], g["variant"]):
                    ax.annotate(v, (float(n), y), xytext=(2, 2), textcoords="offset points", fontsize=4.5,
                                color="#444444", gid=style.gid("stage", p, int(n), v))
        ax.set_ylim(0, sub["gflops_per_joule"].max() * 1.15)  # linear from zero: ratios read as heights
        size_axis(ax, sub["n"], max_flat=3)  # two panels a row: more labels flat would collide
        ax.set_title(p, loc="left")
    for i, ax in enumerate(axes):
        if i >= max(len(precisions), 1):
            ax.set_visible(False)
            continue
        if i % ncols == 0:
            ax.set_ylabel("GFLOP/J")
        ax.set_xlabel("N (m = n = k)")
    if not precisions:  # nothing measured: no scale to read
        axes[0].set_xticks([])
        axes[0].set_yticks([])
    style.note(axes[0], notes(ds, pts), where="lower right" if precisions else "center")
    style.legend_below(fig, handles)
    return fig


def notes(ds: data.Dataset, pts: pd.DataFrame) -> list:
    if pts.empty:
        return [energy.not_measured("GFLOP/J per square GEMM", energy.MEASURE_SQUARE)]
    out = []
    gone = [s for s in (*data.CUBLAS_VARIANTS, energy.HANDWRITTEN) if s not in set(pts["series"])]
    if gone:
        out.append(f"no energy rows of {', '.join(gone)}")
    return out
