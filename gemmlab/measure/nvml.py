"""SM and memory clocks, power and temperature from NVML, sampled in a background thread while samples run.

The GPU is asynchronous, so the host cannot read the clock "at" a kernel; instead a thread polls
NVML every few milliseconds and each batch of samples claims the readings taken between its first
enqueue and its synchronisation. Without nvidia-ml-py (or NVML) the columns stay empty.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

log = logging.getLogger("gemmlab")


@dataclass
class ClockStats:
    sm_clock_min_mhz: Optional[float] = None
    sm_clock_max_mhz: Optional[float] = None
    power_w: Optional[float] = None
    temperature_c: Optional[float] = None
    readings: int = 0
    drift: Optional[float] = None  # (median of the last third - of the first third) / max clock
    foreign_pids: Tuple[int, ...] = ()  # other processes seen on the GPU while sampling
    mem_clock_min_mhz: Optional[float] = None  # the memory clock's range (an idle GPU may run it lower)
    mem_clock_max_mhz: Optional[float] = None

    def fields(self, limit_mhz: Optional[float], throttle_fraction: float, stable_fraction: float) -> Dict:
        out = {"sm_clock_min_mhz": self.sm_clock_min_mhz, "sm_clock_max_mhz": self.sm_clock_max_mhz,
               "power_w": self.power_w, "temperature_c": self.temperature_c,
               "sm_clock_limit_mhz": limit_mhz,
               "mem_clock_min_mhz": self.mem_clock_min_mhz, "mem_clock_max_mhz": self.mem_clock_max_mhz}
        if self.readings:
            lo, hi = self.sm_clock_min_mhz, self.sm_clock_max_mhz
            out["clock_stable"] = (hi - lo) <= stable_fraction * hi
            out["throttled"] = bool(limit_mhz) and lo < throttle_fraction * limit_mhz
        return out


class Nvml:
    """One device's NVML handle for clocks, power and temperature, found by PCI bus id so
    CUDA_VISIBLE_DEVICES cannot confuse it (the GPU's identity: gemmlab.gpu.identity.gpu_identity)."""

    def __init__(self, pci_bus_id: str):
        self.ok = False
        self.reason = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self._n = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            self.max_sm_clock_mhz = float(pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM))
            self.ok = True
        except Exception as e:  # ImportError, NVMLError
            self.reason = f"NVML unavailable ({type(e).__name__}: {e})"
            self.max_sm_clock_mhz = None
            log.warning(self.reason)

    def processes(self) -> Optional[List[int]]:
        """PIDs of every process with a CUDA context on this GPU (NVML), or None if unknown."""
        if not self.ok:
            return None
        n = self._n
        try:
            return [int(p.pid) for p in n.nvmlDeviceGetComputeRunningProcesses(self.handle)]
        except Exception:  # not supported here: contention cannot be told
            return None

    def foreign(self) -> Optional[List[int]]:
        """Processes on this GPU that are not this run (nor its children), or None if unknown."""
        return foreign_pids(self.processes())

    # -- energy (gemmlab/measure/energy.py) --------------------------------------------------------
    energy_reason = ""

    def energy_mj(self) -> Optional[float]:
        """NVML's total energy counter, millijoules since the driver loaded; None where it has none."""
        if not self.ok:
            self.energy_reason = self.reason
            return None
        try:
            return float(self._n.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception as e:  # NVMLError_NotSupported on boards without the counter
            self.energy_reason = f"NVML energy counter unavailable ({type(e).__name__}: {e})"
            return None

    def power_limit_w(self) -> Optional[float]:
        """The enforced power limit, W (NVML reports milliwatts)."""
        try:
            return self._n.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0 if self.ok else None
        except Exception:
            return None

    def throttle_mask(self) -> Optional[int]:
        """Why the clocks are below their maximum now (NVML clocks-event reasons, a bitmask)."""
        if not self.ok:
            return None
        n = self._n
        get = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(n, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        try:
            return int(get(self.handle)) if get else None
        except Exception:
            return None

    def read(self) -> Tuple[float, float, float, float]:
        """SM clock (MHz), board power (W; NaN where NVML cannot say), temperature (C) and memory
        clock (MHz; NaN where NVML cannot say)."""
        n = self._n
        clk = n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM)
        try:
            pw = n.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        except n.NVMLError:
            pw = float("nan")
        tmp = n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU)
        try:
            mem = float(n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_MEM))
        except n.NVMLError:
            mem = float("nan")
        return float(clk), float(pw), float(tmp), mem


