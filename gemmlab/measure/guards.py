"""Guard zones: every output, and the inputs, inside a larger buffer whose bytes before and after
them hold a random pattern, compared after the checked call and after the timed calls.

A kernel whose epilogue lost a row guard writes past the end of C. Where those bytes land inside
the memory pool nothing faults, C itself is right, and the element-wise check passes: the kernel
would corrupt a user's program while the harness called it correct (issue 29; flashinfer's bench
adds red zones for the same reason). Here C lives at ``guard_bytes`` into a buffer of
``guard_bytes + nbytes + guard_bytes``; both guards are filled with bytes drawn fresh for every
point (a kernel cannot predict them, and a kernel that writes zeros or NaN is caught as surely as
one that writes its results; a byte written with the very value the pattern holds there goes
unseen, 1 in 256 per byte, so the count of bytes a message gives is a lower bound). A and B are copied into such buffers too, and every input's bytes
are kept (a copy on its device) and compared as well: a kernel that writes into A or B fails with
the first element it changed.

The checks run outside the timed region (between the checked call and the samples, and after the
samples), so they never change a timing; their cost is a few copies and compares of the guards and
inputs per point. Written once for NumPy and CuPy (``xp``). Inputs that are not arrays of ``xp``
(PyTorch FP8 tensors, whose device addresses key their recorded scales) stay where they are: their
bytes are still watched, only their neighbours are not guarded; ``extra.guards`` says so.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

ALIGN = 4096  # the guard's size is rounded up to this: the array keeps the allocation's alignment
COMPARE_CHUNK = 256 << 20  # an input's bytes are compared with the kept ones this many at a time


def guard_size(requested: int) -> int:
    """``measure.guard_bytes`` rounded up to ALIGN (0 stays 0: guards off)."""
    requested = int(requested)
    return 0 if requested <= 0 else -(-requested // ALIGN) * ALIGN


def _bytes_view(xp, x):
    """The bytes of a C-contiguous array of ``xp`` as a flat uint8 view (no copy)."""
    return x.reshape(-1).view(xp.uint8)


def _is_array_of(xp, x) -> bool:
    return isinstance(x, xp.ndarray)


@dataclass
class _Zone:
    """One array: its buffer, where it sits in it, the guard pattern, and the bytes to keep."""

    name: str
    shape: Tuple[int, ...]  # the shape of the array as laid out in memory (row-major)
    itemsize: int
    buf: Any = None  # the whole buffer (uint8), None for an input watched in place
    guard: int = 0
    nbytes: int = 0
    pattern: Any = None  # 2 x guard bytes: before, then after
    kept: Any = None  # an input's bytes as they were drawn
    live: Any = None  # an input's bytes now (a uint8 view of the array the kernel gets)


def _where(shape: Tuple[int, ...], elem: int) -> str:
    """Row and column (and batch) of the element at flat index ``elem`` of a row-major array."""
    idx = np.unravel_index(int(elem), shape) if shape else (int(elem),)
    if len(idx) == 1:
        return f"element {idx[0]}"
    names = ["row", "col"] if len(idx) == 2 else ["batch", "row", "col"]
    if len(idx) > 3:
        names = [f"dim {i}" for i in range(len(idx) - 2)] + ["row", "col"]
    return ", ".join(f"{n} {int(i)}" for n, i in zip(names, idx))


class Guards:
    """The guarded arrays of one point. ``output``/``input`` allocate them; ``violation`` says
    what a call broke (None if nothing)."""

    def __init__(self, xp, guard_bytes: int, rng: Optional[np.random.Generator] = None):
        self.xp = xp
        self.guard = guard_size(guard_bytes)
        self.rng = rng if rng is not None else np.random.default_rng()  # fresh entropy per point
        self.zones: List[_Zone] = []
        self.unguarded: List[str] = []  # inputs watched in place (not arrays of xp)
        self.cost_s = 0.0  # host time spent placing and comparing (what the guards add to a point)

    @property
    def on(self) -> bool:
        return self.guard > 0

    def _buffer(self, nbytes: int):
        xp, g = self.xp, self.guard
        buf = xp.empty(g + nbytes + g, dtype=xp.uint8)
        pattern = self.rng.integers(0, 256, size=2 * g, dtype=np.uint8)
        pattern = pattern if xp is np else xp.asarray(pattern)
        buf[:g] = pattern[:g]
        buf[g + nbytes:] = pattern[g:]
        return buf, pattern

    def _view(self, buf, shape, dtype):
        """The array at ``guard`` bytes into ``buf`` (built from the pointer: any dtype xp can hold,
        bfloat16 and FP8 included)."""
        xp, g = self.xp, self.guard
        if xp is np:
            return np.ndarray(shape, dtype=dtype, buffer=buf, offset=g)
        return xp.ndarray(shape, dtype=dtype, memptr=buf.data + g)

    def output(self, shape, dtype, name: str = "C"):
        """An empty array of ``shape`` and ``dtype`` between two guards (a plain one when off)."""
        t0 = time.perf_counter()
        try:
            return self._output(shape, dtype, name)
        finally:
            self.cost_s += time.perf_counter() - t0

    def _output(self, shape, dtype, name: str):
        xp = self.xp
        if not self.on:
            return xp.empty(shape, dtype=dtype)
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        buf, pattern = self._buffer(nbytes)
        self.zones.append(_Zone(name, tuple(shape), dtype.itemsize, buf, self.guard, nbytes, pattern))
        return self._view(buf, tuple(shape), dtype)

    def input(self, x, name: str):
        """``x`` copied between two guards, its bytes kept for comparison; returns the copy. An
        input that is not a C-contiguous array of xp is watched where it is (its bytes kept)."""
        t0 = time.perf_counter()
        try:
            return self._input(x, name)
        finally:
            self.cost_s += time.perf_counter() - t0

    def _input(self, x, name: str):
        xp = self.xp
        if not self.on:
            return x
        if not (_is_array_of(xp, x) and x.flags.c_contiguous):
            self._watch_in_place(x, name)
            return x
        buf, pattern = self._buffer(x.nbytes)
        y = self._view(buf, x.shape, x.dtype)
        live = buf[self.guard:self.guard + x.nbytes]
        live[...] = _bytes_view(xp, x)  # bytes, not values: no cast kernel for bfloat16 or FP8
        self.zones.append(_Zone(name, tuple(x.shape), x.dtype.itemsize, buf, self.guard, x.nbytes, pattern,
                                kept=live.copy(), live=live))
        return y

    def _watch_in_place(self, x, name: str) -> None:
        """Keep the bytes of an input that must stay where it is (a PyTorch tensor: its address
        keys its FP8 scales), as the row-major array its memory holds."""
        xp = self.xp
        shape, itemsize, live = _memory_of(xp, x)
        if live is None:
            self.unguarded.append(f"{name}: not watched ({type(x).__name__})")
            return
        self.unguarded.append(f"{name}: bytes watched, neighbours not guarded ({type(x).__name__})")
        self.zones.append(_Zone(name, shape, itemsize, kept=live.copy(), live=live))

    # -- the verdict ------------------------------------------------------------------------------
    def violation(self) -> Optional[str]:
        """What the calls so far broke: writes before or after an array, or an input changed.
        Each zone's first problem, joined with "; "; None if every guard and input is intact."""
        t0 = time.perf_counter()
        problems = [p for z in self.zones for p in self._check(z)]
        self.cost_s += time.perf_counter() - t0
        return "; ".join(problems) if problems else None

    def _check(self, z: _Zone) -> List[str]:
        xp, out = self.xp, []
        if z.buf is not None:
            g = z.guard
            before = xp.nonzero(z.buf[:g] != z.pattern[:g])[0]
            after = xp.nonzero(z.buf[g + z.nbytes:] != z.pattern[g:])[0]
            if len(after):
                out.append(f"wrote {_n_bytes(len(after))} after {z.name}'s end (first at offset "
                           f"+{int(after[0])})")
            if len(before):
                out.append(f"wrote {_n_bytes(len(before))} before {z.name}'s start (nearest at offset "
                           f"-{g - int(before[-1])})")
        if z.kept is not None:
            first, elems = _changed(xp, z.live, z.kept, z.itemsize)
            if elems:
                out.append(f"changed {z.name} (first at {_where(z.shape, first // z.itemsize)}; {elems} element"
                           f"{'s' if elems != 1 else ''})")
        return out

    def fields(self) -> Dict[str, Any]:
        """The row's guard columns before any verdict: the size per side (0: off)."""
        return {"guard_bytes": self.guard}

    def extra(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"bytes_per_side": self.guard, "zones": [z.name for z in self.zones],
                               "cost_s": round(self.cost_s, 6)}
        if self.unguarded:
            out["in_place"] = list(self.unguarded)
        return out


