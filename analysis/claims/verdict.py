"""Verdicts: the four words, a claim's parts, and the rules that turn a measured number into a
verdict (each can come out "does not hold")."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Sequence

import pandas as pd

from .chapter import FASTER_MIN_GAIN, ORDER_HALF_DECADES, SAME_NUMBER_REL

HOLDS = "holds"
OTHER_NUMBER = "holds with another number"
DOES_NOT_HOLD = "does not hold"
NOT_MEASURED = "not measured"
VERDICTS = (HOLDS, OTHER_NUMBER, DOES_NOT_HOLD, NOT_MEASURED)
_SEVERITY = {HOLDS: 0, OTHER_NUMBER: 1, DOES_NOT_HOLD: 2}

NO_PROBE = "no probe in the harness measures it yet"  # a NOT_MEASURED part no experiment can fill


@dataclass
class Part:
    """One checked statement of a claim."""

    what: str  # the statement
    verdict: str
    measured: str = ""  # numbers and where they come from
    rule: str = ""  # the threshold that decided
    numbers: Dict[str, float] = field(default_factory=dict)
    missing: str = ""  # for NOT_MEASURED: what would measure it
    from_rows: bool = True  # False: a fact of a kernel's config, which alone measures nothing


@dataclass
class Verdict:
    claim: str
    section: str
    chapter: str
    figure: str
    parts: List[Part]
    device: str = ""

    @property
    def verdict(self) -> str:
        if all(p.verdict == NOT_MEASURED for p in self.parts if p.from_rows):
            return NOT_MEASURED  # a config fact alone is no measurement
        return combine([p.verdict for p in self.parts])

    def numbers(self) -> Dict[str, float]:
        out: Dict[str, float] = {}
        for p in self.parts:
            out.update(p.numbers)
        return out


def combine(verdicts: Sequence[str]) -> str:
    """The worst measured verdict; NOT_MEASURED only when nothing was measured."""
    measured = [v for v in verdicts if v != NOT_MEASURED]
    if not measured:
        return NOT_MEASURED
    return max(measured, key=_SEVERITY.__getitem__)


def _decades(measured: float, reference: float) -> float:
    return abs(math.log10(measured / reference)) if measured > 0 and reference > 0 else math.inf


def same_number(measured: float, chapter: float, rel: float = SAME_NUMBER_REL) -> str:
    """HOLDS within ``rel`` of ``chapter``; OTHER_NUMBER within the same order of magnitude (a
    factor below 10**ORDER_HALF_DECADES); DOES_NOT_HOLD beyond (or at a sign the chapter's
    number does not have)."""
    if abs(measured - chapter) <= rel * abs(chapter):
        return HOLDS
    return OTHER_NUMBER if _decades(measured, chapter) < ORDER_HALF_DECADES else DOES_NOT_HOLD


SAME_NUMBER_RULE = (f"within ±{SAME_NUMBER_REL:.0%}: holds; within a factor {10 ** ORDER_HALF_DECADES:.1f}: "
                    f"another number; beyond: does not hold")


def in_range(measured: float, lo: float, hi: float) -> str:
    """HOLDS inside [lo, hi]; OTHER_NUMBER within a factor 10**ORDER_HALF_DECADES of the nearer
    end; DOES_NOT_HOLD beyond."""
    if lo <= measured <= hi:
        return HOLDS
    edge = lo if measured < lo else hi
    return OTHER_NUMBER if _decades(measured, edge) < ORDER_HALF_DECADES else DOES_NOT_HOLD


RANGE_RULE = (f"inside: holds; within a factor {10 ** ORDER_HALF_DECADES:.1f} of the range: another number; "
              f"beyond: does not hold")


def orders(ratio: float) -> int:
    """Orders of magnitude of a ratio, rounded (1.5 -> 0, 8 -> 1, 48 -> 2)."""
    return int(round(math.log10(ratio))) if ratio > 0 else 0


def same_orders(ratio: float, expected: int) -> str:
    """HOLDS when ``ratio`` rounds to ``expected`` orders of magnitude, else DOES_NOT_HOLD."""
    return HOLDS if ratio > 0 and orders(ratio) == expected else DOES_NOT_HOLD


def faster(a: pd.Series, b: pd.Series) -> bool:
    """``a`` is faster than ``b`` beyond their noise: a's p80 below b's p20 (or, without
    quantiles, a median FASTER_MIN_GAIN lower)."""
    if pd.notna(a.get("time_p80_s")) and pd.notna(b.get("time_p20_s")):
        return float(a["time_p80_s"]) < float(b["time_p20_s"])
    return float(a["time_median_s"]) < (1 - FASTER_MIN_GAIN) * float(b["time_median_s"])


def not_measured(what: str, missing: str, rule: str = "") -> Part:
    return Part(what, NOT_MEASURED, rule=rule, missing=missing)


def need_rows(what: str, experiment: str) -> str:
    """What a NOT_MEASURED part lacks: rows of ``what`` and the command that makes them."""
    return f"rows of {what}: python run.py +experiment={experiment}"
