"""Relative error against an FP64 product, by precision and backend; each precision's pass
tolerance, and the band the chapter calls normal for FP16 tensor cores (5.5, claim C9).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .. import data, style

# The chapter's statement (5.5, claim C9): 1e-4 to 1e-3 relative error against FP32 is normal
# for FP16 WMMA. A claim to compare with, not a measurement.
CHAPTER_ERROR_BAND = (1e-4, 1e-3)
BAND_COLOR = "#f4a582"


def points(ds: data.Dataset) -> pd.DataFrame:
    rows = data.gemm(pd.concat([ds.gpu, ds.cpu]))
    return rows[rows["rel_error"].notna()]


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds)


def _build(ds: data.Dataset) -> Figure:
    rows = points(ds)
    precisions = data.precision_order(rows["precision"])
    backends = data.backend_order(rows["backend"])
    handles = _handles(backends, rows)
    fig = style.figure(2.3 + style.legend_height([h.get_label() for h in handles]))
    ax = fig.add_subplot()
    ax.set_yscale("log")
    positive = rows.loc[rows["rel_error"] > 0, "rel_error"]
    # exact results (0) are drawn on a floor under every error and tolerance shown
    lowest = min(list(positive) + list(rows["tolerance"].dropna()) + [CHAPTER_ERROR_BAND[0]])
    floor = 10 ** math.floor(math.log10(lowest)) / 10
    notes = []

    ax.axhspan(*CHAPTER_ERROR_BAND, color=BAND_COLOR, alpha=0.3, lw=0, zorder=0, gid=style.gid("band", "chapter"))
    width = 0.7
    offsets = {b: (i - (len(backends) - 1) / 2) * width / max(len(backends), 1) for i, b in enumerate(backends)}
    for i, p in enumerate(precisions):
        sub = rows[rows["precision"] == p]
        tol = sub["tolerance"].max()
        if tol == tol:
            ax.hlines(tol, i - 0.45, i + 0.45, colors="black", lw=0.8, linestyles="--", zorder=3,
                      gid=style.gid("tolerance", p))
        for b in backends:
            g = sub[sub["backend"] == b]
            if g.empty:
                continue
            # spread a backend's rows (sizes, variants) a little, in a fixed order
            g = g.sort_values(["variant", "m", "n", "k", "run_id"], kind="stable")
            spread = width / max(len(backends), 1) * 0.6
            x = i + offsets[b] + (np.linspace(-spread / 2, spread / 2, len(g)) if len(g) > 1 else np.zeros(1))
            y = g["rel_error"].to_numpy()
            exact = y == 0
            color = style.backend_color(b)
            if (~exact).any():
                ax.scatter(x[~exact], y[~exact], s=9, color=color, edgecolors="white", linewidths=0.3,
                           zorder=4, gid=style.gid("error", b, p))
            if exact.any():
                ax.scatter(x[exact], np.full(exact.sum(), floor), s=9, facecolors="none", edgecolors=color,
                           linewidths=0.7, zorder=4, gid=style.gid("error-exact", b, p))
    ax.set_xticks(range(len(precisions)), precisions)
    ax.set_xlim(-0.6, max(len(precisions), 1) - 0.4)
    top = max([CHAPTER_ERROR_BAND[1]] + list(rows["rel_error"]) + list(rows["tolerance"].dropna()))
    ax.set_ylim(floor / 3, top * 8)
    ax.grid(axis="x", visible=False)
    ax.set_xlabel("Precision")
    ax.set_ylabel(r"Relative error $\|C - C_{ref}\|_F / \|C_{ref}\|_F$")

    if rows.empty:
        notes.append(f"no GEMM rows with a relative error in the data{ds.left_out()}")
    measured = pd.concat([ds.measured_rows("cpu"), ds.measured_rows("gpu")])  # counted or not
    gone = data.missing(measured["backend"], data.configured_backends())
    if gone:
        notes.append(f"no rows of {', '.join(gone)}")
    gone = data.missing(rows["precision"], data.configured_precisions())
    if gone and not rows.empty:
        notes.append(f"no rows at {', '.join(gone)}")
    style.note(ax, notes, where="upper right" if not rows.empty else "center")  # errors sit low

    style.legend_below(fig, handles)
    return fig


def _handles(backends, rows) -> list:
    handles = [Line2D([], [], ls="", marker="o", ms=3, color=style.backend_color(b), label=b) for b in backends]
    handles += [Line2D([], [], color="black", lw=0.8, ls="--", label="pass tolerance"),
                Patch(color=BAND_COLOR, alpha=0.3, lw=0, label="chapter: 1e-4 to 1e-3 normal (FP16)")]
    if (rows["rel_error"] == 0).any():
        handles.append(Line2D([], [], ls="", marker="o", ms=3, mfc="none", color="#555555",
                              label="0 (exact), drawn at the bottom"))
    return handles
