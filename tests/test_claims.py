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

from conftest import ROOT, compose_cfg, evidence, flags, reference_sets, run_points

from analysis import claims, data
from analysis.claims import registry
from analysis.figures import FIGURES
from gemmlab.backends import base as backends_base
from gemmlab.backends.probes import cpu as cpu_probe, gpu as gpu_probe
from gemmlab.points import expand

EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("claims_*.yaml"))
ALL_EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("*.yaml"))
CLAIMS_MD = ROOT.parent / "shared" / "seed" / "CLAIMS.md"
NO_CLAIMS_EXPERIMENT = "peaks"  # analysis.claims.peaks: C8, from cublas_square's rows
REFERENCE = ROOT / "outputs" / "reference"
REFERENCE_SETS = reference_sets()  # each device kind's first and latest (conftest.reference_sets)
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


def test_registry_holds_each_claim_once_beside_its_experiment():
    """Every claim of CLAIMS.md is registered once, in order, by a check in the module of the
    claims experiment that lists it (or in the module of claims no claims experiment measures)."""
    registered = [c.id for c in registry.registered()]
    assert len(registered) == len(set(registered)) and tuple(registered) == claims.CLAIM_IDS
    if CLAIMS_MD.exists():
        assert registered == re.findall(r"^\| (C\d+[a-z]?) \|", CLAIMS_MD.read_text(), re.MULTILINE)
    for c in registry.registered():
        package, _, module = c.check.__module__.rpartition(".")
        assert package == "analysis.claims", (c.id, c.check.__module__)
        if module == NO_CLAIMS_EXPERIMENT:
            continue
        assert f"claims_{module}" in EXPERIMENTS, (c.id, module, EXPERIMENTS)
        listed = OmegaConf.load(ROOT / "experiments" / f"claims_{module}.yaml").experiment.get("claims", [])
        assert c.id in listed, f"{c.id} is checked in {c.check.__module__}, but claims_{module}.yaml does not list it"
    with pytest.raises(ValueError, match="registered twice"):
        registry.claim("C1", "5.1", "again", "roofline")(lambda ev: [])


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
@pytest.fixture(scope="session")  # once per worker: fast and slow tests use it, at both ends of the run
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
                assert (names or claims.NO_PROBE in p.missing) and set(names) <= set(ALL_EXPERIMENTS), \
                    (v.claim, p.missing)
            else:
                assert p.measured and p.rule, (v.claim, p.what)
    gpu_claims = {"C1", "C2", "C3", "C4", "C5", "C7", "C9", "C10", "C12", "C13", "C14a", "C14b", "C14c",
                  "C14d", "C14e", "C14f"}
    assert all(v.verdict == claims.NOT_MEASURED for v in verdicts if v.claim in gpu_claims)


def test_cpu_peak_per_core_and_cycle_is_computed_from_the_rows(cpu_rows):
    ds = data.Dataset.from_paths([cpu_rows])
    (c11,) = [v for v in claims.evaluate(ds) if v.claim == "C11"]
    part = c11.parts[0]
    every = pd.concat([pd.read_csv(p) for p in cpu_rows.rglob("results.csv")])
    df = evidence(every)
    gemm = df[(df["backend"] == "cpu_blas") & (df["precision"] == "fp32")]
    if gemm.empty:  # a noisy shared runner: no CPU BLAS row counts, so there is nothing to divide
        assert part.verdict == claims.NOT_MEASURED and "cpu_gflops" not in part.numbers
        return
    best = gemm.loc[gemm["tflops"].idxmax()]
    # host facts are no timing: any ok probe row carries them, reliable or not
    facts = json.loads(every[(every["backend"] == "cpu_probe") & (every["status"] == "ok")].iloc[0]["extra"])
    cores = min(int(best["blas_threads"]), facts["physical_cores_allowed"])
    expected = best["tflops"] * 1e12 / (cores * facts["cpu_max_mhz"] * 1e6)
    assert part.numbers["cpu_gflops"] == pytest.approx(best["tflops"] * 1e3)
    assert part.numbers["cpu_flop_per_cycle_core"] == pytest.approx(expected)
    # achieved BLAS per cycle bounds the peak from below, at the CPU's maximum clock only
    is_max = "cpuinfo_max_freq" in str(facts.get("cpu_mhz_source"))
    above = expected > claims.CHAPTER.cpu_flop_per_cycle_core * (1 + claims.SAME_NUMBER_REL)
    if not (facts.get("avx512f") and facts.get("fma")):
        assert part.verdict == claims.NOT_MEASURED
    else:
        assert part.verdict == (claims.DOES_NOT_HOLD if is_max and above else claims.NOT_MEASURED)
    assert c11.verdict == (claims.NOT_MEASURED if part.verdict == claims.NOT_MEASURED else part.verdict)


