"""The isolation worker's in-process parts (the rest runs in the worker's own process, where the fast
tier's coverage does not follow): which CUDA errors are sticky, how a worker target is named, and how
the isolation benchmark reads and keys its rows."""
from __future__ import annotations

import pytest

from gemmlab.bench import isolation
from gemmlab.measure.worker import child, faults


@pytest.mark.parametrize("text, says", [
    ("CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered",
     "illegal memory access (cudaErrorIllegalAddress)"),
    ("CUDADriverError: CUDA_ERROR_ASSERT: device-side assert triggered", "device-side assert or trap (cudaErrorAssert)"),
    ("CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
     "unspecified launch failure (cudaErrorLaunchFailure)"),
])
def test_sticky_errors_are_named_by_the_runtime_or_the_driver(text, says):
    assert faults.sticky_error(text) == says


def test_a_recoverable_error_is_not_sticky():
    assert faults.sticky_error("cudaErrorMemoryAllocation: out of memory") is None
    assert faults.sticky_error("CUDA_ERROR_INVALID_VALUE: invalid argument") is None


def test_a_worker_target_is_module_colon_function():
    assert child.load("gemmlab.measure.worker.faults:sticky_error") is faults.sticky_error
    with pytest.raises(ValueError, match="not 'module:function'"):
        child.load("gemmlab.measure.worker.faults")


def test_the_isolation_benchmark_reads_and_keys_its_rows(tmp_path):
    assert isolation.read(tmp_path / "missing.csv") == []
    f = tmp_path / "results.csv"
    f.write_text("variant,precision,m,n,k,status\nwmma_tiled,fp16,2048,2048,2048,ok\nwrong_fault,bf16,4096,4096,4096,failed\n")
    rows = isolation.read(f)
    assert [isolation.key(r) for r in rows] == [("wmma_tiled", "fp16", 2048, 2048, 2048),
                                                 ("wrong_fault", "bf16", 4096, 4096, 4096)]
    assert rows[1]["status"] == "failed"
