"""What one run leaves for the next in the same process (a sweep's jobs in a shared worker, or in the
launcher's process with run.isolate=none). The GPU executor frees its timer's flush buffer and
stream when its run ends (close), and nothing keeps it alive in a reference cycle until Python's
cyclic GC gets to it; cuBLAS runs on one handle per device for the process, not one per run's
backend. Why: h100-2026-12-06/session39 (cuBLAS at 2048 ran 2-3% slower as a sweep's second job,
and in line when each job had a process of its own; freeing the executor alone left it, session39c)."""
from __future__ import annotations

import gc
import sys
import types
import weakref

from omegaconf import OmegaConf

from conftest import compose_cfg
from gemmlab import measuring
from gemmlab.config import GemmlabConf
from gemmlab.measure import gpu
from gemmlab.points import expand


class _Stream:
    def __init__(self, non_blocking=False):
        self.synced = 0

    def synchronize(self):
        self.synced += 1


class _Pool:
    freed = 0

    def free_all_blocks(self):
        _Pool.freed += 1


def _fake_gpu(monkeypatch):
    """A GpuExecutor that initialises without a GPU: cupy, the device info, NVML and the timer faked."""
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=_Stream),
                                 get_default_memory_pool=lambda: _Pool())
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(gpu, "info", lambda: {"l2_bytes": 1 << 20, "pci_bus_id": "0000:00:00.0"})
    import gemmlab.gpu.identity as identity
    import gemmlab.measure.nvml as nvml
    import gemmlab.measure.timer as timer

    monkeypatch.setattr(nvml, "Nvml", lambda bus: object())
    monkeypatch.setattr(identity, "gpu_identity", lambda: {})

    class Timer:
        def __init__(self, measure, stream, l2_bytes, sampler_factory):
            self.sampler_factory = sampler_factory

    monkeypatch.setattr(timer, "GpuTimer", Timer)


def test_the_timer_does_not_keep_its_executor_alive(monkeypatch):
    _fake_gpu(monkeypatch)
    ex = gpu.GpuExecutor(compose_cfg([]))
    ex._init()
    gone = weakref.ref(ex)
    gc.disable()
    try:
        del ex  # reference counting alone must free it: no cycle through the timer
        assert gone() is None, "the GPU executor sits in a reference cycle: only the cyclic GC frees it"
    finally:
        gc.enable()


def test_close_frees_the_device_state_and_a_later_point_initialises_again(monkeypatch):
    _fake_gpu(monkeypatch)
    ex = gpu.GpuExecutor(compose_cfg([]))
    ex.close()  # never initialised: nothing to free
    assert _Pool.freed == 0
    ex._init()
    stream = ex.stream
    ex.close()
    assert stream.synced == 1 and ex.timer is None and ex.stream is None and _Pool.freed == 1
    ex.close()  # twice is harmless
    assert _Pool.freed == 1
    ex._init()
    assert ex.timer is not None and ex.stream is not None


class _Measurer:
    made = []

    def __init__(self, cfg, watch=None):
        self.closed = 0
        _Measurer.made.append(self)

    def close(self):
        self.closed += 1

    def measure(self, pt):
        return {"status": "ok"}

    def backend(self, name):
        return types.SimpleNamespace(kind="cpu")


def test_a_worker_frees_the_last_runs_measurer_before_it_builds_the_next(monkeypatch):
    monkeypatch.setattr(measuring, "PointMeasurer", _Measurer)
    _Measurer.made = []
    handle = measuring.worker_target({}, lambda *a, **k: None)
    runs = [OmegaConf.to_yaml(compose_cfg(["variant=cpu_blas", f"sizes.square=[{n}]"]), resolve=True) for n in (64, 96)]
    keys = [expand(OmegaConf.merge(OmegaConf.structured(GemmlabConf), OmegaConf.create(y)))[0].key for y in runs]
    handle({"cfg_yaml": runs[0], "point_key": keys[0]})
    handle({"cfg_yaml": runs[0], "point_key": keys[0]})  # the same run: the same measurer
    assert len(_Measurer.made) == 1 and _Measurer.made[0].closed == 0
    handle({"cfg_yaml": runs[1], "point_key": keys[1]})
    assert len(_Measurer.made) == 2
    assert _Measurer.made[0].closed == 1 and _Measurer.made[1].closed == 0


def test_a_runs_end_frees_its_executors(tmp_path, monkeypatch):
    closed = []
    monkeypatch.setattr(measuring.PointMeasurer, "close", lambda self: closed.append(self))
    from gemmlab.runner import Runner

    r = Runner(compose_cfg(["variant=cpu_blas", "sizes.square=[32]"], tmp_path), tmp_path / "out")
    r.run()
    assert closed == [r.measurer]


def test_close_in_a_context_a_fault_left_unusable_does_not_raise(monkeypatch):
    _fake_gpu(monkeypatch)
    ex = gpu.GpuExecutor(compose_cfg([]))
    ex._init()

    def fault():
        raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")

    ex.stream.synchronize = fault
    ex.close()
    assert ex.timer is None and ex.stream is None and not ex._ready


def test_cublas_runs_on_one_handle_per_device_for_the_process(monkeypatch):
    from gemmlab.backends import cublas as backend

    made, streams = [], []
    fake = types.SimpleNamespace(
        CUBLAS_POINTER_MODE_HOST=0, CUBLAS_DEFAULT_MATH=0,
        create=lambda: made.append(100 + len(made)) or made[-1],
        setPointerMode=lambda h, mode: None, setMathMode=lambda h, mode: None,
        setStream=lambda h, s: streams.append((h, s)))
    libs = types.SimpleNamespace(cublas=fake)
    monkeypatch.setitem(sys.modules, "cupy_backends", types.SimpleNamespace(cuda=types.SimpleNamespace(libs=libs)))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda", types.SimpleNamespace(libs=libs))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs", libs)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cublas", fake)
    monkeypatch.setattr(backend, "_HANDLES", {})
    first = backend.handle_for(0, 7)
    assert backend.handle_for(0, 7) == first and streams == [(first, 7)]  # bound once per stream
    assert backend.handle_for(0, 9) == first and streams[-1] == (first, 9)  # the next run's stream
    other = backend.handle_for(1, 9)
    assert other != first and made == [first, other]