@pytest.mark.slow
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


def test_number_rules_can_each_say_does_not_hold():
    H, O, D = claims.HOLDS, claims.OTHER_NUMBER, claims.DOES_NOT_HOLD
    assert claims.same_number(1.2, 1.0) == H
    assert claims.same_number(1.3, 1.0) == O and claims.same_number(0.4, 1.0) == O
    assert claims.same_number(4.0, 1.0) == D and claims.same_number(0.2, 1.0) == D  # another order of magnitude
    assert claims.same_number(-1.0, 1.0) == D
    assert claims.in_range(25, 20, 30) == H and claims.in_range(33, 20, 30) == O
    assert claims.in_range(100, 20, 30) == D and claims.in_range(5, 20, 30) == D
    assert [claims.orders(r) for r in (1.5, 8, 48, 2048)] == [0, 1, 2, 3]
    assert claims.same_orders(14.7, 1) == H and claims.same_orders(1.4, 1) == D and claims.same_orders(150, 1) == D


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
    """Best GEMM TFLOP/s per precision on the GPU with the most measured rows, over the rows that
    count (plain pandas)."""
    timer = df["timer"].astype(str) if "timer" in df.columns else pd.Series("", index=df.index)
    measured = df[(df["status"] == "ok") & (timer != "cupti_kernel") & ~df["backend"].astype(str).str.startswith("cpu")]
    device = measured["device"].value_counts().sort_index().sort_values(ascending=False, kind="stable").index[0]
    gpu = evidence(df)
    g = gpu[(gpu["device"] == device) & (gpu["op"].fillna("gemm") == "gemm") & (gpu["tflops"] > 0)]
    return g.groupby("precision")["tflops"].max().to_dict()


def _three_way(measured: float, chapter: float) -> str:
    if abs(measured - chapter) <= claims.SAME_NUMBER_REL * chapter:
        return claims.HOLDS
    return claims.OTHER_NUMBER if abs(math.log10(measured / chapter)) < 0.5 else claims.DOES_NOT_HOLD


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_PARAMS)
def test_reference_verdicts_follow_their_thresholds(name):
    folder = REFERENCE / name
    ds = data.Dataset.from_paths([folder])
    verdicts = {v.claim: v for v in claims.evaluate(ds)}
    assert tuple(verdicts) == claims.CLAIM_IDS
    files = list(folder.rglob("results.csv"))
    df = pd.concat([pd.read_csv(p, dtype={"extra": "string", "reason": "string", "run_id": str, "point_key": str})
                    for p in files]).drop_duplicates(["run_id", "point_key"])
    peaks = _gpu_gemm_peaks(df)
    chapter = {c.stem: c for c in data.device_configs()}[claims.CHAPTER_DEVICE].peak_tflops
    for part in verdicts["C8"].parts:
        for key, value in part.numbers.items():
            if key.startswith("peak_"):
                p = key[len("peak_"):]
                assert value == pytest.approx(peaks[p])
                assert part.verdict == _three_way(value, chapter[p])
    copy = evidence(df)
    copy = copy[(copy["op"] == "copy") & ~copy["backend"].astype(str).str.startswith("cpu")]
    for part in verdicts["C1"].parts:
        for p in ("fp32", "tf32"):
            if f"ridge_{p}" in part.numbers and not copy.empty:
                bw = (copy["bytes_min"] / copy["time_median_s"]).max()
                assert part.numbers[f"ridge_{p}"] == pytest.approx(peaks[p] * 1e12 / bw)
        if "roofline_rows" in part.numbers:  # CUPTI-timed and unreliable rows are not in the count
            # every precision with a datasheet peak, measured GEMM peak or not: session43's H100 copy_sizes run
            # holds FP32 vector adds where that folder has no FP32 GEMM
            gpu = evidence(df)
            gpu = gpu[~gpu["backend"].astype(str).str.startswith("cpu") & gpu["op"].isin(["gemm", "gemv", "vecadd"])
                      & (gpu["time_median_s"] > 0) & (gpu["cache"] != "warm") & (gpu["bytes_min"] > 0)
                      & gpu["precision"].isin(list(ds.gpu_ceilings.datasheet_tflops))]
            assert part.numbers["roofline_rows"] == len(gpu)
    for v in verdicts.values():
        for p in v.parts:
            if p.verdict != claims.NOT_MEASURED:
                assert p.measured and p.rule
            for value in p.numbers.values():
                assert isinstance(value, float) and (math.isnan(value) or math.isfinite(value))


