"""The hierarchical roofline: each kernel at its measured DRAM, L2 and L1 intensity (issue 9).

Nsight Compute counts the bytes a kernel really moves at each memory level (``bytes_dram``,
``bytes_l2``, ``bytes_l1``; ``measure.counters=ncu``); dividing the algorithmic FLOPs (2mnk) by
them gives one intensity per level. Each kernel is drawn at its throughput (TFLOP/s of its timed
run) three times, one marker style per level, joined by a thin line; its modeled DRAM intensity
(``intensity_model``: the chapter's 0.25, T/4, 32) sits on the same line as a hollow circle, the
DRAM marker's shape, so the model and the DRAM counter read side by side. One panel per
precision; the x axis is shared so that panels compare.

Roofs: the measured compute peak of the panel's precision (as the roofline) and the DRAM roof from
the measured copy bandwidth (the datasheet's where there are no copy rows, and noted). L2 and L1
roofs are drawn only from rows that measured those bandwidths (``LEVEL_BANDWIDTH_OPS``); no
number is invented where there are none. The shared-memory probe (``smem_bandwidth``) is no L1
roof: shared-memory traffic is not in ``l1tex__t_bytes``.

A level that carries every operand at least once cannot exceed the algorithmic intensity (each
operand moved once). Far above it (over ``OFFSCALE_FACTOR`` times the largest algorithmic
intensity drawn), the operands bypassed that level (TMA loads go from L2 to shared memory without
L1); such intensities, and those of a level with zero bytes counted, are drawn in a grey band at
the right edge, and their values are written in the panel's note. Kernels that land on the same
spots (same throughput and bytes) are named in the note as hidden.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, style

# (level, label, marker): one marker style per memory level, in the order the line joins them.
LEVELS = (("dram", "DRAM", "o"), ("l2", "L2", "s"), ("l1", "L1", "^"))
LEVEL_LABELS = {lvl: label for lvl, label, _ in LEVELS}
# Rows that would measure an L2 or L1 roof, read like the copy probe (bytes_min / time_median_s).
# No probe writes them yet: then there is no roof and the axes say so.
LEVEL_BANDWIDTH_OPS = {"l2": "l2_bandwidth", "l1": "l1_bandwidth"}
# Intensities above this multiple of the algorithmic intensity are off scale (see the docstring).
OFFSCALE_FACTOR = 4.0
# Two kernels closer than this are drawn on the same spots (markers ~0.05 in across; an axes
# spans ~1 decade per inch in y, ~2 in x) and the note names the hidden one.
HIDDEN_TFLOPS_PCT = 5.0
HIDDEN_INTENSITY_PCT = 10.0
PANEL_HEIGHT_IN = 2.3  # one precision's axes with its labels; the legend adds its own height
ROOF_COLOR = "#222222"
BAND_COLOR = "#eeeeee"
MARKER_AREA = 14  # points^2, as the roofline's points
POINT_KEYS = ["variant", "backend", "precision", "op", "m", "n", "k"]
NO_COUNTERS = "no rows with hardware counters (run with measure.counters=ncu)"
LEVEL_ROOFS_MISSING = "L2/L1 bandwidth not measured: no L2/L1 roof"


# -- the numbers -------------------------------------------------------------------------------
def points(ds: data.Dataset) -> pd.DataFrame:
    """One line per kernel and shape with counters, on the primary GPU: one row's counters (the
    point's counter row with the shortest median time, the first untimed one where none is
    timed; bytes and throughput from one run, never medians pooled over runs): ``tflops``,
    ``intensity`` (algorithmic), ``intensity_model`` and bytes per level, and
    ``intensity_<level>`` = flops / bytes (inf where zero bytes were counted, NaN where the level
    was not read)."""
    cols = POINT_KEYS + ["flops", "tflops", "intensity", "intensity_model"] + \
        [f"{k}_{lvl}" for lvl, _, _ in LEVELS for k in ("bytes", "intensity")]
    rows = ds.gpu
    byte_cols = [f"bytes_{lvl}" for lvl, _, _ in LEVELS]
    rows = rows[rows["op"].isin(data.THROUGHPUT_OPS) & rows[byte_cols].notna().any(axis=1)
                & (rows["flops"] > 0)]
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in POINT_KEYS[:4] else "float64") for c in cols})
    rows = rows.assign(_t=rows["time_median_s"].where(rows["time_median_s"] > 0))
    rows = rows.sort_values(POINT_KEYS + ["_t", "run_id"], kind="stable", na_position="last")
    out = rows.groupby(POINT_KEYS, sort=True, dropna=False).head(1)
    out = out[POINT_KEYS + ["flops", "tflops", "intensity", "intensity_model"] + byte_cols].reset_index(drop=True)
    # a counters row without its own timing: the point's throughput from the other rows
    timed = data.best_points(ds.gpu[ds.gpu["tflops"] > 0], POINT_KEYS)
    if not timed.empty:
        other = out.merge(timed[POINT_KEYS + ["tflops"]], on=POINT_KEYS, how="left", suffixes=("", "_timed"))
        out["tflops"] = out["tflops"].where(out["tflops"] > 0, other["tflops_timed"].to_numpy())
    for lvl, _, _ in LEVELS:
        b = out[f"bytes_{lvl}"]
        per_byte = np.where(b > 0, out["flops"] / b.where(b > 0), np.where(b == 0, np.inf, np.nan))
        out[f"intensity_{lvl}"] = data.stable(pd.Series(per_byte, index=out.index))
    out["tflops"] = data.stable(out["tflops"])
    return out[cols]


def level_bandwidth_gbs(ds: data.Dataset, level: str) -> Optional[float]:
    """Measured bandwidth of ``level`` (dram: the copy probe; l2/l1: LEVEL_BANDWIDTH_OPS), GB/s."""
    if level == "dram":
        return ds.gpu_ceilings.measured_bandwidth_gbs
    r = ds.gpu
    r = r[(r["op"] == LEVEL_BANDWIDTH_OPS[level]) & (r["time_median_s"] > 0) & (r["bytes_min"] > 0)]
    if r.empty:
        return None
    return data.stable(float((r["bytes_min"] / r["time_median_s"]).max() / 1e9))


def offscale_limit(pts: pd.DataFrame) -> float:
    """Intensities above this are drawn in the off-scale band (inf: none but zero-byte levels)."""
    top = pts["intensity"].max() if not pts.empty else float("nan")
    return OFFSCALE_FACTOR * top if pd.notna(top) and top > 0 else math.inf


# -- the figure --------------------------------------------------------------------------------
def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds)


def _build(ds: data.Dataset) -> Figure:
    ceil = ds.gpu_ceilings
    pts = points(ds)
    untimed = sorted(set(pts.loc[~(pts["tflops"] > 0), "variant"]))
    pts = pts[pts["tflops"] > 0]
    precisions = data.precision_order(pts["precision"])
    handles = _handles(pts, ds.stages)
    n_panels = max(len(precisions), 1)
    fig = style.figure(PANEL_HEIGHT_IN * n_panels + style.legend_height([h.get_label() for h in handles]))
    axes = fig.subplots(n_panels, 1, squeeze=False, sharex=True)[:, 0]

    bw_dram_gbs = ceil.bandwidth_gbs
    bw_levels = {lvl: level_bandwidth_gbs(ds, lvl) for lvl in LEVEL_BANDWIDTH_OPS}
    cut = offscale_limit(pts)
    x_lo, x_on_hi, x_hi = _x_range(pts, ceil, precisions, bw_dram_gbs, bw_levels, cut)

    roof_labels = []
    for i, ax in enumerate(axes):
        p = precisions[i] if precisions else None
        g = pts[pts["precision"] == p] if p else pts.iloc[:0]
        ax.set_xscale("log")
        ax.set_yscale("log")
        peak, peak_kind = _peak(ceil, p)
        y_lo, y_hi = _y_range(g, peak, bw_dram_gbs, x_lo, x_on_hi)
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        roof_labels.append(_draw_roofs(ax, p, peak, peak_kind, bw_dram_gbs, ceil, bw_levels, x_lo, x_on_hi,
                                       x_hi, y_lo))
        offscale = _draw_kernels(ax, g, p, cut, x_on_hi, x_hi, ds.stages)
        style.log_axis(ax, "x")
        style.log_axis(ax, "y")
        if x_hi > x_on_hi:
            _hide_offscale_ticks(ax, x_on_hi)
        ax.set_ylabel("Throughput (TFLOP/s)")
        ax.set_title(_title(ceil, p, g), loc="left")
        notes = (_dataset_notes(ds, ceil, pts, bw_levels) if i == 0 else []) + offscale
        if i == 0 and untimed:
            notes.append(f"counters but no throughput, not drawn: {', '.join(untimed)}")
        style.note(ax, notes, where="lower right")
    axes[-1].set_xlabel("Arithmetic intensity, 2mnk / bytes at the level (FLOP/byte)")
    style.legend_below(fig, handles)
    fig.draw_without_rendering()  # lay out first: a label's angle needs the axes' final shape
    for ax, labels, p in zip(axes, roof_labels, precisions or [None]):
        peak = _peak(ceil, p)[0]
        _place_along(ax, labels, list(pts.loc[pts["precision"] == p, "tflops"]), peak or ax.get_ylim()[1])
    return fig


def _peak(ceil: data.Ceilings, precision: Optional[str]) -> Tuple[Optional[float], str]:
    """The panel's compute roof, TFLOP/s: measured, else the datasheet's."""
    if precision is None:
        return None, ""
    if precision in ceil.measured_tflops:
        return ceil.measured_tflops[precision], "measured"
    if precision in ceil.datasheet_tflops:
        return ceil.datasheet_tflops[precision], "datasheet"
    return None, ""


def _x_range(pts, ceil, precisions, bw_dram_gbs, bw_levels, cut) -> Tuple[float, float, float]:
    """(x_lo, x_on_hi, x_hi): the shared x limits; between x_on_hi and x_hi, the off-scale band."""
    xs = list(pts["intensity_model"].dropna())
    for lvl, _, _ in LEVELS:
        v = pts[f"intensity_{lvl}"]
        xs += list(v[np.isfinite(v) & (v <= cut)])
    peaks = [_peak(ceil, p)[0] for p in precisions]
    bws = [bw_dram_gbs] + [b for b in bw_levels.values() if b]
    xs += [P * 1e3 / bw for P in peaks if P for bw in bws]  # ridge points
    if not xs:
        xs = [1.0, 10.0]
    x_lo, x_on_hi = min(xs) / 3, max(xs) * 3
    has_offscale = any(((pts[f"intensity_{lvl}"] > cut) | np.isinf(pts[f"intensity_{lvl}"])).any()
                       for lvl, _, _ in LEVELS)
    x_hi = x_on_hi * 4 if has_offscale else x_on_hi
    return x_lo, x_on_hi, x_hi


def _y_range(g, peak, bw_dram_gbs, x_lo, x_on_hi) -> Tuple[float, float]:
    ys = list(g["tflops"]) + ([peak] if peak else [])
    if not ys:  # no kernel, no roof: the memory roof across the panel
        ys = [bw_dram_gbs / 1e3 * x_lo, bw_dram_gbs / 1e3 * x_on_hi]
    return min(ys) / 2.5, max(ys) * 2.0  # above: room for the compute roof's label


def _draw_roofs(ax, precision, peak, peak_kind, bw_dram_gbs, ceil, bw_levels, x_lo, x_on_hi, x_hi,
                y_lo) -> List:
    """The memory roofs (up to the compute roof) and the compute roof; returns the memory roofs'
    labels, ``(text, slope)``, to be turned along their roof once the axes are laid out."""
    roofs = [("dram", bw_dram_gbs)] + [(lvl, bw) for lvl, bw in bw_levels.items() if bw]
    top = peak if peak else bw_dram_gbs / 1e3 * x_hi
    labels = []
    for lvl, bw in roofs:
        slope = bw / 1e3  # TFLOP/s per FLOP/byte
        ls = "-" if lvl != "dram" or ceil.measured_bandwidth_gbs is not None else "--"
        ax.plot([x_lo, top / slope], [slope * x_lo, top], ls=ls, lw=1.0, color=ROOF_COLOR,
                gid=style.gid("memroof", lvl), zorder=2)
        # short, to fit between kernels (a datasheet roof is dashed and noted); placed and
        # turned once the axes are laid out (_place_along)
        text = ax.text(x_lo, slope * x_lo, f"{LEVEL_LABELS[lvl]} {style.format_sig(bw / 1e3)} TB/s",
                       fontsize=5.5, color=ROOF_COLOR, ha="center", va="bottom", rotation_mode="anchor",
                       gid=style.gid("label", "memroof", lvl), zorder=6)
        labels.append((text, slope))
    if peak:
        ridge = peak * 1e3 / bw_dram_gbs
        ax.plot([ridge, x_hi], [peak, peak], ls="-" if peak_kind == "measured" else "--", lw=1.0,
                color=ROOF_COLOR, gid=style.gid("roof", peak_kind, precision), zorder=2)
        # right-aligned left of the off-scale band (if any): every panel's label at the same place
        sheet = "" if peak_kind == "measured" else " (datasheet)"
        ax.text(x_on_hi / 1.15, peak * 1.15, f"{precision} peak {style.format_sig(peak)} TFLOP/s{sheet}; "
                f"DRAM ridge {style.format_sig(ridge, 2)} FLOP/B", fontsize=5.5, color=ROOF_COLOR, ha="right",
                va="bottom", gid=style.gid("label", "roof", precision), zorder=6)
    return labels


def _place_along(ax, labels, kernel_tflops: List[float], top: float) -> None:
    """Each memory roof's label in the widest free band of heights between the kernels (kernels
    sit on both sides of a memory roof here: L1 and L2 intensities fall left of it), turned to
    its roof's slope on the laid-out axes (a straight line on log-log axes: one angle)."""
    y_lo, _ = ax.get_ylim()
    ys = sorted(math.log10(y) for y in [y_lo, top] + list(kernel_tflops) if y_lo <= y <= top)
    lo, hi = max(zip(ys, ys[1:]), key=lambda ab: (ab[1] - ab[0], -ab[0]))
    y = 10 ** ((lo + hi) / 2)
    for text, slope in labels:
        x0, _ = ax.get_xlim()
        (a, b), (c, d) = ax.transData.transform([(x0, slope * x0), (x0 * 10, slope * x0 * 10)])
        text.set_rotation(math.degrees(math.atan2(d - b, c - a)))
        text.set_position((y / slope, y * 1.15))  # a little above the roof: on its left


