"""The chapter's claims, C1 to C14f, each with a verdict computed from result rows.

    python -m analysis.claims RESULTS ...              # -> RESULTS/paper/claims.md
    python -m analysis.claims RESULTS ... --out DIR    # results.csv files or folders holding them
    python -m analysis.claims --out outputs/paper      # the reference data -> the committed report

One row per claim of ``../shared/seed/CLAIMS.md``: what the chapter says, what the rows show,
and a verdict: **holds**, **holds with another number** (the statement is right, its number is
not this hardware's), **does not hold** (the rows contradict its direction, its order of
magnitude or its range), or **not measured** (with the experiment that measures it). A claim is
checked as one or more parts; its verdict is its worst measured part. The chapter's side comes
from ``conf/device/h100.yaml`` (through :mod:`analysis.data`), ``analysis.tables.CHAPTER_OPS``
and :data:`CHAPTER`; the measured side only from rows, through :mod:`analysis.data`, which
decides what is evidence.

Each check sits in the module of the experiment that measures it, registered with
:func:`claim`; ``analysis.paper`` calls :func:`write_claims` beside the figures.
"""
from __future__ import annotations

# importing the check modules registers every claim
from . import cpu_gpu, first_run, ladder, memory_roof, peaks, smem, tensor_cores, tf32  # noqa: F401
from .chapter import CHAPTER, CHAPTER_DEVICE, SAME_NUMBER_REL
from .evidence import Evidence, defines
from .registry import Claim, claim, evaluate, registered
from .report import CLAIMS_FILE, frame, main, render_markdown, write_claims
from .verdict import (
    DOES_NOT_HOLD,
    HOLDS,
    NO_PROBE,
    NOT_MEASURED,
    OTHER_NUMBER,
    VERDICTS,
    Part,
    Verdict,
    combine,
    faster,
    in_range,
    orders,
    same_number,
    same_orders,
)

CLAIMS = registered()
CLAIM_IDS = tuple(c.id for c in CLAIMS)

__all__ = ["CHAPTER", "CHAPTER_DEVICE", "CLAIMS", "CLAIMS_FILE", "CLAIM_IDS", "DOES_NOT_HOLD", "HOLDS", "NOT_MEASURED",
           "NO_PROBE", "OTHER_NUMBER", "SAME_NUMBER_REL", "VERDICTS", "Claim", "Evidence", "Part", "Verdict", "claim",
           "combine", "defines", "evaluate", "faster", "frame", "in_range", "main", "orders", "render_markdown",
           "same_number", "same_orders", "write_claims"]