# -- every claim, on rows made here: rows that support it hold, rows that contradict it do not --
GPU = "NVIDIA H100 80GB HBM3"  # conf/device/h100.yaml names it: the chapter's own device
CPU = "Test CPU with AVX-512"
COPY_GBS = 3350.0  # the H100's datasheet bandwidth: the chapter's ridges come out of these rows
CPU_FACTS = {"avx512f": True, "fma": True, "cpu_max_mhz": 2000.0, "physical_cores_allowed": 16,
             "cpus_allowed": 16, "cpu_mhz_source": "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"}


def row(variant, backend="cuda", precision="fp32", n=4096, m=None, k=None, op="gemm", tflops=None,
        time_s=None, run="run-a", device=GPU, extra=None, **kw):
    """One synthetic result row (a test input, not a measurement): 2mnk FLOPs over 3 matrices
    of 4-byte (2-byte for half precisions) elements, timed at ``tflops`` (or ``time_s``)."""
    m = n if m is None else m
    k = n if k is None else k
    size = 2 if precision in ("fp16", "bf16") else 4
    flops = kw.pop("flops", 2.0 * m * n * k)
    bytes_min = kw.pop("bytes_min", float(size * (m * k + k * n + m * n)))
    if time_s is None and tflops is not None:
        time_s = flops / (tflops * 1e12)
    r = {"run_id": run, "point_key": f"{variant}-{precision}-{m}x{n}x{k}-{op}-{len(str(kw))}-{run}",
         "device": device, "backend": backend, "variant": variant, "precision": precision, "op": op,
         "m": m, "n": n, "k": k, "flops": flops, "bytes_min": bytes_min, "intensity": flops / bytes_min,
         "status": "ok", "timer": "cuda_event", "cache": "flush", "tolerance": 1e-5}
    if time_s is not None:
        r.update(time_median_s=time_s, time_p20_s=time_s * 0.995, time_p80_s=time_s * 1.005,
                 tflops=flops / time_s / 1e12)
    if extra is not None:
        r["extra"] = json.dumps(extra)
    r.update(kw)
    return r


def copy_row(gbs=COPY_GBS, device=GPU, backend="gpu_probe", variant="copy_gpu", **kw):
    n = 1 << 28
    return row(variant, backend, n=n, m=n, k=1, op="copy", flops=0.0, bytes_min=8.0 * n,
               time_s=8.0 * n / (gbs * 1e9), device=device, **kw)


def ceilings(fp32=67.0, tf32=495.0, fp16=989.0, bf16=989.0, run="run-peaks"):
    """cuBLAS at the chapter's peaks, and the copy probe at its bandwidth."""
    out = [copy_row()]
    for p, t in (("fp32", fp32), ("tf32", tf32), ("fp16", fp16), ("bf16", bf16)):
        if t is not None:
            out.append(row("cublas", "cublas", p, tflops=t, run=run))
    return out


def verdict_of(claim: str, rows) -> claims.Verdict:
    ds = data.Dataset(pd.DataFrame(rows))
    (v,) = [v for v in claims.evaluate(ds, ids=[claim]) if v.claim == claim]  # the others: not asked
    for p in v.parts:
        assert p.verdict in claims.VERDICTS
        assert "error while evaluating" not in p.missing, p.missing
        if p.verdict != claims.NOT_MEASURED:
            assert p.measured and p.rule, (claim, p.what)
    return v


