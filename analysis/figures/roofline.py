"""The roofline: FLOP/s against FLOP/byte, log-log (chapter 5.1, claims C1-C6).

The GPU's, or the CPU's where the data has no GPU rows. Roofs: the memory roof from the measured
copy bandwidth, one compute roof per precision at its measured peak (the best GEMM evidence
row); the device's datasheet roofs (dashed) beside them where a ``conf/device`` entry names the
device (none for a device no entry names: a fallback datasheet describes another machine). The
figure says where each roof comes from. Points: every variant at its algorithmic intensity
(``intensity``: each operand moved once), the best row of each point; measured rows that are not
evidence (unreliable, contended) hollow, and in no roof. Where the variant models its DRAM
intensity (``intensity_model``: the chapter's 0.25, T/4, 32), a hollow marker there at the same
throughput, joined to the measured point, so the model's prediction and the measurement sit
side by side. On the GPU, the decode point closest to its copy roof (:mod:`analysis.decode`: at
most 64 tokens against a weight matrix, GB/s as % of its run's copy probe, else of the device's
best copy row) is ringed and labelled with that %, the note naming it; nothing without decode rows.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, decode, style
from .throughput import NOT_EVIDENCE_LABEL

ROOF_COLOR, SHEET_COLOR = "#222222", "#8c8c8c"
AXES_HEIGHT_IN = 2.9  # the plot and its labels; the legend adds its own height


def kind_of(ds: data.Dataset) -> str:
    """The device the roofline shows: the GPU, else the CPU where only it has rows."""
    if ds.gpu_ceilings.device is None and ds.cpu_ceilings.device is not None:
        return "cpu"
    return "gpu"


def points(ds: data.Dataset, kind: Optional[str] = None):
    """Measured points on the roofline's device (the best row of each variant, precision and
    shape), ``evidence`` false for rows that are not evidence."""
    from .throughput import measured_points

    kind = kind or kind_of(ds)

    def keep(rows):
        rows = rows[rows["kind"] == kind]
        return rows[rows["op"].isin(data.THROUGHPUT_OPS) & (rows["tflops"] > 0) & (rows["intensity"] > 0)]

    return measured_points(ds, ["variant", "backend", "precision", "op", "m", "n", "k"], keep)


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds)


def _bw_text(gbs: float) -> str:
    return f"{style.format_sig(gbs / 1e3)} TB/s" if gbs >= 1000 else f"{style.format_sig(gbs)} GB/s"


def _build(ds: data.Dataset) -> Figure:
    kind = kind_of(ds)
    ceil = ds.gpu_ceilings if kind == "gpu" else ds.cpu_ceilings
    sheet_cfg = ceil.sheet
    pts = points(ds, kind)
    good = pts[pts["evidence"]] if not pts.empty else pts
    handles = _handles(pts, sheet_cfg is not None, ds.stages)
    fig = style.figure(AXES_HEIGHT_IN + style.legend_height([h.get_label() for h in handles]))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")

    precisions = data.precision_order(pts["precision"])
    if not precisions and sheet_cfg is not None:
        precisions = data.precision_order(sheet_cfg.peak_tflops)
    measured = {p: ceil.measured_tflops[p] for p in precisions if p in ceil.measured_tflops}
    sheet = {p: sheet_cfg.peak_tflops[p] for p in precisions if sheet_cfg and p in sheet_cfg.peak_tflops}
    bw_gbs = ceil.measured_bandwidth_gbs
    bw = None if bw_gbs is None else bw_gbs / 1e3  # TFLOP/s per FLOP/byte of intensity
    bw_sheet = None if sheet_cfg is None else sheet_cfg.memory_bandwidth_gbs / 1e3
    slopes = [b for b in (bw, bw_sheet) if b]

    ridge_bw = bw or bw_sheet  # without copy rows, the measured peaks meet the datasheet's memory roof
    ridges = [P / ridge_bw for P in measured.values() if ridge_bw] + \
        [P / bw_sheet for P in sheet.values() if bw_sheet]
    xs = list(pts["intensity"]) + list(pts["intensity_model"].dropna())
    x_lo = min(xs + ridges + [1.0]) / 4
    x_hi = max(xs + ridges + [10.0]) * 6
    tops = list(measured.values()) + list(sheet.values()) + list(pts["tflops"])
    y_hi = max(tops) * 2.5 if tops else 1.0
    lows = list(pts["tflops"]) + [b * x_lo for b in slopes]
    y_lo = min(lows) / 2 if lows else y_hi / 1e3
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    style.log_axis(ax, "x")
    style.log_axis(ax, "y")

    # memory roofs, up to the highest compute roof they meet
    if bw_sheet:
        top = max(sheet.values(), default=y_hi)
        ax.plot([x_lo, top / bw_sheet], [bw_sheet * x_lo, top], ls="--", lw=0.8, color=SHEET_COLOR,
                gid=style.gid("memroof", "datasheet"), zorder=1)
    if bw:
        top = max(measured.values(), default=max(sheet.values(), default=y_hi))
        ax.plot([x_lo, top / bw], [bw * x_lo, top], lw=1.1, color=ROOF_COLOR,
                gid=style.gid("memroof", "measured"), zorder=2)
    _label_memory_roof(ax, ceil, x_lo)

    # compute roofs and their ridge points
    labels: List[Tuple[float, str, str]] = []  # (y, text, colour)
    for p, P in sheet.items():
        ax.plot([P / bw_sheet, x_hi], [P, P], ls="--", lw=0.8, color=SHEET_COLOR,
                gid=style.gid("roof", "datasheet", p), zorder=1)
    for P, names in _group_by_value(sheet).items():
        labels.append((P, f"{'/'.join(names)} datasheet {style.format_sig(P)}", SHEET_COLOR))
    for p, P in measured.items():
        ridge = P / ridge_bw if ridge_bw else None
        ax.plot([ridge or x_lo, x_hi], [P, P], lw=1.1, color=ROOF_COLOR, gid=style.gid("roof", "measured", p),
                zorder=2)
        if ridge:
            ax.plot([ridge], [P], ls="", marker="o", ms=2.8, mfc="white", mec=ROOF_COLOR, mew=0.8,
                    gid=style.gid("ridge", p), zorder=4)
        labels.append((P, f"{p} {style.format_sig(P)}" + (f", I* = {style.format_sig(ridge, 2)}" if ridge else ""),
                       ROOF_COLOR))
    # the measured points, and the modeled intensity beside them
    for (variant, backend, precision), g in good.groupby(["variant", "backend", "precision"], sort=True):
        color = style.variant_color(variant, backend)
        marker = style.precision_marker(precision)
        ax.scatter(g["intensity"], g["tflops"], s=14, color=color, marker=marker, edgecolors="white",
                   linewidths=0.3, zorder=5, gid=style.gid("point", variant, precision))
        # the model beside the largest problem only: one prediction per variant, not one per size
        mg = g[g["intensity_model"].notna()]
        mg = mg[mg["flops"] == mg["flops"].max()]
        if not mg.empty:
            segs = [[(im, y), (ia, y)] for im, ia, y in zip(mg["intensity_model"], mg["intensity"], mg["tflops"])]
            ax.add_collection(LineCollection(segs, colors=color, linewidths=0.6, linestyles=":", zorder=4,
                                             gid=style.gid("model-link", variant, precision)))
            ax.scatter(mg["intensity_model"], mg["tflops"], s=14, facecolors="none", edgecolors=color,
                       marker=marker, linewidths=0.7, zorder=5, gid=style.gid("model", variant, precision))
    bad = pts[~pts["evidence"]] if not pts.empty else pts
    for (variant, backend, precision), g in bad.groupby(["variant", "backend", "precision"], sort=True):
        ax.scatter(g["intensity"], g["tflops"], s=14, facecolors="none",
                   edgecolors=style.variant_color(variant, backend), marker=style.precision_marker(precision),
                   linewidths=0.7, zorder=5, gid=style.gid("unreliable", variant, precision))

    best_decode = decode.best_point(decode.points(ds)) if kind == "gpu" else None
    _label_best_decode(ax, best_decode)

    ax.set_xlabel("Arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("Throughput (TFLOP/s)")
    ax.set_title(ceil.label + (" (CPU)" if kind == "cpu" else ""), loc="left")
    style.note(ax, _notes(ds, kind, ceil, pts) + ([decode_note(best_decode)] if best_decode is not None else []),
               where="lower right", width=0.6)  # the roof's label: lower left
    style.legend_below(fig, handles)
    fig.draw_without_rendering()  # lay out first: label spacing needs the axes' final height
    _place_roof_labels(ax, labels, y_lo, y_hi, ax.get_position().height * fig.get_figheight(),
                       max(slopes) if slopes else None, x_lo)
    return fig


def decode_label(best) -> str:
    """The roofline's label at the best decode point (analysis.decode): its % of its copy roof."""
    return f"decode {best['pct_of_roof']:.0f}%"


