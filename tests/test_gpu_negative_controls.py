"""The negative controls on a GPU, through the whole harness: the check fails every one.

Every ``wrong_*`` variant (conf/variant/wrong_*.yaml, kernels/cuda/9[5-8]_wrong_*.cu) in each of
its precisions at 1024^3 must come back ``failed`` by the check itself: elements over their bound
(``check_elem_max`` > 1, ``check_elem_fail`` > 0) or NaN/Inf, not a compile or launch error. In
the same run cuBLAS at the same precisions and size must pass the same check (status ok), so the
controls do not pass by a check that fails everything.

The CPU side of this (where the failing elements are, and that the rest passes its bound) is
tests/test_negative_controls.py, in the host emulation.

Run on the GPU host: python -m pytest -m gpu tests/test_gpu_negative_controls.py
"""
from __future__ import annotations

import math

import pytest
from conftest import compose_cfg, run_points
from omegaconf import OmegaConf

from gemmlab.variants import files as variant_files

pytestmark = pytest.mark.gpu

CONTROLS = ("wrong_tile", "wrong_edge_row", "wrong_k_tail", "wrong_low_acc")
POSITIVE = "cublas"  # a correct kernel checked the same way in the same run
SIZE = 1024
QUICK = ["measure=quick", "measure.baseline=[]", "run.progress=false", "run.fail_on_error=false"]


def precisions_of(variant):
    return [str(p) for p in OmegaConf.load(variant_files()[variant]).precisions]


def _number(cell, default):
    return default if cell in (None, "") else float(cell)


def test_the_check_fails_every_negative_control_and_passes_cublas(tmp_path):
    precisions = sorted({p for v in CONTROLS for p in precisions_of(v)})
    assert set(precisions) <= set(precisions_of(POSITIVE)), precisions
    cfg = compose_cfg([f"variant=[{','.join(CONTROLS)},{POSITIVE}]", f"precision=[{','.join(precisions)}]",
                       f"sizes.square=[{SIZE}]", "sizes.shapes=[]", *QUICK], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")

    expected = {(v, p) for v in CONTROLS for p in precisions_of(v)} | {(POSITIVE, p) for p in precisions}
    got = {(r["variant"], r["precision"]) for r in rows}
    assert got == expected, f"missing rows {sorted(expected - got)}, unexpected {sorted(got - expected)}"

    problems = []
    for r in rows:
        where = f"{r['variant']} {r['precision']} {r['m']}x{r['n']}x{r['k']}"
        reason = r["reason"] or ""
        if r["variant"] == POSITIVE:
            if r["status"] != "ok":
                problems.append(f"{where} (the positive control): {r['status']}: {reason}")
            continue
        elem_max = _number(r["check_elem_max"], math.nan)
        elem_fail = int(_number(r["check_elem_fail"], 0))
        nonfinite = "NaN/Inf" in reason or "overflow" in reason
        if r["status"] != "failed":
            problems.append(f"{where}: status {r['status']} ({reason or 'no reason'}), "
                            f"check_elem_max {r['check_elem_max']!r}: the check passed a control")
        elif not (elem_fail > 0 and (elem_max > 1 or nonfinite)):
            problems.append(f"{where}: failed, but not by the element-wise check (check_elem_max "
                            f"{r['check_elem_max']!r}, check_elem_fail {r['check_elem_fail']!r}): {reason}")
    assert not problems, "\n".join(problems)
