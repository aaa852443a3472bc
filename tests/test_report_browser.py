"""analysis.report's page in a real browser (headless Chromium, Debian's ``chromium``; .ci/run
installs it): built from committed reference rows and from a tiny CPU run made by ``python
run.py``, each page must load without a console message or error, draw every image, fit a
1280 px wide window, and sort its tables (tests/report_check.js, injected into a copy of the
page, says what it found). Copies broken on purpose (an image's data, an element too wide, a
script error, no script) must fail the same check."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = [pytest.mark.slow,  # a headless browser per page: the full suite, not the fast tier
              # one worker builds the pages (three `python -m analysis.report` and a run: 15 CPU-s)
              # for every test here; tests split over two workers built them twice
              pytest.mark.xdist_group("report_browser"),
              pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium here (Debian's chromium package: "
                                                          "apt-get install chromium; .ci/run installs it)")]
WIDTH = 1280
REFERENCE = ROOT / "outputs" / "reference"
CHECK_JS = (Path(__file__).parent / "report_check.js").read_text()


def chromium(args, profile: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    """Headless Chromium with its own profile (xdist workers run it at once), no sandbox (CI
    runs as root), no network."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--hide-scrollbars", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
           "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={WIDTH},900", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def load(page: Path, tmp_path: Path) -> dict:
    """What report_check.js found in ``page``, and the page's console lines (``console``)."""
    text = page.read_text()
    assert "<head>" in text
    probe = tmp_path / f"probe-{page.parent.name}-{page.name}"
    probe.write_text(text.replace("<head>", "<head><script>" + CHECK_JS + "</script>", 1))
    r = chromium(["--virtual-time-budget=10000", "--dump-dom", probe.as_uri()], tmp_path / "profile")
    found = re.findall(r'<pre id="report-check">(.*?)</pre>', r.stdout, re.S)
    assert found, f"the check did not run (rc {r.returncode}): {r.stderr[-2000:]}"
    result = json.loads(html.unescape(found[-1]))
    result["console"] = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return result


def problems(result: dict) -> list:
    """Everything wrong with a loaded page, in words (empty: the page is fine)."""
    out = [f"console: {line}" for line in result["console"]]
    out += [f"page error: {e}" for e in result["errors"]]
    if not result["images"]:
        out.append("no images")
    out += [f"image not rendered: {i['alt']} (complete {i['complete']}, naturalWidth {i['naturalWidth']})"
            for i in result["images"] if not (i["complete"] and i["naturalWidth"] > 0)]
    if result["innerWidth"] != WIDTH:
        out.append(f"window {result['innerWidth']} px wide, not {WIDTH}")
    if result["scrollWidth"] > WIDTH:
        out.append(f"wider than the window: {result['scrollWidth']} px > {WIDTH} ({result['tooWide']})")
    if not result["tables"]:
        out.append("no sortable table")
    out += [f"table {t['id']}: {p}" for t in result["tables"] for p in t["problems"]]
    return out


def _report(args, tmp_path: Path, name: str) -> Path:
    out = tmp_path / f"{name}.html"
    r = subprocess.run([sys.executable, "-m", "analysis.report", *map(str, args), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == str(out)
    return out


SWEEP = REFERENCE / "h200-2026-11-29" / "tune_warp_tiled"  # a sweep: its jobs' overrides
CUBLAS_A, CUBLAS_B = (REFERENCE / d / "cublas_square" for d in ("h200-2026-11-29", "h200-2026-11-30"))


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Pages of reference rows (a sweep; two runs compared) and of a CPU run by ``python run.py``."""
    tmp = tmp_path_factory.mktemp("pages")
    out = {}
    if SWEEP.is_dir() and CUBLAS_A.is_dir() and CUBLAS_B.is_dir():
        out["reference sweep"] = _report([SWEEP], tmp, "sweep")
        out["reference comparison"] = _report([CUBLAS_A, CUBLAS_B], tmp, "compare")
    run = tmp / "cpu_run"
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), "variant=[cpu_blas,cublas]", "precision=[fp64,fp32]",
                        "sizes=smoke", "measure=quick", "run.progress=false", f"hydra.run.dir={run}"],
                       cwd=tmp, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"gemmlab: report: {run / 'report.html'}" in r.stdout, r.stdout[-2000:]
    out["cpu run"] = run / "report.html"
    return out


@pytest.mark.parametrize("which", ["cpu run", "reference sweep", "reference comparison"])
def test_the_page_loads_clean_renders_fits_and_sorts(pages, which, tmp_path):
    if which not in pages:
        pytest.skip("reference runs not in this checkout")
    result = load(pages[which], tmp_path)
    assert not problems(result), "\n".join(problems(result))
    assert len(result["images"]) >= 2 and all(i["width"] > 200 for i in result["images"])
    ids = {t["id"] for t in result["tables"]}
    assert "rows-table" in ids and (which != "reference comparison" or "compare-table" in ids)


BREAKS = {  # how to break the CPU run's page, and what the check must then say (and nothing else)
    # one image's PNG data no longer a PNG
    "broken image": (lambda t: t.replace("data:image/png;base64,iVBOR", "data:image/png;base64,AAAAx", 1),
                     ("image not rendered", "page error: failed to load <img>")),
    "too wide": (lambda t: t.replace("<main>", '<main><div style="width:1500px">wide</div>', 1), ("wider than",)),
    "script error": (lambda t: t.replace("</body>", "<script>undefinedFunction();</script></body>", 1),
                     ("console", "page error")),
    "no sorting": (lambda t: t.replace('th.addEventListener("click"', 'th.addEventListener("nothing"', 1),
                   ("ascending", "descending", "aria-sort")),
}


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_the_check_fails_a_broken_page(pages, how, tmp_path):
    """The check above can fail: a copy of the CPU run's page broken in one way fails it, saying
    how, and only that way."""
    page = pages["cpu run"]
    text = page.read_text()
    broken, says = BREAKS[how]
    changed = broken(text)
    assert changed != text
    copy = tmp_path / "broken.html"
    copy.write_text(changed)
    found = problems(load(copy, tmp_path))
    assert found and all(any(s in p for s in says) for p in found), found
