"""The ladder: each hand-written stage at one size per precision, beside the fastest CUTLASS
row and the best standalone cuBLAS row at that size.

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
           "pct_of_cublas", "cublas_tflops", "pct_of_standalone", "standalone_tflops", "rel_error", "rows",
           "run_id", "kernel_name"]


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
    """One rung: the best row of ``rows`` (one variant, or one library, at one point; the
    shortest median time of any run or configuration), with both readings of % of cuBLAS."""
    best = data.best_rows(rows, ["precision", "n"]).iloc[0]
    return {"group": group, "stage": best["stage"], "variant": best["variant"],
            "backend": best["backend"], "description": best["description"],
            "tflops": data.stable(float(best["tflops"])),
            "pct_of_cublas": data.stable(float(best["pct_of_cublas"])),
            "cublas_tflops": data.stable(float(best["cublas_tflops"])),
            "pct_of_standalone": data.stable(float(best["pct_of_standalone"])),
            "standalone_tflops": data.stable(float(best["standalone_tflops"])),
            "rel_error": float(best["rel_error"]), "rows": int(best["rows"]), "run_id": best["run_id"],
            "kernel_name": best.get("kernel_name")}


def build(ds: data.Dataset) -> Ladder:
    """The ladder of ``ds``: each rung is its variant's best row at the ladder's size. Its "% of
    cuBLAS" is read twice: against the cuBLAS timed interleaved with that row (same run, same
    clock state: a slow kernel lets the GPU run the baseline cooler and faster) and against the
    best standalone cuBLAS row at that size (the number the cuBLAS rung shows)."""
    g = data.square(data.gemm(ds.gpu))
    g = data.with_pct_of_cublas(g[g["tflops"].notna() & (g["tflops"] > 0)])
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
        order = sorted(staged["variant"].unique(), key=data.stage_key(data.stage_of(staged)))
        for v in order:
            lines.append({"precision": p, "n": n, **_rung(staged[staged["variant"] == v], GROUP_STAGE)})
        cutlass = at[at["backend"] == data.CUTLASS_BACKEND]
        if cutlass.empty:
            p_notes.append(f"no CUTLASS row at {p}, N = {n}")
        else:  # the fastest CUTLASS row (of any configuration), named in the label
            lines.append({"precision": p, "n": n, **_rung(cutlass, GROUP_CUTLASS)})
        lib = at[at["backend"].isin(data.CUBLAS_BACKENDS) & at["variant"].isin(data.CUBLAS_VARIANTS)]
        if lib.empty:
            p_notes.append(f"no standalone cuBLAS/cuBLASLt row at {p}, N = {n}: no standalone %")
        else:
            rung = _rung(lib, GROUP_CUBLAS)
            rung.update(stage=pd.NA, pct_of_cublas=float("nan"), cublas_tflops=float("nan"))
            lines.append({"precision": p, "n": n, **rung})
        if staged["pct_of_cublas"].isna().any():
            p_notes.append("some stages have no interleaved cuBLAS baseline: % missing there")
    entries = pd.DataFrame(lines, columns=COLUMNS)
    return Ladder(entries, notes)
