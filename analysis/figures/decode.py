"""Decode GEMMs against the measured copy roof: the memory-bound half of the roofline (issue 30).

One panel per token count (1, 16, 64, ...): every decode point on the GPU (analysis.decode's rule:
a GEMM of at most 64 tokens, ``m`` or its LLM shape name's ``t<T>``, against a weight matrix at
least 8 times wider and deeper than ``m``) at the bytes it moves (``bytes_min``: weights and
activations read once, the output written once; log axis) and its bandwidth (``bytes_min`` /
median time) as % of a copy roof: the copy probe measured in the point's own run where that run
has one, else the device's best copy row (the roofline's memory roof); the note says which roofs the
points use, and a label whose roof is the device's best copy row, where others have their run's,
carries a "*". 100% is drawn solid, 90% dotted, the datasheet's bandwidth dashed where every
point shares one roof. Colour: the variant (as in every figure); marker: the precision; hollow:
measured rows that are not evidence (unreliable, contended, too few samples). Each variant's
point closest to its roof is labelled with its % (right of the panel, joined by a thin line).

Left out: rows on other devices, the small square GEMMs (m = n = k <= 64, latency bound), GEMMs
of more tokens whose ``m`` is small (DeepSeek-V3's routed experts at 1024 tokens, m = 32 per
expert), GEMV and other probes (not GEMMs), CUPTI-timed rows and the controls (analysis.read).
A point above 100% moved its bytes faster than the copy probe did: a decode GEMM almost only
reads, the copy probe reads and writes as much.
"""
from __future__ import annotations

import math
from typing import List

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, decode, style
from .roofline import ROOF_COLOR, SHEET_COLOR, spread
from .throughput import NOT_EVIDENCE_LABEL

PANEL_HEIGHT_IN = 1.25
NOTES_HEIGHT_IN = 0.55
NEAR_ROOF = 90.0  # % of the copy roof drawn dotted
LABEL_ROOM = 10.0  # the x range past the largest point, for the labels' column (a factor, log axis)


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds, decode.points(ds))


def label_text(row, mixed_roofs: bool) -> str:
    """A point's % of its copy roof, "*" where that roof is the device's best copy row while other
    points have their run's."""
    star = "*" if mixed_roofs and row["roof"] == decode.DEVICE_BEST else ""
    return f"{row['pct_of_roof']:.0f}%{star}"


def labelled(pts: pd.DataFrame) -> pd.DataFrame:
    """Per token count and variant, the evidence point closest to its roof (the labels)."""
    good = pts[pts["evidence"].astype(bool) & pts["pct_of_roof"].notna()]
    if good.empty:
        return good
    good = good.sort_values(["tokens", "variant", "pct_of_roof", "precision", "shape_name"],
                            ascending=[True, True, False, True, True], kind="stable")
    return good.groupby(["tokens", "variant"], sort=True).head(1)