def _changed(xp, live, kept, itemsize: int, chunk: int = COMPARE_CHUNK) -> Tuple[int, int]:
    """(first changed byte, number of changed elements) of ``live`` against ``kept``, compared a
    chunk at a time: the compare's temporaries stay under ``chunk`` bytes however large the input
    (a whole-array compare of DeepSeek-V3's 256 experts in bf16 needed another 15 GB and ran a
    library point out of memory on an 80 GB card). Chunks hold whole elements."""
    step = max(itemsize, chunk - chunk % itemsize)
    first, elems = -1, 0
    for s in range(0, int(live.shape[0]), step):
        d = live[s:s + step] != kept[s:s + step]
        if not bool(d.any()):
            continue
        if first < 0:
            first = s + int(xp.argmax(d))
        elems += int(xp.count_nonzero(d.reshape(-1, itemsize).any(axis=1)))
        del d  # before the next chunk's compare: one chunk's temporaries at a time
    return first, elems


def prime_failure_path(xp) -> Optional[str]:
    """Every failure branch of the compare run once on a few bytes of ``xp``'s device: a byte written before and
    after a guarded output, an element of a guarded input changed. CuPy compiles the kernels of those branches
    (nonzero on a guard, argmax and the per-element any/count of ``_changed``) on first use; run inside the
    checked call's watchdog limit on a fresh machine, they could time out the very point whose stray write they
    were naming. Returns the message (all three problems), so a test sees every branch ran."""
    g = Guards(xp, ALIGN, np.random.default_rng(0))
    x = g.input(xp.arange(8, dtype=xp.float32).reshape(2, 4), "A")
    g.output((2, 4), np.float32, "C")
    c = g.zones[-1]
    c.buf[0:1] = c.pattern[0:1] ^ 1
    c.buf[c.guard + c.nbytes:c.guard + c.nbytes + 1] = c.pattern[c.guard:c.guard + 1] ^ 1
    x[1, 2] = -1.0
    return g.violation()


def _n_bytes(n) -> str:
    n = int(n)
    return f"{n} byte{'s' if n != 1 else ''}"


def _memory_of(xp, x):
    """(shape in memory, itemsize, uint8 view of its bytes on xp's device) of an array-like that
    is not an array of xp (a PyTorch tensor), or (None, 0, None) where that cannot be had."""
    try:
        import torch
    except ImportError:
        return None, 0, None
    if not isinstance(x, torch.Tensor):
        return None, 0, None
    if x.is_contiguous():
        shape = tuple(x.shape)
    elif x.dim() == 2 and x.t().is_contiguous():
        shape = tuple(x.t().shape)  # a transposed view: watched as the row-major array it stores
    else:
        return None, 0, None
    n = x.numel() * x.element_size()
    if xp is np:
        if x.is_cuda:
            return None, 0, None
        return shape, x.element_size(), np.frombuffer(
            (np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * n).from_address(x.data_ptr()))), np.uint8)
    mem = xp.cuda.UnownedMemory(x.data_ptr(), n, x)
    return shape, x.element_size(), xp.ndarray((n,), dtype=xp.uint8, memptr=xp.cuda.MemoryPointer(mem, 0))