def _hide_offscale_ticks(ax, x_on_hi: float) -> None:
    """No tick labels inside the off-scale band: its markers are not at those values."""
    from matplotlib.ticker import FuncFormatter

    shown = ax.xaxis.get_major_formatter()
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, pos: "" if v > x_on_hi else shown(v, pos)))


def _draw_kernels(ax, g: pd.DataFrame, precision, cut: float, x_on_hi: float, x_hi: float,
                  stages: dict) -> List[str]:
    """Each kernel's markers, its level line and model, in legend order (a later one is drawn
    over an earlier one); returns the notes: off-scale values, kernels hidden under another."""
    offscale_x = math.sqrt(x_on_hi * x_hi)  # the middle of the band, on a log axis

    def shown_x(v: float) -> float:
        return offscale_x if np.isinf(v) or v > cut else v

    notes: List[str] = []
    order = {v: i for i, v in enumerate(data.variant_order(g, stages))}
    g = g.assign(_order=g["variant"].map(order)).sort_values(["_order", "m", "n", "k"], kind="stable")
    for _, r in g.iterrows():
        variant, y = r["variant"], r["tflops"]
        color = style.variant_color(variant, r["backend"])
        xs_line = []
        for lvl, label, marker in LEVELS:
            v = r[f"intensity_{lvl}"]
            if pd.isna(v):
                continue
            off = shown_x(v) != v
            xs_line.append(shown_x(v))
            ax.scatter([shown_x(v)], [y], s=MARKER_AREA, color=color, marker=marker, edgecolors="white",
                       linewidths=0.3, zorder=5,
                       gid=style.gid(f"offscale-{lvl}" if off else lvl, variant, precision))
            if off:
                value = "∞ (0 bytes)" if np.isinf(v) else style.format_sig(v, 3)
                notes.append(f"off scale: {variant} {label} {value} FLOP/B")
        if xs_line:
            ax.plot([min(xs_line), max(xs_line)], [y, y], lw=0.6, color=color, zorder=3,
                    gid=style.gid("levels", variant, precision))
        m = r["intensity_model"]
        if pd.notna(m) and m > 0:
            if pd.notna(r["intensity_dram"]):
                ax.plot([m, shown_x(r["intensity_dram"])], [y, y], lw=0.6, ls=":", color=color, zorder=3,
                        gid=style.gid("model-link", variant, precision))
            ax.scatter([m], [y], s=MARKER_AREA, facecolors="white", edgecolors=color, marker=LEVELS[0][2],
                       linewidths=0.7, zorder=5, gid=style.gid("model", variant, precision))
    if any(n.startswith("off scale") for n in notes):
        ax.axvspan(x_on_hi, x_hi, color=BAND_COLOR, lw=0, zorder=0, gid=style.gid("band", "offscale"))
        ax.text(offscale_x, 0.98, "off scale", transform=ax.get_xaxis_transform(), ha="center", va="top",
                fontsize=5, color="#666666", gid=style.gid("label", "offscale"), zorder=6)
    hidden = hidden_pairs(g)
    notes += [f"hidden: {a} under {b}" for a, b in hidden]
    return notes


