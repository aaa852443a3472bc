"""What tuning buys (issue 18, item 5; numbers: :mod:`analysis.regret`).

Top: per shape set, the distribution of the default's regret (cuBLASLt's heuristic first choice
against the best of cuBLASLt's searched algorithms, the CUTLASS search and the hand-written stages:
default time / best time - 1), a box over the problems and every problem as a point coloured by
what was best there (the default itself, cuBLASLt's search, CUTLASS's search, a hand-written stage),
marked by precision. Bottom: what each search bought (default
time / the search's time - 1) against the wall time it took (log axis).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, regret, style

SEARCH_MARKER = {regret.LT_SEARCH: "o", regret.CUTLASS_SEARCH: "s"}
DEFAULT_COLOR = "#9a9a9a"  # the default won: nothing to gain (grey, not cuBLASLt's own colour)


def kind_color(kind: str) -> str:
    """One colour per kind of result in both panels: the searches and the stages take their
    backend's colour, the default grey (cuBLASLt's colour is its search's)."""
    return DEFAULT_COLOR if kind == regret.DEFAULT else style.backend_color(regret.KIND_BACKEND[kind])


def _slug(kind: str) -> str:
    return kind.replace(" ", "_").replace("-", "_")


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds, regret.frame(ds))


def _build(ds: data.Dataset, f: pd.DataFrame) -> Figure:
    handles = _handles(f)
    fig = style.figure(3.6 + style.legend_height([h.get_label() for h in handles]))
    top, bottom = fig.subplots(2, 1)
    _regret_panel(top, f)
    _gain_panel(bottom, f)
    style.note(top, regret.notes(ds, f), where="center" if f.empty else "upper right")
    style.legend_below(fig, handles)
    return fig


def _regret_panel(ax, f: pd.DataFrame) -> None:
    sets = sorted(f["shape_set"].unique()) if not f.empty else []
    for i, s in enumerate(sets):
        g = f[f["shape_set"] == s].sort_values(["regret", "precision", "shape_name", "m", "n", "k", "run_id"],
                                               kind="stable")
        values = 100 * g["regret"].to_numpy(dtype=float)
        box = ax.boxplot([values], positions=[i], widths=0.5, showfliers=False, patch_artist=False,
                         medianprops={"color": "#222222", "lw": 0.8}, whiskerprops={"lw": 0.6},
                         capprops={"lw": 0.6}, boxprops={"lw": 0.6})
        for artists in box.values():
            for a in artists:
                a.set_gid(style.gid("box", s))
        x = i + (np.linspace(-0.18, 0.18, len(g)) if len(g) > 1 else np.zeros(1))
        for (kind, precision), idx in g.groupby(["best_kind", "precision"], sort=True).groups.items():
            pos = [g.index.get_loc(j) for j in idx]
            ax.scatter(x[pos], values[pos], s=10, color=kind_color(kind),
                       marker=style.precision_marker(precision), edgecolors="white", linewidths=0.3, zorder=4,
                       gid=style.gid("regret", s, _slug(kind), precision))
    ax.set_xticks(range(len(sets)), sets)
    ax.set_xlim(-0.6, max(len(sets), 1) - 0.4)
    top = float(100 * f["regret"].max()) if not f.empty else 10.0
    ax.set_ylim(-0.05 * max(top, 1.0), max(top, 1.0) * 1.15)
    ax.grid(axis="x", visible=False)
    ax.set_xlabel("Shape set")
    ax.set_ylabel("Regret of cuBLASLt's default (%)\n(default time / best time - 1)", fontsize=6)


def _gain_panel(ax, f: pd.DataFrame) -> None:
    xs = []
    for kind in regret.SEARCHES:
        p = regret.PREFIX[kind]
        g = f[f[f"{p}_s"].notna() & (f[f"{p}_s"] > 0) & f[f"{p}_gain"].notna()] if not f.empty else f
        for precision, sub in (g.groupby("precision", sort=True) if not g.empty else []):
            sub = sub.sort_values([f"{p}_s", "shape_name", "run_id"], kind="stable")
            ax.scatter(sub[f"{p}_s"], 100 * sub[f"{p}_gain"], s=10, marker=style.precision_marker(precision),
                       color=kind_color(kind), edgecolors="white", linewidths=0.3,
                       zorder=4, gid=style.gid("gain", _slug(kind), precision))
            xs += list(sub[f"{p}_s"])
    ax.axhline(0, color="#8c8c8c", lw=0.6, zorder=2, gid=style.gid("zero", "gain"))
    lo, hi = (min(xs), max(xs)) if xs else (0.1, 100.0)
    ax.set_xlim(lo / 2, hi * 2)
    style.log_axis(ax, "x")
    ax.set_xlabel("Search time (s): candidates checked and ranked\n(CUTLASS's compile not included)", fontsize=6)
    ax.set_ylabel("Default time / search's\ntime - 1 (%)", fontsize=6)


def _handles(f: pd.DataFrame) -> list:
    """Colours: what was best (top), which search (bottom): one kind, one colour in both."""
    if f.empty:
        return []
    won = set(f["best_kind"])
    searched = {k for k in regret.SEARCHES if f[f"{regret.PREFIX[k]}_s"].notna().any()}
    labels = {regret.DEFAULT: "the default was best", regret.LT_SEARCH: "cuBLASLt search",
              regret.CUTLASS_SEARCH: "CUTLASS search", regret.HANDWRITTEN: "a hand-written stage was best"}
    handles = [Line2D([], [], ls="", marker="o", ms=3, color=kind_color(k), label=labels[k])
               for k in regret.KINDS if k in won or k in searched]
    handles += [Line2D([], [], ls="", marker=style.precision_marker(p), ms=3, color="#555555", label=p)
                for p in data.precision_order(f["precision"])]
    return handles
