"""Hopper stages on a GPU (`pytest -m gpu`): correct against FP64 at square, odd, tiny and
partial-tile sizes in bf16 and fp16 through the real runner, and the wgmma stages' machine code
holds HGMMA (the wgmma datapath), not HMMA.

Shapes are chosen to hit every edge of the kernels: partial tiles in M, N and K at once, K shorter
than one k-tile, M = 1, a single tile, many tiles per persistent CTA, fewer tiles than clusters, and
(for mma_sync only; the TMA stages skip them) rows that are not 16-byte aligned.

The wgmma stages run here with GEMMLAB_DEBUG=1: a barrier wait that never completes (a wrong byte
count, phase or descriptor) traps after ~10 s with a printf naming the block, thread and barrier,
instead of hanging the GPU. A trap poisons the CUDA context of the process, so run this file in a
pytest process of its own. Tests run in file order, simplest machinery first, so the first failure
points at the culprit: SASS, then wgmma_ws without clusters (no multicast), then everything.
"""
from __future__ import annotations

import pytest
from conftest import compose_cfg, run_points
from test_hopper_kernels import HOPPER_VARIANTS, build, opcodes, sass

pytestmark = pytest.mark.gpu

SQUARE = [64, 128, 256, 1024, 2048]
SHAPES = [
    [1000, 1000, 1000],  # odd sizes that are multiples of 8
    [8, 8, 8],  # far smaller than one tile
    [1, 8, 64],  # M = 1
    [129, 264, 72],  # one row / 8 columns / 8 k past a tile boundary
    [512, 4104, 40],  # K shorter than one k-tile
    [300, 1032, 4104],
    [4096, 4096, 4096],  # several tiles per persistent CTA (wgmma_ws)
    [8192, 256, 512],  # one tile column: the grouped raster's narrow case
    [256, 8192, 256],  # one cluster row, many columns
    [33, 65, 17],  # not 16-byte aligned: mma_sync's element path; skipped by the TMA stages
    [1023, 1023, 1023],
]


DEBUG = ["+variant.wgmma_tma.cuda.defines.GEMMLAB_DEBUG=1", "+variant.wgmma_ws.cuda.defines.GEMMLAB_DEBUG=1"]


def _run(tmp, variants, square, shapes, extra=()):
    cfg = compose_cfg([f"variant=[{','.join(variants)}]", "precision=[bf16,fp16]", "measure=quick",
                       "run.progress=false", "run.fail_on_error=false", "measure.baseline=[]",
                       *[d for d in DEBUG if any(f".{v}." in d for v in variants)], *extra], tmp)
    cfg.sizes.square = square
    cfg.sizes.shapes = shapes
    _, out = run_points(cfg, tmp / "run")
    return out


def _failures(rows):
    return [(r["variant"], r["precision"], _shape(r), r["status"], r["rel_error"], r["reason"])
            for r in rows if r["status"] not in ("ok", "skipped")]


def test_wgmma_stages_run_on_hgmma_and_mma_sync_on_hmma(tmp_path):
    for variant in HOPPER_VARIANTS:
        ops = opcodes(sass(build(variant, "bf16", tmp_path)[0]))
        hgmma = [x for x in ops if x.startswith("HGMMA")]
        hmma = [x for x in ops if x.startswith("HMMA")]
        if variant == "mma_sync":
            assert hmma and not hgmma, (variant, set(hgmma))
        else:
            assert hgmma and not hmma, (variant, set(hmma))
            assert all(".BF16" in x for x in hgmma), set(hgmma)


def test_wgmma_ws_without_clusters_is_correct(tmp_path):
    """Diagnostic: the same kernel with CLUSTER_M=1 (no multicast, no cluster barriers)."""
    rows = _run(tmp_path, ["wgmma_ws"], [128, 1024], [[129, 264, 72], [4096, 4096, 4096]],
                ["variant.wgmma_ws.cuda.defines.CLUSTER_M=1"])
    assert rows and not _failures(rows), _failures(rows)


