"""One job per GPU on a host with several GPUs, and which physical GPU a row was measured on.

Hydra's submitit launcher starts every job of a sweep at once as a local subprocess, and submitit's
local executor gives each of them the *same* GPUs (``CUDA_VISIBLE_DEVICES=0..gpus_per_node-1``).
Two timed jobs on one GPU would slow each other and corrupt both measurements, so every job claims
a GPU first: an exclusive ``flock`` on ``<lock dir>/<gpu>.lock``, tried on each allowed GPU in turn
until one is free, and held until the job's process ends (the kernel drops it even when the job is
killed, so a crashed job never leaves a GPU taken). The job then pins itself to that GPU with
``CUDA_VISIBLE_DEVICES`` before anything starts CUDA; jobs beyond the number of GPUs wait.

``PinOneGpu`` is the Hydra callback that does this at ``on_job_start``
(``conf/hydra/launcher/per_gpu.yaml`` adds it). It also exports ``GEMMLAB_GPU_INDEX``, the physical
index of the claimed GPU (nvidia-smi's numbering, ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), and
``GEMMLAB_GPU_UUID`` where NVML can tell, and writes ``gpu_claim.json`` into the job's folder.

``gpu_identity()`` is what the GPU executor records in a row (``gpu_index``, ``gpu_uuid``): it asks
NVML about the device this process runs on, matched by PCI bus id, so it is right whatever
``CUDA_VISIBLE_DEVICES`` says (set here, by Slurm, or by hand). ``nvml_handle()`` gives the same
device's NVML handle for clocks, power and temperature: NVML numbers GPUs ignoring
``CUDA_VISIBLE_DEVICES``, so ``nvmlDeviceGetHandleByIndex(cuda_ordinal)`` reads the wrong GPU in a
pinned job.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import random
import re
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

log = logging.getLogger("gemmlab")

LOCK_DIR_ENV = "GEMMLAB_GPU_LOCK_DIR"  # where the per-GPU lock files live (default: <tmp>/gemmlab-gpu-locks)
INDEX_ENV = "GEMMLAB_GPU_INDEX"  # physical index of the GPU this job claimed
UUID_ENV = "GEMMLAB_GPU_UUID"  # its UUID, where NVML is available
CLAIM_FILE = "gpu_claim.json"  # written into the job's output folder

# This process's claim: the open lock file keeps the GPU ours until the process exits.
_claim: Optional["GpuClaim"] = None


# -- which GPUs ------------------------------------------------------------------------------
def parse_visible(value: Optional[str]) -> Optional[List[str]]:
    """Entries of a CUDA_VISIBLE_DEVICES value; None when unset (every GPU), [] when empty (none)."""
    if value is None:
        return None
    return [e.strip() for e in value.split(",") if e.strip()]


def as_gpu_list(gpus: Union[None, int, str, Sequence[Any]]) -> Optional[List[str]]:
    """The ``gpus`` option: None, a count N (GPUs 0..N-1), "0,2" or a list of indices / UUIDs."""
    if gpus is None:
        return None
    if isinstance(gpus, bool):
        raise ValueError(f"gpus must be a count, a list of GPU indices/UUIDs or null, not {gpus!r}")
    if isinstance(gpus, int):
        return [str(i) for i in range(gpus)]
    if isinstance(gpus, str):
        return parse_visible(gpus)
    return [str(g).strip() for g in gpus]


@functools.lru_cache(maxsize=None)
def _nvml():
    """pynvml, initialised, or None. NVML neither starts CUDA nor reads CUDA_VISIBLE_DEVICES."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # not installed, or no driver on this machine
        return None


def _text(v: Union[str, bytes]) -> str:
    return v.decode() if isinstance(v, bytes) else v


def host_gpus() -> List[str]:
    """Indices of every GPU of this host (nvidia-smi's numbering), without starting CUDA."""
    nvml = _nvml()
    if nvml is not None:
        return [str(i) for i in range(nvml.nvmlDeviceGetCount())]
    import shutil
    import subprocess

    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
            return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]
        except (OSError, subprocess.SubprocessError):
            pass
    return []


def resolve(entry: str) -> Dict[str, Any]:
    """{'index': nvidia-smi index or None, 'uuid': 'GPU-...' or None} of a CUDA_VISIBLE_DEVICES entry."""
    nvml = _nvml()
    index: Optional[int] = int(entry) if entry.isdigit() else None
    uuid: Optional[str] = entry if entry.startswith("GPU-") else None
    if nvml is not None:
        try:
            h = (nvml.nvmlDeviceGetHandleByIndex(index) if index is not None
                 else nvml.nvmlDeviceGetHandleByUUID(entry.encode()))
            index, uuid = int(nvml.nvmlDeviceGetIndex(h)), _text(nvml.nvmlDeviceGetUUID(h))
        except Exception:  # a MIG instance or an unknown entry: keep what the entry says
            pass
    return {"index": index, "uuid": uuid}


