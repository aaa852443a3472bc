"""The ladder: each hand-written stage at one size per precision, beside the fastest CUTLASS
row and the best standalone cuBLAS row at that size.

Stages are the ``cuda`` backend's variants that have a ``stage`` in their config (pitfall
variants have none), in stage order; nothing here names a variant. The size of a precision's ladder is the square N at which the most stages
have rows (the largest such N on a tie), so every rung is measured at the same problem. Its layout
is nn unless no stage of that precision ran nn (FP8: wgmma reads both operands K-major, so stage
13 and cuBLASLt's FP8 kernels run nt): then the layout most of its stages ran.

A rung is its variant's best row among the rows that ran the variant's current configuration
(the defines of its YAML: a row agrees where it has the define), so a tuning candidate or the
configuration of an older default never stands for the stage; where no row ran it, the best row
of any configuration, with a note.

A stage whose YAML names a ``ceiling`` probe (stage 10: ``mma_sync_peak``, mma.sync issued back to
back from registers) gets that instruction's rate at the rung's own clock: the probe's best
TFLOP/s per MHz (same device and precision) times the highest SM clock seen while the rung ran,
so an upper bound (issue rates scale with the clock).
As % of the cuBLAS timed interleaved with the rung, it is the most the stage could show there.
Used by the ladder figure and the ladder table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Mapping, Optional

import pandas as pd

from gemmlab import variants
from gemmlab.expr import evaluate_rules
from gemmlab.rows import fp8_scaling, highest_clock_mhz

from . import data, decode

GROUP_STAGE, GROUP_CUTLASS, GROUP_CUBLAS = "stage", "cutlass", "cublas"
COLUMNS = ["precision", "n", "layout", "group", "stage", "variant", "backend", "description", "tflops",
           "pct_of_cublas", "cublas_tflops", "pct_of_standalone", "standalone_tflops", "rel_error", "rows",
           "run_id", "kernel_name", "ceiling_tflops", "ceiling_pct_of_cublas", "pct_of_ceiling"]


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


def _ladder_layout(stage_rows: pd.DataFrame) -> str:
    """nn where a stage ran nn, else the layout most stages (distinct variants) ran."""
    if stage_rows.empty or (stage_rows["layout"] == "nn").any():
        return "nn"
    counts = stage_rows.groupby("layout")["variant"].nunique()
    return str(max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0])


def _info(variant: str) -> Optional[variants.VariantInfo]:
    """``variant``'s YAML in this checkout (None where it has none: rows of a removed variant)."""
    try:
        return variants.info(variant)
    except KeyError:
        return None


def _yaml_defines(variant: str) -> dict:
    """The cuda.defines of ``variant``'s YAML in this checkout ({} without one)."""
    info = _info(variant)
    return info.defines if info else {}


def _defines_before(variant: str) -> dict:
    """The YAML's ``defines_before``: what rows older than a define ran ({} without one)."""
    info = _info(variant)
    return info.defines_before if info else {}


def _defines_text(text, variant: str) -> str:
    """The defines of a row that differ from the variant's YAML (all of them without one)."""
    yaml = _yaml_defines(variant)
    ran = {**_defines_before(variant), **data.extra_of(text)}
    diff = {k: v for k, v in ran.items() if str(yaml.get(k)) != str(v)}
    return ", ".join(f"{k} {v}" for k, v in sorted(diff.items())) or "no recorded defines"


def _ceiling_probe(variant: str) -> Optional[str]:
    """The probe variant the YAML names as ``variant``'s instruction ceiling (None without one)."""
    info = _info(variant)
    return info.ceiling if info else None


def ceiling_per_mhz(probes: pd.DataFrame, probe: str, device: str, precision: str) -> Optional[float]:
    """The best TFLOP/s per MHz of SM clock that ``probe`` reached on ``device`` at ``precision``
    (its ok rows' tflops / the highest clock seen while each ran, as the harness reads it for the
    row's peak at clock), or None without such a row."""
    if probes.empty:
        return None
    rows = probes[(probes["variant"] == probe) & (probes["device"] == device) & (probes["precision"] == precision)
                  & (probes["status"] == "ok")]
    if rows.empty:
        return None
    clocks = pd.to_numeric(rows.apply(highest_clock_mhz, axis=1), errors="coerce")
    rate = pd.to_numeric(rows["tflops"], errors="coerce") / clocks
    rate = rate[rate > 0].dropna()
    return None if rate.empty else float(rate.max())


