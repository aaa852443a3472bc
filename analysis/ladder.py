"""The ladder: each hand-written stage at one size per precision, beside the fastest CUTLASS
configuration and cuBLAS at that size.

Stages are the ``cuda`` backend's variants that have a ``stage`` in their config (pitfall
variants have none), in stage order; nothing here names a variant. The size of a precision's ladder is the square N at which the most stages
have rows (the largest such N on a tie), so every rung is measured at the same problem.
Used by the ladder figure and the ladder table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import pandas as pd

from . import data

GROUP_STAGE, GROUP_CUTLASS, GROUP_CUBLAS = "stage", "cutlass", "cublas"
COLUMNS = ["precision", "n", "group", "stage", "variant", "backend", "description", "tflops",
           "pct_of_cublas", "rel_error", "rows", "kernel_name"]


@dataclass
class Ladder:
    entries: pd.DataFrame  # COLUMNS; one line per rung, precisions in order, rungs in order
    notes: dict = field(default_factory=dict)  # precision ("" for all) -> list of gap notes

    @property
    def precisions(self) -> List[str]:
        return list(dict.fromkeys(self.entries["precision"]))


def _ladder_size(rows: pd.DataFrame) -> Optional[int]:
    """The square N with the most distinct variants in ``rows`` (largest N on a tie)."""
    if rows.empty:
        return None
    counts = rows.groupby("n", sort=True)["variant"].nunique()
    return int(max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0])


def _rung(rows: pd.DataFrame, group: str) -> dict:
    """One rung from the rows of one variant at one point (medians across runs)."""
    first = rows.iloc[0]
    return {"group": group, "stage": first["stage"], "variant": first["variant"],
            "backend": first["backend"], "description": first["description"],
            "tflops": data.stable(float(rows["tflops"].median())),
            "pct_of_cublas": data.stable(float(rows["pct_of_cublas"].median())),
            "rel_error": float(rows["rel_error"].max()), "rows": int(len(rows)),
            "kernel_name": first.get("kernel_name")}


def best_configuration(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of a variant's best configuration (kernel_name: its defines) where a sweep tried
    several: the highest median % of cuBLAS (each row's own interleaved baseline, so runs at other
    clocks compare fairly), else the highest median TFLOP/s. A median over different
    configurations would describe none of them."""
    if "kernel_name" not in rows or rows["kernel_name"].nunique(dropna=False) <= 1:
        return rows
    key = rows["kernel_name"].fillna("")
    score = rows["pct_of_cublas"] if rows["pct_of_cublas"].notna().all() else rows["tflops"]
    med = score.groupby(key, sort=True).median()
    return rows[key == med.idxmax()]


def build(ds: data.Dataset) -> Ladder:
    g = data.square(data.gemm(ds.gpu))
    g = data.with_pct_of_cublas(g[g["tflops"].notna()])
    stages = g[g["backend"] == data.HANDWRITTEN_BACKEND]
    if stages["stage"].notna().any():  # pitfalls (no stage) are not rungs
        stages = stages[stages["stage"].notna()]
    notes: dict = {"": []}
    if g.empty:
        notes[""].append("no GPU GEMM rows in the data")
    if stages.empty:
        if not g.empty:
            notes[""].append("no hand-written (cuda) stage in the data")
        # still show what the libraries reached, at each precision's largest N
        precisions = data.precision_order(g["precision"])
    else:
        precisions = data.precision_order(stages["precision"])
    lines = []
    for p in precisions:
        gp = g[g["precision"] == p]
        sp = stages[stages["precision"] == p]
        n = _ladder_size(sp) if not sp.empty else int(gp["n"].max())
        at = gp[gp["n"] == n]
        p_notes = notes.setdefault(p, [])
        staged = at[at["variant"].isin(set(stages["variant"]))]
        order = sorted(staged["variant"].unique(),
                       key=lambda v: (data.variant_info(v).stage is None, data.variant_info(v).stage or 0, v))
        for v in order:
            lines.append({"precision": p, "n": n,
                          **_rung(best_configuration(staged[staged["variant"] == v]), GROUP_STAGE)})
        cutlass = at[at["backend"] == data.CUTLASS_BACKEND]
        if cutlass.empty:
            p_notes.append(f"no CUTLASS row at {p}, N = {n}")
        else:  # the fastest CUTLASS configuration (median over runs), named in the label
            speed = cutlass.groupby("variant", sort=True)["tflops"].median()
            best = speed.sort_index().idxmax()
            lines.append({"precision": p, "n": n, **_rung(cutlass[cutlass["variant"] == best], GROUP_CUTLASS)})
        base = data.best_cublas(at)
        if base.empty:
            p_notes.append(f"no cuBLAS/cuBLASLt row at {p}, N = {n}: no % of cuBLAS")
        else:
            # the faster library of each run, then the median over runs
            winner = base["cublas_variant"].value_counts().sort_index().idxmax()
            lines.append({"precision": p, "n": n, "group": GROUP_CUBLAS, "stage": pd.NA,
                          "variant": winner, "backend": data.variant_info(winner).backend or winner,
                          "description": data.variant_info(winner).description,
                          "tflops": data.stable(float(base["cublas_tflops"].median())), "pct_of_cublas": 100.0,
                          "rel_error": float(at.loc[at["variant"] == winner, "rel_error"].max()),
                          "rows": int(len(base)), "kernel_name": None})
            if at.loc[at["backend"] != data.CUTLASS_BACKEND, "pct_of_cublas"].isna().any() and not staged.empty:
                p_notes.append("some stages have no cuBLAS row in their run: % missing there")
    entries = pd.DataFrame(lines, columns=COLUMNS)
    return Ladder(entries, notes)
