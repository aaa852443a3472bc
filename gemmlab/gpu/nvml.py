"""SM clock, power and temperature from NVML, sampled in a background thread while samples run.

The GPU is asynchronous, so the host cannot read the clock "at" a kernel; instead a thread polls
NVML every few milliseconds and each batch of samples claims the readings taken between its first
enqueue and its synchronisation. Without nvidia-ml-py (or NVML) the columns stay empty.
"""
from __future__ import annotations

import logging
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

    def fields(self, limit_mhz: Optional[float], throttle_fraction: float, stable_fraction: float) -> Dict:
        out = {"sm_clock_min_mhz": self.sm_clock_min_mhz, "sm_clock_max_mhz": self.sm_clock_max_mhz,
               "power_w": self.power_w, "temperature_c": self.temperature_c,
               "sm_clock_limit_mhz": limit_mhz}
        if self.readings:
            lo, hi = self.sm_clock_min_mhz, self.sm_clock_max_mhz
            out["clock_stable"] = (hi - lo) <= stable_fraction * hi
            out["throttled"] = bool(limit_mhz) and lo < throttle_fraction * limit_mhz
        return out


class Nvml:
    """One device's NVML handle for clocks, power and temperature, found by PCI bus id so
    CUDA_VISIBLE_DEVICES cannot confuse it (the GPU's identity: gemmlab.gpu_pinning.gpu_identity)."""

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

    def read(self) -> Tuple[float, float, float]:
        n = self._n
        clk = n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM)
        try:
            pw = n.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        except n.NVMLError:
            pw = float("nan")
        tmp = n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU)
        return float(clk), float(pw), float(tmp)


class Sampler:
    """Polls NVML in a thread; ``window(t0, t1)`` summarises readings taken in [t0, t1]."""

    def __init__(self, nvml: Nvml, period_s: float = 0.005):
        self.nvml, self.period_s = nvml, period_s
        self.readings: List[Tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self):
        if self.nvml.ok:
            self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            try:
                clk, pw, tmp = self.nvml.read()
                self.readings.append((time.perf_counter(), clk, pw, tmp))
            except Exception:  # a failed read must never stop the measurement
                pass
            self._stop.wait(self.period_s)

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
                clk, pw, tmp = self.nvml.read()
                sel = [(0.0, clk, pw, tmp)]
            except Exception:
                sel = []
        if not sel:
            return ClockStats()
        clocks = [r[1] for r in sel]
        powers = [r[2] for r in sel if r[2] == r[2]]
        return ClockStats(min(clocks), max(clocks), sum(powers) / len(powers) if powers else None,
                          max(r[3] for r in sel), len(sel))
