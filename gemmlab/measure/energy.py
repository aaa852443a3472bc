"""Energy per call: the timed call run back to back for ``measure.energy_s``, NVML's total energy
counter read before and after (``measure.energy=true``).

Why the counter and not power x time: on the H200 ``nvmlDeviceGetPowerUsage`` is an average over a
past window and lags; polled over 2 s of BF16 GEMMs from idle it read 21% under the counter
(../shared/gpu-host/README.md). The counter (millijoules since the driver loaded) integrates the
board's power; the window starts after a short lead-in at the same work so the clock has settled
where the timed samples saw it. The polled power and clocks over the window are kept beside it:
``energy_vs_power_x_time`` (counter / polled mean power x window) says how far the two agree.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Dict, Optional

# NVML's clocks-event (throttle) reason bits (nvml.h, nvmlClocksEventReason*): a row names them
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
LEAD_IN_FRACTION = 0.2  # of energy_s, at the same work before the counter is read
MIN_CALLS = 3


def reason_names(mask: Optional[int]) -> str:
    """``"sw_power_cap,hw_slowdown"`` for a reason bitmask ("" for none; unknown bits by value)."""
    if not mask:
        return ""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_REASONS)
    if rest:
        names.append(hex(rest))
    return ",".join(names)


@dataclass
class EnergyWindow:
    calls: int
    window_s: float
    energy_j: float  # over the window, from the counter
    power_polled_w: Optional[float]
    sm_clock_avg_mhz: Optional[float]
    power_limit_w: Optional[float]
    throttle_mask: int

    def fields(self, flops: int) -> Dict:
        per_call = self.energy_j / self.calls
        out = {"energy_j": per_call,
               "gflops_per_joule": flops / per_call / 1e9 if per_call > 0 else None,
               "power_avg_w": self.energy_j / self.window_s if self.window_s > 0 else None,
               "power_limit_w": self.power_limit_w, "sm_clock_avg_mhz": self.sm_clock_avg_mhz,
               "throttle_reasons": reason_names(self.throttle_mask)}
        extra = {"calls": self.calls, "window_s": round(self.window_s, 6), "energy_window_j": round(self.energy_j, 6)}
        if self.power_polled_w and self.window_s > 0:
            extra["power_polled_w"] = round(self.power_polled_w, 3)
            extra["energy_vs_power_x_time"] = round(self.energy_j / (self.power_polled_w * self.window_s), 4)
        return {**out, "_energy_extra": extra}


def measure(fn: Callable[[], None], sync: Callable[[], None], nvml, call_s: float, energy_s: float,
            sampler_factory: Callable, clock: Callable[[], float] = time.perf_counter) -> EnergyWindow:
    """Run ``fn`` back to back for about ``energy_s`` (after a lead-in of LEAD_IN_FRACTION of it)
    and read the energy counter around the window. ``call_s``: the call's timed median, to size
    the batches; ``sync`` waits for the device. Raises RuntimeError when NVML has no counter."""
    start_mj = nvml.energy_mj()
    if start_mj is None:
        raise RuntimeError(nvml.energy_reason or "NVML has no energy counter on this device")
    per_batch = max(1, int(math.ceil(0.01 / max(call_s, 1e-9))))  # about 10 ms of work per batch
    lead = max(1, int(math.ceil(LEAD_IN_FRACTION * energy_s / max(call_s, 1e-9) / per_batch)))
    for _ in range(lead):
        for _ in range(per_batch):
            fn()
        sync()
    calls, mask = 0, 0
    with sampler_factory() as sampler:
        sync()
        e0, t0 = nvml.energy_mj(), clock()
        while True:
            for _ in range(per_batch):
                fn()
            calls += per_batch
            sync()
            mask |= nvml.throttle_mask() or 0
            if clock() - t0 >= energy_s and calls >= MIN_CALLS:
                break
        t1, e1 = clock(), nvml.energy_mj()
        stats = sampler.window([(t0, t1)])
    if e1 is None or e1 < e0:
        raise RuntimeError("NVML's energy counter went backwards or vanished during the window")
    sm_avg = None
    readings = [r for r in getattr(sampler, "readings", []) if t0 <= r[0] <= t1]
    if readings:
        sm_avg = sum(r[1] for r in readings) / len(readings)
    return EnergyWindow(calls, t1 - t0, (e1 - e0) / 1000.0, stats.power_w, sm_avg, nvml.power_limit_w(), mask)