def _build(ds: data.Dataset, pts: pd.DataFrame) -> Figure:
    placed = pts[pts["pct_of_roof"].notna()] if not pts.empty else pts
    tokens = sorted({int(t) for t in placed["tokens"]}) if not placed.empty else []
    order = data.variant_order(placed[["variant", "backend"]].drop_duplicates(), ds.stages) if not placed.empty else []
    backend_of = dict(zip(placed["variant"], placed["backend"])) if not placed.empty else {}
    roofs = sorted(set(placed["roof_gbs"])) if not placed.empty else []
    sheet = ds.gpu_ceilings.sheet
    sheet_pct = 100.0 * sheet.memory_bandwidth_gbs / roofs[0] if sheet is not None and len(roofs) == 1 else None
    handles = _handles(placed, order, backend_of, sheet_pct is not None)
    notes = _notes(ds, pts, placed, sheet_pct)
    panels = max(len(tokens), 1)
    fig = style.figure(0.5 + PANEL_HEIGHT_IN * panels + NOTES_HEIGHT_IN
                       + style.legend_height([h.get_label() for h in handles]))
    # the notes get a row of their own under the panels: on a panel they would hide points
    grid = fig.add_gridspec(panels + 1, 1, height_ratios=[PANEL_HEIGHT_IN] * panels + [NOTES_HEIGHT_IN])
    axes = [fig.add_subplot(grid[0, 0])]
    axes += [fig.add_subplot(grid[i, 0], sharex=axes[0]) for i in range(1, panels)]
    notes_ax = fig.add_subplot(grid[panels, 0])
    notes_ax.axis("off")
    mixed = {decode.SAME_RUN, decode.DEVICE_BEST} <= set(placed["roof"]) if not placed.empty else False
    if tokens:
        x_lo = float(placed["bytes_min"].min()) / 1e6 / 1.6
        x_data_hi = float(placed["bytes_min"].max()) / 1e6
        x_hi = x_data_hi * LABEL_ROOM
        y_hi = max(110.0, float(placed["pct_of_roof"].max()) * 1.06, (sheet_pct or 0) * 1.04)
    labels = labelled(placed) if tokens else placed
    for ax, t in zip(axes, tokens):
        sub = placed[placed["tokens"] == t]
        ax.set_xscale("log")
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(0, y_hi)
        ax.axhline(100.0, color=ROOF_COLOR, lw=1.0, zorder=2, gid=style.gid("roof", "copy", t))
        ax.axhline(NEAR_ROOF, color=ROOF_COLOR, lw=0.8, ls=(0, (1, 1.5)), zorder=2, gid=style.gid("roof", "near", t))
        if sheet_pct is not None:
            ax.axhline(sheet_pct, color=SHEET_COLOR, lw=0.8, ls="--", zorder=1, gid=style.gid("roof", "datasheet", t))
        for (variant, precision, ev), g in sub.groupby(["variant", "precision", "evidence"], sort=True):
            color = style.variant_color(variant, backend_of[variant])
            fill = dict(color=color, edgecolors="white", linewidths=0.3) if ev else \
                dict(facecolors="none", edgecolors=color, linewidths=0.7)
            ax.scatter(g["bytes_min"] / 1e6, g["pct_of_roof"], s=12, marker=style.precision_marker(precision),
                       zorder=5 if ev else 4, gid=style.gid("point" if ev else "unreliable", variant, precision, t),
                       **fill)
        ax.set_title(f"{t} token{'s' if t != 1 else ''}", loc="left")
        ax.set_ylabel("% of copy roof")
        style.log_axis(ax, "x")
    ax = axes[-1]
    ax.set_xlabel("Bytes moved (MB; bytes_min: each operand once)")
    if not tokens:
        ax.set_xscale("log")
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    style.note(notes_ax, notes, where="center", width=1.0)
    style.legend_below(fig, handles)
    fig.draw_without_rendering()  # lay out first: the labels' spacing needs the panels' final height
    for ax, t in zip(axes, tokens):
        _place_labels(ax, labels[labels["tokens"] == t], backend_of, mixed, x_data_hi, y_hi)
    return fig


def _place_labels(ax, rows: pd.DataFrame, backend_of: dict, mixed: bool, x_data_hi: float, y_hi: float) -> None:
    """Each variant's label in a column right of the points, at its point's height, moved apart
    where two would overlap, joined to its point by a thin line."""
    if rows.empty:
        return
    rows = rows.sort_values(["pct_of_roof", "variant"], kind="stable")
    height_in = ax.get_position().height * ax.figure.get_figheight() or PANEL_HEIGHT_IN * 0.7
    gap = 1.3 * 5.5 / 72 / height_in * y_hi  # one line of 5.5 pt text and its box, in % units
    ys = spread(list(rows["pct_of_roof"]), gap)
    top = y_hi - 0.6 * gap  # inside the panel: push the top ones down, each at least a gap apart
    for i in reversed(range(len(ys))):
        ys[i] = min(ys[i], top if i == len(ys) - 1 else ys[i + 1] - gap)
    x_text = x_data_hi * math.sqrt(LABEL_ROOM) / 1.3
    for y, (_, row) in zip(ys, rows.iterrows()):
        color = style.variant_color(row["variant"], backend_of[row["variant"]])
        x = row["bytes_min"] / 1e6
        ax.plot([x, x_text / 1.08], [row["pct_of_roof"], y], color=color, lw=0.4, zorder=3,
                gid=style.gid("label-link", row["variant"], int(row["tokens"])))
        ax.text(x_text, y, label_text(row, mixed), color=color, fontsize=5.5, ha="left", va="center", zorder=6,
                gid=style.gid("pct", row["variant"], row["precision"], int(row["tokens"])),
                bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.8))  # over the roofs