def decode_note(best) -> str:
    """What the ringed decode point is, and which copy row its % divides by."""
    return (f"ringed: the decode point closest to its copy roof, {best['variant']} {best['precision']} "
            f"{decode.shape_text(best)}, {best['gbs'] / 1e3:.3g} TB/s = {best['pct_of_roof']:.0f}% of "
            f"{decode.roof_text(best)}")


def _label_best_decode(ax, best) -> None:
    """Ring the decode point closest to its copy roof and write its % of that roof left of it, at its
    height: above the memory roof, where no point can be, and below the roofs' labels, which sit
    above the ridge points (nothing without decode rows)."""
    if best is None:
        return
    x, y = float(best["intensity"]), float(best["tflops"])
    ax.scatter([x], [y], s=55, facecolors="none", edgecolors=ROOF_COLOR, linewidths=0.6, zorder=6,
               gid=style.gid("decode-best", best["variant"], best["precision"]))
    ax.text(x / 1.4, y, decode_label(best), ha="right", va="center", fontsize=5.5, color=ROOF_COLOR, zorder=6,
            gid=style.gid("label", "decode-best"), bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none",
                                                              alpha=0.7))


def _group_by_value(peaks: Dict[str, float]) -> Dict[float, List[str]]:
    out: Dict[float, List[str]] = {}
    for p, P in peaks.items():
        out.setdefault(P, []).append(p)
    return out


