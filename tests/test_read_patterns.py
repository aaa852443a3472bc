"""The decode read-pattern probe (gemmlab/bench/read_patterns.py) without a GPU: its kernels build for
sm_90 in every configuration's defines, and its work split gives every warp an item."""
from __future__ import annotations

import subprocess

import pytest

from gemmlab.backends import nvcc
from gemmlab.bench import read_patterns as rp


def test_split_gives_every_warp_an_item_within_the_limit():
    assert rp.split_for(6144, 132 * 32, 16) == 1  # more rows than warps: no split
    assert rp.split_for(192, 1056, 64) == 6       # 192 units x 6 >= 1056 warps
    assert rp.split_for(10, 1056, 4) == 4         # capped by the chunks a row has
    assert 192 * rp.split_for(192, 1056, 64) >= 1056


def test_configs_cover_every_pattern_and_keep_registers_in_bounds():
    cs = rp.configs()
    assert {c["pattern"] for c in cs} == {"contig", "rowwarp", "tile"}
    assert {c["ORDER"] for c in cs if c["pattern"] == "tile"} == {0, 1}
    assert all(c["MT"] * c["D"] <= 8 for c in cs)


@pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found on this machine")
@pytest.mark.parametrize("defines", [dict(U=8, MT=1, D=1, ORDER=0), dict(U=1, MT=2, D=4, ORDER=1)])
def test_kernels_build_for_sm90_without_spills(defines, tmp_path):
    src = tmp_path / "rp.cu"
    src.write_text(rp.SRC)
    cmd = [nvcc.find_nvcc(), "-arch=sm_90", "-cubin", "-o", str(tmp_path / "rp.cubin"), "-Xptxas", "-v",
           f"-DRP_THREADS={rp.THREADS}", *(f"-DRP_{k}={v}" for k, v in defines.items()), str(src)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("Compiling entry function") == 3, out.stderr
    assert "0 bytes spill stores" in out.stderr and " bytes spill stores" in out.stderr
    assert all(s.startswith("0 bytes") for s in (ln.strip() for ln in out.stderr.splitlines()) if "spill stores" in s)


def test_resident_blocks_by_registers():
    assert rp.resident_blocks(32) == 8    # 2048 threads: the thread limit
    assert rp.resident_blocks(64) == 4
    assert rp.resident_blocks(178) == 1   # 184 per thread after rounding: 47 K of 64 K
    assert rp.resident_blocks(255) == 1
