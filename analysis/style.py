"""One look for every figure, and files that do not change when the input does not.

Sizes are for a single column (3.4 in) at print size; the font is DejaVu Sans, the files shipped
with Matplotlib (:func:`analysis.fonts.pin_fonts`: never the system's or another install's
DejaVu that a font cache may list first), so every machine draws the same glyphs. Colours belong
to a variant, not to a figure: each variant has its own colour from one palette of distinct
colours (DISTINCT_PALETTE), keyed by its name, so a variant looks the same in every figure and in
every dataset.
"""
from __future__ import annotations

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

from gemmlab import variants as catalog  # noqa: E402

from . import data  # noqa: E402
from .fonts import pin_fonts  # noqa: E402

COLUMN_WIDTH_IN = 3.4  # one column of a two-column paper
PNG_DPI = 300
NOTE_GID = "gap-note"
NOTE_CHAR_IN = 0.047  # width of an average 5.5 pt italic character, inches (a little generous)  # gid of the text that says what the data lacks (tests look for it)

# One colour per variant, the same in every figure and every dataset, keyed by the variant's name
# (color_slots, variant_color). The palette: 64 colours picked greedily, each the farthest
# (CIEDE2000) from those before it, from an RGB grid (step 15) within L* 30-80, away from white,
# black and the roofs' greys (:func:`distinct_palette` recomputes it); no two are closer than 11,
# none of the first 48 closer than 13.
DISTINCT_PALETTE = (
    "#4b00ff", "#00e100", "#b40000", "#f0b400", "#ff3cff", "#006900", "#00d2d2", "#ff784b",
    "#96005a", "#0087ff", "#694b00", "#f0b4d2", "#006969", "#ff0f69", "#879600", "#b4c3ff",
    "#695a87", "#00a569", "#004b78", "#b4782d", "#3cc3ff", "#8769f0", "#965a5a", "#a5c387",
    "#3c96a5", "#b45a96", "#f0b487", "#9687b4", "#d28787", "#69784b", "#0fe1a5", "#b4d200",
    "#a50fb4", "#a59669", "#964b0f", "#f02d2d", "#871e2d", "#d296ff", "#ff69b4", "#4b69b4",
    "#ff8700", "#0f5a3c", "#2d9600", "#b4694b", "#0078a5", "#d2c378", "#5a2d96", "#009687",
    "#693c2d", "#a58700", "#4b4b1e", "#8796ff", "#696900", "#c31eff", "#c31e4b", "#693c5a",
    "#87693c", "#78b496", "#ffb4a5", "#c387a5", "#78b43c", "#d20078", "#e15a00", "#003cc3",
)
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


pin_fonts()


@contextmanager
def context() -> Iterator[None]:
    pin_fonts()
    with matplotlib.rc_context(rc()):
        yield


def figure(height_in: float, width_in: float = COLUMN_WIDTH_IN) -> Figure:
    """A new figure (not managed by pyplot, so nothing accumulates across builds)."""
    return Figure(figsize=(width_in, height_in), layout="constrained")


# -- colours and markers ---------------------------------------------------------------------
def srgb_to_lab(rgb):
    """CIELAB (D65) of sRGB colours in [0, 1] (an array ending in 3)."""
    import numpy as np

    rgb = np.asarray(rgb, float)
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750],
                  [0.0193339, 0.1191920, 0.9503041]])
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], -1)


def delta_e2000(lab1, lab2):
    """CIEDE2000 colour difference of CIELAB colours (arrays ending in 3, broadcast)."""
    import numpy as np

    lab1, lab2 = np.broadcast_arrays(np.asarray(lab1, float), np.asarray(lab2, float))
    l1, a1, b1 = lab1[..., 0], lab1[..., 1], lab1[..., 2]
    l2, a2, b2 = lab2[..., 0], lab2[..., 1], lab2[..., 2]
    cb = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(cb ** 7 / (cb ** 7 + 25.0 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p, h2p = np.degrees(np.arctan2(b1, a1p)) % 360, np.degrees(np.arctan2(b2, a2p)) % 360
    dh = h2p - h1p
    dh = np.where(dh > 180, dh - 360, np.where(dh < -180, dh + 360, dh))
    dh = np.where(c1p * c2p == 0, 0, dh)
    d_hp = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh / 2))
    lbp, cbp, hs = (l1 + l2) / 2, (c1p + c2p) / 2, h1p + h2p
    hbp = np.where(c1p * c2p == 0, hs, np.where(np.abs(h1p - h2p) > 180,
                                                np.where(hs < 360, (hs + 360) / 2, (hs - 360) / 2), hs / 2))
    t = (1 - 0.17 * np.cos(np.radians(hbp - 30)) + 0.24 * np.cos(np.radians(2 * hbp))
         + 0.32 * np.cos(np.radians(3 * hbp + 6)) - 0.20 * np.cos(np.radians(4 * hbp - 63)))
    rt = -np.sin(np.radians(60 * np.exp(-(((hbp - 275) / 25) ** 2)))) * 2 * np.sqrt(cbp ** 7 / (cbp ** 7 + 25.0 ** 7))
    sl = 1 + 0.015 * (lbp - 50) ** 2 / np.sqrt(20 + (lbp - 50) ** 2)
    sc, sh = 1 + 0.045 * cbp, 1 + 0.015 * cbp * t
    dl, dc = (l2 - l1) / sl, (c2p - c1p) / sc
    return np.sqrt(dl ** 2 + dc ** 2 + (d_hp / sh) ** 2 + rt * dc * (d_hp / sh))