def _label_memory_roof(ax, ceil: data.Ceilings, x_lo: float) -> None:
    sheet = ceil.sheet
    if ceil.measured_bandwidth_gbs is not None:
        text = f"{_bw_text(ceil.measured_bandwidth_gbs)} copy" + \
            (f" (datasheet {_bw_text(sheet.memory_bandwidth_gbs)})" if sheet else "")
        slope = ceil.measured_bandwidth_gbs / 1e3
    elif sheet is not None:
        text, slope = f"datasheet {_bw_text(sheet.memory_bandwidth_gbs)}", sheet.memory_bandwidth_gbs / 1e3
    else:
        return
    # under the roof's left part, hanging from it: the roof rises away from the text
    x = x_lo * 1.5
    ax.text(x * 1.15, slope * x / 1.15, text, fontsize=5.5, color=ROOF_COLOR, ha="left", va="top",
            gid=style.gid("label", "memroof"), zorder=6)


def spread(targets: List[float], gap: float) -> List[float]:
    """Positions near ``targets`` (sorted ascending) at least ``gap`` apart, each cluster of
    labels that would overlap centred on its targets' mean: the least total displacement."""
    clusters = [[t] for t in targets]  # each: the targets it holds
    while True:
        starts = []
        for c in clusters:
            centre = sum(c) / len(c)
            starts.append(centre - gap * (len(c) - 1) / 2)
        merged = False
        for i in range(len(clusters) - 1):
            if starts[i] + gap * len(clusters[i]) > starts[i + 1] + 1e-12:
                clusters[i:i + 2] = [clusters[i] + clusters[i + 1]]
                merged = True
                break
        if not merged:
            out = []
            for c, s0 in zip(clusters, starts):
                out += [s0 + gap * j for j in range(len(c))]
            return out