def test_wgmma_ws_with_clusters_is_correct(tmp_path):
    """2-CTA clusters with B multicast and CTA-scope remote releases (MBAR_CLUSTER_SCOPE=0), at the
    edges a cluster adds: a second CTA whose tile is wholly (M = 1) or partly (M = 129) outside C,
    several tiles per cluster, one cluster row and one tile column."""
    rows = _run(tmp_path, ["wgmma_ws"], [128, 1024],
                [[1, 8, 64], [129, 264, 72], [300, 1032, 4104], [4096, 4096, 4096], [8192, 256, 512],
                 [256, 8192, 256]],
                ["variant.wgmma_ws.cuda.defines.CLUSTER_M=2", "variant.wgmma_ws.cuda.defines.MBAR_CLUSTER_SCOPE=0"])
    assert len(rows) == 2 * 8 and not _failures(rows), _failures(rows)


# Issue 32: the shapes for stage 12 at layouts nn and nt with each new define. On 132 SMs with
# GRID_CTAS 0 (66 clusters) the 4096 and 2048 x 6144 sizes leave the last wave partly idle, so
# stream-K cuts tiles there (two parts each, summed in the workspace, which the timed calls reuse);
# the others: partial tiles, one row, fewer tiles than clusters, one tile column, one cluster row.
NT_SHAPES = [[1, 8, 64], [129, 264, 72], [300, 1032, 4104], [2048, 6144, 1000], [4096, 4096, 4096],
             [8192, 256, 512], [256, 8192, 256]]
# The first runs the measured default's code (each role walks the tiles), the next the producer-only
# schedule (PRODUCER_SCHEDULES 1, which stream-K needs).
NT_DEFINES = ["{RASTER:0,STREAM_K:0,PRODUCER_SCHEDULES:0}", "{PRODUCER_SCHEDULES:1}", "{RASTER:1}", "{RASTER:2}",
              "{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0}", "{PRODUCER_SCHEDULES:1,STREAM_K:1,GRID_CTAS:0,RASTER:2}",
              "{MAP_PARAMS:0}"]  # the tensor maps in the device buffer (the defaults pass them by value)


@pytest.mark.parametrize("defines", NT_DEFINES)
def test_wgmma_ws_layout_nt_and_nn_with_each_new_define(tmp_path, defines):
    """Stage 12 reading B K-major (nt: stored N x K, no transpose bit) and N-major (nn), with each tile
    order and stream-K: every point must match FP64 before and after its timed calls."""
    rows = _run(tmp_path, ["wgmma_ws"], [], NT_SHAPES,
                ["layouts=[nn,nt]", f"variant.wgmma_ws.cuda.defines={defines}"])
    assert len(rows) == 2 * 2 * len(NT_SHAPES) and not _failures(rows), _failures(rows)
    assert {r["layout"] for r in rows} == {"nn", "nt"}
    assert all("B_KMAJOR=1" in r["kernel_name"] for r in rows if r["layout"] == "nt"), "nt ran the nn build"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("hopper"), HOPPER_VARIANTS, SQUARE, SHAPES)


def _shape(r):
    return int(r["m"]), int(r["n"]), int(r["k"])


def test_every_runnable_point_matches_fp64(rows):
    assert len(rows) == len(HOPPER_VARIANTS) * 2 * (len(SQUARE) + len(SHAPES))
    assert not _failures(rows), _failures(rows)


def test_only_sizes_tma_cannot_stride_are_skipped(rows):
    for r in rows:
        m, n, k = _shape(r)
        unaligned = n % 8 != 0 or k % 8 != 0
        should_skip = r["variant"] != "mma_sync" and unaligned
        assert (r["status"] == "skipped") == should_skip, (r["variant"], r["precision"], (m, n, k), r["reason"])


def test_kernel_build_facts_reach_the_rows(rows):
    ran = [r for r in rows if r["status"] == "ok"]
    assert {r["variant"] for r in ran} == set(HOPPER_VARIANTS)
    for r in ran:
        assert r["kernel_name"], r
        # The wgmma stages run here as GEMMLAB_DEBUG builds (extra device checks, which cost
        # wgmma_ws 24 bytes of spills at CLUSTER_M=1); the timed builds' no-spill rule is the
        # YAML's no_spill, checked on every build in tests/test_hopper_kernels.py.
        if r.get("spill_bytes") not in (None, "") and "GEMMLAB_DEBUG" not in (r.get("kernel_name") or ""):
            assert float(r["spill_bytes"]) == 0, (r["variant"], r["spill_bytes"])
