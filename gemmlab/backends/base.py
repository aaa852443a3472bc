"""The interface every backend implements, and the registry that finds them by name.

A backend knows how to compute C = A @ B for one point on arrays the executor made; the executor
(CPU or GPU) owns everything around it: inputs, poisoning, the FP64 check, warm-up and timing.
So the timed region is exactly what ``Launch.fn`` does, and nothing a backend does in
``prepare``/``make_launch`` (compiling, planning, building arguments) is ever timed.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, Iterable, Optional, Tuple, Type

from omegaconf import DictConfig

from gemmlab.operands import LAYOUTS


@dataclass
class Launch:
    fn: Callable[[], None]  # enqueue (GPU) or run (CPU) C = A @ B, nothing else
    info: Dict[str, Any] = field(default_factory=dict)  # row fields: kernel_name, registers, ...
    inputs: Any = None  # (a, b) when the backend made its own inputs (see Backend.make_inputs)


class Backend:
    name: ClassVar[str]
    kind: ClassVar[str]  # "cpu" or "gpu": which executor runs it

    # The workload axes (gemmlab/operands.py) the backend runs: operand layouts (a variant's
    # ``layouts:`` may list others it supports) and strided batches; otherwise its points are
    # skipped with these reasons.
    layouts: ClassVar[Tuple[str, ...]] = LAYOUTS
    layout_reason: ClassVar[str] = ""
    batched: ClassVar[bool] = True
    batch_reason: ClassVar[str] = ""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg

    @classmethod
    def workload_reason(cls, point) -> Optional[str]:
        """Why this backend does not run the point's layout or batch, or None (known before
        anything runs, on any machine)."""
        declared = point.variant_cfg.get("layouts") if point.variant_cfg is not None else None
        layouts = tuple(declared) if declared is not None else cls.layouts
        if point.layout not in layouts:
            why = cls.layout_reason if declared is None else \
                f"{point.variant} declares layouts {', '.join(layouts)}"
            return f"{why} (this point: layout {point.layout})"
        if point.batch != 1 and not cls.batched:
            return f"{cls.batch_reason} (this point: batch {point.batch})"
        return None

    def unavailable(self) -> Optional[str]:
        """Why this backend cannot run on this machine at all, or None."""
        return None

    def skip_reason(self, point) -> Optional[str]:
        """Why this point cannot run here (beyond the variant's precisions and `requires`), or None."""
        return None

    def prepare(self, points: Iterable) -> None:
        """Called once with all runnable points of this backend before any is timed (compile here)."""

    def wants_fp32_inputs(self, point) -> bool:
        """True if ``make_inputs`` should receive the FP32 random values and cast them itself
        (storage types the array library cannot cast to, such as FP8)."""
        return False

    def make_inputs(self, point, a, b):
        """Convert the executor's inputs if the backend needs another form (e.g. FP8 with scales).

        Returns (a, b, a_ref, b_ref): the operands to launch on and the exact values they hold,
        in a type the reference can upcast. The default uses the inputs as they are.
        """
        return a, b, a, b

    def make_launch(self, point, a, b, c) -> Launch:
        raise NotImplementedError

    def watch_search(self, n_trials: Optional[int]) -> None:
        """Tell the worker's watchdog that a search over ``n_trials`` candidates begins (None: it
        is done), so that it gets a limit of its own and a hang in it is named as the search's
        (gemmlab/measure/worker/limits.py). The executor replaces this for the point it measures;
        elsewhere it does nothing."""

    # A backend that measures something other than C = A @ B (a probe: vector add, device copy,
    # host-device transfers, ...) defines ``measure_point(point, executor, seed) -> dict`` and
    # owns its inputs, reference and timing, reusing ``executor.timer`` (GPU) for the samples. The
    # dict it returns overrides the row's GEMM defaults (op, flops, bytes_min, intensity). The
    # executors call it instead of their GEMM path when it exists.
    measure_point = None

    def release(self) -> None:
        """Free per-point state (plans, modules) between points."""


_MODULES = {
    "cpu_blas": "gemmlab.backends.cpu_blas",
    "cublas": "gemmlab.backends.cublas",
    "cublaslt": "gemmlab.backends.cublaslt",
    "cutlass": "gemmlab.backends.cutlass",
    "cuda": "gemmlab.backends.cuda_kernels",
    "gpu_probe": "gemmlab.backends.probes.gpu",
    "cpu_probe": "gemmlab.backends.probes.cpu",
}


def backend_class(name: str) -> Type[Backend]:
    try:
        module = importlib.import_module(_MODULES[name])
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known: {sorted(_MODULES)}") from None
    return module.BACKEND
