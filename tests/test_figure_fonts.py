"""The figures' bytes do not depend on Matplotlib's font cache (issue 31): a process that read a
foreign ``fontlist-*.json`` (another install's, one listing other files under the DejaVu names)
draws the same PDF and PNG bytes as one that built its own (analysis.style.pin_fonts)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

REFERENCE_RUN = ROOT / "outputs" / "reference" / "h200-2026-12-01" / "claims_ladder"

# Writes a font cache into MPLCONFIGDIR in which every family of Matplotlib's own files names
# another family's files (DejaVu Sans -> DejaVu Serif's, ...): all the files exist, so Matplotlib
# trusts the list and does not rebuild it.
FOREIGN_CACHE = """
import json, sys
from matplotlib import font_manager as fm
mgr = fm.fontManager  # built fresh into the empty MPLCONFIGDIR
entries = mgr.ttflist
names = sorted({e.name for e in entries})
shifted = {n: names[(i + 1) % len(names)] for i, n in enumerate(names)}
mgr.ttflist = [fm.FontEntry(**{**e.__dict__, "name": shifted[e.name]}) for e in entries]
fm.json_dump(mgr, sys.argv[1])
"""

# Builds the figures and prints, as JSON, the file DejaVu Sans resolved to before analysis was
# imported and the bytes of every figure.
BUILD = """
import hashlib, json, sys
from matplotlib import font_manager as fm
before = fm.findfont("DejaVu Sans")
from analysis import data, style
from analysis.figures import FIGURES
ds = data.Dataset.from_paths([sys.argv[1]])
out = {"before": before, "after": fm.findfont("DejaVu Sans"), "files": {}}
with style.context():
    for name in sys.argv[2].split(","):
        fig = FIGURES[name](ds)
        for fmt in ("pdf", "png"):
            out["files"][f"{name}.{fmt}"] = hashlib.sha256(style.render(fig, fmt)).hexdigest()
print(json.dumps(out))
"""
FIGURE_SET = "roofline,ladder,throughput_vs_size"  # text, legends, notes and mathtext tick labels


def _python(code: str, config_dir: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLCONFIGDIR": str(config_dir)}
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def _build(config_dir: Path) -> dict:
    return json.loads(_python(BUILD, config_dir, str(REFERENCE_RUN), FIGURE_SET).strip().splitlines()[-1])


@pytest.mark.skipif(not (REFERENCE_RUN / "results.csv").exists(), reason="reference run not in this checkout")
@pytest.mark.slow
def test_figures_do_not_depend_on_the_font_cache(tmp_path):
    from matplotlib import font_manager

    own, foreign = tmp_path / "own", tmp_path / "foreign"
    own.mkdir()
    foreign.mkdir()
    cache = foreign / f"fontlist-v{font_manager.FontManager.__version__}.json"
    _python(FOREIGN_CACHE, foreign, str(cache))
    assert cache.exists()
    normal, odd = _build(own), _build(foreign)
    # the foreign cache was read: before analysis pinned the fonts, DejaVu Sans was another file
    assert Path(normal["before"]).name == "DejaVuSans.ttf"
    assert Path(odd["before"]).name != "DejaVuSans.ttf", odd["before"]
    assert Path(odd["after"]) == Path(normal["after"]) and Path(odd["after"]).name == "DejaVuSans.ttf"
    assert len(normal["files"]) == 2 * len(FIGURE_SET.split(","))
    differ = sorted(f for f in normal["files"] if normal["files"][f] != odd["files"][f])
    assert not differ, f"figures drawn under a foreign font cache differ: {differ}"