def counters(variant, l1, dram, tflops, precision="fp32", **kw):
    flops = 2.0 * 4096 ** 3
    return row(variant, "cuda", precision, tflops=tflops, intensity_l1=l1, intensity_dram=dram,
               intensity_l2=(l1 + dram) / 2, bytes_l1=flops / l1, bytes_dram=flops / dram,
               bytes_l2=2 * flops / (l1 + dram), run="run-counters", **kw)


def faster_pair(a, b, speedup, precision="fp32", n=4096, run="run-ladder", **kw):
    return [row(a, "cuda", precision, n=n, tflops=10.0 * speedup, run=run, **kw),
            row(b, "cuda", precision, n=n, tflops=10.0, run=run, **kw)]


def tf32_sweep(slope):
    out = []
    for k in (256, 1024, 4096, 16384, 65536):
        out.append(row("cublas", "cublas", "tf32", n=1024, k=k, tflops=100.0, run="run-tf32",
                       rel_error=3e-4 * (k / 256) ** slope))
        out.append(row("cublas", "cublas", "fp32", n=1024, k=k, tflops=40.0, run="run-tf32",
                       rel_error=1.5e-7 * (k / 256) ** 0.25))
    return out


def wmma_rows(error):
    layout = {"rel_error_vs_fp64_of_fp32_data": error, "rel_error_vs_fp64_of_fp16_inputs": 5e-6,
              "wmma_gemm_bcol_flag": {"ran_without_error": True, "nonfinite": False, "rel_error_vs_a_times_b": 1.4,
                                      "rel_error_vs_a_times_tile_transposed_b": 5e-6},
              "wmma_gemm_bcol": {"ran_without_error": True, "nonfinite": False, "rel_error_vs_a_times_b": 1.4,
                                 "rel_error_vs_a_times_b_transposed": 5e-6}}
    align = {"offsets": {"2": {"outcome": "error", "error": "misaligned address"},
                         "16": {"outcome": "correct", "slowdown": 1.3}}}
    return [row("wmma_layout", "gpu_probe", "fp16", op="wmma_layout", extra=layout),
            row("wmma_alignment", "gpu_probe", "fp16", op="wmma_alignment", extra=align)]


def cpu_gpu(cpu_faster_below: int):
    """CPU BLAS, the GPU end to end and cuBLAS at N = 16 ... 256: the CPU is faster below
    ``cpu_faster_below``; the kernel is a fifth of the GPU's end-to-end time there."""
    out = [row("copy_cpu", "cpu_probe", n=1 << 24, m=1 << 24, k=1, op="copy", flops=0.0, bytes_min=8.0 * (1 << 24),
               time_s=8.0 * (1 << 24) / 400e9, device=CPU, extra=CPU_FACTS, run="run-cpu")]
    for n in (16, 32, 64, 128, 256):
        e2e = 30e-6 + n ** 3 * 1e-12
        cpu = e2e * (0.5 if n < cpu_faster_below else 2.0)
        out += [row("cpu_blas", "cpu_blas", n=n, time_s=cpu, device=CPU, run="run-cpu", blas_threads=16),
                row("gemm_e2e_gpu", "gpu_probe", n=n, op="gemm_e2e", time_s=e2e, run="run-cg"),
                row("cublas", "cublas", n=n, time_s=e2e / 5, run="run-cg")]
    return out


def gemv(speedup, bw_ratio):
    shape = {"m": 16384, "n": 1, "k": 16384, "op": "gemv", "flops": 2.0 * 16384 ** 2, "bytes_min": 4.0 * 16384 ** 2}
    t_gpu = 4.0 * 16384 ** 2 / (0.9 * COPY_GBS * 1e9)
    return [copy_row(),
            row("copy_cpu", "cpu_probe", n=1 << 24, m=1 << 24, k=1, op="copy", flops=0.0, bytes_min=8.0 * (1 << 24),
                time_s=8.0 * (1 << 24) / (COPY_GBS / bw_ratio * 1e9), device=CPU, extra=CPU_FACTS, run="run-cpu"),
            row("gemv_gpu", "gpu_probe", time_s=t_gpu, **shape),
            row("gemv_cpu", "cpu_probe", time_s=t_gpu * speedup, device=CPU, run="run-cpu", **shape)]