def distinct_palette(n: int = len(DISTINCT_PALETTE)) -> List[str]:
    """``n`` colours, each the farthest (CIEDE2000) from those before it (see DISTINCT_PALETTE)."""
    import numpy as np

    levels = np.arange(0, 256, 15) / 255
    cand = np.array(np.meshgrid(levels, levels, levels, indexing="ij")).reshape(3, -1).T
    lab = srgb_to_lab(cand)
    keep = (lab[:, 0] >= 30) & (lab[:, 0] <= 80)
    cand, lab = cand[keep], lab[keep]
    avoid = srgb_to_lab(np.array([[1, 1, 1], [0x22 / 255] * 3, [0x8c / 255] * 3, [0.5] * 3, [0, 0, 0]]))
    d = np.min(np.stack([delta_e2000(lab, a) for a in avoid]), axis=0)
    d = np.where(np.hypot(lab[:, 1], lab[:, 2]) < 25, d * 0.3, d)  # greys read as roofs
    out = []
    for _ in range(n):
        j = int(np.argmax(d))
        out.append("#%02x%02x%02x" % tuple(int(round(c * 255)) for c in cand[j]))
        d = np.minimum(d, delta_e2000(lab, lab[j]))
    return out


@functools.lru_cache(maxsize=None)
def _variants_by_backend() -> Dict[str, List[str]]:
    """Every variant the harness offers today (``gemmlab.variants``), grouped by backend and ordered
    by stage then name: colours are keyed by name over this set, so they stay put across figures."""
    out: Dict[str, List[str]] = {}
    for info in catalog.all_info():
        out.setdefault(info.backend, []).append(info.name)
    for names in out.values():
        names.sort(key=lambda v: (catalog.info(v).stage is None, catalog.info(v).stage or 0, v))
    return out


# Variants the figures colour (GEMMs, and the probes drawn as throughput or time) share the palette's
# COLOR_SLOTS most distinct colours; the salt was picked (from 0-1999) so that the variants of the
# reference figures land farthest apart: no two of them closer than 15 (CIEDE2000).
COLOR_SLOTS = 48
COLOR_SALT = "1557"
# Variants added after the committed figures' colours were fixed: they take their slots after every
# other name (in this order), so adding one never moves a colour a published figure already shows
# (in name order, cublaslt_search would have taken smem_tiled_colread's slot; wgmma_fp8 wgmma_ws's; decode_wgmma, 49th,
# is past the slots: it takes a free colour from its name; in name order it would have moved 11 colours and pushed
# wrong_oob_row past the slots).
LATE_VARIANTS = ("cublaslt_search", "warp_tiled_bk8", "warp_tiled_s4", "wgmma_fp8", "decode_wgmma")
DRAWN_PROBES = ("vecadd", "gemv", "gemm_e2e", "copy")


def _name_hash(name: str) -> int:
    return int(hashlib.sha1(f"{COLOR_SALT}{name}".encode()).hexdigest(), 16)


@functools.lru_cache(maxsize=None)
def color_slots() -> Dict[str, int]:
    """Each named series' index into DISTINCT_PALETTE, keyed by its name: the configured variants
    the figures draw and the backend names (the error figure's series), in name order, each at
    the slot its name hashes to among the first COLOR_SLOTS, or the next free one. A variant added
    later takes a free slot and leaves the others' colours alone, unless it sorts before one
    whose slot it hashes to: then it goes in LATE_VARIANTS."""
    infos = [catalog.info(v) for vs in _variants_by_backend().values() for v in vs]
    drawn = {i.name for i in infos if i.probe is None or i.probe in DRAWN_PROBES}
    names = sorted(n for n in drawn | {i.backend for i in infos} | set(data.BACKEND_ORDER) if n)
    names = [n for n in names if n not in LATE_VARIANTS] + [n for n in LATE_VARIANTS if n in names]
    slots: Dict[str, int] = {}
    taken = set()
    for n in names[:COLOR_SLOTS]:
        i = _name_hash(n) % COLOR_SLOTS
        while i in taken:
            i = (i + 1) % COLOR_SLOTS
        slots[n] = i
        taken.add(i)
    return slots


@functools.lru_cache(maxsize=None)
def variant_color(variant: str, backend: str = "") -> str:
    """A variant's colour in every figure and every dataset (see DISTINCT_PALETTE)."""
    slots = color_slots()
    if variant in slots:
        return DISTINCT_PALETTE[slots[variant]]
    # a variant the figures do not colour, or one this checkout has no config for: a slot from its
    # name among those no coloured variant holds
    used = set(slots.values())
    free = [i for i in range(len(DISTINCT_PALETTE)) if i not in used] or list(range(len(DISTINCT_PALETTE)))
    return DISTINCT_PALETTE[free[_name_hash(variant) % len(free)]]


