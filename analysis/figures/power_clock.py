"""Power and clock against size (issue 21): for BF16 and FP16 sustained rows (warmed up until the
clock settles), TFLOP/s, the SM clock and the board power against N, three stacked panels sharing
N. The clock is the energy window's mean where the row has one, else the in-band median the spin
read before the samples (:func:`analysis.energy.clock_mhz`); power is the energy counter's mean
over that window (``power_avg_w``; NVML's polled ``power_w`` lags and is not drawn), the power
limit a line. Each point is the best evidence row at its N.
"""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, energy, style
from .throughput import plot_by_size, size_axis

LINESTYLE = {"bf16": "-", "fp16": "--"}
PANELS = (("tflops", "TFLOP/s", "tflops"), ("clock_mhz", "SM clock (MHz)", "clock"),
          ("power_avg_w", "Board power (W)", "power"))


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds, energy.power_clock_points(ds))


def _build(ds: data.Dataset, pts: pd.DataFrame) -> Figure:
    variants = data.variant_order(pts[["variant", "backend"]].drop_duplicates(), ds.stages) if not pts.empty else []
    precisions = [p for p in energy.POWER_CLOCK_PRECISIONS if p in set(pts["precision"])]
    handles = [Line2D([], [], color=style.variant_color(v), label=v) for v in variants]
    handles += [Line2D([], [], color="#555555", ls=LINESTYLE[p], marker=style.precision_marker(p), ms=2.5, label=p)
                for p in precisions]
    limits = sorted(set(pts["power_limit_w"].dropna())) if not pts.empty else []
    if limits:
        handles.append(Line2D([], [], color="#8c8c8c", ls=":", label="power limit"))
    fig = style.figure(3.3 + style.legend_height([h.get_label() for h in handles]))
    axes = fig.subplots(3, 1, sharex=True)
    for ax, (col, label, kind) in zip(axes, PANELS):
        for v in variants:
            for p in precisions:
                g = pts[(pts["variant"] == v) & (pts["precision"] == p) & pts[col].notna()].sort_values("n")
                if not g.empty:
                    plot_by_size(ax, g["n"], g[col], style.gid(kind, v, p), color=style.variant_color(v),
                                 ls=LINESTYLE[p], marker=style.precision_marker(p), ms=2.5)
        ax.set_ylabel(label, fontsize=6)
    for w in limits:
        axes[2].axhline(w, color="#8c8c8c", ls=":", lw=0.8, gid=style.gid("limit", style.format_sig(w)))
    if pts["power_avg_w"].notna().any() if not pts.empty else False:
        top = max([*pts["power_avg_w"].dropna(), *limits])
        axes[2].set_ylim(0, top * 1.1)
    size_axis(axes[2], pts["n"]) if not pts.empty else axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("N (m = n = k)")
    for ax in axes:
        if not ax.lines:
            ax.set_yticks([])  # nothing measured: no scale to read
    for ax, lines in zip(axes, notes(pts)):
        style.note(ax, lines, where="lower right" if ax.lines else "center")
    style.legend_below(fig, handles)
    return fig


def notes(pts: pd.DataFrame) -> list:
    """A list of note lines per panel (TFLOP/s, clock, power)."""
    if pts.empty:
        return [[f"no sustained bf16/fp16 square GEMM rows: measure with `{energy.MEASURE_SQUARE}`"], [], []]
    out = [[], [], []]
    if not pts["power_avg_w"].notna().any():
        out[2].append(energy.not_measured("power over the energy window", energy.MEASURE_SQUARE))
    gone = [p for p in energy.POWER_CLOCK_PRECISIONS if p not in set(pts["precision"])]
    if gone:
        out[0].append(f"no sustained rows at {', '.join(gone)}")
    return out
