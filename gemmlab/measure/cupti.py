"""Kernel-only sample times from CUPTI activity records (``measure.timer=cupti``).

A CUDA event pair times everything the stream does between the two events: the GPU front end
starting the call's first kernel after the start event, the call's kernels, and the gaps between
them. CUPTI's concurrent-kernel records carry each kernel's own start and end on the GPU (ns), so a
sample can instead span from the call's first kernel starting to its last kernel ending.

The timer still records its events (they drive the stopping rule and stay in the row as
``extra.timer.event_median_s``); this module only turns the records of one measurement back into
per-sample times. Records are split into samples at the timer's own work between samples: the L2
flush (a memset of exactly ``flush_bytes``), the discard kernel after it, and the spin kernel.
Everything else on the stream belongs to a call, including memsets a library issues itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence

SEPARATOR_KERNELS = ("gemmlab_spin", "gemmlab_l2_discard")


@dataclass(frozen=True)
class Record:
    kind: str  # "kernel" | "memset" | "memcpy"
    name: str  # kernel name ("" for a memset)
    start_ns: int
    end_ns: int
    bytes: int = 0  # memset / memcpy size


def is_separator(r: Record, flush_bytes: Optional[int]) -> bool:
    if r.kind == "kernel":
        return r.name in SEPARATOR_KERNELS
    return flush_bytes is not None and r.kind == "memset" and r.bytes == flush_bytes


def split_samples(records: Iterable[Record], flush_bytes: Optional[int]) -> List[List[Record]]:
    """The call's records of each sample, in stream order: a sample is a maximal run of records
    between the timer's separators (flush memset, discard or spin kernel); runs of separators with
    nothing between them make no sample."""
    samples, cur = [], []
    for r in sorted(records, key=lambda r: (r.start_ns, r.end_ns)):
        if is_separator(r, flush_bytes):
            if cur:
                samples.append(cur)
            cur = []
        else:
            cur.append(r)
    if cur:
        samples.append(cur)
    return samples


def span_s(sample: Sequence[Record]) -> float:
    """Seconds from the first record's start to the last record's end."""
    return (max(r.end_ns for r in sample) - min(r.start_ns for r in sample)) * 1e-9


def kernel_names(sample: Sequence[Record]) -> List[str]:
    """The kernels one sample launched, in order (which kernel a library picked for the call)."""
    return [r.name for r in sample if r.kind == "kernel"]


def assign(spans: Sequence[float], order: Sequence[int], n_calls: int) -> List[List[float]]:
    """Give each call its samples: ``order[k]`` is the call whose sample was enqueued k-th."""
    if len(spans) != len(order):
        raise RuntimeError(f"CUPTI saw {len(spans)} samples where the timer enqueued {len(order)}: "
                           "a call launched work the timer cannot tell from its own (or records "
                           "were dropped); time this call with measure.timer=events")
    out: List[List[float]] = [[] for _ in range(n_calls)]
    for i, s in zip(order, spans):
        out[i].append(s)
    return out


class KernelTrace:
    """Collects CUPTI concurrent-kernel, memset and memcpy records between ``start()`` and ``stop()``.

    One per process: CUPTI's activity callbacks are process-wide."""

    _instance: Optional["KernelTrace"] = None

    def __init__(self):
        try:
            from cupti import cupti
        except ImportError as e:
            raise RuntimeError("measure.timer=cupti needs CUPTI's Python bindings: "
                               "pip install cupti-python (they bring libcupti)") from e
        self._c = cupti
        self._records: List[Record] = []
        self._kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMSET,
                       cupti.ActivityKind.MEMCPY)
        cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)

    @classmethod
    def get(cls) -> "KernelTrace":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    @staticmethod
    def _buffer_requested():
        return 8 << 20, 0  # bytes per buffer, no limit on records

    def _buffer_completed(self, activities):
        kinds = self._c.ActivityKind
        kernel, memset, memcpy = int(kinds.CONCURRENT_KERNEL), int(kinds.MEMSET), int(kinds.MEMCPY)
        for a in activities:
            k = int(a.kind)
            if k == kernel:
                self._records.append(Record("kernel", str(a.name), int(a.start), int(a.end)))
            elif k == memset:
                self._records.append(Record("memset", "", int(a.start), int(a.end), int(a.bytes)))
            elif k == memcpy:  # a call may copy (the transfer probes time nothing else)
                self._records.append(Record("memcpy", "", int(a.start), int(a.end), int(getattr(a, "bytes", 0))))

    def start(self) -> None:
        self._c.activity_flush_all(1)  # drop whatever an earlier measurement left behind
        self._records = []
        for k in self._kinds:
            self._c.activity_enable(k)

    def stop(self) -> List[Record]:
        """Stop collecting and return the records (the stream must have finished the work)."""
        for k in self._kinds:
            self._c.activity_disable(k)
        self._c.activity_flush_all(1)
        records, self._records = self._records, []
        return records
