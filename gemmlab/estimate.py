"""What a run will take, said before it starts: time and peak memory per device.

``python run.py sizes.square=[16384]`` with the host BLAS used to start silently and print nothing
for minutes. The runner now prints one line per device first, e.g.::

    gemmlab: about 3 min 10 s on the GPU (87 points, peak 2.1 GiB of device memory),
             about 20 s on the host (6 points, peak 0.4 GiB of 22.0 GiB free)

The time of a point is the timing settings' own budget (warm-up, samples up to the stopping rule,
the baselines interleaved with it, the energy window) plus its calls at a rate a working kernel
reaches (the device's datasheet peak for GPU points, HOST_FLOPS_PER_CORE per core for host
points): an estimate, good to a factor of two, meant to tell seconds from hours. Peak memory is
gemmlab/measure/footprint.py's, the same figure the executors use to skip a point that does not
fit (the device's free memory is checked by the worker as each point starts).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional

from gemmlab.measure import footprint

HOST_FLOPS_PER_CORE = 2e10  # a host BLAS core in FP32 (AVX2/AVX-512 FMA at ~60% of peak); FP64 half
SETUP_S = 0.2  # inputs, the FP64 reference, launch objects: per point, small sizes


@dataclass
class DeviceEstimate:
    points: int = 0
    seconds: float = 0.0
    peak_bytes: int = 0
    largest: Optional[str] = None  # the point that sets the peak


@dataclass
class Estimate:
    by_kind: Dict[str, DeviceEstimate] = field(default_factory=dict)

    def lines(self, host_free: Optional[int] = None) -> List[str]:
        out = []
        for kind, e in sorted(self.by_kind.items()):
            where = "on the GPU" if kind == "gpu" else "on the host"
            mem = f"peak {_gib(e.peak_bytes)} of {'device' if kind == 'gpu' else 'host'} memory"
            if kind == "cpu" and host_free:
                mem += f", {_gib(host_free)} free"
            out.append(f"about {_duration(e.seconds)} {where} ({e.points} points, {mem}; largest: {e.largest})")
        return out


def point_seconds(p, measure, rate_flops: float, n_baselines: int = 0) -> float:
    """Expected seconds of one point: its check, warm-up and samples (the stopping rule's
    minimums, capped by its maximums) for it and each baseline, and the energy window."""
    call = p.flops / max(rate_flops, 1.0)
    check = max(1, int(measure.check_repeats)) * call * 2 if measure.check else 0.0  # and the recheck
    samples = min(max(measure.min_time_s, measure.min_samples * call), max(measure.max_time_s, measure.min_samples * call))
    warm = max(measure.warmup_s, measure.warmup_min_iters * call)
    energy = measure.energy_s if measure.energy else 0.0
    return SETUP_S + check + (1 + n_baselines) * (warm + samples) + energy


def host_rate(p) -> float:
    cores = os.cpu_count() or 1
    return HOST_FLOPS_PER_CORE * cores * (0.5 if p.compute == "fp64" else 1.0)


def estimate(points: Iterable, kind_of, cfg, n_baselines_of=lambda p: 0) -> Estimate:
    """The estimate of ``points`` (those that will run: not skipped): ``kind_of(point)`` is its
    executor's kind ("cpu" or "gpu"), ``n_baselines_of(point)`` how many baselines are timed with it."""
    out = Estimate()
    peaks = cfg.device.peak_tflops or {}
    for p in points:
        kind = kind_of(p)
        e = out.by_kind.setdefault(kind, DeviceEstimate())
        rate = host_rate(p) if kind == "cpu" else 1e12 * float(peaks.get(p.compute) or max(peaks.values(), default=1.0))
        e.points += 1
        e.seconds += point_seconds(p, cfg.measure, rate, n_baselines_of(p))
        need = footprint.point_bytes(p, cfg.measure)
        if need > e.peak_bytes:
            e.peak_bytes, e.largest = need, f"{p.variant} {p.precision} {p.m}x{p.n}x{p.k}"
    return out


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**27 else f"{n / 2**20:.0f} MiB"


def _duration(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