def _parent(pid: int) -> Optional[int]:
    """``pid``'s parent (/proc/PID/stat), or None where it is gone or cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _descends(pid: int, roots: set) -> bool:
    """Whether ``pid`` is one of ``roots`` or below one: its own ancestor chain, a few reads. The
    sampler asks this before the samples and every 50 ms while they run. Until
    2026-12-07 it read all of /proc instead (about 2 ms of Python for 80 processes) whenever
    a process of this run's tree held a context of its own, e.g. the shared worker a test session
    keeps. That GIL time lands on the thread enqueuing the samples. It was suspected in the flush test that
    failed only after test_gpu_decode.py (tests/test_gpu_core.py), but the old scan put back did not fail that test
    on an H100 (h100-2026-12-07/session47): a few reads instead of all of /proc is kept for its own sake."""
    for _ in range(64):  # deeper than any real process tree; a cycle cannot loop forever
        if pid in roots:
            return True
        ppid = _parent(pid)
        if ppid is None or ppid == pid or ppid < 1:  # (1 may be a root: a run that is a container's init)
            return False
        pid = ppid
    return False


def _own_tree(roots: Optional[set] = None) -> set:
    """This process (or ``roots``) and its descendants (children it started, e.g. probe
    subprocesses)."""
    roots = set(roots or {os.getpid()})
    me = os.getpid()
    parents: Dict[int, int] = {}
    try:
        for d in os.listdir("/proc"):
            if d.isdigit() and (ppid := _parent(int(d))) is not None:
                parents[int(d)] = ppid
    except OSError:
        return roots | {me}
    tree, grew = roots | {me}, True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def foreign_pids(pids: Optional[List[int]]) -> Optional[List[int]]:
    """Those of ``pids`` that are not this run. When this process is not among them at all (a PID
    namespace NVML does not share), one of them is taken to be this run. A worker's run is its
    runner too (``GEMMLAB_RUNNER_PID``, set by gemmlab/measure/worker): a runner process that holds
    a context of its own (a test session) is not another program on the GPU."""
    if pids is None:
        return None
    me = os.getpid()
    if me not in pids:
        return sorted(pids)[1:] if len(pids) > 1 else []
    roots = {me} | _runner_pid()
    others = [p for p in pids if p not in roots]
    return sorted(p for p in others if not _descends(p, roots))


def _runner_pid() -> set:
    pid = os.environ.get("GEMMLAB_RUNNER_PID", "")
    return {int(pid)} if pid.isdigit() else set()


class Sampler:
    """Polls NVML in a thread; ``window(spans)`` summarises readings taken inside the spans. Every
    ``PROCESS_EVERY`` readings it also lists the GPU's processes, to catch another run."""

    PROCESS_EVERY = 10

    def __init__(self, nvml: Nvml, period_s: float = 0.005):
        self.nvml, self.period_s = nvml, period_s
        self.readings: List[Tuple[float, ...]] = []  # (time, SM clock, power, temperature, memory clock)
        self.foreign: set = set()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self):
        if self.nvml.ok:
            # The first reading and process list on the caller's thread, before it queues a sample: run in the
            # thread, they overlapped the first samples, the whole of a short call's sample loop (~5 ms for 100
            # samples of 50 us), with whatever GIL time they take (tests/test_gpu_core.py's flush tests)
            self._reading(0)
            self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def _reading(self, i: int) -> None:
        try:
            self.readings.append((time.perf_counter(), *self.nvml.read()))
            if i % self.PROCESS_EVERY == 0:
                self.foreign.update(self.nvml.foreign() or ())
        except Exception:  # a failed read must never stop the measurement
            pass

    def _run(self):
        i = 1
        while not self._stop.wait(self.period_s):
            self._reading(i)
            i += 1

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=1.0)

    def now(self) -> float:
        return time.perf_counter()

    def window(self, spans: List[Tuple[float, float]]) -> ClockStats:
        sel = [r for r in list(self.readings) if any(t0 <= r[0] <= t1 for t0, t1 in spans)]
        if not sel and self.nvml.ok:  # very short spans: take one reading now
            try:
                sel = [(0.0, *self.nvml.read())]
            except Exception:
                sel = []
        if not sel:
            return ClockStats()
        clocks = [r[1] for r in sel]
        powers = [r[2] for r in sel if r[2] == r[2]]
        mems = [r[4] for r in sel if len(r) > 4 and r[4] == r[4]]
        return ClockStats(min(clocks), max(clocks), sum(powers) / len(powers) if powers else None,
                          max(r[3] for r in sel), len(sel), drift(clocks), tuple(sorted(self.foreign)),
                          min(mems, default=None), max(mems, default=None))


def drift(clocks: List[float]) -> Optional[float]:
    """How far the clock moved over a series, in order: (median of the last third - median of
    the first third) / the largest reading. An oscillation around a settled level (a power-capped
    GEMM) gives ~0; a clock still falling when the samples began gives a large negative value."""
    if len(clocks) < 6:
        return None
    third = len(clocks) // 3
    first, last = sorted(clocks[:third]), sorted(clocks[-third:])
    top = max(clocks)
    return (last[len(last) // 2] - first[len(first) // 2]) / top if top > 0 else None