def _with_ceiling(line: dict, best: pd.Series, probes: pd.DataFrame, notes: list) -> dict:
    """``line`` (a stage rung) with its instruction ceiling at the rung's clock, where its YAML
    names a probe; a note where the probe or the rung's clock is missing."""
    probe = _ceiling_probe(line["variant"])
    if not probe:
        return line
    rate = ceiling_per_mhz(probes, probe, best["device"], line["precision"])
    clock = highest_clock_mhz(best)
    if rate is None:
        notes.append(f"{line['variant']}: no {probe} row on {best['device']} at {line['precision']}: "
                     f"no instruction ceiling")
        return line
    if clock is None:
        notes.append(f"{line['variant']}: its row recorded no SM clock: no instruction ceiling")
        return line
    ceiling = data.stable(rate * float(clock))
    line = dict(line, ceiling_tflops=ceiling, pct_of_ceiling=data.stable(100.0 * line["tflops"] / ceiling))
    if pd.notna(line["cublas_tflops"]) and line["cublas_tflops"] > 0:
        line["ceiling_pct_of_cublas"] = data.stable(100.0 * ceiling / line["cublas_tflops"])
    return line


_BYTES = {"fp64": (8, 8), "fp32": (4, 4), "tf32": (4, 4), "fp16": (2, 2), "bf16": (2, 2), "fp8": (1, 2)}  # in, out


