"""The paired A/B mode: ``variant=B measure.baseline=[A]`` times A interleaved with B in one run,
and ``python -m analysis.compare --paired RUN`` compares the two calls of each row.

The run side is checked on the host (the baseline resolution; the timing itself needs a GPU);
the analysis side on synthetic runs written with the harness's own writers (gemmlab.rows,
gemmlab.samples), whose true ratios, clock drifts and offsets are known.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import compose_cfg

from gemmlab import rows as result_rows
from gemmlab import samples as sample_files
from gemmlab.runner import Runner


# -- the run side: which baselines a point is timed with ------------------------------------------
class _FakeGpuBackend:
    kind = "gpu"

    def skip_reason(self, point):
        return None


def _runner(tmp_path, overrides):
    runner = Runner(compose_cfg(["precision=fp32", "sizes=smoke", *overrides], tmp_path), tmp_path / "run")
    for name in ("cuda", "cublas", "cublaslt"):  # as on a GPU host: every backend can run
        runner._unavailable[name] = None
        runner._backends[name] = _FakeGpuBackend()
    return runner


def _point(runner, variant):
    return next(p for p in runner.points if p.variant == variant and not p.skip_reason)


def test_any_variant_is_a_baseline_but_never_its_own(tmp_path):
    runner = _runner(tmp_path, ["variant=[naive,smem_tiled]", "measure.baseline=[naive,cublas]",
                                "variant.naive.description=overridden"])
    tiled, naive = _point(runner, "smem_tiled"), _point(runner, "naive")
    got = runner.baselines_for(tiled, runner.backend("cuda"))
    assert [name for name, _p, _b in got] == ["naive", "cublas"]
    # the run's own config of a variant it also measures (its overrides), not the YAML's
    assert got[0][1].variant_cfg.description == "overridden"
    assert got[0][1].backend == "cuda" and got[0][1].variant == "naive"
    # naive's own points: cublas only; a variant timed against itself would share its call name
    assert [name for name, _p, _b in runner.baselines_for(naive, runner.backend("cuda"))] == ["cublas"]


def test_library_and_cpu_points_get_no_baseline(tmp_path):
    runner = _runner(tmp_path, ["variant=[cublas,cpu_blas]", "measure.baseline=[cublaslt]"])
    assert runner.baselines_for(_point(runner, "cublas"), runner.backend("cublas")) == []
    cpu = _point(runner, "cpu_blas")
    assert runner.baselines_for(cpu, runner.backend("cpu_blas")) == []
