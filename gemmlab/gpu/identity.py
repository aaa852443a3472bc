"""Which physical GPU a process runs on, read without starting CUDA where possible: nvidia-smi's
index and the UUID of a CUDA_VISIBLE_DEVICES entry, and of a CUDA device of this process (what
every GPU row records as ``gpu_index`` and ``gpu_uuid``), matched by PCI bus id so it is right
whatever CUDA_VISIBLE_DEVICES says. ``nvml_handle()`` gives the same device's NVML handle for
clocks, power and temperature: NVML numbers GPUs ignoring CUDA_VISIBLE_DEVICES, so
``nvmlDeviceGetHandleByIndex(cuda_ordinal)`` would read the wrong GPU in a pinned job.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, List, Optional, Sequence, Union

INDEX_ENV = "GEMMLAB_GPU_INDEX"  # physical index of the GPU a pinned job claimed (gemmlab.sweep.pinning)


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