def first_run(ratio, clock_before):
    settled = 2.68e-3
    return [row("first_run_gpu", "gpu_probe", op="first_run", time_s=settled, sm_clock_min_mhz=1980.0,
                sm_clock_max_mhz=1980.0, extra={"idle_s": 30.0, "first_call_event_s": 0.08,
                                                "after_idle_event_s": settled * ratio,
                                                "after_idle_sm_clock_before_mhz": clock_before})]


def race(worst):
    x = {"check_repeats": 5, "rel_error_distinct": 5, "rel_error_min": worst / 2, "rel_error_max": worst}
    return [row("smem_tiled_nosync", "cuda", status="failed" if worst > 1e-5 else "ok", extra=x, run="run-ladder"),
            row("smem_tiled", "cuda", tflops=8.0, run="run-ladder", extra={"check_repeats": 5, "rel_error_distinct": 1})]


def unguarded(guarded_ok: bool):
    return [row("sgemm32_unguarded", "gpu_probe", n=1000, status="failed", run="run-ladder",
                extra={"unwritten_elements": 15936, "rel_error_of_written_elements": 0.16}),
            row("sgemm32_unguarded", "gpu_probe", n=2048, run="run-ladder"),
            row("smem_tiled", "cuda", n=1000, run="run-ladder", rel_error=5e-7,
                **({"tflops": 7.0} if guarded_ok else {"status": "failed"}))]


def banks(ratio):
    base = 1.37e-4
    return [row("smem_bank_stride33", "gpu_probe", n=1, op="smem_bank", time_s=base, run="run-smem"),
            row("smem_bank_stride32", "gpu_probe", n=1, op="smem_bank", time_s=base * ratio, run="run-smem"),
            *faster_pair("smem_tiled_colread_padded", "smem_tiled_colread", ratio if ratio > 2 else 0.9)]


def smem(bandwidth_tbs):
    return [copy_row(),
            row("smem_bandwidth", "gpu_probe", n=1, op="smem_bandwidth", bytes_min=1e12, time_s=1 / bandwidth_tbs,
                run="run-smem"),
            row("smem_latency", "gpu_probe", n=1, op="smem_latency", time_s=1e-3, run="run-smem",
                extra={"cycles_per_load": 23.0})]


def tensor(wgmma_tflops):
    return [row("wmma", "cuda", "fp16", tflops=28.0, run="run-tc"),
            row("wmma_tiled", "cuda", "fp16", tflops=280.0, run="run-tc"),
            row("wgmma_tma", "cuda", "fp16", tflops=wgmma_tflops, run="run-tc", baseline_variant="cublas",
                baseline_tflops=700.0, pct_of_baseline=100 * wgmma_tflops / 700.0),
            # another run at a small size, where WMMA's row is the fastest of all: not compared
            row("wmma", "cuda", "fp16", n=256, time_s=1e-6, run="run-small"),
            row("wgmma_tma", "cuda", "fp16", n=256, time_s=2e-6, run="run-small")]


def transfers(kernel_ms, transfer_ms):
    n = 1024
    return [row("cublas", "cublas", n=n, time_s=kernel_ms / 1e3, run="run-cg"),
            row("transfer_pinned", "gpu_probe", n=n, op="transfer", time_s=transfer_ms / 1e3, run="run-cg",
                extra={"memory": "pinned"})]


def cpu_peak(gflops):
    return [row("copy_cpu", "cpu_probe", n=1 << 24, m=1 << 24, k=1, op="copy", flops=0.0, bytes_min=8.0 * (1 << 24),
                time_s=8.0 * (1 << 24) / 400e9, device=CPU, extra=CPU_FACTS, run="run-cpu"),
            row("cpu_blas", "cpu_blas", tflops=gflops / 1e3, device=CPU, run="run-cpu", blas_threads=16)]


