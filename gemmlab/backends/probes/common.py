"""What every GPU probe shares: the :class:`Probe` interface the registry (:mod:`.gpu`) holds,
:class:`ProbeSkip`, and the helpers that draw inputs, check the device's free memory and turn a
check and a timed call into row fields through the GPU executor's own paths (``timed_fields``,
``reference``). CuPy is imported inside functions, so this module imports without a GPU.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from gemmlab.measure import check


# -- the interface --------------------------------------------------------------------------------
class ProbeSkip(Exception):
    """The point cannot run here (memory, sizes); the message is the row's reason."""


class Probe:
    """One probe kind: ``skip`` says why a point cannot run (or None), ``run`` measures it."""

    op: str = ""
    precisions: Sequence[str] = ("fp32",)
    compiles: bool = False  # runs a kernel of the variant's probe.source (GpuProbe.function)

    def skip(self, p, params) -> Optional[str]:
        if p.compute not in self.precisions:
            return f"gpu_probe {type(self).__name__} measures {', '.join(self.precisions)}, not {p.compute}"
        return None

    def run(self, backend, p, ex, seed: int, params) -> Dict[str, Any]:
        """Measure point ``p``; ``backend`` is the gpu_probe backend (its ``function``, ``cubin``,
        ``gemm_launch``), ``ex`` the GPU executor."""
        raise NotImplementedError


# -- row fields -----------------------------------------------------------------------------------
def _cache_policy(ex) -> str:
    # probes do not rotate input sets: with cache=rotate their samples see whatever L2 holds
    return "flush" if ex.timer.cache == "flush" else "warm"


def timed_fields(ex, timed, flops: int, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Row fields of one timed call: the executor's own timing-to-row path, plus ``extra``."""
    fields, timer = ex.timed_fields(timed, flops, cache=_cache_policy(ex))
    return {**fields, "extra": {**(extra or {}), "timer": timer}}


def elementwise(cp, p, r, s, k: int) -> check.Reference:
    """The reference of an element-wise probe: R (FP64) and the |terms| S behind each element."""
    return check.Reference(cp, r, s, k, check.model_of(p), "CuPy FP64", p.tolerance, p.out_dtype)


def checked(row: Dict[str, Any], res: check.CheckResult) -> Optional[Dict[str, Any]]:
    """The row with the check's columns; a failed row if the check failed, else None."""
    row.update(res.fields())
    return {**row, "status": "failed", "reason": res.failure()} if not res.passed else None


def rechecked(row: Dict[str, Any], reference: check.Reference, out) -> Dict[str, Any]:
    why = check.recheck(reference, out, row)
    return {**row, "status": "failed", "reason": why} if why else {**row, "status": "ok"}


# -- inputs ---------------------------------------------------------------------------------------
def need_memory(nbytes: int) -> None:
    from gemmlab.gpu.device import free_bytes

    free = free_bytes()
    if nbytes > 0.9 * free:
        raise ProbeSkip(f"needs {nbytes / 2**30:.1f} GiB of device memory, {free / 2**30:.1f} GiB free")


def random_array(cp, rng, shape, name: str, ex):
    """Inputs as every GPU backend draws them (measure.distribution, measure.input_scale)."""
    from gemmlab.gpu import arrays

    m = ex.measure
    return arrays.cast(cp, check.random_matrix(cp, rng, shape, m.distribution.value, m.input_scale), name)
