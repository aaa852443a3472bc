"""Throughput against size: TFLOP/s of every variant (the CPU BLAS included) against N for square
N x N x N products, one panel per precision; each point is the best row at that N, its bar the
row's p20-p80 (chapter 5.6, C11). A variant's line joins its powers of two; other sizes are
markers of their own. Measured rows that are not evidence (unreliable, contended)
are drawn hollow and joined to nothing.
"""
from __future__ import annotations

import math
from typing import List

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, style

PANEL_HEIGHT_IN = 1.2
NOT_EVIDENCE_LABEL = "hollow: unreliable, contended or exact-input rows (in no best or peak)"


def measured_points(ds: data.Dataset, by: List[str], keep) -> pd.DataFrame:
    """Best points (:func:`analysis.data.best_points`) of the measured rows of both devices that
    ``keep`` selects, separately for evidence rows and the others; ``evidence`` says which."""
    rows = pd.concat([ds.measured_rows("gpu"), ds.measured_rows("cpu")])
    rows = keep(rows)
    good = data.best_points(rows[rows["evidence"]], by).assign(evidence=True)
    bad = data.best_points(rows[~rows["evidence"]], by).assign(evidence=False)
    parts = [p for p in (good, bad) if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else good


def points(ds: data.Dataset) -> pd.DataFrame:
    def keep(rows):
        rows = data.square(data.gemm(rows))
        return rows[rows["tflops"] > 0]

    return measured_points(ds, ["variant", "backend", "precision", "n"], keep)


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds)


ROTATE_ABOVE = 5  # more size labels than this on a half-column panel: turned upright


def is_pow2(n) -> bool:
    n = int(n)
    return n > 0 and n & (n - 1) == 0


def plot_by_size(ax, n, y, gid: str, **kw) -> None:
    """A curve against N: a line through the powers of two, the other sizes (1000, 1023, 4097:
    tails and guards) as markers of the same style beside it (gid ``offsize-<gid>``), so an odd
    size is not a spike in the line."""
    n, y = list(map(float, n)), list(y)
    pow2 = [is_pow2(x) for x in n]
    if any(pow2):
        ax.plot([x for x, p in zip(n, pow2) if p], [v for v, p in zip(y, pow2) if p], gid=gid, **kw)
    if not all(pow2):
        kw = {k: v for k, v in kw.items() if k not in ("ls", "linestyle")}
        ax.plot([x for x, p in zip(n, pow2) if not p], [v for v, p in zip(y, pow2) if not p], ls="",
                gid=f"offsize-{gid}", **kw)


def size_axis(ax, sizes, max_flat: int = ROTATE_ABOVE) -> None:
    """Log-2 N axis: a labelled tick at every measured power of two (at every measured size
    where none is one), a minor tick at the other measured sizes; labels turned upright when
    there are more than ``max_flat``."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log", base=2)
    sizes = sorted(set(int(n) for n in sizes))
    if not sizes:
        return
    pow2 = [n for n in sizes if n > 0 and n & (n - 1) == 0]
    major = pow2 or sizes
    minor = [n for n in sizes if n not in major]
    ax.set_xticks(major, [str(n) for n in major])
    ax.set_xticks(minor, minor=True)
    ax.xaxis.set_minor_formatter(NullFormatter())
    if len(major) > max_flat:
        ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.4)


def _build(ds: data.Dataset) -> Figure:
    pts = points(ds)
    good = pts[pts["evidence"]] if not pts.empty else pts
    precisions = data.precision_order(pts["precision"])
    ncols = 1 if len(precisions) <= 2 else 2
    nrows = max(1, math.ceil(len(precisions) / ncols))
    order = data.variant_order(pts[["variant", "backend"]].drop_duplicates(), ds.stages)
    backend_of = dict(zip(pts["variant"], pts["backend"]))
    handles = [Line2D([], [], marker="o", ms=2.5, color=style.variant_color(v, backend_of[v]), label=v)
               for v in order]
    if not pts.empty and (~pts["evidence"]).any():
        handles.append(Line2D([], [], ls="", marker="o", ms=2.5, mfc="none", color="#555555",
                              label=NOT_EVIDENCE_LABEL))
    labels = [h.get_label() for h in handles]
    # an odd panel count leaves a slot for the legend, if it fits there
    legend_slot = ncols == 2 and len(precisions) % 2 == 1 and \
        style.legend_height(labels, style.COLUMN_WIDTH_IN / 2) <= PANEL_HEIGHT_IN and \
        max(map(len, labels), default=0) * style.LEGEND_CHAR_IN + 0.3 <= style.COLUMN_WIDTH_IN / 2
    extra_rows = 0.25 if any(len({int(n) for n in pts.loc[pts["precision"] == p, "n"]}) > ROTATE_ABOVE
                             for p in precisions) else 0.0
    fig = style.figure(0.45 + (PANEL_HEIGHT_IN + extra_rows) * nrows +
                       (0 if legend_slot else style.legend_height(labels)))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, p in zip(axes, precisions):
        sub = pts[pts["precision"] == p]
        for v in order:
            color = style.variant_color(v, backend_of[v])
            g = sub[(sub["variant"] == v) & sub["evidence"]].sort_values("n")
            if not g.empty:
                # the line joins the powers of two; other sizes (1000, 1023, 4097: tails, guards)
                # are markers of their own, not a spike in the line
                plot_by_size(ax, g["n"], g["tflops"], style.gid("line", v, p), marker="o", ms=2.5, color=color)
                ax.vlines(g["n"].astype(float), g["tflops_lo"], g["tflops_hi"], color=color, lw=0.5,
                          gid=style.gid("range", v, p))
            h = sub[(sub["variant"] == v) & ~sub["evidence"]]
            if not h.empty:
                ax.scatter(h["n"].astype(float), h["tflops"], s=9, facecolors="none", edgecolors=color,
                           linewidths=0.7, zorder=4, gid=style.gid("unreliable", v, p))
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
