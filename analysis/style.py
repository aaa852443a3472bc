"""One look for every figure, and files that do not change when the input does not.

Sizes are for a single column (3.4 in) at print size; the font is DejaVu Sans (shipped with
Matplotlib, so every machine draws the same glyphs). Colours belong to a variant, not to a figure:
the hand-written stages run along one sequential palette by their ``stage``, each library has its
own hue, so a variant looks the same in every figure and in every dataset.
"""
from __future__ import annotations

import colorsys
import functools
import hashlib
import io
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import matplotlib

matplotlib.use("Agg")  # files only; never a window

import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gemmlab.config import CONF_DIR  # noqa: E402

from . import data  # noqa: E402

COLUMN_WIDTH_IN = 3.4  # one column of a two-column paper
PNG_DPI = 300
NOTE_GID = "gap-note"  # gid of the text that says what the data lacks (tests look for it)

# Libraries and the CPU: one hue each. Hand-written stages: STAGE_PALETTE by stage.
BACKEND_COLORS = {
    "cpu_blas": "#6b6b6b",
    "cutlass": "#e08214",
    "cublas": "#c0143c",
    "cublaslt": "#7b3294",
    "gpu_probe": "#8c510a",
    "cpu_probe": "#35978f",
}
STAGE_PALETTE = "viridis"
PRECISION_MARKERS = {"fp64": "D", "fp32": "o", "tf32": "s", "fp16": "^", "bf16": "v", "fp8": "P"}
OTHER_MARKERS = ("X", "*", "h", "p", "<", ">")
# PDF: no creation date, no Matplotlib version; PNG: no "Software" chunk. Same input, same bytes.
PDF_METADATA = {"CreationDate": None, "ModDate": None, "Producer": None,
                "Creator": "gemmlab analysis.paper"}
PNG_METADATA = {"Software": None}


def rc() -> Dict[str, object]:
    """rcParams of every figure: seaborn's whitegrid/paper look, sized for one column."""
    params: Dict[str, object] = {}
    params.update(sns.axes_style("whitegrid"))
    params.update(sns.plotting_context("paper"))
    params.update({
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans"],
        "mathtext.fontset": "dejavusans",
        "font.size": 7.0,
        "axes.titlesize": 7.0,
        "axes.labelsize": 7.0,
        "xtick.labelsize": 6.0,
        "ytick.labelsize": 6.0,
        "legend.fontsize": 6.0,
        "legend.title_fontsize": 6.0,
        "axes.linewidth": 0.6,
        "grid.linewidth": 0.4,
        "grid.color": "#dddddd",
        "lines.linewidth": 1.0,
        "lines.markersize": 3.5,
        "patch.linewidth": 0.4,
        "xtick.major.size": 2.5,
        "ytick.major.size": 2.5,
        "xtick.minor.size": 1.2,
        "ytick.minor.size": 1.2,
        "xtick.minor.width": 0.4,
        "ytick.minor.width": 0.4,
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "xtick.bottom": True,
        "ytick.left": True,
        "legend.frameon": False,
        "legend.handlelength": 1.6,
        "legend.columnspacing": 1.0,
        "figure.dpi": 100,
        "savefig.dpi": PNG_DPI,
        "pdf.fonttype": 42,  # embed TrueType: selectable text, a vector PDF
        "ps.fonttype": 42,
        "svg.fonttype": "none",
        "svg.hashsalt": "gemmlab",  # fixed ids, should an SVG ever be written
        "axes.formatter.use_mathtext": True,
    })
    return params


@contextmanager
def context() -> Iterator[None]:
    with matplotlib.rc_context(rc()):
        yield


def figure(height_in: float, width_in: float = COLUMN_WIDTH_IN) -> Figure:
    """A new figure (not managed by pyplot, so nothing accumulates across builds)."""
    return Figure(figsize=(width_in, height_in), layout="constrained")