def hidden_pairs(g: pd.DataFrame) -> List[Tuple[str, str]]:
    """(under, over) pairs of kernels of one panel drawn on the same spots: throughput within
    HIDDEN_TFLOPS_PCT and every level's intensity within HIDDEN_INTENSITY_PCT (or absent in
    both); ``g`` in drawing order, so the later kernel covers the earlier."""
    rows = list(g.to_dict("records"))

    def close(a: float, b: float, pct: float) -> bool:
        if pd.isna(a) or pd.isna(b):
            return pd.isna(a) and pd.isna(b)
        if np.isinf(a) or np.isinf(b):
            return bool(np.isinf(a) and np.isinf(b))
        return a > 0 and b > 0 and abs(math.log(a / b)) <= math.log1p(pct / 100)

    out = []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if a["variant"] != b["variant"] and close(a["tflops"], b["tflops"], HIDDEN_TFLOPS_PCT) and all(
                    close(a[f"intensity_{lvl}"], b[f"intensity_{lvl}"], HIDDEN_INTENSITY_PCT)
                    for lvl, _, _ in LEVELS):
                out.append((a["variant"], b["variant"]))
    return out


def _title(ceil: data.Ceilings, precision: Optional[str], g: pd.DataFrame) -> str:
    if precision is None:
        return ceil.label
    shapes = sorted({(int(m), int(n), int(k)) for m, n, k in zip(g["m"], g["n"], g["k"])})
    if len(shapes) == 1:
        m, n, k = shapes[0]
        size = f"m = n = k = {m}" if m == n == k else f"m, n, k = {m}, {n}, {k}"
    else:
        size = f"{len(shapes)} shapes"
    return f"{precision}, {size} ({ceil.label})"


