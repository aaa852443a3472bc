"""Which CUDA errors poison a process, and whether this process's context still works.

A kernel's illegal address, misaligned access, illegal instruction, trap or device-side assert
is sticky: the CUDA context is unusable afterwards and every later call of the process returns
the same error. The runtime's names and the driver's are both listed; a probe of the context
after a failed point is the test that matters (it also catches a sticky error this list lacks).
"""
from __future__ import annotations

from typing import Optional

# runtime name -> (driver name, what happened)
STICKY = {
    "cudaErrorIllegalAddress": ("CUDA_ERROR_ILLEGAL_ADDRESS", "illegal memory access"),
    "cudaErrorMisalignedAddress": ("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"),
    "cudaErrorLaunchFailure": ("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
    "cudaErrorIllegalInstruction": ("CUDA_ERROR_ILLEGAL_INSTRUCTION", "illegal instruction"),
    "cudaErrorHardwareStackError": ("CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"),
    "cudaErrorInvalidPc": ("CUDA_ERROR_INVALID_PC", "invalid program counter"),
    "cudaErrorInvalidAddressSpace": ("CUDA_ERROR_INVALID_ADDRESS_SPACE", "invalid address space"),
    "cudaErrorAssert": ("CUDA_ERROR_ASSERT", "device-side assert or trap"),
    "cudaErrorLaunchTimeout": ("CUDA_ERROR_LAUNCH_TIMEOUT", "kernel past the driver's time limit"),
    "cudaErrorTensorMemoryLeak": ("CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory not freed"),
}


def sticky_error(text: str) -> Optional[str]:
    """'<what happened> (<name>)' if ``text`` names a sticky CUDA error, else None."""
    for name, (driver, what) in STICKY.items():
        if name in text or driver in text:
            return f"{what} ({name})"
    return None


def context_error() -> Optional[str]:
    """None if this process's CUDA context still runs work; else the error it returns (the first
    line). Never creates a context: a process that has not used CUDA is healthy by definition."""
    try:
        import cupy
    except ImportError:
        return None
    try:
        cupy.cuda.runtime.deviceSynchronize()
        probe = cupy.empty(1, dtype=cupy.float32)
        probe.fill(1.0)
        cupy.cuda.runtime.deviceSynchronize()
        return None
    except Exception as e:  # CUDARuntimeError / CUDADriverError of a sticky fault
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return sticky_error(text) or f"{type(e).__name__}: {text}"