# -- colours and markers ---------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _variants_by_backend() -> Dict[str, List[str]]:
    """Every variant config, grouped by backend and ordered by stage then name."""
    out: Dict[str, List[str]] = {}
    for path in sorted((CONF_DIR / "variant").glob("*.yaml")):
        info = data.variant_info(path.stem)
        out.setdefault(info.backend, []).append(path.stem)
    for names in out.values():
        names.sort(key=lambda v: (data.variant_info(v).stage is None, data.variant_info(v).stage or 0, v))
    return out


def _shade(color: str, i: int, n: int) -> str:
    """The i-th of n shades of ``color`` (0 is the colour itself), lighter as i grows."""
    if n <= 1 or i == 0:
        return color
    r, g, b = matplotlib.colors.to_rgb(color)
    h, l, s = colorsys.rgb_to_hls(r, g, b)
    l = l + (0.85 - l) * i / n
    return matplotlib.colors.to_hex(colorsys.hls_to_rgb(h, l, s))


@functools.lru_cache(maxsize=None)
def variant_color(variant: str, backend: str) -> str:
    """A variant's colour in every figure (see the module docstring)."""
    known = _variants_by_backend().get(backend, [])
    if backend == data.HANDWRITTEN_BACKEND:
        # by stage along the palette, so a stage keeps its colour whatever else is in the data
        stage = data.variant_info(variant).stage
        if stage is not None:
            stages = [data.variant_info(v).stage for v in known] + [stage]
            top = max(s for s in stages if s is not None)
            frac = stage / max(top, 1)
            cmap = matplotlib.colormaps[STAGE_PALETTE]
            return matplotlib.colors.to_hex(cmap(0.05 + 0.8 * frac))  # skip viridis' palest yellow
    if backend in BACKEND_COLORS:
        i = known.index(variant) if variant in known else len(known)
        return _shade(BACKEND_COLORS[backend], i, max(len(known), i + 1))
    # a backend this module does not know: a stable colour from the name
    digest = int(hashlib.sha1(f"{backend}/{variant}".encode()).hexdigest(), 16)
    return matplotlib.colors.to_hex(sns.color_palette("tab10")[digest % 10])


def backend_color(backend: str) -> str:
    if backend == data.HANDWRITTEN_BACKEND:
        return matplotlib.colors.to_hex(matplotlib.colormaps[STAGE_PALETTE](0.45))
    return BACKEND_COLORS.get(backend) or variant_color(backend, backend)


def precision_marker(precision: str) -> str:
    if precision in PRECISION_MARKERS:
        return PRECISION_MARKERS[precision]
    digest = int(hashlib.sha1(precision.encode()).hexdigest(), 16)
    return OTHER_MARKERS[digest % len(OTHER_MARKERS)]


def gid(*parts: object) -> str:
    """The id a data artist carries, ``kind:name:...``: what tests read back as the series."""
    return ":".join(str(p) for p in parts)


# -- axes ---------------------------------------------------------------------------------
def _log_label(v: float, _pos=None, plain: bool = True) -> str:
    import math

    if v <= 0:
        return ""
    if plain and 1e-3 <= v < 1e5:
        return format_sig(v, 3)
    exp = math.floor(math.log10(v) + 1e-9)
    mant = v / 10 ** exp
    return f"$10^{{{exp}}}$" if abs(mant - 1) < 1e-6 else f"${mant:.0f}\\times10^{{{exp}}}$"


