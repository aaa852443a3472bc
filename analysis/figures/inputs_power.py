"""What the inputs do (issue 21, ``python run.py -m +experiment=inputs_power``): per input
distribution (normal, uniform, exact small integers, 90 % zeros) and input scale, TFLOP/s, the SM
clock, board power and GFLOP/J of each library and precision at N = 8192, four stacked panels
sharing the groups. This figure is a study of the inputs, so it draws exact and sparse rows too
(shaded groups: they are never evidence for a peak); rows the reliability rules drop (unreliable,
contended, too few samples) are hollow and in no point's best (:func:`analysis.energy.inputs_points`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, energy, style

PANELS = (("tflops", "TFLOP/s", "tflops"), ("clock_mhz", "SM clock\n(MHz)", "clock"),
          ("power_avg_w", "Power (W)", "power"), ("gflops_per_joule", "GFLOP/J", "eff"))
STUDY_LABEL = "shaded: exact / sparse inputs, a study (never evidence for a peak)"
HOLLOW_LABEL = "hollow: unreliable, contended or too few samples (in no best)"


def group_label(distribution: str, scale: float) -> str:
    return distribution if scale == 1.0 else f"{distribution}\n×{style.format_sig(scale)}"


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds, energy.inputs_points(ds))


def _build(ds: data.Dataset, pts: pd.DataFrame) -> Figure:
    groups = energy.groups(pts)
    series = list(dict.fromkeys(zip(pts["variant"], pts["precision"]))) if not pts.empty else []
    series.sort(key=lambda s: (data.variant_order(pts[["variant", "backend"]].drop_duplicates()).index(s[0]),
                               data.precision_order(pts["precision"]).index(s[1])))
    handles = [Line2D([], [], ls="", marker="o", ms=3, color=style.variant_color(v), label=v)
               for v in dict.fromkeys(v for v, _ in series)]
    handles += [Line2D([], [], ls="", marker=style.precision_marker(p), ms=3, color="#555555", label=p)
                for p in data.precision_order(pts["precision"])]
    if not pts.empty and pts["study"].any():
        handles.append(Line2D([], [], ls="", marker="s", ms=5, color="#ececec", label=STUDY_LABEL))
    if not pts.empty and (~pts["counts"]).any():
        handles.append(Line2D([], [], ls="", marker="o", ms=3, mfc="none", color="#555555", label=HOLLOW_LABEL))
    fig = style.figure(4.0 + style.legend_height([h.get_label() for h in handles]))
    axes = fig.subplots(len(PANELS), 1, sharex=True)
    width = 0.7
    offset = {s: (i + 0.5) / len(series) * width - width / 2 for i, s in enumerate(series)}
    for ax, (col, label, kind) in zip(axes, PANELS):
        for i, (d, scale) in enumerate(groups):
            if d in data.STUDY_INPUTS:
                ax.axvspan(i - 0.5, i + 0.5, color="#ececec", lw=0, zorder=0, gid=style.gid("study", d, scale))
        for (v, p) in series:
            for counts in (True, False):
                g = pts[(pts["variant"] == v) & (pts["precision"] == p) & (pts["counts"] == counts) & pts[col].notna()]
                if g.empty:
                    continue
                x = np.array([groups.index(k) for k in zip(g["distribution"], g["input_scale"])], float) + offset[(v, p)]
                color = style.variant_color(v)
                ax.scatter(x, g[col], s=10, marker=style.precision_marker(p), zorder=4, linewidths=0.7,
                           facecolors=color if counts else "none", edgecolors="white" if counts else color,
                           gid=style.gid(kind if counts else "unreliable-" + kind, v, p))
        ax.set_ylabel(label, fontsize=6)
        if not any(c.get_gid() and not c.get_gid().startswith("study") for c in ax.collections):
            ax.set_yticks([])
    axes[-1].set_xticks(range(len(groups)), [group_label(d, s) for d, s in groups], fontsize=5)
    axes[-1].set_xlim(-0.6, max(len(groups), 1) - 0.4)
    for ax in axes:
        ax.grid(axis="x", visible=False)
    axes[-1].set_xlabel("Input distribution × scale (N = 8192)")
    for ax, lines in zip(axes, notes(pts)):
        style.note(ax, lines, where="center" if pts.empty else "upper right")
    style.legend_below(fig, handles)
    return fig


def notes(pts: pd.DataFrame) -> list:
    """Note lines per panel (TFLOP/s, clock, power, GFLOP/J)."""
    if pts.empty:
        return [[f"inputs study: not measured (no rows of the inputs_power experiment yet); measure with "
                 f"`{energy.MEASURE_INPUTS}`"], [], [], []]
    out = [[], [], [], []]
    gone = [d for d in energy.DISTRIBUTIONS if d not in set(pts["distribution"])]
    if gone:
        out[0].append(f"no rows with {', '.join(gone)} inputs")
    for i, col in ((2, "power_avg_w"), (3, "gflops_per_joule")):
        if not pts[col].notna().any():
            out[i].append(energy.not_measured(PANELS[i][1].replace("\n", " "), energy.MEASURE_INPUTS))
    return out