def _dataset_notes(ds: data.Dataset, ceil: data.Ceilings, pts: pd.DataFrame,
                   bw_levels: Dict[str, Optional[float]]) -> List[str]:
    notes = []
    if ceil.device is None:
        notes.append(f"no GPU rows: {ceil.config.name} datasheet roofs only")
    elif not ceil.matched:
        notes.append(f"no conf/device entry named {ceil.device}: {ceil.config.stem} datasheet")
    if ceil.other_devices:
        notes.append(f"not shown: rows of {', '.join(ceil.other_devices)}")
    if pts.empty:
        notes.append(NO_COUNTERS)
        reasons = _counter_reasons(ds)
        if reasons:
            notes.append(f"counters: {reasons[0]}")
    if ceil.measured_bandwidth_gbs is None:
        notes.append("no copy rows: DRAM roof is the datasheet's")
    missing = [LEVEL_LABELS[lvl] for lvl, bw in bw_levels.items() if not bw]
    if len(missing) == len(bw_levels):
        notes.append(LEVEL_ROOFS_MISSING)
    elif missing:
        notes.append(f"{'/'.join(missing)} bandwidth not measured: no {'/'.join(missing)} roof")
    if not pts.empty and pts["intensity_model"].isna().all():
        notes.append("no modeled intensity (intensity_model) in the rows")
    return notes


