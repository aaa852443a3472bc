"""TMA tensor maps for the Hopper kernels: resolve the YAML's specs, encode them, hand them over.

A kernel that loads or stores tiles with the copy engine (``cp.async.bulk.tensor``) needs one
``CUtensorMap`` per operand, encoded on the host by ``cuTensorMapEncodeTiled``. The variant's YAML
lists them (``cuda.tensor_maps``: operand A | B | C, box [rows, cols] as expressions, swizzle
bytes); the ``cuda`` launcher calls :func:`tensor_map_args` once per point, in ``make_launch``,
and passes what it returns after K.

What is passed: by default the maps are copied,
in the YAML's order, into one small device buffer (64-byte aligned, as the PTX ISA requires for a
tensor map in global memory) and the kernel gets its address, as ``const TensorMap* maps``
(kernels/cuda/hopper/ptx.cuh). The kernel orders the host's writes before the copy engine reads
them (``fence.proxy.tensormap::generic.acquire``). Keep the returned list alive as long as the
launch (the buffer is the only reference). A kernel built with the define MAP_PARAMS 1 takes each map
by value instead, as a ``const __grid_constant__`` parameter (CuPy passes a one-element NumPy array by
value): the driver writes it with the launch, so the copy engine does not first fetch it from
device memory (which the timer's L2 flush leaves cold at the start of every sample).

Every operand is a dense row-major 2-D matrix as stored (a transposed layout's operand is the
stored transpose, e.g. layout nt's B is N x K); TMA sees it as (cols, rows) with the row stride in
bytes, innermost first. Elements outside the matrix read as zeros and are never written, which is
how the kernels handle partial tiles. The rules of ``cuTensorMapEncodeTiled`` are checked here
first (:func:`check`) so that a bad config fails with a sentence, not ``CUDA_ERROR_INVALID_VALUE``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping

from gemmlab import operands
from gemmlab.expr import evaluate

TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap)
TENSOR_MAP_ALIGN = 64
SWIZZLES = (0, 32, 64, 128)  # bytes; 0 = no swizzle
MAX_BOX = 256  # elements per box dimension

# numpy / ml_dtypes dtype name -> CUtensorMapDataType member name
_DATA_TYPES = {
    "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "float16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "float32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "float64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
    "int8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",  # 8-bit types move as bytes
    "uint8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "float8_e4m3fn": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "float8_e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
}


class TensorMapError(ValueError):
    """A tensor-map spec that TMA cannot encode for this point."""


@dataclass(frozen=True)
class TensorMapSpec:
    """One tensor map, resolved for a point: plain integers, checkable without a GPU."""

    operand: str  # A | B | C
    dtype: str  # element type name (numpy / ml_dtypes)
    elem_bytes: int
    rows: int  # global extent, outer dimension
    cols: int  # global extent, contiguous dimension
    row_stride_bytes: int
    box_rows: int
    box_cols: int
    swizzle: int  # bytes
    address: int  # device pointer of element (0, 0)

    @property
    def box_bytes(self) -> int:
        return self.box_rows * self.box_cols * self.elem_bytes


def _get(spec: Any, key: str, default: Any = None) -> Any:
    if isinstance(spec, Mapping):
        return spec.get(key, default)
    return getattr(spec, key, default)


def resolve(point, arrays: Mapping[str, Any], specs: Iterable[Any]) -> List[TensorMapSpec]:
    """Resolve the YAML's specs for ``point``; ``arrays`` maps 'A'/'B'/'C' to the CuPy operands."""
    env = point.expr_env()
    # the operands as stored (gemmlab/operands.py): layout nt's B is N x K, and its map is over that
    stored_a, stored_b = operands.stored_shapes(point.m, point.n, point.k, point.layout)
    shapes = {"A": stored_a, "B": stored_b, "C": (point.m, point.n)}
    out: List[TensorMapSpec] = []
    for i, spec in enumerate(specs):
        operand = str(_get(spec, "operand", "")).upper()
        if operand not in shapes:
            raise TensorMapError(f"tensor_maps[{i}]: operand must be A, B or C, got {operand!r}")
        box = list(_get(spec, "box", []) or [])
        if len(box) != 2:
            raise TensorMapError(f"tensor_maps[{i}] ({operand}): box is [rows, cols], got {box!r}")
        box_rows, box_cols = (int(evaluate(b, env)) for b in box)
        arr = arrays[operand]
        rows, cols = shapes[operand]
        if tuple(arr.shape) != (rows, cols):
            raise TensorMapError(f"tensor_maps[{i}] ({operand}): array shape {tuple(arr.shape)} is not "
                                 f"{(rows, cols)} for m={point.m}, n={point.n}, k={point.k}")
        itemsize = int(arr.dtype.itemsize)
        if arr.strides != (cols * itemsize, itemsize):
            raise TensorMapError(f"tensor_maps[{i}] ({operand}): the array must be C-contiguous")
        out.append(TensorMapSpec(
            operand=operand, dtype=str(arr.dtype.name), elem_bytes=itemsize, rows=rows, cols=cols,
            row_stride_bytes=cols * itemsize, box_rows=box_rows, box_cols=box_cols,
            swizzle=int(_get(spec, "swizzle", 128)), address=int(arr.data.ptr)))
    return out