def _place_roof_labels(ax, labels: List[Tuple[float, str, str]], y_lo: float, y_hi: float,
                       axes_height_in: float, bw_max: Optional[float], x_lo: float) -> None:
    """Each roof's label at its height, just left of the memory roof (where no point can be),
    moved apart where two would overlap; without a memory roof, at the left edge."""
    decades_per_in = math.log10(y_hi / y_lo) / axes_height_in
    gap = 1.2 * 5.5 / 72 * decades_per_in  # one line of text, in decades
    labels = sorted(labels, key=lambda t: (t[0], t[1]))
    ys = spread([math.log10(P) for P, _, _ in labels], gap)
    for log_y, (P, text, color) in zip(ys, labels):
        y = 10 ** log_y
        x, ha, va = (y / bw_max / 1.3, "right", "center") if bw_max else (x_lo * 1.2, "left", "bottom")
        ax.text(x, y, text, ha=ha, va=va, fontsize=5.5, color=color,
                gid=style.gid("label", "roof", text.split()[0]), zorder=6,
                bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.7))


def _notes(ds: data.Dataset, kind: str, ceil: data.Ceilings, pts) -> List[str]:
    notes = []
    if ceil.device is None:
        notes.append("no measured GPU or CPU rows: no roofline")
    elif kind == "cpu":
        peak = "compute: its best cpu_blas GEMM row" if ceil.measured_tflops else "no compute roof measured"
        mem = "memory: the copy probe" if ceil.measured_bandwidth_gbs is not None else \
            ("memory: the datasheet" if ceil.sheet else "no memory roof (no copy rows, no datasheet names this CPU)")
        notes.append(f"no GPU rows: the CPU's roofline, roofs from its own rows: {peak}; {mem}")
    if ceil.device is not None and not ceil.matched:
        notes.append(f"no conf/device entry names {ceil.device}: no datasheet roofs")
    if ceil.other_devices:
        notes.append(f"not shown: rows of {', '.join(ceil.other_devices)}")
    if ceil.device is not None and ceil.measured_bandwidth_gbs is None and kind == "gpu":
        notes.append("no copy rows: memory roof is the datasheet's" if ceil.sheet else "no copy rows: no memory roof")
    if not pts.empty and pts["intensity_model"].isna().all() and kind == "gpu":
        notes.append("no modeled intensity (intensity_model) in the rows")
    backends = [b for b in data.configured_backends() if data.backend_kind(b) == kind]
    gone = data.missing(pts["backend"], backends)
    if gone:
        notes.append(f"no {kind.upper()} rows of {', '.join(gone)}")
    gone = data.missing(pts["precision"], data.configured_precisions(kind))
    if gone and not pts.empty:
        notes.append(f"no rows at {', '.join(gone)}")
    if ceil.sheet is not None:
        no_sheet = [p for p in data.precision_order(pts["precision"]) if p not in ceil.sheet.peak_tflops]
        if no_sheet:
            notes.append(f"no datasheet peak for {', '.join(no_sheet)}")
    return notes


def _handles(pts, datasheet: bool, stages: dict) -> List[Line2D]:
    handles = []
    pairs = pts[["variant", "backend"]].drop_duplicates()
    order = data.variant_order(pairs, stages)
    backend_of = dict(zip(pairs["variant"], pairs["backend"]))
    for v in order:
        handles.append(Line2D([], [], ls="", marker="o", ms=3.5, color=style.variant_color(v, backend_of[v]),
                              label=v))
    for p in data.precision_order(pts["precision"]):
        handles.append(Line2D([], [], ls="", marker=style.precision_marker(p), ms=3.5, color="#555555",
                              label=p))
    handles.append(Line2D([], [], color=ROOF_COLOR, lw=1.1, label="measured roof"))
    if datasheet:
        handles.append(Line2D([], [], color=SHEET_COLOR, lw=0.8, ls="--", label="datasheet roof"))
    if pts["intensity_model"].notna().any():
        handles.append(Line2D([], [], color="#555555", lw=0.6, ls=":", marker="o", mfc="none", ms=3.5,
                              label="modeled intensity"))
    if not pts.empty and (~pts["evidence"]).any():
        handles.append(Line2D([], [], ls="", marker="o", ms=3.5, mfc="none", color="#555555",
                              label=NOT_EVIDENCE_LABEL))
    return handles