def _handles(pts: pd.DataFrame, order: List[str], backend_of: dict, datasheet: bool) -> List[Line2D]:
    handles = [Line2D([], [], ls="", marker="o", ms=3.5, color=style.variant_color(v, backend_of[v]), label=v)
               for v in order]
    handles += [Line2D([], [], ls="", marker=style.precision_marker(p), ms=3.5, color="#555555", label=p)
                for p in data.precision_order(pts["precision"])]
    if not pts.empty:
        handles.append(Line2D([], [], color=ROOF_COLOR, lw=1.0, label="copy roof (100%)"))
        handles.append(Line2D([], [], color=ROOF_COLOR, lw=0.8, ls=(0, (1, 1.5)), label=f"{NEAR_ROOF:.0f}% of it"))
    if datasheet:
        handles.append(Line2D([], [], color=SHEET_COLOR, lw=0.8, ls="--", label="datasheet bandwidth"))
    if not pts.empty and (~pts["evidence"].astype(bool)).any():
        handles.append(Line2D([], [], ls="", marker="o", ms=3.5, mfc="none", color="#555555", label=NOT_EVIDENCE_LABEL))
    return handles


def _count(n: int) -> str:
    return f"{n} point" + ("" if n == 1 else "s")


def _notes(ds: data.Dataset, pts: pd.DataFrame, placed: pd.DataFrame, sheet_pct) -> List[str]:
    if pts.empty:
        return ["no decode GEMM rows on the GPU (m or the shape's tokens <= 64, 8 m <= n and k): "
                "measure them with `python run.py +experiment=decode`"]
    notes = []
    if placed.empty:
        return ["no copy rows on this GPU: no roof to place the decode points against; the decode "
                "experiment measures the copy probe in the same run"]
    same = placed[placed["roof"] == decode.SAME_RUN]
    best = placed[placed["roof"] == decode.DEVICE_BEST]
    if not same.empty:
        gbs = sorted(set(same["roof_gbs"]))
        notes.append(f"100%: the copy probe of the point's own run ({_count(len(same))}; "
                     f"{', '.join(f'{g / 1e3:.3g}' for g in gbs)} TB/s)")
    if not best.empty:
        row = best.iloc[0]
        notes.append(f"{'*' if not same.empty else '100%'}: the device's best copy row, "
                     f"{row['roof_gbs'] / 1e3:.3g} TB/s (run {row['roof_run_id']}), for the {_count(len(best))} whose "
                     f"run has no copy row")
    if sheet_pct is not None:
        notes.append(f"dashed: the datasheet's {ds.gpu_ceilings.sheet.memory_bandwidth_gbs / 1e3:.3g} TB/s "
                     f"({sheet_pct:.0f}%)")
    over = placed[placed["evidence"].astype(bool) & (placed["pct_of_roof"] > 100)]
    if not over.empty:
        notes.append(f"{len(over)} points above their copy roof (up to {over['pct_of_roof'].max():.0f}%): a decode GEMM "
                     f"almost only reads, the copy probe reads and writes as much")
    notes.append("at the right: each variant's point closest to its roof")
    return notes