# -- claiming one ----------------------------------------------------------------------------
def lock_dir() -> Path:
    d = Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "gemmlab-gpu-locks")
    d.mkdir(parents=True, exist_ok=True)
    try:  # one lock folder for every user of the host, like /tmp itself
        os.chmod(d, 0o1777)
    except OSError:
        pass
    return d


@dataclass
class GpuClaim:
    entry: str  # the CUDA_VISIBLE_DEVICES entry this job now runs on
    index: Optional[int]  # physical index (nvidia-smi)
    uuid: Optional[str]
    lock_path: Path
    waited_s: float
    _fh: Any = None  # the open, flocked lock file

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing drops the flock
            self._fh = None


def _try_lock(path: Path):
    from .locks import try_lock

    return try_lock(path)


def claim_gpu(candidates: Sequence[str], poll_s: float = 0.5, timeout_s: Optional[float] = None) -> GpuClaim:
    """Lock the first free GPU of ``candidates``, waiting for one to free up; held until release/exit."""
    if not candidates:
        raise ValueError("no GPU to claim")
    ids = [(e, resolve(e)) for e in candidates]
    d = lock_dir()
    start = time.monotonic()
    announced = False
    while True:
        for entry, ident in ids:
            # Lock by UUID where known, so "0" and "GPU-..." name the same lock.
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", ident["uuid"] or entry)
            path = d / f"{name}.lock"
            fh = _try_lock(path)
            if fh is not None:
                return GpuClaim(entry, ident["index"], ident["uuid"], path, time.monotonic() - start, fh)
        waited = time.monotonic() - start
        if timeout_s is not None and waited > timeout_s:
            raise TimeoutError(f"no free GPU among {list(candidates)} after {waited:.0f} s")
        if not announced:
            log.info("waiting for a free GPU among %s (locks in %s)", list(candidates), d)
            announced = True
        time.sleep(poll_s * (0.5 + random.random()))  # jitter: waiting jobs don't poll in step


def pin_process(claim: GpuClaim) -> None:
    """Make ``claim``'s GPU the only one CUDA shows this process (and its children)."""
    # By UUID where NVML named one: the same GPU whatever CUDA_DEVICE_ORDER says. Otherwise numeric
    # entries mean nvidia-smi's (PCI bus) order, as the locks and rows do.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    os.environ["CUDA_VISIBLE_DEVICES"] = claim.uuid if claim.uuid and claim.entry.isdigit() else claim.entry
    if claim.index is not None:
        os.environ[INDEX_ENV] = str(claim.index)
    if claim.uuid is not None:
        os.environ[UUID_ENV] = claim.uuid


def claimed() -> Optional[GpuClaim]:
    """This process's GPU claim, if it made one."""
    return _claim


def cuda_started() -> bool:
    """Whether this process may already have started CUDA (then pinning comes too late)."""
    import sys

    return any(m in sys.modules for m in ("cupy", "torch", "cuda.bindings.driver", "pycuda.driver"))


class GpuBusy(RuntimeError):
    """Another gemmlab run held the GPU for longer than run.gpu_wait_s."""


