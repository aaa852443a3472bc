"""Every figure of the paper: ``FIGURES[name](dataset) -> matplotlib Figure``.

Each builder returns the Figure without saving it, so tests can read its series (artist gids,
see ``analysis.style.series_of``) and notes; ``analysis.paper`` saves them.
"""
from __future__ import annotations

from typing import Callable, Dict

from matplotlib.figure import Figure

from . import (crossover, decode, energy_efficiency, errors, hierarchical_roofline, inputs_power, ladder, power_clock, roofline,
               throughput, tuning_regret)

FIGURES: Dict[str, Callable[..., Figure]] = {
    "roofline": roofline.build,
    "ladder": ladder.build,
    "throughput_vs_size": throughput.build,
    "error_vs_precision": errors.build,
    "cpu_gpu_crossover": crossover.build,
    "hierarchical_roofline": hierarchical_roofline.build,
    "tuning_regret": tuning_regret.build,
    "energy_efficiency": energy_efficiency.build,
    "power_clock": power_clock.build,
    "inputs_power": inputs_power.build,
    "decode": decode.build,
}