def _counter_reasons(ds: data.Dataset) -> List[str]:
    """Why counters are empty, as the GPU rows say (the runner's ``counters_reason``)."""
    if "counters_reason" not in ds.gpu.columns:
        return []
    r = ds.gpu["counters_reason"]
    return sorted({str(x) for x in r if isinstance(x, str) and x.strip()})


def _handles(pts: pd.DataFrame, stages: dict) -> List[Line2D]:
    handles = []
    pairs = pts[["variant", "backend"]].drop_duplicates()
    backend_of = dict(zip(pairs["variant"], pairs["backend"]))
    for v in data.variant_order(pairs, stages):
        handles.append(Line2D([], [], ls="-", lw=0.6, marker="o", ms=3.5,
                              color=style.variant_color(v, backend_of[v]), label=v))
    grey = "#555555"
    for lvl, label, marker in LEVELS:
        if not pts.empty and pts[f"intensity_{lvl}"].notna().any():
            handles.append(Line2D([], [], ls="", marker=marker, ms=3.5, color=grey, label=label))
    if not pts.empty and pts["intensity_model"].notna().any():
        handles.append(Line2D([], [], ls=":", lw=0.6, marker=LEVELS[0][2], ms=3.5, mfc="white", mec=grey,
                              color=grey, label="modeled DRAM"))
    return handles
