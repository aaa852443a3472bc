"""The claims, registered by the :func:`claim` decorator beside their checks, and
:func:`evaluate`, which runs every check on one dataset in the chapter's order."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from .. import data
from .evidence import Evidence
from .verdict import NOT_MEASURED, Part, Verdict

Check = Callable[[Evidence], List[Part]]


@dataclass(frozen=True)
class Claim:
    id: str
    section: str
    chapter: str
    figure: str  # where the paper shows it (analysis.figures.FIGURES / tables), or "probe rows"
    check: Check
    kinds: Tuple[str, ...] = ("gpu",)  # the devices its rows come from


_REGISTRY: Dict[str, Claim] = {}


def claim(claim_id: str, section: str, chapter: str, figure: str, kinds: Tuple[str, ...] = ("gpu",)):
    """Register the decorated function as the check of claim ``claim_id`` (each id once)."""
    def register(check: Check) -> Check:
        if claim_id in _REGISTRY:
            raise ValueError(f"claim {claim_id} registered twice: by {_REGISTRY[claim_id].check.__module__} "
                             f"and by {check.__module__}")
        _REGISTRY[claim_id] = Claim(claim_id, section, chapter, figure, check, kinds)
        return check
    return register


def chapter_order(claim_id: str) -> Tuple[int, str]:
    """C1 < C2 < ... < C13 < C14a < C14b: the number, then the letter."""
    m = re.fullmatch(r"C(\d+)([a-z]?)", claim_id)
    if m is None:
        raise ValueError(f"not a claim id: {claim_id!r}")
    return int(m.group(1)), m.group(2)


def registered() -> Tuple[Claim, ...]:
    """Every registered claim, in the chapter's order."""
    return tuple(sorted(_REGISTRY.values(), key=lambda c: chapter_order(c.id)))


def evaluate(ds: data.Dataset, ids: Optional[Iterable[str]] = None) -> List[Verdict]:
    """A verdict for every claim (of ``ids``, where given), in the chapter's order, from the rows
    of ``ds``. Each claim's check reads only the rows: evaluating one alone gives the verdict it
    has among all (a test of one claim need not pay for the other twenty)."""
    ev = Evidence(ds)
    wanted = None if ids is None else set(ids)
    out = []
    for c in registered():
        if wanted is not None and c.id not in wanted:
            continue
        try:
            parts = c.check(ev)
        except Exception as e:  # a malformed row must not hide the other claims
            parts = [Part("evaluation", NOT_MEASURED, missing=f"error while evaluating: {type(e).__name__}: {e}")]
        device = " and ".join(ev.gpu_label if k == "gpu" else ev.cpu_label for k in c.kinds)
        out.append(Verdict(c.id, c.section, c.chapter, c.figure, parts, device))
    return out