def backend_color(backend: str) -> str:
    """A backend's colour (figures by backend): its variant's where a variant has the backend's
    name (cpu_blas, cublas, cublaslt), else a slot of its own."""
    return variant_color(backend, backend)


def precision_marker(precision: str) -> str:
    if precision in PRECISION_MARKERS:
        return PRECISION_MARKERS[precision]
    digest = int(hashlib.sha1(precision.encode()).hexdigest(), 16)
    return OTHER_MARKERS[digest % len(OTHER_MARKERS)]


def gid(*parts: object) -> str:
    """The id a data artist carries, ``kind:name:...``: what tests read back as the series."""
    return ":".join(str(p) for p in parts)


# -- axes ---------------------------------------------------------------------------------
def _log_label(v: float, _pos=None, plain: bool = True, digits: int = 3) -> str:
    import math

    if v <= 0:
        return ""
    if plain and 1e-3 <= v < 1e5:
        return format_sig(v, digits)
    exp = math.floor(math.log10(v) + 1e-9)
    mant = v / 10 ** exp
    return f"$10^{{{exp}}}$" if abs(mant - 1) < 1e-6 else f"${mant:.0f}\\times10^{{{exp}}}$"


def _log_formatter(plain: bool):
    """Labels of :func:`_log_label`, 3 significant digits, more where the ticks would otherwise
    read alike (an axis spanning less than a few percent, where Matplotlib ticks linearly)."""
    from matplotlib.ticker import Formatter

    class LogLabels(Formatter):
        digits = 3

        def __call__(self, v, pos=None):
            return _log_label(v, pos, plain, self.digits)

        def format_ticks(self, values):
            for self.digits in range(3, 9):
                labels = [self(v, i) for i, v in enumerate(values)]
                shown = [t for t in labels if t]
                if len(set(shown)) == len(shown):
                    break
            return labels

    return LogLabels()


def log_axis(ax, which: str = "y", plain: bool = True) -> None:
    """A log axis, 1, 2, 5 per decade where it spans little; labels in plain numbers between
    1e-3 and 1e5 (``plain``), else as powers of ten."""
    import math

    from matplotlib.ticker import LogLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    lo, hi = (ax.get_ylim() if which == "y" else ax.get_xlim())
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 10
    subs = (1.0,) if decades > 2.5 else (1.0, 2.0, 5.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(_log_formatter(plain))
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
    """One legend under every axes, in as many columns as fit inside the figure: the columns
    are measured with the figure's renderer (the estimate of :func:`legend_columns` can be off),
    and the figure grows or shrinks by the difference between the legend's measured height and
    :func:`legend_height`'s estimate, which its builder sized it with."""
    if not handles:
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    labels = [h.get_label() for h in handles]
    width = fig.get_figwidth()
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    ncol = legend_columns(labels, width)
    while True:
        legend = fig.legend(handles=handles, loc="outside lower center", ncol=ncol, handletextpad=0.4,
                            columnspacing=1.0)
        box = legend.get_window_extent(renderer)
        if box.width / fig.dpi <= width - 0.1 or ncol == 1:
            break
        legend.remove()
        ncol -= 1
    fig.set_figheight(fig.get_figheight() + (0.12 + box.height / fig.dpi) - legend_height(labels, width))


# -- notes on the axes -----------------------------------------------------------------------
def note(ax, lines: List[str], where: str = "upper left", width: float = 1.0) -> None:
    """Say on the axes what the data lacks (a missing backend, precision or probe), wrapped to
    ``width`` of the axes' width (less keeps a corner's labels clear)."""
    import textwrap

    lines = [l for l in dict.fromkeys(lines) if l]
    if not lines:
        return
    # wrapped to the axes' width: a note wider than its axes would break the figure's layout
    width_in = ax.get_position().width * ax.figure.get_figwidth() * width
    chars = max(int(width_in / NOTE_CHAR_IN), 20)
    shown = [w for l in lines for w in textwrap.wrap(l, chars, break_on_hyphens=False) or [""]]
    x, ha = (0.02, "left") if "left" in where else (0.98, "right")
    y, va = (0.98, "top") if "upper" in where else (0.02, "bottom")
    if where == "center":
        x, y, ha, va = 0.5, 0.5, "center", "center"
    text = ax.text(x, y, "\n".join(shown), transform=ax.transAxes, ha=ha, va=va, fontsize=5.5,
                   style="italic", color="#444444", gid=NOTE_GID, zorder=10, wrap=False,
                   bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="#bbbbbb", lw=0.4, alpha=0.9))
    text.gemmlab_note = "\n".join(lines)  # the lines as written, before wrapping (notes_of)


def notes_of(fig: Figure) -> List[str]:
    """Every gap note of ``fig`` (for tests and the command's summary)."""
    return [getattr(t, "gemmlab_note", t.get_text()) for ax in fig.axes for t in ax.texts
            if t.get_gid() == NOTE_GID]


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