def log_axis(ax, which: str = "y", plain: bool = True) -> None:
    """A log axis, 1, 2, 5 per decade where it spans little; labels in plain numbers between
    1e-3 and 1e5 (``plain``), else as powers of ten."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    lo, hi = (ax.get_ylim() if which == "y" else ax.get_xlim())
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 10
    subs = (1.0,) if decades > 2.5 else (1.0, 2.0, 5.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, pos: _log_label(v, pos, plain)))
    axis.set_minor_formatter(NullFormatter())


# -- legends under the axes -------------------------------------------------------------------
LEGEND_CHAR_IN = 0.048  # width of an average 6 pt DejaVu Sans character, inches (measured)
LEGEND_ROW_IN = 0.125  # one legend row at 6 pt with the default spacing


def legend_columns(labels: List[str], width_in: float = COLUMN_WIDTH_IN) -> int:
    """The most columns that fit across the figure. Matplotlib fills a legend column by column
    and sizes each column to its longest label, so the widths are summed per column."""
    best = 1
    for ncol in range(1, len(labels) + 1):
        rows = -(-len(labels) // ncol)
        chunks = [labels[i:i + rows] for i in range(0, len(labels), rows)]
        total = sum(0.3 + LEGEND_CHAR_IN * max(len(l) for l in c) for c in chunks)  # handle, gaps, text
        if total <= width_in - 0.1:
            best = ncol
    return best


def legend_height(labels: List[str], width_in: float = COLUMN_WIDTH_IN) -> float:
    """Height a legend of ``labels`` under the axes takes, inches (0 without labels)."""
    if not labels:
        return 0.0
    rows = -(-len(labels) // legend_columns(labels, width_in))
    return 0.12 + LEGEND_ROW_IN * rows


def legend_below(fig: Figure, handles) -> None:
    """One legend under every axes, in as many columns as fit."""
    if handles:
        labels = [h.get_label() for h in handles]
        fig.legend(handles=handles, loc="outside lower center", ncol=legend_columns(labels, fig.get_figwidth()),
                   handletextpad=0.4, columnspacing=1.0)


# -- notes on the axes -----------------------------------------------------------------------
def note(ax, lines: List[str], where: str = "upper left") -> None:
    """Say on the axes what the data lacks (a missing backend, precision or probe)."""
    lines = [l for l in dict.fromkeys(lines) if l]
    if not lines:
        return
    x, ha = (0.02, "left") if "left" in where else (0.98, "right")
    y, va = (0.98, "top") if "upper" in where else (0.02, "bottom")
    if where == "center":
        x, y, ha, va = 0.5, 0.5, "center", "center"
    ax.text(x, y, "\n".join(lines), transform=ax.transAxes, ha=ha, va=va, fontsize=5.5,
            style="italic", color="#444444", gid=NOTE_GID, zorder=10, wrap=False,
            bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="#bbbbbb", lw=0.4, alpha=0.9))


def notes_of(fig: Figure) -> List[str]:
    """Every gap note of ``fig`` (for tests and the command's summary)."""
    return [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == NOTE_GID]


def series_of(fig: Figure) -> List[str]:
    """The gid of every data artist (lines, collections, patches) of ``fig``."""
    out = []
    for ax in fig.axes:
        for a in list(ax.lines) + list(ax.collections) + list(ax.patches) + list(ax.texts):
            g = a.get_gid()
            if g and g != NOTE_GID:
                out.append(g)
    return out


# -- writing ---------------------------------------------------------------------------------
def render(fig: Figure, fmt: str) -> bytes:
    buf = io.BytesIO()
    with context():
        if fmt == "pdf":
            fig.savefig(buf, format="pdf", metadata=PDF_METADATA)
        elif fmt == "png":
            fig.savefig(buf, format="png", dpi=PNG_DPI, metadata=PNG_METADATA)
        else:
            raise ValueError(f"unknown figure format {fmt!r}")
    return buf.getvalue()


def write_if_changed(path: Path, payload: bytes) -> bool:
    """Write ``payload`` to ``path`` unless it already holds exactly that (mtimes stay put)."""
    from gemmlab.cache import atomic_write_bytes

    path = Path(path)
    if path.exists() and path.read_bytes() == payload:
        return False
    atomic_write_bytes(path, payload)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)  # a plain file, not mkstemp's 0600
    return True


def save(fig: Figure, out_dir: os.PathLike, name: str, formats=("pdf", "png")) -> List[Path]:
    paths = []
    for fmt in formats:
        p = Path(out_dir) / f"{name}.{fmt}"
        write_if_changed(p, render(fig, fmt))
        paths.append(p)
    return paths


def format_sig(x: Optional[float], digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, plain for 1e-3 <= |x| < 1e5, else 1.23e-06."""
    import math

    import pandas as pd

    if x is None or pd.isna(x):
        return "–"
    x = float(x)
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e5:
        decimals = max(digits - 1 - int(math.floor(math.log10(abs(x)))), 0)
        text = f"{x:.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{x:.{digits - 1}e}"
