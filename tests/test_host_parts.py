"""The parts of the GPU-side modules that run on any host, so the fast tier (`-m "not slow"`, see
tests/fast_tier_coverage.py) runs code in them: the ranking arithmetic of the kernel searches, the
bfloat16 casts of gemmlab.gpu.arrays (with NumPy standing in for CuPy), each probe's skip rules,
the helpers of the benchmark scripts, and `python -m analysis.claims` in this process.
What needs a device (a probe's run, a search, the ncu child) is tested on the GPU host.
"""
from __future__ import annotations

import runpy
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from gemmlab.measure import ranking
from gemmlab.backends.probes import boundary, memory, mma, transfer
from gemmlab.bench import cpu_overhead, fidelity, multi_gpu
from gemmlab.gpu import arrays


def test_ranking_arithmetic():
    assert ranking.first_line(RuntimeError("launch failed\nmore")) == "launch failed"
    assert ranking.first_line(KeyError()) == "KeyError"
    assert ranking.reps_for(1.0) == 1 and ranking.reps_for(0.0) == ranking.SEARCH_MAX_REPS
    assert ranking.reps_for(ranking.SEARCH_SAMPLE_S / 4) == 4
    summary = ranking.rank_summary([3e-3, 1e-3, 2e-3], flops=2e9, reps=5)
    assert summary == {"rank_time_median_s": 2e-3, "rank_tflops": pytest.approx(1.0), "samples": 3,
                       "launches_per_sample": 5}


def test_bfloat16_casts_round_to_nearest_even_and_poison_is_nan():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.0, 1.00390625, 1.01171875, -3.5, np.nan, 1e38], dtype=np.float32)
    bf = arrays._bf16_from_f32(np, x)  # the fallback CuPy takes without a bfloat16 dtype
    assert bf.dtype == ml_dtypes.bfloat16
    expected = x.astype(ml_dtypes.bfloat16)
    assert np.array_equal(bf.view(np.uint16)[:4], expected.view(np.uint16)[:4])
    assert bf.view(np.uint16)[4] == 0x7FC0  # a quiet NaN
    back = arrays._f32_from_bf16(np, bf)
    assert np.array_equal(back[:4], expected.astype(np.float32)[:4])
    assert arrays.to_float64(np, arrays.cast(np, x, "bfloat16")).dtype == np.float64
    c = arrays.empty(np, (2, 3), "bfloat16")
    arrays.poison(np, c)
    assert np.isnan(c.astype(np.float32)).all()


def _point(m, n, k, compute="fp32"):
    return SimpleNamespace(m=m, n=n, k=k, compute=compute)


def test_each_probe_says_which_points_it_cannot_run():
    assert memory.Copy().skip(_point(4096, 1, 1), {}) is None
    assert "vector probe" in memory.Copy().skip(_point(64, 64, 64), {})
    assert "vector probe" in memory.Copy().skip(_point(64, 1, 48), {})
    assert "not fp16" in memory.VecAdd().skip(_point(4096, 1, 1, "fp16"), {})
    assert memory.Gemv().skip(_point(64, 1, 48), {}) is None
    assert "[m, 1, k]" in memory.Gemv().skip(_point(64, 1, 1), {})
    assert mma.MmaSyncPeak().skip(_point(1, 1, 1, "bf16"), {}) is None
    assert "[1, 1, 1]" in mma.MmaSyncPeak().skip(_point(8, 8, 8, "bf16"), {})
    assert boundary.Sgemm32Unguarded().skip(_point(64, 64, 64), {"grid": "ceil"}) is None
    assert "floor or ceil" in boundary.Sgemm32Unguarded().skip(_point(64, 64, 64), {"grid": "round"})
    assert transfer.Transfer().skip(_point(64, 64, 64), {"memory": "pinned"}) is None
    assert "pageable or pinned" in transfer.Transfer().skip(_point(64, 64, 64), {"memory": "mapped"})
    no_nvml = SimpleNamespace(nvml=SimpleNamespace(ok=False))
    assert transfer._nvml_clock(no_nvml) is None


