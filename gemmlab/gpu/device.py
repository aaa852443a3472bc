"""Facts about the CUDA device the process runs on, read from the device (never hard-coded)."""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, Optional


def no_device_reason() -> Optional[str]:
    """None if CuPy sees a usable CUDA device; otherwise why not, starting 'no CUDA device'."""
    try:
        import cupy
    except ImportError as e:
        return f"no CUDA device (CuPy is not installed: {e}; pip install -e '.[gpu]')"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError without a driver
        return f"no CUDA device ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return None if n > 0 else "no CUDA device (the CUDA runtime reports 0 devices)"


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


@functools.lru_cache(maxsize=None)
def info() -> Dict[str, Any]:
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    return {
        "device": _s(props["name"]),
        "ordinal": dev.id,
        "pci_bus_id": dev.pci_bus_id,
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "total_mem_bytes": int(props["totalGlobalMem"]),
        "cc": f"{props['major']}.{props['minor']}",
        "smem_per_block_optin": int(props.get("sharedMemPerBlockOptin", 0)),
        "driver_version": cupy.cuda.runtime.driverGetVersion(),
        "cuda_runtime_version": cupy.cuda.runtime.runtimeGetVersion(),
        "cupy_version": cupy.__version__,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    }


def free_bytes() -> int:
    import cupy

    release_cached()
    free, _total = cupy.cuda.runtime.memGetInfo()
    return int(free)


def release_cached() -> None:
    """Hand back to the driver what the process's allocators keep cached: CuPy's pool and, where
    PyTorch is loaded (the FP8 operands are its tensors), PyTorch's. Neither allocator can use the
    other's cached blocks, so a point after a large FP8 one would find them taken."""
    import sys

    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