H, D = claims.HOLDS, claims.DOES_NOT_HOLD
# claim: (rows that support it, rows that contradict it)
CASES = {
    "C1": (ceilings(), ceilings(fp32=5.0)),  # ridge 1.5 FLOP/B: another order of magnitude than 20
    "C2": (ceilings() + [row("vecadd_gpu", "gpu_probe", n=1 << 28, m=1 << 28, k=1, op="vecadd",
                             flops=2.0 * (1 << 28), bytes_min=12.0 * (1 << 28),
                             time_s=12.0 * (1 << 28) / (0.95 * COPY_GBS * 1e9)),
                         row("gemv_gpu", "gpu_probe", m=16384, n=1, k=16384, op="gemv", flops=2.0 * 16384 ** 2,
                             bytes_min=4.0 * 16384 ** 2, time_s=4.0 * 16384 ** 2 / (0.9 * COPY_GBS * 1e9)),
                         row("cublas", "cublas", n=1024, tflops=40.0, bytes_min=12.0 * 1024 ** 2)],
           # vector add at a tenth of the copy bandwidth: not bandwidth-bound
           ceilings() + [row("vecadd_gpu", "gpu_probe", n=1 << 28, m=1 << 28, k=1, op="vecadd",
                             flops=2.0 * (1 << 28), bytes_min=12.0 * (1 << 28),
                             time_s=12.0 * (1 << 28) / (0.1 * COPY_GBS * 1e9)),
                         row("cublas", "cublas", n=1024, tflops=40.0, bytes_min=12.0 * 1024 ** 2)]),
    "C3": (ceilings() + [counters("naive", l1=0.25, dram=0.5, tflops=1.0)],
           ceilings() + [counters("naive", l1=0.4, dram=31.7, tflops=4.0)]),  # above the ridge, not 2 orders below
    "C4": (ceilings() + [counters("smem_tiled", l1=8.0, dram=10.0, tflops=30.0, kernel_name="smem_tiled<TILE=32>"),
                         counters("register_blocked", l1=32.0, dram=35.0, tflops=60.0)],
           ceilings() + [counters("smem_tiled", l1=8.0, dram=40.0, tflops=8.4, kernel_name="smem_tiled<TILE=32>"),
                         counters("register_blocked", l1=32.0, dram=219.0, tflops=40.0)]),
    "C5": (smem(40.0) + ceilings(), smem(5.0) + ceilings()),
    "C6": (ceilings() + [counters("register_blocked", l1=32.0, dram=35.0, tflops=60.0)]
           + faster_pair("register_blocked", "smem_tiled", 4.0),
           ceilings() + [counters("register_blocked", l1=32.0, dram=219.0, tflops=40.0)]
           + faster_pair("register_blocked", "smem_tiled", 4.0)),
    "C7": (faster_pair("double_buffered", "register_blocked", 1.1),
           faster_pair("double_buffered", "register_blocked", 0.9)),
    "C8": (ceilings(), ceilings(fp16=90.0)),  # FP16 at 1.3x FP32: no order of magnitude, not 989
    "C9": (wmma_rows(3e-4), wmma_rows(0.05)),
    "C10": (tensor(650.0), tensor(200.0)),
    "C11": (cpu_peak(900.0) + ceilings(fp32=51.0, fp16=700.0, bf16=None, tf32=None),
            cpu_peak(2000.0) + ceilings(fp32=51.0, fp16=700.0, bf16=None, tf32=None)),  # 62 FLOP/cycle: > 32
    "C12": (cpu_gpu(cpu_faster_below=128), cpu_gpu(cpu_faster_below=16)),
    "C13": (gemv(speedup=8.0, bw_ratio=8.0), gemv(speedup=150.0, bw_ratio=150.0)),
    "C14a": (unguarded(True), unguarded(False)),
    "C14b": (banks(32.0), banks(1.1)),
    "C14c": (tf32_sweep(0.5), tf32_sweep(0.0)),  # flat: TF32's error does not grow with K
    "C14d": (transfers(0.3, 0.5), transfers(2.0, 0.5)),  # a 2 ms kernel: not "about 0.3 ms"
    "C14e": (first_run(1.5, 900.0), first_run(1.02, 900.0)),  # the clock ramped, the call was not slower
    "C14f": (race(2e-3), race(1e-7)),
}


