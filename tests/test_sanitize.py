"""measure.sanitize (gemmlab/sanitize.py) without a GPU: compute-sanitizer's report read into the
row, and a clear skip where it cannot run. The GPU side: tests/test_gpu_isolation.py."""
from __future__ import annotations

from conftest import compose_cfg

from gemmlab import sanitize
from gemmlab.points import expand

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at wrong_oob_row+0x1a0 in 85_wrong_oob_row.cu:17
=========     by thread (3,0,0) in block (0,15,0)
=========     Address 0x7f0000f42400 is out of bounds
=========
========= ERROR SUMMARY: 24 errors
"""


def test_the_report_gives_the_error_count_and_the_first_line():
    assert sanitize.parse(MEMCHECK) == (24, "Invalid __global__ write of size 4 bytes")
    assert sanitize.parse("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == (0, None)
    racecheck = "========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warnings)\n"
    assert sanitize.parse(racecheck) == (2, None)
    assert sanitize.parse("Traceback (most recent call last):\n  ...\n")[0] is None  # never ran to its summary


def test_a_point_is_skipped_with_the_reason_where_the_sanitizer_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(sanitize, "executable", lambda: None)
    cfg = compose_cfg(["variant=smem_tiled", "precision=fp32", "sizes.square=[256]", "sizes.shapes=[]",
                       "measure.sanitize=memcheck"], tmp_path)
    (p,) = expand(cfg)
    fields = sanitize.run_point(p, cfg, tmp_path)
    assert fields["status"] == "skipped" and fields["sanitize_tool"] == "memcheck"
    assert fields["reason"].startswith("measure.sanitize=memcheck: compute-sanitizer is not on the PATH")


def test_errors_fail_the_point_and_name_the_first(tmp_path, monkeypatch):
    import subprocess

    class Done:
        returncode, stdout, stderr = 99, MEMCHECK, ""

    monkeypatch.setattr(sanitize, "executable", lambda: "/bin/true")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: Done())
    cfg = compose_cfg(["variant=wrong_oob_row", "precision=fp32", "sizes.square=[1000]", "sizes.shapes=[]",
                       "measure.sanitize=memcheck"], tmp_path)
    (p,) = expand(cfg)
    fields = sanitize.run_point(p, cfg, tmp_path)
    assert fields["status"] == "failed" and fields["sanitize_errors"] == 24
    assert fields["reason"].startswith("compute-sanitizer memcheck: 24 errors, first: Invalid __global__ write")
    assert (tmp_path / "sanitize" / f"{p.key}.log").read_text() == MEMCHECK
