"""One measurement per GPU: a run claims its GPU, and a sweep's jobs take one GPU each.

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

``claim_for_run`` is the claim every run makes before it measures on a GPU (``gemmlab.runner``):
a second run on the same GPU waits, up to ``run.gpu_wait_s``, then fails clearly. Which physical GPU
an entry or a process is: ``gemmlab.gpu.identity``.
"""
from __future__ import annotations

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
from typing import Any, Dict, Optional, Sequence, Union

from gemmlab.gpu.identity import (
    INDEX_ENV,
    as_gpu_list,
    host_gpus,
    parse_visible,
    resolve,
)

log = logging.getLogger("gemmlab")

LOCK_DIR_ENV = "GEMMLAB_GPU_LOCK_DIR"  # where the per-GPU lock files live (default: <tmp>/gemmlab-gpu-locks)
UUID_ENV = "GEMMLAB_GPU_UUID"  # its UUID, where NVML is available
CLAIM_FILE = "gpu_claim.json"  # written into the job's output folder

# This process's claim: the open lock file keeps the GPU ours until the process exits.
_claim: Optional["GpuClaim"] = None


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
    from gemmlab.sweep.locks import try_lock

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
        from gemmlab.sweep.locks import holder

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