def test_every_claim_has_a_holding_and_a_contradicting_case():
    assert set(CASES) == set(claims.CLAIM_IDS)


@pytest.mark.slow
@pytest.mark.parametrize("claim", list(CASES))
def test_rows_that_support_a_claim_hold(claim):
    v = verdict_of(claim, CASES[claim][0])
    assert v.verdict == H, [(p.what, p.verdict, p.measured or p.missing) for p in v.parts]


@pytest.mark.slow
@pytest.mark.parametrize("claim", list(CASES))
def test_rows_that_contradict_a_claim_do_not_hold(claim):
    v = verdict_of(claim, CASES[claim][1])
    assert v.verdict == D, [(p.what, p.verdict, p.measured or p.missing) for p in v.parts]


@pytest.mark.slow
def test_rows_that_are_not_evidence_reach_no_verdict():
    """An unreliable, a contended and a CUPTI-timed row faster than every other one: none of them
    sets a peak, a ridge or a count."""
    good = ceilings()
    bad = [row("cublas", "cublas", "fp16", tflops=3000.0, run="run-x", reliable="false",
               unreliable_reason="noise 9% > max_noise 2%"),
           row("cublaslt", "cublaslt", "fp16", tflops=2500.0, run="run-x", contended="true"),
           row("cublas", "cublas", "fp32", tflops=300.0, run="run-y", timer="cupti_kernel")]
    for claim in ("C1", "C8"):
        assert verdict_of(claim, good + bad).numbers() == verdict_of(claim, good).numbers(), claim
    assert verdict_of("C8", good + bad).verdict == H
    # rows written before the columns existed count (missing reliable is not false)
    old = [{k: v for k, v in r.items() if k not in ("reliable", "contended")} for r in good]
    assert verdict_of("C8", old).verdict == H


def test_first_run_without_a_ramp_or_colder_caches_is_not_measured():
    """The reference's case: the clock did not drop in the idle and the settled samples flushed
    the L2 too, so the after-idle call holds neither cause the chapter names."""
    v = verdict_of("C14e", first_run(1.05, 1980.0))
    assert v.verdict == claims.NOT_MEASURED
    assert v.numbers()["after_idle_ratio"] == pytest.approx(1.05)
    warm = first_run(1.05, 1980.0)
    warm[0]["cache"] = "warm"  # the settled samples on a warm L2: the call had colder caches
    assert verdict_of("C14e", warm).verdict == D


def test_comparisons_stay_inside_one_run_and_size():
    """C10 compares the WMMA and mma/wgmma stages of one run at one size: a faster WMMA row of
    a small size in another run is not the one compared."""
    v = verdict_of("C10", tensor(650.0))
    assert v.numbers()["mma_over_wmma"] == pytest.approx(650.0 / 280.0)
    assert "4096³" in v.parts[0].measured


def _roof_part(gemv_gbs):
    """C1's bound part for the chapter's peaks, a copy probe at 3000 GB/s and one GEMV streaming
    its 16384 x 16384 FP32 matrix at ``gemv_gbs``."""
    n = 16384
    bytes_min = 4.0 * (n * n + 2 * n)
    rows = ceilings()[1:] + [copy_row(3000.0),
                             row("gemv_gpu", "gpu_probe", n=n, m=n, k=1, op="gemv", flops=2.0 * n * n,
                                 bytes_min=bytes_min, time_s=bytes_min / (gemv_gbs * 1e9), run="run-gemv")]
    (part,) = [p for p in verdict_of("C1", rows).parts if "bounds every" in p.what]
    return part


def test_roofline_bound_uses_the_datasheet_and_says_no_to_a_row_beyond_it():
    """T uses the datasheet's peaks: a read stream faster than the copy probe but under the
    datasheet bandwidth holds (and is named), one beyond the datasheet does not."""
    under = _roof_part(3200.0)  # H100 datasheet 3350 GB/s
    assert under.verdict == claims.HOLDS
    assert "faster than the copy probe" in under.measured
    beyond = _roof_part(3700.0)
    assert beyond.verdict == claims.DOES_NOT_HOLD and beyond.numbers["roofline_violations"] == 1.0