def check(spec: TensorMapSpec) -> None:
    """Raise TensorMapError unless cuTensorMapEncodeTiled accepts ``spec`` (CUDA driver API rules)."""
    name = f"tensor map for {spec.operand}"
    if spec.dtype not in _DATA_TYPES:
        raise TensorMapError(f"{name}: no TMA data type for {spec.dtype}")
    if spec.swizzle not in SWIZZLES:
        raise TensorMapError(f"{name}: swizzle must be one of {SWIZZLES} bytes, got {spec.swizzle}")
    for what, v in (("box rows", spec.box_rows), ("box cols", spec.box_cols)):
        if not 1 <= v <= MAX_BOX:
            raise TensorMapError(f"{name}: {what} = {v} must be in [1, {MAX_BOX}]")
    inner_bytes = spec.box_cols * spec.elem_bytes
    if inner_bytes % 16:
        raise TensorMapError(f"{name}: the box's contiguous extent ({inner_bytes} B) must be a multiple of 16 B")
    if spec.swizzle and inner_bytes > spec.swizzle:
        raise TensorMapError(f"{name}: with {spec.swizzle}B swizzle the box's contiguous extent "
                             f"({inner_bytes} B) must be at most {spec.swizzle} B")
    if spec.row_stride_bytes % 16:
        raise TensorMapError(
            f"{name}: the row stride ({spec.cols} x {spec.elem_bytes} B = {spec.row_stride_bytes} B) "
            "must be a multiple of 16 B")
    if spec.row_stride_bytes >= 1 << 40:
        raise TensorMapError(f"{name}: row stride {spec.row_stride_bytes} B is too large for TMA")
    if spec.address % 16:
        raise TensorMapError(f"{name}: the base address must be 16-byte aligned")
    if spec.rows > 1 << 32 or spec.cols > 1 << 32:
        raise TensorMapError(f"{name}: extents above 2^32 elements")


def encode(spec: TensorMapSpec) -> bytes:
    """The 128 bytes of the CUtensorMap for ``spec`` (needs the CUDA driver)."""
    import numpy as np
    from cuda.bindings import driver

    check(spec)
    swizzle = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
               64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}[spec.swizzle]
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    err, tmap = driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, _DATA_TYPES[spec.dtype]),
        2,
        spec.address,
        [u64(spec.cols), u64(spec.rows)],  # innermost first
        [u64(spec.row_stride_bytes)],  # strides of dimensions 1.. in bytes
        [u32(spec.box_cols), u32(spec.box_rows)],
        [u32(1), u32(1)],  # element strides: every element
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, swizzle),
        # Fetch whole 256-byte L2 lines: tiles are re-read by neighbouring CTAs from L2.
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        # Out-of-bounds elements read as zeros (not NaN): partial tiles add nothing to the sum.
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise TensorMapError(f"cuTensorMapEncodeTiled failed for {spec}: {err!r}")
    raw = np.asarray([int(w) for w in tmap.opaque], dtype=np.uint64).tobytes()
    assert len(raw) == TENSOR_MAP_BYTES, len(raw)
    return raw


def tensor_map_args(point, a, b, c, specs, by_value: bool = False) -> list:
    """Kernel arguments that follow K: ``[device buffer holding the maps in YAML order]``, or with
    ``by_value`` one argument per map, each the 128 bytes themselves (:func:`by_value_args`).

    Called once per point by the ``cuda`` launcher, outside the timed region; ``a``, ``b``, ``c``
    are the point's CuPy operands. Returns an empty list when ``specs`` is empty.
    """
    specs = list(specs or [])
    if not specs:
        return []
    import cupy
    import numpy as np

    resolved = resolve(point, {"A": a, "B": b, "C": c}, specs)
    if by_value:
        return by_value_args([encode(s) for s in resolved])
    blob = b"".join(encode(s) for s in resolved)
    buf = cupy.asarray(np.frombuffer(blob, dtype=np.uint8))
    if buf.data.ptr % TENSOR_MAP_ALIGN:  # CuPy's pool hands out 512-byte aligned blocks
        raise TensorMapError(f"tensor-map buffer at {buf.data.ptr:#x} is not {TENSOR_MAP_ALIGN}-byte aligned")
    return [buf]


def by_value_args(maps: List[bytes]) -> list:
    """Each encoded map as a one-element NumPy array of a 128-byte void type: CuPy passes a NumPy array of one
    element by value (the kernel's parameter gets its bytes: ``const __grid_constant__ TensorMap``), which the
    driver writes with the launch. Such maps need no fence in the kernel and are not in device memory (a kernel
    built with MAP_PARAMS 1 takes them: stages 12, 13 and 17 by default, kernels/cuda/hopper/ptx.cuh)."""
    import numpy as np

    out = []
    for m in maps:
        if len(m) != TENSOR_MAP_BYTES:
            raise TensorMapError(f"a tensor map is {TENSOR_MAP_BYTES} bytes, not {len(m)}")
        out.append(np.frombuffer(m, dtype=np.uint8).copy().view(np.dtype((np.void, TENSOR_MAP_BYTES))))
    return out


def describe(specs: Iterable[TensorMapSpec]) -> str:
    """One line per map, for logs and error messages."""
    return "; ".join(f"{s.operand}: {s.rows}x{s.cols} {s.dtype}, box {s.box_rows}x{s.box_cols}, "
                     f"swizzle {s.swizzle}B" for s in specs)
