"""The one reader of ``conf/device/``: each device's datasheet (peaks, bandwidth, source) and which
datasheet names a device seen in rows.

Datasheets are facts about hardware, not about a measurement: analysis compares measured rows with
them (the roofline's dashed roofs, the claims' chapter numbers) and reads them here, never from
``conf/`` itself.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Tuple

from omegaconf import OmegaConf

from gemmlab.paths import CONF_DIR

DEVICE_DIR = CONF_DIR / "device"
# Datasheet used when no config's name matches the rows' device (the project's GPU).
FALLBACK = {"gpu": "h200", "cpu": "cpu"}


@dataclass(frozen=True)
class DeviceConfig:
    stem: str  # conf/device/<stem>.yaml
    name: str
    kind: str
    memory_bandwidth_gbs: float
    peak_tflops: Mapping[str, float]
    source: str


@functools.lru_cache(maxsize=None)
def configs(folder: Path = DEVICE_DIR) -> Tuple[DeviceConfig, ...]:
    out = []
    for path in sorted(Path(folder).glob("*.yaml")):
        node = OmegaConf.load(path)
        out.append(DeviceConfig(path.stem, str(node.name), str(node.get("kind", "gpu")),
                                float(node.memory_bandwidth_gbs),
                                {str(k): float(v) for k, v in node.get("peak_tflops", {}).items()},
                                str(node.get("source", ""))))
    return tuple(out)


def match(device: Optional[str], kind: str) -> Tuple[DeviceConfig, bool]:
    """The config whose ``name`` matches ``device`` (exact, contained, or its file stem as a
    word of the device name), else the fallback for ``kind``; and whether it matched."""
    every = configs()
    candidates = [c for c in every if c.kind == kind] or list(every)
    if device:
        d = device.lower()
        for test in (lambda c: c.name.lower() == d,
                     lambda c: c.name.lower() in d or d in c.name.lower(),
                     # a stem that is the kind itself (conf/device/cpu.yaml, a generic CPU) names no
                     # model: "Intel(R) Core(TM) i7 CPU" is not that config's machine
                     lambda c: c.stem.lower() != c.kind and
                     re.search(rf"\b{re.escape(c.stem.lower())}\b", d) is not None):
            for c in candidates:
                if test(c):
                    return c, True
    by_stem = {c.stem: c for c in every}
    fallback = by_stem.get(FALLBACK.get(kind, "h200")) or candidates[0]
    return fallback, False
