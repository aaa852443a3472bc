"""Fonts by file: every figure draws with Matplotlib's own font files, whatever font cache the
process read (the paper's bytes must not depend on ~/.cache/matplotlib)."""
from __future__ import annotations

import functools
from pathlib import Path

import matplotlib


@functools.lru_cache(maxsize=None)
def own_font_files() -> tuple:
    """Matplotlib's own TrueType files (mpl-data/fonts/ttf: DejaVu, STIX, Computer Modern), by
    name: every font the figures use (text, mathtext, fallbacks) is one of them."""
    return tuple(sorted(Path(matplotlib.get_data_path(), "fonts", "ttf").glob("*.ttf")))


_PINNED: list = []  # the font entries pin_fonts put at the head of the font list


def pin_fonts() -> None:
    """Resolve every family of Matplotlib's own font files to those files, whatever font list
    this process read from Matplotlib's cache (``fontlist-*.json`` in ~/.cache/matplotlib or
    MPLCONFIGDIR). A cache written by another install can list the system's DejaVu (another
    build, other glyphs) or other files under these names, and findfont takes the first best
    match: the figures' bytes then depended on that cache. Here the own files' entries go first
    and no other file answers to their family names. Idempotent; redone after Matplotlib rebuilt
    its list (a missing file makes it rebuild)."""
    from matplotlib import font_manager

    mgr = font_manager.fontManager
    if _PINNED and mgr.ttflist[:len(_PINNED)] == _PINNED:
        return
    rest = list(mgr.ttflist)
    mgr.ttflist = []
    for path in own_font_files():
        mgr.addfont(path)  # also clears findfont's cache
    own = list(mgr.ttflist)
    names, families = {e.fname for e in own}, {e.name for e in own}
    mgr.ttflist = own + [e for e in rest if e.fname not in names and e.name not in families]
    _PINNED[:] = own
    font_manager.FontManager._findfont_cached.cache_clear()
    from matplotlib import mathtext

    parsed = getattr(mathtext.MathTextParser, "_parse_cached", None)  # fonts looked up before
    if hasattr(parsed, "cache_clear"):
        parsed.cache_clear()
