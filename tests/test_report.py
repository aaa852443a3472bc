"""analysis.report without a browser: what the page holds for a CPU run, a reference sweep and two
runs compared, where it may be written, and that writing it never fails a run
(tests/test_report_browser.py loads the pages in Chromium)."""
from __future__ import annotations

import base64
import html
import re
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, compose_cfg, run_points

from analysis import report
from analysis.report import __main__ as report_cli
from gemmlab.report import write_report

REFERENCE = ROOT / "outputs" / "reference"
SWEEP = REFERENCE / "h200-2026-11-29" / "tune_warp_tiled"
CUBLAS_A, CUBLAS_B = (REFERENCE / d / "cublas_square" for d in ("h200-2026-11-29", "h200-2026-11-30"))
needs_reference = pytest.mark.skipif(not (SWEEP.is_dir() and CUBLAS_A.is_dir() and CUBLAS_B.is_dir()),
                                     reason="reference runs not in this checkout")


def table_rows(page: str, table_id: str) -> list:
    """The cells' text of each body row of one table."""
    body = page.split(f'id="{table_id}"', 1)[1].split("</tbody>", 1)[0]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)]


def images(page: str) -> list:
    return [base64.b64decode(b) for b in re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)]


def stands_alone(page: str) -> None:
    """Nothing the page would fetch: every src and href is a data: URL or a fragment."""
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(r.startswith(("data:image/png;base64,", "#")) for r in refs), \
        [r[:60] for r in refs if not r.startswith(("data:", "#"))]
    assert "http-equiv=\"Content-Security-Policy\"" in page and "default-src &#x27;none&#x27;" in page
    assert "@import" not in page and "url(" not in page


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """A CPU run with ok rows and GPU rows skipped, with the .hydra files run.py would keep."""
    tmp = tmp_path_factory.mktemp("report")
    overrides = ["variant=[cpu_blas,cublas]", "precision=fp32", "sizes=smoke", "measure=quick", "run.progress=false"]
    cfg = compose_cfg(overrides, tmp)
    folder = tmp / "run"
    _, rows = run_points(cfg, folder)
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    from omegaconf import OmegaConf

    OmegaConf.save(cfg, folder / ".hydra" / "config.yaml")
    return folder, rows


def test_the_page_of_a_cpu_run(cpu_run):
    folder, rows = cpu_run
    path = report.write(folder)
    assert path == folder / "report.html"
    page = path.read_text()
    stands_alone(page)
    ok = sum(r["status"] == "ok" for r in rows)
    skipped = sum(r["status"] == "skipped" for r in rows)
    assert ok == 3 and skipped >= 3
    assert f"{len(rows)} rows: ok {ok}, failed 0, skipped {skipped}, unreliable" in page
    cells = table_rows(page, "rows-table")
    assert len(cells) == len(rows)
    assert [c[4] for c in cells] == ["ok"] * ok + ["skipped"] * skipped  # measured first
    assert all(c[10].startswith("no CUDA device") for c in cells if c[0] == "cublas")
    assert all(float(c[5]) > 0 and c[2].count("×") == 2 for c in cells if c[4] == "ok")
    pngs = images(page)
    assert len(pngs) == 2 and all(p.startswith(b"\x89PNG\r\n\x1a\n") for p in pngs)
    assert "variant=[cpu_blas,cublas]" in page and "<b>measure</b>" in page
    assert path.stat().st_size < 2_000_000


@needs_reference
def test_a_reference_sweep_lists_each_jobs_overrides(tmp_path):
    page = report.write(SWEEP, out=tmp_path / "sweep.html").read_text()
    stands_alone(page)
    assert "8 rows: ok 8, failed 0, skipped 0" in page
    jobs = re.findall(r'<li id="run-(\d+)">(.*?)</li>', page, re.S)
    assert sorted(int(j) for j, _ in jobs) == list(range(8))
    overrides = {j: yaml.safe_load((SWEEP / j / ".hydra" / "overrides.yaml").read_text()) for j, _ in jobs}
    for j, item in jobs:
        assert all(html.escape(o) in item for o in overrides[j])
    cells = table_rows(page, "rows-table")
    assert sorted(c[0] for c in cells) == [str(j) for j in range(8)]  # the run column: each row's job


@needs_reference
@pytest.mark.slow
def test_two_runs_get_the_compare_verdicts(tmp_path):
    from analysis.compare import compare
    from analysis.compare.match import Side

    page = report.write(CUBLAS_A, CUBLAS_B, out=tmp_path / "c.html").read_text()
    stands_alone(page)
    comp = compare(Side.load("A", CUBLAS_A), Side.load("B", CUBLAS_B))
    for verdict, n in comp.counts().items():
        assert f">{verdict} {n}</span>" in page
    cells = table_rows(page, "compare-table")
    assert len(cells) == len(comp.table[comp.table["status"].isin(["compared", "not evidence"])])
    assert {c[1] for c in cells} <= {"SAME", "FASTER", "SLOWER", "UNSURE"}
    assert "h200-2026-11-29/cublas_square vs h200-2026-11-30/cublas_square" in page
    rows = table_rows(page, "rows-table")
    assert {c[0] for c in rows} == {"A", "B"}
    assert len(images(page)) == 5  # two figures a side and the comparison's


@needs_reference
def test_never_written_under_the_reference(capsys):
    with pytest.raises(ValueError, match="outputs/reference"):
        report.write(SWEEP)
    assert report_cli.main([str(SWEEP)]) == 2
    assert "--out" in capsys.readouterr().err
    assert not (SWEEP / "report.html").exists()
    assert report_cli.main([str(SWEEP / "nowhere")]) == 2


def test_a_failing_page_never_fails_the_run(cpu_run, monkeypatch, capsys):
    folder, _ = cpu_run

    def broken(*a, **k):
        raise RuntimeError("the figure broke\nover two lines")

    monkeypatch.setattr(report, "write", broken)
    assert write_report(folder) is None
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("gemmlab: warning: no report page") and "figure broke" in out[0]
    assert write_report(folder / "empty") is None and not capsys.readouterr().out  # no rows: nothing to say


def test_a_run_inside_the_reference_data_writes_no_page_and_says_so_quietly(capsys):
    """A GPU session writes its rows into outputs/reference/: the page goes nowhere there, and the
    run says so in one line that is not a warning."""
    assert write_report(SWEEP) is None
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "no report page inside outputs/reference/" in out[0] and "warning" not in out[0]
    assert not (SWEEP / "report.html").exists()


def test_gemmlab_imports_analysis_only_when_a_run_ends():
    """run.py and the sweep's callbacks reach analysis (and matplotlib) only inside write_report."""
    code = ("import sys, gemmlab.report, gemmlab.sweep.callbacks; "
            "print(sorted(m for m in ('analysis', 'matplotlib') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


def test_a_row_reliable_by_its_median_says_so():
    from analysis.report.rows_table import _reliable

    by_ci = '{"reliability": {"by": "median_ci", "median_ci": 0.0031, "noise": 0.04}}'
    assert _reliable(True, by_ci) == "yes (median ±0.31%)"
    assert _reliable(True, '{"timer": {}}') == _reliable(True, float("nan")) == "yes"
    assert _reliable(False, by_ci) == "no" and _reliable(None) == ""
