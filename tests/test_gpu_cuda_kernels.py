"""The hand-written CUDA stages on a GPU, through the whole harness (compose_cfg + run_points).

- every default-sweep ``cuda`` variant passes its FP64 check at odd, rectangular and GEMV-like
  sizes (status ok), or is skipped by its own ``requires`` with the reason;
- the ``smem_tiled_nosync`` pitfall is caught: its error moves between repeated runs on the same
  inputs, or compute-sanitizer's racecheck reports a shared-memory hazard (and neither happens
  for ``smem_tiled``, which keeps its second barrier);
- the column-read pitfall and its padded twin compute the same correct product, the padded one
  faster.

Run on the GPU host: python -m pytest -m gpu tests/test_gpu_cuda_kernels.py
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, compose_cfg, run_points
from omegaconf import OmegaConf

from gemmlab.variants import files as variant_files

pytestmark = pytest.mark.gpu

SQUARE = [1000, 1023, 4097]
SHAPES = [[33, 65, 17], [4096, 1, 4096], [1, 4096, 4096], [4096, 16, 4096], [1024, 1536, 2048],
          [8192, 1024, 1024]]
QUICK = ["measure=quick", "measure.baseline=[]", "run.progress=false"]


def default_cuda_variants():
    from gemmlab import variants  # its YAML reads are cached: collection reads each file once

    return [(v.name, list(v.precisions)) for v in variants.all_info()
            if v.backend == "cuda" and v.in_default_sweep]


def declared(variant):
    """Overrides that run ``variant`` where it runs at all: its declared layouts (stage 13 reads
    B K-major: layout nt only) and, for FP8, per-tensor scales as the stage is measured."""
    node = OmegaConf.load(variant_files()[variant])
    out = [f"layouts=[{','.join(node.layouts)}]"] if node.get("layouts") else []
    return out + (["measure.fp8_scaling=tensor"] if "fp8" in list(node.get("precisions", [])) else [])


def sizes_overrides(square, shapes):
    return [f"sizes.square=[{','.join(map(str, square))}]",
            "sizes.shapes=[" + ",".join(f"[{m},{n},{k}]" for m, n, k in shapes) + "]"]


@pytest.mark.slow
@pytest.mark.parametrize("variant,precisions", default_cuda_variants(), ids=[v for v, _ in default_cuda_variants()])
def test_default_stage_passes_the_fp64_check_at_odd_and_rectangular_sizes(variant, precisions, tmp_path):
    cfg = compose_cfg([f"variant={variant}", f"precision=[{','.join(precisions)}]",
                       *sizes_overrides(SQUARE, SHAPES), *QUICK, *declared(variant)], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    layouts = OmegaConf.load(variant_files()[variant]).get("layouts") or ["nn"]  # declared(): each one runs
    assert len(rows) == len(precisions) * len(layouts) * (len(SQUARE) + len(SHAPES))
    ran = 0
    for r in rows:
        where = f"{r['variant']} {r['precision']} {r['m']}x{r['n']}x{r['k']}"
        if r["status"] == "skipped":
            assert "(requires" in (r["reason"] or ""), f"{where} skipped for another reason: {r['reason']}"
            continue
        assert r["status"] == "ok", f"{where}: {r['status']}: {r['reason']} (rel_error {r['rel_error']})"
        assert float(r["rel_error"]) <= float(r["tolerance"])
        assert int(r["registers"]) > 0 and r["kernel_name"].startswith(cfg.variant[variant].cuda.entry)
        ran += 1
    assert ran >= len(precisions) * 3, f"{variant} ran at only {ran} shapes"


def _check_spread(variant, tmp_path, repeats=8, n=2048):
    cfg = compose_cfg([f"variant={variant}", "precision=fp32", *sizes_overrides([n], []), *QUICK,
                       f"measure.check_repeats={repeats}"], tmp_path)
    _, rows = run_points(cfg, tmp_path / variant)
    (row,) = rows
    return row, json.loads(row["extra"] or "{}")


RACECHECK_SCRIPT = textwrap.dedent("""
    import sys
    sys.path[:0] = [{root!r}, {tests!r}]
    import cupy as cp, numpy as np
    from conftest import compose_cfg
    from gemmlab.points import expand
    from gemmlab.backends.cuda_kernels import CudaKernels
    cfg = compose_cfg(["variant={variant}", "precision=fp32", "sizes.square=[128]", "sizes.shapes=[]",
                       "paths.cache={cache}"])
    (p,) = expand(cfg)
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.standard_normal((p.m, p.k), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((p.k, p.n), dtype=np.float32))
    c = cp.empty((p.m, p.n), dtype=cp.float32)
    backend = CudaKernels(cfg)
    backend.prepare([p])
    backend.make_launch(p, a, b, c).fn()
    cp.cuda.runtime.deviceSynchronize()
    print("launched", p.variant)