def test_benchmark_script_helpers(tmp_path):
    assert fidelity.timer_overrides("flush_discard=false, flush_bytes=do_bench", 256) == [
        "measure.flush_discard=false", "measure.flush_bytes=256"]
    assert fidelity.timer_overrides("") == []
    assert multi_gpu._float("1.5") == 1.5 and multi_gpu._float("nan") is None and multi_gpu._float("x") is None
    assert multi_gpu.read_rows(tmp_path / "missing.csv") == []
    recs = [{"job": "0", "gpu": "0", "claimed_at": 0.0, "ended_at": 2.0, "gpu_index": 0, "row_gpu_indices": ["0"]},
            {"job": "1", "gpu": "0", "claimed_at": 1.0, "ended_at": 3.0, "gpu_index": 0, "row_gpu_indices": ["1"]}]
    ex = multi_gpu.exclusivity(recs)
    assert ex["jobs_per_gpu"] == {"0": 2} and ex["overlaps"] == [{"gpu": "0", "jobs": ["0", "1"]}]
    assert ex["jobs_whose_rows_name_another_gpu"] == ["1"]
    assert cpu_overhead.bare_loop_gflops(32, calls=2) > 0


def test_claims_module_runs_as_a_script_without_rows(tmp_path, monkeypatch, capsys):
    """`python -m analysis.claims` on a folder without rows: exit code 2 and a line saying so."""
    monkeypatch.setattr(sys, "argv", ["analysis.claims", str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        runpy.run_module("analysis.claims", run_name="__main__", alter_sys=True)
    assert stop.value.code == 2
    assert "analysis.claims" in capsys.readouterr().err


def test_the_sampler_reports_the_memory_clock_beside_the_sm_clock():
    """Each NVML reading carries the memory clock; a window's rows get its range, and a device whose
    NVML cannot read it (NaN) leaves the columns empty rather than failing."""
    from gemmlab.measure import nvml as nv

    class Fake:
        ok = True

        def __init__(self, mem):
            self.mem = mem

        def read(self):
            return 1980.0, 500.0, 50.0, self.mem.pop(0) if self.mem else float("nan")

        def foreign(self):
            return []

    s = nv.Sampler(Fake([2619.0, 1593.0, 2619.0]))
    s.readings = [(float(t), *s.nvml.read()) for t in range(3)]
    f = s.window([(0.0, 2.0)]).fields(1980.0, 0.9, 0.02)
    assert (f["mem_clock_min_mhz"], f["mem_clock_max_mhz"]) == (1593.0, 2619.0)
    assert f["sm_clock_min_mhz"] == f["sm_clock_max_mhz"] == 1980.0
    s = nv.Sampler(Fake([]))
    s.readings = [(0.0, *s.nvml.read())]
    f = s.window([(0.0, 1.0)]).fields(1980.0, 0.9, 0.02)
    assert f["mem_clock_min_mhz"] is None and f["mem_clock_max_mhz"] is None
    from gemmlab.rows import COLUMN_NAMES
    assert {"mem_clock_min_mhz", "mem_clock_max_mhz"} <= set(COLUMN_NAMES)


def test_the_sampler_lists_the_gpus_processes_before_the_samples_not_beside_them():
    """The first reading and process list run on the caller's thread inside ``with Sampler(...)``, before it
    queues a sample; the thread's later readings list processes every PROCESS_EVERY readings."""
    import threading
    import time

    from gemmlab.measure import nvml as nv

    class Fake:
        ok = True

        def __init__(self):
            self.listed, self.read_by = [], []

        def read(self):
            self.read_by.append(threading.current_thread().name)
            return 1980.0, 500.0, 50.0, 2619.0

        def foreign(self):
            self.listed.append(threading.current_thread().name)
            return [4242]

    fake = Fake()
    s = nv.Sampler(fake, period_s=0.001)
    with s:
        me = threading.current_thread().name
        assert fake.listed[0] == fake.read_by[0] == me and me not in fake.read_by[1:] + fake.listed[1:]
        assert s.foreign == {4242}
        deadline = time.monotonic() + 5
        while len(fake.listed) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert fake.listed[1] == "nvml-sampler" and len(s.readings) >= nv.Sampler.PROCESS_EVERY + 1
