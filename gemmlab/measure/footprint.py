"""How much memory a GEMM point takes while it is measured, written once for the executors (which
skip a point that does not fit) and for the estimate a run prints before it starts."""
from __future__ import annotations

from typing import Optional

from gemmlab import dtypes, operands
from gemmlab.measure import check, guards


def fp8_scaling(p, measure) -> str:
    """The point's FP8 scaling mode (``measure.fp8_scaling``, an Fp8Scaling: gemmlab.config); "none"
    for a point that is not fp8."""
    return measure.fp8_scaling.value if p.compute == "fp8" else "none"


def _reference_bytes(p, scaling: str) -> int:
    """Bytes an element of A and B that an fp8 set keeps apart for the check, the exact values of its
    operands: FP64 dequantized where scaled, else FP32 (gemmlab/fp8.py); other precisions none."""
    return 0 if p.compute != "fp8" else 4 if scaling == "none" else 8


def inputs_bytes(p, scaling: str = "none") -> int:
    """A, B and C of every GEMM of the batch, and an fp8 set's references (``scaling``: its mode)."""
    return p.bytes_min + _reference_bytes(p, scaling) * _operand_elements(p)


def making_bytes(p, scaling: str = "none") -> int:
    """The most memory making one input set holds at once (gemmlab.measure.gpu.make_sets): the FP32
    draw of A and B beside, first, the stored copy of an operand the layout transposes, then the
    backend's operands made from the draw. An fp8 set (gemmlab.fp8.gpu_operands) first holds the
    FP32 x / scale copies (scaled) and the FP8 ones, then the FP8 ones and the references (FP64
    dequantized, under ``block`` with the FP32 scales repeated over the larger operand; FP32
    unscaled; ``scaling``: the set's mode, fp8_scaling); other precisions the cast operands. C
    comes after, with the set."""
    e = _operand_elements(p)
    ta, tb = operands.transposed(p.layout)
    draw = 4 * e
    stored = draw + 4 * p.batch * p.k * ((p.m if ta else 0) + (p.n if tb else 0))
    if p.compute != "fp8":
        return max(stored, draw + (p.bytes_min - _c_bytes(p)))
    scaled = scaling != "none"
    grid = 4 * p.batch * max(p.m * p.k, p.k * p.n) if scaling == "block" else 0
    made = draw + max((4 * e if scaled else 0) + e, e + _reference_bytes(p, scaling) * e + grid)
    return max(stored, made)


def _c_bytes(p) -> int:
    return p.batch * p.m * p.n * dtypes.numpy_dtype(p.out_dtype).itemsize


def _operand_elements(p) -> int:
    return p.batch * (p.m * p.k + p.k * p.n)


def check_bytes(p) -> int:
    """R, the bound, the upcast output and a chunk's temporaries for every GEMM of the batch, and
    FP64 A and B and their absolute values for the group of GEMMs built at once (a batch: and the
    group's products before they are copied into R and the bound) (gemmlab/measure/check.py)."""
    group = check.reference_group(p.batch, p.m, p.n, p.k)
    products = 16 * group * p.m * p.n if p.batch > 1 else 0
    return group * 16 * (p.m * p.k + p.k * p.n) + products + p.batch * 40 * p.m * p.n


def guard_bytes(p, guard_setting: int, n_sets: int = 1) -> int:
    """Each input copied between its guards while the drawn one stays as the check's operand, its
    bytes kept for comparison, two guards around each of A, B and C, and the compare's temporaries
    (a chunk at a time) (gemmlab/measure/guards.py)."""
    g = guards.guard_size(guard_setting)
    if not g:
        return 0
    return n_sets * (2 * (p.bytes_min - _c_bytes(p)) + 6 * g) + guards.COMPARE_CHUNK


def point_bytes(p, measure, n_sets: int = 1) -> int:
    """The most memory the point holds at once on the device it runs on: the input sets made
    before the last, and the larger of what making the last holds and all sets with the guards
    and the check, which come after."""
    scaling = fp8_scaling(p, measure)
    after = (check_bytes(p) if measure.check else 0) + guard_bytes(p, measure.guard_bytes, n_sets)
    steady = inputs_bytes(p, scaling)
    return (n_sets - 1) * steady + max(making_bytes(p, scaling), steady + after)


def host_free_bytes() -> Optional[int]:
    """The host's available memory (MemAvailable), or None where /proc/meminfo cannot say."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def too_big(need: int, free: Optional[int], where: str) -> Optional[str]:
    """The skip reason of a point that needs more than 90% of the free memory, else None."""
    if free is None or need <= 0.9 * free:
        return None
    return f"needs {need / 2**30:.1f} GiB of {where} memory, {free / 2**30:.1f} GiB free"
