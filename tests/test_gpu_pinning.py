"""One job per GPU (gemmlab.sweep.pinning, hydra/launcher=per_gpu).

The claim logic and the launcher run on the CPU with pretend GPUs (CUDA_VISIBLE_DEVICES=0,1): the
jobs measure CPU points, and their gpu_claim.json records show which GPU each held and when. The
gpu test checks, on a GPU host, that rows name the physical GPU of a pinned process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gemmlab.gpu import identity
from gemmlab.sweep import pinning as gpu_pinning

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    d = tmp_path / "locks"
    monkeypatch.setenv(gpu_pinning.LOCK_DIR_ENV, str(d))
    return d


def test_gpu_lists():
    assert identity.parse_visible(None) is None
    assert identity.parse_visible("") == []
    assert identity.parse_visible("0, 2,") == ["0", "2"]
    assert identity.as_gpu_list(2) == ["0", "1"]
    assert identity.as_gpu_list([1, "GPU-ab"]) == ["1", "GPU-ab"]
    assert identity.as_gpu_list("3") == ["3"]
    with pytest.raises(ValueError):
        identity.as_gpu_list(True)


def test_claims_are_exclusive_and_wait_for_a_free_gpu(lock_dir):
    a = gpu_pinning.claim_gpu(["0", "1"], poll_s=0.05)
    b = gpu_pinning.claim_gpu(["0", "1"], poll_s=0.05)
    try:
        assert {a.entry, b.entry} == {"0", "1"}
        with pytest.raises(TimeoutError):
            gpu_pinning.claim_gpu(["0", "1"], poll_s=0.05, timeout_s=0.3)
        freed = a.entry
        a.release()
        c = gpu_pinning.claim_gpu(["0", "1"], poll_s=0.05, timeout_s=5)
        assert c.entry == freed
        c.release()
    finally:
        a.release()
        b.release()


def test_a_killed_job_frees_its_gpu(lock_dir):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from gemmlab.sweep import pinning as g; "
         "claim = g.claim_gpu(['0']); print('claimed', flush=True); time.sleep(60)"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        with pytest.raises(TimeoutError):
            gpu_pinning.claim_gpu(["0"], poll_s=0.05, timeout_s=0.3)
        holder.send_signal(signal.SIGKILL)  # as Slurm or the OOM killer would: no cleanup runs
        holder.wait(timeout=10)
        claim = gpu_pinning.claim_gpu(["0"], poll_s=0.05, timeout_s=5)
        claim.release()
    finally:
        if holder.poll() is None:
            holder.kill()


def test_pin_process_sets_the_environment(monkeypatch):
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", gpu_pinning.INDEX_ENV, gpu_pinning.UUID_ENV):
        monkeypatch.delenv(var, raising=False)
    # Without NVML (no UUID known) the entry itself, in nvidia-smi's order.
    gpu_pinning.pin_process(gpu_pinning.GpuClaim("1", 1, None, Path("/dev/null"), 0.0))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert identity.physical_index_from_env(0) == 1
    # With the UUID NVML gave for index 1: pinned by UUID, the index kept for the rows.
    gpu_pinning.pin_process(gpu_pinning.GpuClaim("1", 1, "GPU-x", Path("/dev/null"), 0.0))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-x"
    assert os.environ[gpu_pinning.INDEX_ENV] == "1" and os.environ[gpu_pinning.UUID_ENV] == "GPU-x"
    assert identity.physical_index_from_env(0) == 1


@pytest.mark.slow
def test_per_gpu_launcher_runs_one_job_per_gpu_at_a_time(tmp_path, lock_dir):
    """Four jobs may use (pretend) GPUs 0 and 1, but this test holds GPU 0 meanwhile: all four
    start at once, each waits for GPU 1, and they run on it strictly one after another."""
    sweep = tmp_path / "sweep"
    # keep the caller's PYTHONPATH: on a GPU host the dependencies may live only there
    pythonpath = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env = {**os.environ, "PYTHONPATH": pythonpath, "CUDA_VISIBLE_DEVICES": "0,1"}
    cmd = [sys.executable, "run.py", "-m", "hydra/launcher=per_gpu", f"hydra.sweep.dir={sweep}",
           "variant=cpu_blas", "precision=fp32,fp64", "sizes=smoke", "sizes.shapes=[]",
           "sizes.square=[64],[80]", "measure=quick", "measure.threads=1", "measure.warmup_s=0.05",
           "measure.min_time_s=0.5", "measure.max_time_s=0.5", "measure.max_samples=100000000",
           "run.progress=false", "run.report=false"]  # the sweep's page: tests/test_cpu_run.py
    held = gpu_pinning.claim_gpu(["0"])
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    finally:
        held.release()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    claims = [json.loads((sweep / str(j) / gpu_pinning.CLAIM_FILE).read_text()) for j in range(4)]
    for c in claims:
        assert c["gpu"] == "1", f"a job ran on GPU {c['gpu']}, which another process held"
        # pinned by UUID where NVML knows GPU 1 (a GPU host), else by index
        assert c["cuda_visible_devices"] in {"1", c["gpu_uuid"]}, "the job was not pinned to its GPU"
        assert c["ended_at"] > c["claimed_at"]
    spans = sorted((c["claimed_at"], c["ended_at"]) for c in claims)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, f"two jobs held GPU 1 at the same time: {spans}"
    assert len(read_rows(sweep / "results.csv")) == 4


def read_rows(path: Path):
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.gpu
def test_gpu_identity_names_the_physical_gpu():
    """In a process pinned to GPU i, gpu_identity() says index i and NVML's UUID of GPU i."""
    pynvml = pytest.importorskip("pynvml")
    pynvml.nvmlInit()
    gpus = identity.host_gpus()
    assert gpus, "NVML sees no GPU on a host where CuPy sees one"
    code = ("import json; from gemmlab.gpu import identity as g; import cupy; "
            "p = cupy.cuda.runtime.getDeviceProperties(0); "
            "print(json.dumps({**g.gpu_identity(), 'cupy_uuid_len': len(p.get('uuid') or b'')}))")
    for i in gpus:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "CUDA_VISIBLE_DEVICES": i, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        ident = json.loads(out.stdout.strip().splitlines()[-1])
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(int(i)))
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        assert ident["gpu_index"] == int(i), ident
        assert ident["gpu_uuid"] == uuid, ident


@pytest.mark.gpu
def test_pinning_before_cuda_starts_selects_that_gpu(lock_dir):
    """Claim and pin the host's last GPU in a fresh process, then start CUDA: it runs there."""
    pytest.importorskip("pynvml")
    last = identity.host_gpus()[-1]
    code = ("import json; from gemmlab.sweep import pinning as g; from gemmlab.gpu.identity import gpu_identity; "
            f"c = g.claim_gpu([{last!r}]); g.pin_process(c); import cupy; "
            "print(json.dumps({**gpu_identity(), 'count': cupy.cuda.runtime.getDeviceCount()}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ident = json.loads(out.stdout.strip().splitlines()[-1])
    assert ident["count"] == 1 and ident["gpu_index"] == int(last), ident
