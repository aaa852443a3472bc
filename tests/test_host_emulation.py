"""The host emulation's own parts (kernels/cuda/common/host_emulation), apart from any kernel: its
number conversions, decoded field by field or from tables for speed, equal an independent
implementation (NumPy's float16, ml_dtypes' float8_e4m3fn) on every input."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from test_cuda_kernels import EMULATION

NEEDS_GXX = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found (host emulation)")

# Writes every half (as float32) and every e4m3 byte (as float32) decoded by the emulation's headers.
CONVERSIONS = r"""
#include <cstdio>
#include "cuda_fp16.h"
#include "cuda_fp8.h"
int main(int, char** argv) {
    static float out[65536 + 256];
    for (unsigned i = 0; i < 65536; ++i) out[i] = __half2float(__half{static_cast<std::uint16_t>(i)});
    for (unsigned i = 0; i < 256; ++i) out[65536 + i] = gemm_host_e4m3_to_float(static_cast<std::uint8_t>(i));
    FILE* f = std::fopen(argv[1], "wb");
    return f && std::fwrite(out, sizeof(float), 65536 + 256, f) == 65536 + 256 && std::fclose(f) == 0 ? 0 : 1;
}
"""


@NEEDS_GXX
@pytest.mark.slow
def test_half_and_e4m3_decode_every_value_as_numpy_does(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    (tmp_path / "conv.cpp").write_text(CONVERSIONS)
    exe = tmp_path / "conv"
    subprocess.run(["g++", "-std=c++20", "-O1", f"-I{EMULATION}", str(tmp_path / "conv.cpp"), "-o", str(exe)], check=True)
    subprocess.run([str(exe), str(tmp_path / "out.bin")], check=True)
    out = np.fromfile(tmp_path / "out.bin", dtype=np.float32)
    half = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    e4m3 = np.arange(256, dtype=np.uint32).astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    # bit for bit where a number (signed zeros, subnormals included); NaN where NaN
    for got, want, what in ((out[:65536], half, "half"), (out[65536:], e4m3, "e4m3")):
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), what
        bad = np.flatnonzero(got[~nan].view(np.uint32) != want[~nan].view(np.uint32))
        assert bad.size == 0, f"{what}: {bad.size} values differ, first input {np.flatnonzero(~nan)[bad[0]]:#x}"


# Warp 0's thread 0 waits at __syncthreads for threads that wait at a warp collective for it.
DEADLOCK = r"""
__global__ void stuck(const float*, const float*, float* C, int, int, int) {
    if (threadIdx.x == 0) __syncthreads();
    else if (threadIdx.x < 32) __syncwarp();
    if (threadIdx.x == 0) C[0] = 1.0f;
}
"""


@NEEDS_GXX
@pytest.mark.slow
def test_a_deadlocked_block_aborts_naming_the_waits_instead_of_hanging(tmp_path, tmp_path_factory):
    """The threads are fibers (driver.cpp): a pass over the block in which no thread gets past its
    wait ends the run at once with the waits named, where OS threads would wait forever."""
    from test_cuda_kernels import emulator_command

    (tmp_path / "stuck.cu").write_text(DEADLOCK)
    exe = tmp_path / "stuck"
    cmd = emulator_command(str(tmp_path_factory.getbasetemp()), ["-DTIN=float", "-DTOUT=float"], tmp_path / "stuck.cu", "stuck")
    subprocess.run([*cmd, "-o", str(exe)], check=True)
    np.zeros(1, dtype=np.float32).tofile(tmp_path / "a.bin")
    run = [str(exe), "1", "1", "1", "1", "1", "1", "64", "1", "1", "0", *(str(tmp_path / f) for f in ("a.bin", "a.bin", "c.bin"))]
    r = subprocess.run(run, capture_output=True, text=True, timeout=60, env={"ASAN_OPTIONS": "detect_leaks=0"})
    assert r.returncode != 0 and "deadlock in block (0, 0, 0)" in r.stderr, r.stderr[-2000:]
    assert "thread 0 waits on __syncthreads" in r.stderr and "thread 1 waits on __syncwarp" in r.stderr, r.stderr