def claim_for_run(timeout_s: float, poll_s: float = 0.5, announce=None) -> Optional[GpuClaim]:
    """Claim the GPU this process will measure on (CUDA's device 0: the first entry of
    CUDA_VISIBLE_DEVICES, else GPU 0), waiting up to ``timeout_s`` for another gemmlab run to
    release it; ``announce(text)`` says once that it waits. Identifies the GPU through NVML, so
    the waiting process never opens a CUDA context on the GPU that the other one is timing (its
    context would count as a foreign process there). A job pinned by PinOneGpu keeps its claim.
    Returns None where there is no GPU to claim."""
    global _claim
    if _claim is not None:
        return _claim
    visible = parse_visible(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible == []:
        return None
    entry = visible[0] if visible else "0"
    if not cuda_started():  # numeric entries and device 0 mean nvidia-smi's order, as the locks do
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    ident = resolve(entry)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", ident["uuid"] or entry)
    path = lock_dir() / f"{name}.lock"
    start, told = time.monotonic(), False
    while True:
        fh = _try_lock(path)
        if fh is not None:
            _claim = GpuClaim(entry, ident["index"], ident["uuid"], path, time.monotonic() - start, fh)
            return _claim
        from .locks import holder

        waited = time.monotonic() - start
        what = f"GPU {ident['index'] if ident['index'] is not None else entry}" + (
            f" ({ident['uuid']})" if ident["uuid"] else "")
        if waited >= timeout_s:
            raise GpuBusy(f"{what} is held by another gemmlab run ({holder(path)}) and was not released "
                          f"within run.gpu_wait_s={timeout_s:g} s; nothing was measured on it")
        if not told:
            msg = (f"{what} is in use by another gemmlab run ({holder(path)}): waiting up to "
                   f"{timeout_s:g} s for it (run.gpu_wait_s)")
            log.warning(msg)
            if announce is not None:
                announce(msg)
            told = True
        time.sleep(min(poll_s * (0.5 + random.random()), max(0.0, timeout_s - waited)) or 0.01)


# -- the Hydra callback ----------------------------------------------------------------------
try:
    from hydra.experimental.callback import Callback as _Callback
except ImportError:  # gpu_identity() must work without Hydra
    _Callback = object  # type: ignore[assignment,misc]


class PinOneGpu(_Callback):
    """Pins each Hydra job to one free GPU of the host before it runs (see the module doc).

    gpus: the GPUs jobs may use (indices or UUIDs, a count, or null). null means the
    CUDA_VISIBLE_DEVICES of the command that launched the sweep, or every GPU of the host.
    """

    def __init__(self, gpus: Union[None, int, str, Sequence[Any]] = None, poll_s: float = 0.25,
                 timeout_s: Optional[float] = None) -> None:
        # Instantiated in the launching process, before submitit overwrites CUDA_VISIBLE_DEVICES
        # for the jobs: remember what the user allowed there.
        self.gpus = as_gpu_list(gpus)
        if self.gpus is None:
            self.gpus = parse_visible(os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.poll_s = float(poll_s)
        self.timeout_s = timeout_s

    def on_job_start(self, config, **kwargs: Any) -> None:
        global _claim
        if _claim is not None:  # jobs run one after another in this process: it keeps its GPU
            return
        candidates = self.gpus if self.gpus is not None else host_gpus()
        if not candidates:
            log.warning("pin_gpu: this host has no GPU to pin the job to; GPU points will be skipped")
            return
        if cuda_started():
            log.warning("pin_gpu: CUDA may already be started in this process; pinning may not apply")
        claim = claim_gpu(candidates, self.poll_s, self.timeout_s)
        pin_process(claim)
        _claim = claim
        log.info("pin_gpu: job runs on GPU %s (index %s, %s), waited %.1f s", claim.entry, claim.index,
                 claim.uuid or "uuid unknown", claim.waited_s)
        self._write_record(config, claimed_at=time.time())

    def on_job_end(self, config, job_return=None, **kwargs: Any) -> None:
        if _claim is not None:
            self._write_record(config, ended_at=time.time())

    @staticmethod
    def _write_record(config, **times: float) -> None:
        """<job folder>/gpu_claim.json: which GPU the job had and when (checks for overlaps)."""
        try:
            out = Path(str(config.hydra.runtime.output_dir)) / CLAIM_FILE
        except Exception:
            return
        rec: Dict[str, Any] = {}
        if out.exists():
            try:
                rec = json.loads(out.read_text())
            except ValueError:
                rec = {}
        assert _claim is not None
        rec.update(host=socket.gethostname(), pid=os.getpid(), gpu=_claim.entry, gpu_index=_claim.index,
                   gpu_uuid=_claim.uuid, waited_s=round(_claim.waited_s, 3),
                   cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), **times)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rec, indent=1) + "\n")


# -- what the executor records ---------------------------------------------------------------
def nvml_handle(ordinal: Optional[int] = None):
    """NVML handle of CUDA device ``ordinal`` of this process (default: the current one), or None."""
    nvml = _nvml()
    if nvml is None:
        return None
    import cupy

    if ordinal is None:
        ordinal = cupy.cuda.Device().id
    try:
        bus_id = cupy.cuda.runtime.deviceGetPCIBusId(ordinal)  # "0000:19:00.0"; NVML accepts it
        return nvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
    except Exception:
        return None


def gpu_identity(ordinal: Optional[int] = None) -> Dict[str, Any]:
    """{'gpu_index': physical index (nvidia-smi), 'gpu_uuid': 'GPU-...'} of a CUDA device of this process.

    Physical, not CUDA's ordinal: in a pinned job CUDA calls its only GPU 0 whichever it is.
    """
    import cupy

    if ordinal is None:
        ordinal = cupy.cuda.Device().id
    index: Optional[int] = None
    uuid: Optional[str] = None
    h = nvml_handle(ordinal)
    if h is not None:
        nvml = _nvml()
        try:
            index, uuid = int(nvml.nvmlDeviceGetIndex(h)), _text(nvml.nvmlDeviceGetUUID(h))
        except Exception:
            pass
    if uuid is None:
        raw = cupy.cuda.runtime.getDeviceProperties(ordinal).get("uuid")
        if isinstance(raw, bytes) and len(raw) == 16:  # CUDA's 16 bytes, NVML's text form
            import uuid as _uuid

            uuid = "GPU-" + str(_uuid.UUID(bytes=raw))
    if index is None:
        index = physical_index_from_env(ordinal)
    return {"gpu_index": index, "gpu_uuid": uuid}


def physical_index_from_env(ordinal: int) -> Optional[int]:
    """Best guess of the physical index of CUDA ordinal ``ordinal`` from the environment alone."""
    entries = parse_visible(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if entries is None:
        return ordinal
    if ordinal < len(entries) and entries[ordinal].isdigit():
        return int(entries[ordinal])
    pinned = os.environ.get(INDEX_ENV)
    return int(pinned) if pinned and pinned.isdigit() and len(entries) == 1 else None