""")


def racecheck_hazards(variant, tmp_path):
    """Hazards compute-sanitizer --tool racecheck reports for one launch at 128^3 (None: no tool)."""
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        return None, "compute-sanitizer not on PATH"
    script = tmp_path / f"race_{variant}.py"
    script.write_text(RACECHECK_SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), variant=variant,
                                              cache=str(tmp_path / "cache")))
    r = subprocess.run([tool, "--tool", "racecheck", sys.executable, str(script)], capture_output=True, text=True,
                       timeout=900)
    out = r.stdout + r.stderr
    assert f"launched {variant}" in out, f"racecheck run of {variant} did not launch:\n{out[-3000:]}"
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed", out)
    hazards = int(m.group(1)) if m else len(re.findall(r"Race reported", out))
    return hazards, out


@pytest.mark.slow
def test_smem_tiled_nosync_is_caught(tmp_path):
    row, spread = _check_spread("smem_tiled_nosync", tmp_path)
    varies = spread.get("rel_error_distinct", 1) > 1
    hazards, out = (None, "") if varies else racecheck_hazards("smem_tiled_nosync", tmp_path)
    assert varies or (hazards or 0) > 0, (
        f"smem_tiled_nosync was not caught: status {row['status']}, rel_error over "
        f"{spread.get('check_repeats')} runs {spread.get('rel_error_min')}..{spread.get('rel_error_max')}; "
        f"racecheck hazards: {hazards}\n{out[-2000:]}")


@pytest.mark.slow
def test_smem_tiled_with_both_barriers_is_deterministic_and_race_free(tmp_path):
    """The control for the test above: the same kernel with its second barrier."""
    row, spread = _check_spread("smem_tiled", tmp_path)
    assert row["status"] == "ok", row["reason"]
    assert spread.get("rel_error_distinct") == 1, spread
    hazards, out = racecheck_hazards("smem_tiled", tmp_path)
    if hazards is None:
        pytest.skip(out)
    assert hazards == 0, out[-3000:]


@pytest.mark.slow
def test_racecheck_reports_the_missing_barrier(tmp_path):
    hazards, out = racecheck_hazards("smem_tiled_nosync", tmp_path)
    if hazards is None:
        pytest.skip(out)
    assert hazards > 0, out[-3000:]


@pytest.mark.slow
def test_column_read_and_its_padded_twin_agree_and_padding_is_faster(tmp_path):
    cfg = compose_cfg(["variant=[smem_tiled_colread,smem_tiled_colread_padded]", "precision=fp32",
                       *sizes_overrides([2048], [[1000, 1023, 97]]), *QUICK], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    assert all(r["status"] == "ok" for r in rows), [(r["variant"], r["reason"]) for r in rows]
    t = {r["variant"]: float(r["time_median_s"]) for r in rows if r["m"] == "2048"}
    # 32-way conflicts serialise every read of the column; the padded tile reads it in one pass
    assert t["smem_tiled_colread"] > 1.5 * t["smem_tiled_colread_padded"], t
