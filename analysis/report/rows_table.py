"""The rows of a run as the page shows them: one line per row (what, how fast, how right, and why
a row failed, was skipped or does not count), the counts, and the reasons grouped."""
from __future__ import annotations

import re
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

import pandas as pd

from gemmlab import rows as result_rows

from .. import read, style
from . import markup

COLUMNS = [  # (header, kind, what it is)
    ("variant", "text", "the variant measured (its backend in the cell's tooltip)"),
    ("precision", "text", None),
    ("m × n × k", "num", "the problem; sorted by m·n·k·batch"),
    ("layout", "text", "how A and B were stored (nn nt tn tt), and the batch where above 1"),
    ("status", "text", "ok, failed or skipped"),
    ("TFLOP/s", "num", "2·m·n·k·batch / median time"),
    ("% of baseline", "num", "of the baseline (cuBLAS or cuBLASLt) timed interleaved with the point"),
    ("error / bound", "num", "largest element error over its forward error bound (check_elem_max)"),
    ("noise", "num", "(p80 - p20) / median of the samples"),
    ("reliable", "text", "enough samples, no SM clock drift, noise within max_noise or the median's "
                         "95% interval within max_median_ci"),
    ("reason", "text", "why a row failed, was skipped, or does not count as evidence"),
]
RUN_COLUMN = ("run", "text", "the run folder (a sweep's job) the row was written in")
DOES_NOT_SUPPORT = " does not support "
STATUS_ORDER = {"failed": 0, "ok": 1, "skipped": 2}


def _num(x) -> Optional[float]:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if pd.isna(v) else v


def reasons(rows: pd.DataFrame) -> pd.Series:
    """Per row: the row's reason where it failed or was skipped; for an ok row, why it is not
    evidence (analysis.read.not_evidence_reasons: unreliable and why, too few samples, ...)."""
    status = rows["status"].astype(str)
    own = rows["reason"].astype(object).where(rows["reason"].notna(), "").astype(str)
    return own.where(status != "ok", read.not_evidence_reasons(rows)).replace("nan", "")


def counts(rows: pd.DataFrame) -> Dict[str, int]:
    status = rows["status"].astype(str)
    reliable = read.flag(rows["reliable"]) if "reliable" in rows else pd.Series(pd.NA, index=rows.index)
    return {"rows": len(rows), "ok": int((status == "ok").sum()), "failed": int((status == "failed").sum()),
            "skipped": int((status == "skipped").sum()),
            "unreliable": int(((status == "ok") & (reliable.fillna(True) == False)).sum())}  # noqa: E712


def summary_line(rows: pd.DataFrame) -> str:
    c = counts(rows)
    return (f"{c['rows']} rows: ok {c['ok']}, failed {c['failed']}, skipped {c['skipped']}, "
            f"unreliable {c['unreliable']} (ok rows whose timing does not count)")


def reason_gist(reason: str) -> str:
    """A reason without its particulars, so that alike ones group: cut at the first
    parenthesis, semicolon or colon, numbers as N; every "X does not support P" as one."""
    if DOES_NOT_SUPPORT in reason:
        return "the variant does not support the precision"
    text = re.split(r" \(|;|: ", reason, maxsplit=1)[0]
    return re.sub(r"(?<![\w.])\d+(\.\d+)?(e[+-]?\d+)?%?(?!\w)", "N", text).strip()  # not FP8's 8


def reason_groups(rows: pd.DataFrame) -> List[Tuple[str, str, int]]:
    """(status, reason gist, rows) for every failed and skipped row and every ok row that is not
    evidence ("not evidence"), most rows first."""
    why = reasons(rows)
    status = rows["status"].astype(str).where(rows["status"].astype(str) != "ok", "not evidence")
    c = Counter((s, reason_gist(w)) for s, w in zip(status, why) if w)
    order = {"failed": 0, "not evidence": 1, "skipped": 2}
    return sorted(((s, w, n) for (s, w), n in c.items()), key=lambda t: (order.get(t[0], 3), -t[2], t[1]))


def _text(x) -> str:
    """A cell as text: "" for a missing value (None, NaN, pandas' NA)."""
    if x is None or (not isinstance(x, str) and pd.isna(x)):
        return ""
    return str(x)


def _size(r) -> Tuple[str, Optional[float]]:
    m, n, k, batch = (_num(r.get(c)) for c in ("m", "n", "k", "batch"))
    if None in (m, n, k):
        return "", None
    return f"{m:.0f}×{n:.0f}×{k:.0f}", m * n * k * (batch or 1)


def _reliable(v, extra=None) -> str:
    """yes / no / empty; "yes (median ±x%)" where the row is reliable by its median's interval,
    not its noise (extra.reliability, gemmlab/measure/validity.py)."""
    if _text(v) == "":
        return ""
    if not bool(v):
        return "no"
    by = result_rows.row_extra({"extra": extra}).get("reliability") or {}
    ci = _num(by.get("median_ci")) if by.get("by") == "median_ci" else None
    return f"yes (median ±{100 * ci:.2f}%)" if ci is not None else "yes"


def row_cells(r, why: str, run: Optional[str]) -> List[tuple]:
    """The cells of one row: (text, sort value, css class)."""
    size, volume = _size(r)
    batch = _num(r.get("batch"))
    layout = _text(r.get("layout")) + (f", batch {batch:.0f}" if batch and batch > 1 else "")
    status = _text(r["status"])
    tflops, pct = _num(r.get("tflops")), _num(r.get("pct_of_baseline"))
    err, noise = _num(r.get("check_elem_max")), _num(r.get("noise"))
    reliable = _reliable(r.get("reliable"), r.get("extra"))
    base = _text(r.get("baseline_variant"))
    cells = [] if run is None else [(run, None, "path")]
    cells += [
        (_text(r["variant"]), None, None), (_text(r["precision"]), None, None), (size, volume, "num"),
        (layout, None, None),
        (status, None, f"st-{status}" if status in ("ok", "failed", "skipped") else None),
        (style.format_sig(tflops, 4) if tflops is not None else "", tflops, "num"),
        (f"{pct:.1f}" + (f" ({base})" if base else "") if pct is not None else "", pct, "num"),
        (style.format_sig(err, 2) if err is not None else "", err, "num"),
        (f"{100 * noise:.1f}%" if noise is not None else "", noise, "num"),
        (reliable, None, "st-unreliable" if reliable == "no" and status == "ok" else None),
        (why, None, "reason"),
    ]
    return cells


def rows_table(sides: Sequence[Tuple[str, pd.DataFrame, Dict[str, str]]], id_: str = "rows-table") -> markup.Raw:
    """One sortable table of every row of every side: ``(label, rows, run_id -> folder)``; a run
    column where the rows come from more than one folder or side."""
    several = len(sides) > 1 or any(len(set(folders.values())) > 1 for _, _, folders in sides)
    columns = ([RUN_COLUMN] if several else []) + COLUMNS
    lines = []
    for label, rows, folders in sides:
        why = reasons(rows)
        # what was measured first (failed, then ok), the skipped after; each in the file's order
        order = rows["status"].astype(str).map(STATUS_ORDER).fillna(len(STATUS_ORDER)).sort_values(kind="stable")
        for i in order.index:
            r, w = rows.loc[i], why.loc[i]
            run = None
            if several:
                folder = folders.get(str(r["run_id"]), "")
                run = " ".join(x for x in (label, "" if folder == "." else folder) if x)
            lines.append(row_cells(r, w, run))
    return markup.table(columns, lines, id_)
