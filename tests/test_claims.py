"""The claims report (analysis.claims) and the claim experiments (experiments/claims_*.yaml).

Every claim experiment composes, names known claims and probe kinds, and its CPU part runs here at
a tiny size. The verdict logic runs on real rows: a CPU run made here with the harness, and every
reference dataset under ``outputs/reference/`` (the H200 runs, once committed); expected numbers
are recomputed from the CSV with plain pandas, and each verdict must follow its stated threshold.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf, open_dict

from conftest import ROOT, compose_cfg, run_points

from analysis import claims, data
from analysis.figures import FIGURES
from gemmlab.backends import base as backends_base
from gemmlab.backends.probes import cpu as cpu_probe, gpu as gpu_probe
from gemmlab.points import expand

EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("claims_*.yaml"))
ALL_EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("*.yaml"))
CLAIMS_MD = ROOT.parent / "shared" / "seed" / "CLAIMS.md"
REFERENCE = ROOT / "outputs" / "reference"
REFERENCE_SETS = sorted({p.relative_to(REFERENCE).parts[0] for p in REFERENCE.rglob("results.csv")}) \
    if REFERENCE.is_dir() else []
REFERENCE_PARAMS = [pytest.param(name, id=f"reference-{name}") for name in REFERENCE_SETS] or \
    [pytest.param(None, id="reference", marks=pytest.mark.skip(
        reason="no reference dataset under outputs/reference/ yet (it appears with the lead's H200 run)"))]
# Tiny sizes for a smoke run: vector probes take [m, 1, 1], GEMV [m, 1, k], GEMMs the squares.
TINY = ["sizes.square=[48,64]", "sizes.shapes=[[4096,1,1],[64,1,48]]", "measure=quick", "run.progress=false"]


def _kind(backend) -> str:
    return backends_base.backend_class(getattr(backend, "value", backend)).kind


def _cpu_only(cfg):
    """``cfg`` with its GPU variants removed (the CPU part of an experiment)."""
    with open_dict(cfg):
        for name in [n for n, v in cfg.variant.items() if _kind(v.backend) != "cpu"]:
            del cfg.variant[name]
    return cfg


# -- the claim list --------------------------------------------------------------------------
def test_claim_ids_are_the_chapters_in_order():
    if not CLAIMS_MD.exists():
        pytest.skip(f"{CLAIMS_MD} not in this checkout")
    ids = re.findall(r"^\| (C\d+[a-z]?) \|", CLAIMS_MD.read_text(), re.MULTILINE)
    assert ids and tuple(ids) == claims.CLAIM_IDS


def test_figures_named_by_claims_exist():
    table_names = {"peaks", "intensity", "ladder"}
    for c in claims.CLAIMS:
        for token in (t.strip() for t in c.figure.split(";")):
            if token.startswith("table "):
                assert token.split(" ", 1)[1] in table_names, (c.id, token)
            elif not token.startswith("probe rows"):
                assert token in FIGURES, f"{c.id} names figure {token!r}; figures: {sorted(FIGURES)}"


def test_every_claim_is_measured_by_some_experiment():
    covered = set()
    for name in ALL_EXPERIMENTS:
        covered |= set(OmegaConf.load(ROOT / "experiments" / f"{name}.yaml").experiment.get("claims", []))
    assert set(claims.CLAIM_IDS) <= covered, sorted(set(claims.CLAIM_IDS) - covered)


# -- the experiments -------------------------------------------------------------------------
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_claims_experiment_composes_with_known_claims_and_probes(name):
    cfg = compose_cfg([f"+experiment={name}"])
    assert cfg.experiment.name == name and cfg.run.name == name
    assert set(cfg.experiment.claims) <= set(claims.CLAIM_IDS)
    for vname, v in cfg.variant.items():
        backend = getattr(v.backend, "value", v.backend)
        backends_base.backend_class(backend)  # a known backend
        if backend == "gpu_probe":
            assert v.probe.kind in gpu_probe.PROBES, (vname, v.probe.kind)
        if backend == "cpu_probe":
            assert v.probe.kind in cpu_probe.CpuProbe.KINDS, (vname, v.probe.kind)
        assert not v.in_default_sweep or backend in ("cublas", "cublaslt", "cpu_blas", "cuda", "cutlass"), vname
    points = expand(cfg)
    assert any(p.skip_reason is None for p in points)


def _experiment_variants(name):
    """Variant names an experiment file selects (read from its defaults list, no Hydra; the
    computed sets such as tag_simt expanded)."""
    from gemmlab import variants

    sets = variants.sets()
    for entry in OmegaConf.load(ROOT / "experiments" / f"{name}.yaml").get("defaults", []):
        if isinstance(entry, dict) or OmegaConf.is_dict(entry):
            for key, value in entry.items():
                if key.strip() == "override /variant":
                    names = list(value) if not isinstance(value, str) else [value]
                    return [v for n in names for v in sets.get(n, [n])]
    return []


def _has_cpu_part(name) -> bool:
    from gemmlab.config import load_variant

    return any(_kind(load_variant(v).backend) == "cpu" for v in _experiment_variants(name))


@pytest.mark.parametrize("name", [e for e in EXPERIMENTS if _has_cpu_part(e)])
def test_claims_experiment_cpu_part_smoke_runs(name, tmp_path):
    cfg = _cpu_only(compose_cfg([f"+experiment={name}", *TINY], tmp_path))
    _, rows = run_points(cfg, tmp_path / "run")
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok, rows
    for r in rows:
        assert r["status"] in ("ok", "skipped"), (r["variant"], r["reason"])
        if r["status"] == "skipped":  # only shape mismatches of the probes, each with its reason
            assert "shape must be" in r["reason"], r["reason"]
        else:
            assert r["experiment"] == name and float(r["time_median_s"]) > 0


def test_probe_variants_stay_out_of_the_default_sweep():
    default = compose_cfg(["sizes=smoke"]).variant
    for path in (ROOT / "conf" / "variant").glob("*.yaml"):
        node = OmegaConf.load(path)
        if str(node.get("backend")) in ("gpu_probe", "cpu_probe") or path.stem == "sgemm32_as_written":
            assert path.stem not in default, path.stem


# -- rows made here ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_rows(tmp_path_factory) -> Path:
    """The CPU parts of the memory-roof and CPU/GPU experiments, run here at tiny sizes."""
    tmp = tmp_path_factory.mktemp("claims_cpu")
    for name in ("claims_memory_roof", "claims_cpu_gpu"):
        cfg = _cpu_only(compose_cfg([f"+experiment={name}", *TINY], tmp))
        run_points(cfg, tmp / name)
    return tmp


def test_cpu_rows_give_one_verdict_per_claim_in_order(cpu_rows):
    ds = data.Dataset.from_paths([cpu_rows])
    verdicts = claims.evaluate(ds)
    assert tuple(v.claim for v in verdicts) == claims.CLAIM_IDS
    assert {v.verdict for v in verdicts} <= set(claims.VERDICTS)
    for v in verdicts:
        for p in v.parts:
            assert p.verdict in claims.VERDICTS
            if p.verdict == claims.NOT_MEASURED:  # says what would measure it, with a real experiment
                names = re.findall(r"\+experiment=(\w+)", p.missing)
                assert names and set(names) <= set(ALL_EXPERIMENTS), (v.claim, p.missing)
            else:
                assert p.measured and p.rule, (v.claim, p.what)
    gpu_claims = {"C1", "C2", "C3", "C4", "C5", "C7", "C9", "C10", "C12", "C13", "C14a", "C14b", "C14c",
                  "C14d", "C14e", "C14f"}
    assert all(v.verdict == claims.NOT_MEASURED for v in verdicts if v.claim in gpu_claims)


def test_cpu_peak_per_core_and_cycle_is_computed_from_the_rows(cpu_rows):
    ds = data.Dataset.from_paths([cpu_rows])
    (c11,) = [v for v in claims.evaluate(ds) if v.claim == "C11"]
    part = c11.parts[0]
    df = pd.concat([pd.read_csv(p) for p in cpu_rows.rglob("results.csv")])
    gemm = df[(df["backend"] == "cpu_blas") & (df["status"] == "ok") & (df["precision"] == "fp32")]
    best = gemm.loc[gemm["tflops"].idxmax()]
    facts = json.loads(df[(df["backend"] == "cpu_probe") & (df["status"] == "ok")].iloc[0]["extra"])
    cores = min(int(best["blas_threads"]), facts["physical_cores_allowed"])
    expected = best["tflops"] * 1e12 / (cores * facts["cpu_max_mhz"] * 1e6)
    assert part.numbers["cpu_gflops"] == pytest.approx(best["tflops"] * 1e3)
    assert part.numbers["cpu_flop_per_cycle_core"] == pytest.approx(expected)
    within = abs(expected - claims.CHAPTER.cpu_flop_per_cycle_core) <= \
        claims.SAME_NUMBER_REL * claims.CHAPTER.cpu_flop_per_cycle_core
    assert part.verdict == (claims.HOLDS if within else claims.OTHER_NUMBER)
    assert c11.verdict == part.verdict  # the GPU parts are not measured here


def test_cli_writes_claims_md_with_a_row_per_claim(cpu_rows, tmp_path):
    p = subprocess.run([sys.executable, "-m", "analysis.claims", str(cpu_rows), "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    text = (tmp_path / claims.CLAIMS_FILE).read_text()
    rows = re.findall(r"^\| \*\*(C\d+[a-z]?)\*\*", text, re.MULTILINE)
    assert tuple(rows) == claims.CLAIM_IDS
    for name in ("SAME_NUMBER_REL", "BANDWIDTH_BOUND_FRACTION"):
        assert name in text
    before = (tmp_path / claims.CLAIMS_FILE).stat().st_mtime_ns
    claims.write_claims(data.Dataset.from_paths([cpu_rows]), tmp_path)  # same rows: file untouched
    assert (tmp_path / claims.CLAIMS_FILE).stat().st_mtime_ns == before


# -- the logic ---------------------------------------------------------------------------------
def test_combining_parts_takes_the_worst_measured_one():
    H, O, D, N = claims.HOLDS, claims.OTHER_NUMBER, claims.DOES_NOT_HOLD, claims.NOT_MEASURED
    assert claims.combine([H, O, N]) == O
    assert claims.combine([H, D, O]) == D
    assert claims.combine([N, N]) == N
    assert claims.combine([H, N]) == H
    config_only = claims.Verdict("Cx", "", "", "", [claims.Part("fact", H, from_rows=False), claims.Part("m", N)])
    assert config_only.verdict == N  # a fact of a config alone measures nothing


def test_number_rules():
    assert claims.same_number(1.2, 1.0) == claims.HOLDS
    assert claims.same_number(1.3, 1.0) == claims.OTHER_NUMBER
    assert claims.in_range(25, 20, 30) == claims.HOLDS and claims.in_range(33, 20, 30) == claims.OTHER_NUMBER
    assert [claims.orders(r) for r in (1.5, 8, 48, 2048)] == [0, 1, 2, 3]


def test_faster_needs_the_quantile_ranges_apart():
    a = pd.Series({"time_median_s": 1.0, "time_p20_s": 0.95, "time_p80_s": 1.05})
    b = pd.Series({"time_median_s": 1.08, "time_p20_s": 1.04, "time_p80_s": 1.12})
    c = pd.Series({"time_median_s": 1.2, "time_p20_s": 1.15, "time_p80_s": 1.25})
    assert not claims.faster(a, b)  # overlapping: within noise
    assert claims.faster(a, c) and not claims.faster(c, a)


def test_tile_transpose_is_what_a_col_major_fragment_reads_from_row_major_memory():
    rng = np.random.default_rng(0)
    k, n, t = 48, 32, 16
    b = rng.standard_normal((k, n))
    flat = b.ravel()
    # the fragment of tile (kb, nb) declared col_major at the row-major address B + kb*t*n + nb*t with
    # ldm n holds element (r, c) at ptr[c * n + r]
    expected = np.empty_like(b)
    for kb in range(k // t):
        for nb in range(n // t):
            base = kb * t * n + nb * t
            for r in range(t):
                for c in range(t):
                    expected[kb * t + r, nb * t + c] = flat[base + c * n + r]
    assert np.array_equal(gpu_probe.tile_transpose(b, t), expected)


def test_host_facts_name_cores_and_clock():
    facts = cpu_probe.host_facts()
    assert facts["cpus_allowed"] >= 1
    assert facts["physical_cores_allowed"] is None or 1 <= facts["physical_cores_allowed"] <= facts["cpus_allowed"]
    assert facts["cpu_max_mhz"] is None or facts["cpu_max_mhz"] > 0


# -- the reference datasets ---------------------------------------------------------------------
def _gpu_gemm_peaks(df: pd.DataFrame) -> dict:
    """Best ok GEMM TFLOP/s per precision on the GPU with the most ok rows (plain pandas)."""
    gpu = df[(df["status"] == "ok") & ~df["backend"].astype(str).str.startswith("cpu")]
    device = gpu["device"].value_counts().sort_index().sort_values(ascending=False, kind="stable").index[0]
    g = gpu[(gpu["device"] == device) & (gpu["op"].fillna("gemm") == "gemm") & (gpu["tflops"] > 0)]
    return g.groupby("precision")["tflops"].max().to_dict()


@pytest.mark.parametrize("name", REFERENCE_PARAMS)
def test_reference_verdicts_follow_their_thresholds(name):
    folder = REFERENCE / name
    ds = data.Dataset.from_paths([folder])
    verdicts = {v.claim: v for v in claims.evaluate(ds)}
    assert tuple(verdicts) == claims.CLAIM_IDS
    df = pd.concat([pd.read_csv(p, dtype={"extra": "string", "reason": "string"}) for p in folder.rglob("results.csv")])
    peaks = _gpu_gemm_peaks(df)
    chapter = {c.stem: c for c in data.device_configs()}[claims.CHAPTER_DEVICE].peak_tflops
    for part in verdicts["C8"].parts:
        for key, value in part.numbers.items():
            if key.startswith("peak_"):
                p = key[len("peak_"):]
                assert value == pytest.approx(peaks[p])
                within = abs(value - chapter[p]) <= claims.SAME_NUMBER_REL * chapter[p]
                assert part.verdict == (claims.HOLDS if within else claims.OTHER_NUMBER)
    copy = df[(df["status"] == "ok") & (df["op"] == "copy") & ~df["backend"].astype(str).str.startswith("cpu")]
    for part in verdicts["C1"].parts:
        for p in ("fp32", "tf32"):
            if f"ridge_{p}" in part.numbers and not copy.empty:
                bw = (copy["bytes_min"] / copy["time_median_s"]).max()
                assert part.numbers[f"ridge_{p}"] == pytest.approx(peaks[p] * 1e12 / bw)
    for v in verdicts.values():
        for p in v.parts:
            if p.verdict != claims.NOT_MEASURED:
                assert p.measured and p.rule
            for value in p.numbers.values():
                assert isinstance(value, float) and (math.isnan(value) or math.isfinite(value))