def _number(v):
    """A define's value as the YAML's rules read it (a number where it is one)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    return int(f) if f.is_integer() else f


def _rule_values(row, info: variants.VariantInfo, yaml: Mapping) -> Optional[dict]:
    """What the variant's point rules choose at ``row``'s point from the defines ``yaml`` (the YAML's, with any
    overrides), as :meth:`gemmlab.points.Point.point_defines` evaluates them: None where the row lacks what a
    rule reads (then the row's values are taken as they are)."""
    sizes, out_sizes = _BYTES.get(str(row.get("precision")), (None, None))
    env = {k: _number(v) for k, v in yaml.items()}
    try:
        env.update(m=int(row["m"]), n=int(row["n"]), k=int(row["k"]), layout=str(row.get("layout")),
                   fp8_scaling=fp8_scaling(row), elem_bytes=sizes, out_bytes=out_sizes)
        sm = pd.to_numeric(pd.Series([row.get("sm_count")]), errors="coerce").iloc[0]
        if pd.notna(sm):
            env["sm_count"] = int(sm)
        return evaluate_rules(info.point_rules, env)
    except Exception:  # a name the row does not give (an older row without sm_count): no verdict here
        return None


def current_configuration(rows: pd.DataFrame, variant: str, overrides: Optional[Mapping] = None) -> pd.Series:
    """Which of ``rows`` (one hand-written variant) ran the defines its YAML has now: every
    define a row ran equals the YAML's. A define the row lacks predates it: the row ran the
    YAML's ``defines_before`` value where one is given, and agrees otherwise. A define the YAML
    leaves to its point rules (stage 15's BN 0: chosen by waves) must equal what those rules choose
    at the row's point (its m, n, k, layout and recorded SM count); where a rule cannot be evaluated
    there, it agrees at any value a row built. All True where the variant's YAML is not in this
    checkout or has no defines. ``overrides``: the YAML's defines with these changed (a candidate's
    configuration; a point define named here must match too)."""
    yaml = _yaml_defines(variant)
    if not (yaml or overrides) or "defines" not in rows.columns:
        return pd.Series(True, index=rows.index)
    info = _info(variant)
    given = {**yaml, **(overrides or {})}
    fixed = {k: v for k, v in given.items() if not info or k not in info.per_point or k in (overrides or {})}
    before = _defines_before(variant)
    keep = []
    for (_, row), text in zip(rows.iterrows(), rows["defines"]):
        ran = {**before, **data.extra_of(text)}
        want = dict(fixed)
        chosen = _rule_values(row, info, given) if info and info.per_point else None
        if chosen:
            want.update({k: v for k, v in chosen.items() if k in info.per_point and k not in (overrides or {})})
        keep.append(all(str(ran[k]) == str(v) for k, v in want.items() if k in ran))
    return pd.Series(keep, index=rows.index, dtype=bool)


def _best(rows: pd.DataFrame) -> pd.Series:
    return data.best_rows(rows, ["precision", "n"]).iloc[0]


def _rung(best: pd.Series, group: str) -> dict:
    """One rung from ``best``, the best row of its rows (one variant, or one library, at one
    point; the shortest median time of any run or configuration, :func:`_best`), with both
    readings of % of cuBLAS."""
    return {"group": group, "stage": best["stage"], "variant": best["variant"],
            "backend": best["backend"], "description": best["description"],
            "tflops": data.stable(float(best["tflops"])),
            "pct_of_cublas": data.stable(float(best["pct_of_cublas"])),
            "cublas_tflops": data.stable(float(best["cublas_tflops"])),
            "pct_of_standalone": data.stable(float(best["pct_of_standalone"])),
            "standalone_tflops": data.stable(float(best["standalone_tflops"])),
            "rel_error": float(best["rel_error"]), "rows": int(best["rows"]), "run_id": best["run_id"],
            "kernel_name": best.get("kernel_name"), "ceiling_tflops": float("nan"),
            "ceiling_pct_of_cublas": float("nan"), "pct_of_ceiling": float("nan")}


def build(ds: data.Dataset) -> Ladder:
    """The ladder of ``ds``: each rung is its variant's best row at the ladder's size. Its "% of
    cuBLAS" is read twice: against the cuBLAS timed interleaved with that row (same run, same
    clock state: a slow kernel lets the GPU run the baseline cooler and faster) and against the
    best standalone cuBLAS row at that size (the number the cuBLAS rung shows).

    Built once per dataset (the figure and the table each ask: half a second each on the
    reference data), like the dataset's other derived rows; each caller gets its own copy."""
    made = ds.__dict__.get("_ladder")
    if made is None or made[0] is not ds.rows:  # rows replaced: built again
        made = ds.__dict__["_ladder"] = (ds.rows, _build(ds))
    lad = made[1]
    return Ladder(lad.entries.copy(), {k: list(v) for k, v in lad.notes.items()})


def _build(ds: data.Dataset) -> Ladder:
    g = data.square(data.gemm(ds.gpu), layouts=None)
    g = g.assign(layout=data.layout_of(g))
    g = data.with_pct_of_cublas(g[g["tflops"].notna() & (g["tflops"] > 0)])
    stages = g[g["backend"] == data.HANDWRITTEN_BACKEND]
    if stages["stage"].notna().any():  # pitfalls (no stage) are not rungs
        stages = stages[stages["stage"].notna()]
    probes = ds.gpu[ds.gpu["variant"].isin({_ceiling_probe(v) for v in stages["variant"].unique()} - {None})]
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
        layout = _ladder_layout(sp)
        gp, sp = gp[gp["layout"] == layout], sp[sp["layout"] == layout]
        if gp.empty:
            continue
        n = _ladder_size(sp) if not sp.empty else int(gp["n"].max())
        at = gp[gp["n"] == n]
        p_notes = notes.setdefault(p, [])
        staged = at[at["variant"].isin(set(stages["variant"]))]
        order = sorted(staged["variant"].unique(), key=data.stage_key(data.stage_of(staged)))
        for v in order:
            rows = staged[staged["variant"] == v]
            current = rows[current_configuration(rows, v)]
            if current.empty:
                best = data.best_rows(rows, ["precision", "n"]).iloc[0]
                p_notes.append(f"{v}: no row of its current configuration at N = {n}; its best row ran "
                               f"{_defines_text(best.get('defines'), v)}")
            else:
                rows = current
            best = _best(rows)
            line = {"precision": p, "n": n, "layout": layout, **_rung(best, GROUP_STAGE)}
            lines.append(_with_ceiling(line, best, probes, p_notes))
        cutlass = at[at["backend"] == data.CUTLASS_BACKEND]
        if cutlass.empty:
            p_notes.append(f"no CUTLASS row at {p}, N = {n}")
        else:  # the fastest CUTLASS row (of any configuration), named in the label
            lines.append({"precision": p, "n": n, "layout": layout, **_rung(_best(cutlass), GROUP_CUTLASS)})
        lib = at[at["backend"].isin(data.CUBLAS_BACKENDS) & at["variant"].isin(data.CUBLAS_VARIANTS)]
        if lib.empty:
            p_notes.append(f"no standalone cuBLAS/cuBLASLt row at {p}, N = {n}: no standalone %")
        else:
            rung = _rung(_best(lib), GROUP_CUBLAS)
            rung.update(stage=pd.NA, pct_of_cublas=float("nan"), cublas_tflops=float("nan"))
            lines.append({"precision": p, "n": n, "layout": layout, **rung})
        rungs = [line for line in lines if line["precision"] == p and line["group"] == GROUP_STAGE]
        if any(pd.isna(line["pct_of_cublas"]) for line in rungs):
            p_notes.append("some stages have no interleaved cuBLAS baseline: % missing there")
    entries = pd.DataFrame(lines, columns=COLUMNS)
    return Ladder(entries, notes)


# -- the memory-bound rung: the decode stage against the copy roof (analysis.decode) -------------
MEMORY_BOUND_TAG = "memory_bound"
MEMORY_BOUND_STAGE = 14  # decode_splitk, for rows written before it had the tag
MEMORY_COLUMNS = ["precision", "stage", "variant", "status", "shape", "tokens", "m", "n", "k", "gbs", "roof_gbs",
                  "roof", "roof_run_id", "pct_of_roof", "cublas_variant", "pct_of_cublas", "rel_error", "run_id",
                  "rows", "decode_rows"]
MEASURED, NOT_MEASURED = "measured", "not measured"


def memory_bound_rows(rows: pd.DataFrame) -> pd.Series:
    """Rows of a hand-written memory-bound stage: its tags name MEMORY_BOUND_TAG (as the row
    says), or its stage is MEMORY_BOUND_STAGE."""
    tags = rows["tags"].astype(object).where(rows["tags"].notna(), "").astype(str) if "tags" in rows.columns \
        else pd.Series("", index=rows.index)
    stage = pd.to_numeric(rows["stage"], errors="coerce")
    return (rows["backend"] == data.HANDWRITTEN_BACKEND) & (tags.str.contains(MEMORY_BOUND_TAG) |
                                                            (stage == MEMORY_BOUND_STAGE))


def _offered_memory_stages() -> dict:
    """The memory-bound stages this checkout offers (coverage only: a stage without rows is
    "not measured"), variant -> (stage, precisions)."""
    return {i.name: (i.stage, i.precisions) for i in variants.all_info()
            if i.backend == data.HANDWRITTEN_BACKEND and MEMORY_BOUND_TAG in i.tags and i.stage is not None}


def memory_rungs(ds: data.Dataset) -> pd.DataFrame:
    """The ladder's memory-bound rung, per stage and precision: at its best decode shape (its
    evidence decode point closest to its copy roof, :mod:`analysis.decode`), its GB/s, its % of
    the copy roof (its run's copy probe, else the device's best copy row: ``roof`` says which) and
    its % of the cuBLAS timed interleaved with it. A stage (from the rows, or one this checkout
    offers) with no such point has ``status`` "not measured" and no numbers."""
    measured = ds.measured_rows("gpu")
    staged = measured[memory_bound_rows(measured)]
    offered = _offered_memory_stages()
    pairs = {(v, p) for v, p in zip(staged["variant"], staged["precision"])}
    pairs |= {(v, p) for v, (_, precisions) in offered.items() for p in precisions}
    stage_of = {**{v: s for v, (s, _) in offered.items()}, **{k: v for k, v in data.stage_of(staged).items()
                                                               if v is not None}}
    pts = decode.points(ds)
    if not pts.empty:
        pts = pts[memory_bound_rows(pts)]
    lines = []
    for v, p in sorted(pairs, key=lambda vp: (stage_of.get(vp[0]) or 0, vp[0], data.precision_order([vp[1]]))):
        mine = pts[(pts["variant"] == v) & (pts["precision"] == p)] if not pts.empty else pts
        good = mine[mine["evidence"].astype(bool)] if not mine.empty else mine
        line = {c: float("nan") for c in MEMORY_COLUMNS}
        line.update(precision=p, stage=stage_of.get(v), variant=v, status=NOT_MEASURED, shape="", roof="",
                    roof_run_id="", cublas_variant="", run_id="", decode_rows=len(mine))
        if not good.empty:
            best = good.assign(_pct=good["pct_of_roof"].fillna(-1.0)).sort_values(
                ["_pct", "gbs", "shape_name", "m", "n", "k"], ascending=[False, False, True, True, True, True],
                kind="stable").iloc[0]
            line.update(status=MEASURED, shape=decode.shape_text(best), tokens=int(best["tokens"]),
                        m=int(best["m"]), n=int(best["n"]), k=int(best["k"]), gbs=float(best["gbs"]),
                        roof_gbs=float(best["roof_gbs"]), roof=best["roof"], roof_run_id=best["roof_run_id"],
                        pct_of_roof=float(best["pct_of_roof"]), cublas_variant=best["cublas_variant"] if isinstance(best["cublas_variant"], str) else "",
                        pct_of_cublas=float(best["pct_of_cublas"]), rel_error=float(best["rel_error"]),
                        run_id=best["run_id"], rows=int(best["rows"]))
        lines.append(line)
    return pd.DataFrame(lines, columns=MEMORY_COLUMNS)
