"""analysis.paper: every figure and table from result rows, with the expected series, numbers
read back from the data, identical bytes on a rerun, and gaps noted instead of errors.

Datasets: a CPU-only run made here with the harness (it exercises the paths where the GPU
backends are missing), the same run plus the rows of GPU variants the harness skipped on this
machine, and every reference dataset under ``outputs/reference/`` (the H200 runs, once there).
Expected values are recomputed from the CSV with plain pandas, not with ``analysis.data``.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from conftest import (REFERENCE, ROOT, compose_cfg, control, evidence, flags, reference_kind, reference_sets,
                      run_points, whole_reference)

from analysis import data, ladder, paper, style, tables
from analysis.figures import hierarchical_roofline
from analysis.paper import FIGURES  # every figure the paper writes
from gemmlab import devices

REFERENCE_SETS = reference_sets()  # each device kind's first and latest (conftest.reference_sets)
ALL_REFERENCE_SETS = reference_sets(every=True)
NO_REFERENCE = pytest.mark.skip(reason="no reference dataset under outputs/reference/ yet "
                                       "(it appears with the lead's H200 run)")


def _reference_params(names):
    """A reference set's tests run on one pytest-xdist worker, which reads the set once (raw, dataset)."""
    return [pytest.param(name, id=f"reference-{name}", marks=pytest.mark.xdist_group(f"reference-{name}"))
            for name in names] or [pytest.param(None, id="reference", marks=NO_REFERENCE)]


REFERENCE_PARAMS = _reference_params(REFERENCE_SETS)
ALL_REFERENCE_PARAMS = _reference_params(ALL_REFERENCE_SETS)
CPU_SIZES = "sizes.square=[64,128,256,1024]"  # 1024: the chapter's GEMM row of the intensity table


# -- datasets --------------------------------------------------------------------------------
# The tests of the CPU run below share one pytest-xdist worker, which makes the run once.
on_the_cpu_run_worker = pytest.mark.xdist_group("cpu_results")


@pytest.fixture(scope="session")  # once per worker: fast and slow tests use it, at both ends of the run
def cpu_results(tmp_path_factory) -> Path:
    """A real CPU BLAS run at tiny sizes (fp32, fp64), made by the harness here."""
    tmp = tmp_path_factory.mktemp("cpu_run")
    cfg = compose_cfg(["variant=cpu_blas", "precision=[fp32,fp64]", "sizes=smoke", CPU_SIZES,
                       "measure=quick", "measure.min_samples=10", "run.progress=false"], tmp)
    _, rows = run_points(cfg, tmp / "run")  # 10 samples: what the evidence rule asks of a row
    assert rows and all(r["status"] == "ok" for r in rows)
    return tmp / "run" / "results.csv"


@pytest.fixture(scope="session")  # once per worker: fast and slow tests use it, at both ends of the run
def skipped_gpu_results(tmp_path_factory, cpu_results) -> Path:
    """The CPU run plus GPU variants the harness skipped here (no CUDA device): real skipped rows."""
    tmp = tmp_path_factory.mktemp("gpu_skipped")
    cfg = compose_cfg(["variant=[cublas,cublaslt]", "precision=[fp32,fp16]", "sizes=smoke",
                       "measure=quick", "run.progress=false"], tmp)
    _, rows = run_points(cfg, tmp / "run")
    assert rows and all(r["status"] == "skipped" for r in rows), "expected a machine without a GPU"
    (tmp / "cpu").mkdir()
    (tmp / "cpu" / "results.csv").write_bytes(cpu_results.read_bytes())
    return tmp


def _reference(name) -> Path:
    return REFERENCE / name


def _committed(path) -> bool:
    """Whether ``path`` lies in the committed reference data, which no test writes to."""
    return Path(path).resolve().is_relative_to(REFERENCE.resolve())


# what evidence() (conftest), with_counters and _richest_reference read at collection: only these columns, in one read
# of each set per process (two reads of every set were ~5 s of each xdist worker's collection)
EVIDENCE_COLUMNS = ("status", "timer", "reliable", "contended", "distribution", "samples")
COUNTER_COLUMNS = ("bytes_dram", "bytes_l2", "bytes_l1")
COLLECTION_COLUMNS = frozenset(("backend",) + EVIDENCE_COLUMNS + COUNTER_COLUMNS)


@functools.lru_cache(maxsize=None)
def _read_raw(path: str, columns: frozenset | None = None) -> pd.DataFrame:
    """raw(); with ``columns``, only those (and run_id, point_key) are read: a quarter of the time,
    for what collection needs to know about a set."""
    files = sorted(Path(path).rglob("results.csv")) if Path(path).is_dir() else [Path(path)]
    usecols = None if columns is None else (lambda c: c in columns or c in ("run_id", "point_key"))
    df = pd.concat([pd.read_csv(f, dtype={"run_id": str, "point_key": str}, usecols=usecols) for f in files],
                   ignore_index=True)
    keyed = df["run_id"].notna() & df["point_key"].notna()
    return pd.concat([df[keyed].drop_duplicates(["run_id", "point_key"]), df[~keyed]], ignore_index=True)


def raw(path) -> pd.DataFrame:
    """The rows as plain pandas reads them: the independent side of every comparison. A sweep's
    merged file repeats its jobs' rows: a (run_id, point_key) is kept once. The reference data's
    rows are read once per test process (a copy each time: callers may change theirs)."""
    if _committed(path):
        return _read_raw(str(Path(path).resolve())).copy()
    return _read_raw.__wrapped__(str(path))


@functools.lru_cache(maxsize=None)
def _reference_dataset(path: str) -> data.Dataset:
    if Path(path) == REFERENCE.resolve():
        return whole_reference()  # the reference_dataset fixture's (conftest): one read of it a process
    return data.Dataset.from_paths([Path(path)])


def dataset(path) -> data.Dataset:
    """``data.Dataset.from_paths([path])``; for the reference data, one per test process, shared by
    the tests that only read it (reading the H200 sets takes seconds each time)."""
    if _committed(path):
        return _reference_dataset(str(Path(path).resolve()))
    return data.Dataset.from_paths([path])


def measured(df: pd.DataFrame) -> pd.DataFrame:
    timer = df["timer"].astype(str) if "timer" in df.columns else pd.Series("", index=df.index)
    return df[(df["status"] == "ok") & (timer != "cupti_kernel") & ~control(df)]


def subset(path, out_dir: Path, keep) -> Path:
    """Rows of ``path`` for which ``keep(frame)`` holds, as a new results file (a smaller dataset)."""
    df = raw(path)
    out_dir.mkdir(parents=True, exist_ok=True)
    df[keep(df)].to_csv(out_dir / "results.csv", index=False)
    return out_dir / "results.csv"


def build_all(path):
    ds = dataset(path)
    return ds, {name: build(ds) for name, build in FIGURES.items()}


def all_notes(figs) -> str:
    return "\n".join(n for f in figs.values() for n in style.notes_of(f))


# -- files: every one written, the same bytes on a rerun --------------------------------------
@on_the_cpu_run_worker
@pytest.mark.slow
def test_cpu_dataset_writes_every_file_reproducibly(cpu_results, tmp_path, capsys):
    """Through the command line: every file, each the same bytes when written again from the same
    rows (an unchanged file is not rewritten: its mtime stays, so reruns do not churn git)."""
    first = tmp_path / "a"
    assert paper.main([str(cpu_results), "--out", str(first)]) == 0
    assert "gap in roofline" in capsys.readouterr().out
    names = paper.expected_files()
    assert sorted(p.name for p in first.iterdir()) == sorted(names)
    before = {n: ((first / n).stat().st_mtime_ns, (first / n).read_bytes()) for n in names}
    assert all(b for _, b in before.values())
    paper.write_paper(data.Dataset.from_paths([cpu_results]), first)
    after = {n: ((first / n).stat().st_mtime_ns, (first / n).read_bytes()) for n in names}
    differ = [n for n in names if after[n] != before[n]]
    assert not differ, f"{differ} differ between two writes of the same rows"
    from PIL import Image

    for name in names:
        if name.endswith(".pdf"):
            pdf = (first / name).read_bytes()
            assert pdf.startswith(b"%PDF") and b"/CreationDate" not in pdf
            assert b"DejaVuSans" in pdf  # the fixed font, embedded
        elif name.endswith(".png"):
            with Image.open(first / name) as im:
                assert "Software" not in im.info
                assert im.size[0] == round(style.COLUMN_WIDTH_IN * style.PNG_DPI)  # single column


def test_command_line_without_rows_says_so(tmp_path):
    assert paper.main([str(tmp_path / "nothing-here"), "--out", str(tmp_path / "x")]) == 2


# -- series: what each figure draws is what the data holds ------------------------------------
@functools.lru_cache(maxsize=None)
def stage_of(variant):
    path = ROOT / "conf" / "variant" / f"{variant}.yaml"
    return OmegaConf.load(path).get("stage") if path.exists() else None


def series(fig, kind):
    return {s.split(":", 1)[1] for s in style.series_of(fig) if s.split(":", 1)[0] == kind}


def check_series(path, figs, ds=None):
    """The series of ``figs`` (build_all of ``path``; ``ds``: the Dataset they were built from, else
    read again) against the rows of ``path`` as plain pandas reads them."""
    df = raw(path)
    okr = evidence(df).copy()
    okr["gpu"] = ~okr["backend"].isin(["cpu_blas", "cpu_probe"])
    shown = measured(df).copy()
    shown["gpu"] = ~shown["backend"].isin(["cpu_blas", "cpu_probe"])
    gemm = okr[okr["op"].fillna("gemm") == "gemm"]
    square = data.square(gemm)  # one GEMM of row-major operands (layout nn, batch 1)

    roof = figs["roofline"]
    on_gpu = shown["gpu"].any()  # the roofline shows the GPU, else the CPU
    throughput = okr[(okr["gpu"] == on_gpu) & okr["op"].isin(["gemm", "gemv", "vecadd"]) & (okr["tflops"] > 0)
                     & (okr["intensity"] > 0)]
    assert series(roof, "point") == {f"{v}:{p}" for v, p in zip(throughput["variant"], throughput["precision"])}
    left_out = shown.loc[~shown.index.isin(okr.index)]
    left_out = left_out[(left_out["gpu"] == on_gpu) & left_out["op"].isin(["gemm", "gemv", "vecadd"])
                        & (left_out["tflops"] > 0)]
    assert series(roof, "unreliable") == {f"{v}:{p}" for v, p in zip(left_out["variant"], left_out["precision"])}
    modeled = throughput[throughput["intensity_model"].notna()]
    assert series(roof, "model") == {f"{v}:{p}" for v, p in zip(modeled["variant"], modeled["precision"])}
    assert series(roof, "model-link") == series(roof, "model")
    peaks = throughput[throughput["op"].fillna("gemm") == "gemm"]
    assert set(peaks["precision"]) == {s.split(":")[1] for s in series(roof, "roof") if s.startswith("measured")}
    copies = okr[(okr["op"] == "copy") & (okr["gpu"] == on_gpu)]
    # whether conf/device has the shown GPU's datasheet (the H200; an H100 80GB HBM3 by its stem, as gemmlab.devices
    # matches names)
    matched = on_gpu and any(devices.match(str(d), "gpu")[1] for d in set(shown["device"].astype(str)))
    if not copies.empty or matched:
        assert series(roof, "ridge") == set(peaks["precision"])
    assert ("datasheet" in series(roof, "memroof")) == matched
    assert ("measured" in series(roof, "memroof")) == (not copies.empty)
    if copies.empty and on_gpu:
        assert any("no copy rows" in n for n in style.notes_of(roof))

    thr = figs["throughput_vs_size"]
    pow2 = square["n"].astype(int).map(lambda n: n > 0 and n & (n - 1) == 0)
    assert series(thr, "line") == {f"{v}:{p}" for v, p in zip(square.loc[pow2, "variant"], square.loc[pow2, "precision"])}
    assert series(thr, "offsize-line") == {f"{v}:{p}" for v, p in zip(square.loc[~pow2, "variant"],
                                                                      square.loc[~pow2, "precision"])}

    err = figs["error_vs_precision"]
    with_err = gemm[gemm["rel_error"].notna()]
    drawn = series(err, "error") | series(err, "error-exact")
    assert drawn == {f"{b}:{p}" for b, p in zip(with_err["backend"], with_err["precision"])}
    assert series(err, "tolerance") == set(with_err["precision"])
    assert series(err, "band") == {"chapter"}

    cross = figs["cpu_gpu_crossover"]
    cpu_sq = square[~square["gpu"]]
    assert series(cross, "cpu") | series(cross, "offsize-cpu") == set(cpu_sq["precision"])
    gpu_sq = square[square["gpu"]]
    panels = set(cpu_sq["precision"]) or set(data.configured_precisions("cpu"))
    with_cublas = set(gpu_sq.loc[gpu_sq["backend"].isin(["cublas", "cublaslt"]), "precision"])
    # the line labelled cuBLAS holds cuBLAS rows only; a precision without any gets its own line
    assert series(cross, "gpu") | series(cross, "offsize-gpu") == with_cublas & panels
    assert series(cross, "gpu-fastest") | series(cross, "offsize-gpu-fastest") == \
        (set(gpu_sq["precision"]) - with_cublas) & panels
    for p in with_cublas & panels:
        lib = gpu_sq[(gpu_sq["precision"] == p) & gpu_sq["backend"].isin(["cublas", "cublaslt"])]
        lines = [l for ax in cross.axes for l in ax.lines if l.get_gid() in (f"gpu:{p}", f"offsize-gpu:{p}")]
        xs = [x for l in lines for x in l.get_xdata()]
        ys = [y for l in lines for y in l.get_ydata()]
        assert sorted(xs) == sorted(float(n) for n in set(lib["n"]))  # every cuBLAS size, nothing else
        best = lib.groupby("n")["time_median_s"].min()
        assert ys == pytest.approx([best[int(n)] for n in xs], rel=1e-9)
    transfers = okr[(okr["op"] == "transfer") & (okr["m"] == okr["n"]) & (okr["n"] == okr["k"])]
    memory = [json.loads(e).get("memory", v) if isinstance(e, str) else v
              for e, v in zip(transfers["extra"], transfers["variant"])]
    with_gpu = {(p, n) for p, n in zip(gpu_sq["precision"], gpu_sq["n"])}
    assert series(cross, "gpu+transfers") | series(cross, "offsize-gpu+transfers") == {f"{p}:{m}" for p, n, m in zip(transfers["precision"], transfers["n"], memory)
                                              if p in panels and (p, n) in with_gpu}
    if transfers.empty and (series(cross, "gpu") or series(cross, "gpu-fastest")):
        assert any("no transfer rows" in n for n in style.notes_of(cross))
    e2e = okr[(okr["op"] == "gemm_e2e") & (okr["m"] == okr["n"]) & (okr["n"] == okr["k"])]
    assert series(cross, "gpu-e2e") | series(cross, "offsize-gpu-e2e") == set(e2e["precision"]) & panels

    check_hierarchical_series(okr, figs["hierarchical_roofline"])

    lad = figs["ladder"]
    # the ladder's problems: square, batch 1, layout nn; a precision no stage ran nn at (FP8, whose
    # wgmma reads both operands K-major) at the layout its stages ran
    any_layout = data.square(gemm, layouts=None)
    any_layout = any_layout.assign(layout=data.layout_of(any_layout))
    cuda = any_layout[(any_layout["backend"] == "cuda") & any_layout["gpu"]]
    staged = [stage_of(v) is not None for v in cuda["variant"]]
    if any(staged):  # the rungs: variants with a stage in their config (pitfalls have none)
        cuda = cuda[staged]
    nn_precisions = set(cuda.loc[cuda["layout"] == "nn", "precision"])
    cuda = cuda[(cuda["layout"] == "nn") | ~cuda["precision"].isin(nn_precisions)]
    bars = series(lad, "bar")
    assert {b.split(":")[1] for b in bars} == (set(cuda["precision"]) if not cuda.empty
                                                else set(gpu_sq["precision"]))
    sizes = tables.ladder_frame(dataset(path) if ds is None else ds).groupby("precision")["n"].first()
    for p, n in sizes.items():  # every stage that ran at the ladder's size is on it ...
        at = cuda[(cuda["precision"] == p) & (cuda["n"] == n)]
        assert {f"{v}:{p}" for v in at["variant"]} <= bars
        # ... and that size is the one with the most stages
        per_size = cuda[cuda["precision"] == p].groupby("n")["variant"].nunique()
        assert per_size.empty or len(set(at["variant"])) == per_size.max()
    for ax in lad.axes:  # bar lengths compare: a linear axis from zero
        if ax.patches:
            assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0


LEVELS = ("dram", "l2", "l1")


def counter_rows(okr):
    """ok GPU throughput rows with hardware counters, and each level's intensity from the bytes
    (inf where zero bytes were counted)."""
    c = okr[okr["gpu"] & okr["op"].isin(["gemm", "gemv", "vecadd"]) & (okr["tflops"] > 0)].copy()
    for lvl in LEVELS:
        c[f"bytes_{lvl}"] = pd.to_numeric(c.get(f"bytes_{lvl}"), errors="coerce")
    c = c[c[[f"bytes_{lvl}" for lvl in LEVELS]].notna().any(axis=1)]
    for lvl in LEVELS:
        b = c[f"bytes_{lvl}"]
        c[f"x_{lvl}"] = [float("nan") if pd.isna(v) else float("inf") if v == 0 else f / v
                         for f, v in zip(c["flops"], b)]
    return c


def offsets(fig, gid):
    """(x, y) of the markers of the artist with ``gid`` (exactly one such artist)."""
    found = [c for ax in fig.axes for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1, gid
    return [tuple(map(float, xy)) for xy in found[0].get_offsets()]


def check_hierarchical_series(okr, fig):
    """Each kernel with counters at its DRAM, L2 and L1 intensity (off scale where the level
    carried less than the operands), its modeled intensity beside, at its TFLOP/s."""
    c = counter_rows(okr)
    notes = "\n".join(style.notes_of(fig))
    for lvl in LEVELS:
        has = c[c[f"bytes_{lvl}"].notna()]
        drawn = series(fig, lvl) | series(fig, f"offscale-{lvl}")
        assert drawn == {f"{v}:{p}" for v, p in zip(has["variant"], has["precision"])}, lvl
        cut = hierarchical_roofline.OFFSCALE_FACTOR * c["intensity"].max()
        for _, r in has.iterrows():
            x = r[f"x_{lvl}"]
            off = x == float("inf") or x > cut
            kind = f"offscale-{lvl}" if off else lvl
            [(x_drawn, y_drawn)] = offsets(fig, f"{kind}:{r['variant']}:{r['precision']}")
            assert y_drawn == pytest.approx(r["tflops"], rel=1e-9)
            if off:
                value = "∞" if x == float("inf") else style.format_sig(x, 3)
                assert f"off scale: {r['variant']} {lvl.upper()} {value}" in notes
            else:
                assert x_drawn == pytest.approx(x, rel=1e-9)
                assert x_drawn == pytest.approx(r[f"intensity_{lvl}"], rel=1e-9)  # the row's own column
    modeled = c[c["intensity_model"].notna()]
    assert series(fig, "model") == {f"{v}:{p}" for v, p in zip(modeled["variant"], modeled["precision"])}
    for _, r in modeled.iterrows():
        assert offsets(fig, f"model:{r['variant']}:{r['precision']}") == \
            [pytest.approx((r["intensity_model"], r["tflops"]), rel=1e-9)]
    assert series(fig, "levels") == {f"{v}:{p}" for v, p in zip(c["variant"], c["precision"])}
    # roofs: one compute roof per precision with counters, at its measured peak; DRAM always;
    # no L2/L1 roof without rows that measured them, and the axes say so
    assert series(fig, "roof") == {f"measured:{p}" for p in set(c["precision"])}
    assert series(fig, "memroof") == {"dram"} | {lvl for lvl in ("l2", "l1")
                                                 if (okr["op"] == f"{lvl}_bandwidth").any()}
    if not ((okr["op"] == "l2_bandwidth") | (okr["op"] == "l1_bandwidth")).any():
        assert hierarchical_roofline.LEVEL_ROOFS_MISSING in notes
    if c.empty:
        assert hierarchical_roofline.NO_COUNTERS in notes
        assert len(fig.axes) == 1
    else:
        assert hierarchical_roofline.NO_COUNTERS not in notes
        assert [ax.get_title(loc="left").split(",")[0] for ax in fig.axes] == \
            data.precision_order(c["precision"])  # one panel per precision
    for ax in fig.axes:
        assert ax.get_xscale() == ax.get_yscale() == "log"
        assert "FLOP/byte" in ax.get_xlabel() or ax is not fig.axes[-1]
        assert "TFLOP/s" in ax.get_ylabel()


@on_the_cpu_run_worker
def test_cpu_dataset_series_and_gaps(cpu_results):
    ds, figs = build_all(cpu_results)
    check_series(cpu_results, figs, ds)
    notes = all_notes(figs)
    assert "no GPU rows" in notes  # the roofline says its roofs are the datasheet's only
    assert "no GPU GEMM rows" in notes  # the ladder is empty, and says so
    assert "cublas" in notes  # the missing backends are named


@on_the_cpu_run_worker
def test_skipped_gpu_rows_are_not_measurements(skipped_gpu_results):
    ds, figs = build_all(skipped_gpu_results)
    check_series(skipped_gpu_results, figs, ds)
    assert ds.gpu.empty and not ds.measured_rows("cpu").empty  # measured; reliable ones depend on the runner
    assert "no GPU rows" in all_notes(figs)


def test_the_per_set_tests_take_each_device_kind_s_first_and_latest_set(monkeypatch):
    """Bounded: two sets a device kind, whatever the number of session days; every kind is in."""
    monkeypatch.delenv("GEMMLAB_EVERY_REFERENCE_SET", raising=False)
    every = reference_sets(every=True)
    if not every:
        pytest.skip("no reference dataset under outputs/reference/")
    sample = reference_sets()
    kinds = {reference_kind(n) for n in every}
    assert {reference_kind(n) for n in sample} == kinds and len(sample) <= 2 * len(kinds)
    for kind in kinds:
        days = [n for n in every if reference_kind(n) == kind]
        assert days[0] in sample and days[-1] in sample, kind
    assert reference_kind("h200x2-2026-11-29") == "h200x2"
    monkeypatch.setenv("GEMMLAB_EVERY_REFERENCE_SET", "1")
    assert reference_sets() == every


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_PARAMS)
def test_reference_series(name):
    _, figs = build_all(_reference(name))
    check_series(_reference(name), figs)


# -- gaps: a dataset missing a backend or a precision still yields every figure ---------------
@on_the_cpu_run_worker
def test_cpu_dataset_missing_a_precision(cpu_results, tmp_path):
    path = subset(cpu_results, tmp_path, lambda df: df["precision"] != "fp64")
    ds, figs = build_all(path)
    assert set(figs) == set(FIGURES)
    assert "fp64" in style.notes_of(figs["throughput_vs_size"])[0]
    check_series(path, figs, ds)
    peaks = tables.peak_frame(data.Dataset.from_paths([path]))
    device = raw(path)["device"].iloc[0]
    cpu_fp64 = peaks[(peaks["device"] == device) & (peaks["ceiling"] == "fp64")]
    if data.match_device_config(device, "cpu")[1]:  # the datasheet's fp64, "not measured"
        assert len(cpu_fp64) == 1 and pd.isna(cpu_fp64["measured"].iloc[0])
    else:  # no conf/device entry names this CPU: no datasheet line to compare with
        assert cpu_fp64.empty


@on_the_cpu_run_worker
def test_dataset_without_measurements(skipped_gpu_results, tmp_path):
    """Only skipped rows (a GPU run on a machine without one): every figure, each saying why."""
    path = subset(skipped_gpu_results, tmp_path, lambda df: df["status"] != "ok")
    ds, figs = build_all(path)
    assert ds.ok.empty
    for name, fig in figs.items():
        assert style.notes_of(fig), f"{name} notes nothing about an empty dataset"
    made = tables.build(ds)
    assert "not measured" in tables.render_markdown(made)


def _richest_reference():
    """The reference set with the most backends (the first on a tie): dropping each backend in
    turn from one set covers every gap note; every set costs a minute of figures on 2 cores."""
    if not ALL_REFERENCE_SETS:
        return ALL_REFERENCE_PARAMS
    counts = {n: _read_raw(str(_reference(n).resolve()), COLLECTION_COLUMNS)["backend"].nunique()
              for n in ALL_REFERENCE_SETS}
    best = max(ALL_REFERENCE_SETS, key=lambda n: (counts[n], -ALL_REFERENCE_SETS.index(n)))
    return [p for p in ALL_REFERENCE_PARAMS if p.values[0] == best]


@pytest.mark.slow
@pytest.mark.parametrize("name", _richest_reference())
def test_reference_missing_each_backend(name, tmp_path):
    full = raw(_reference(name))
    for b in sorted(set(full["backend"])):
        path = subset(_reference(name), tmp_path / b, lambda df, b=b: df["backend"] != b)
        if raw(path).empty:
            continue
        ds, figs = build_all(path)
        check_series(path, figs, ds)
        if b.endswith("_probe"):  # probes are named by what they measured: the copy roof
            lost = full[(full["backend"] == b) & (full["status"] == "ok")]
            if b == "gpu_probe" and (lost["op"] == "copy").any():
                assert "no copy rows" in all_notes(figs)
        else:
            assert b in all_notes(figs), f"no figure notes that {b} is missing"


# -- tables: every number read back from the data ----------------------------------------------
def check_peak_table(path, ds):
    df = raw(path)
    okr = evidence(df)
    frame = tables.peak_frame(ds)
    md = tables.render_markdown(tables.build(ds))
    cpu_backends = ["cpu_blas", "cpu_probe"]
    for kind, rows in (("gpu", okr[~okr["backend"].isin(cpu_backends)]), ("cpu", okr[okr["backend"].isin(cpu_backends)])):
        if rows.empty:
            continue
        device = rows["device"].value_counts().index[0]
        rows = rows[rows["device"] == device]
        gemms = rows[(rows["op"].fillna("gemm") == "gemm") & (rows["tflops"] > 0)]  # peaks: GEMMs only
        for p, best in gemms.groupby("precision")["tflops"].max().items():
            line = frame[(frame["device"] == device) & (frame["ceiling"] == p)]
            assert len(line) == 1
            assert line["measured"].iloc[0] == pytest.approx(best, rel=1e-9)
            assert style.format_sig(best) in md
            stem = line["datasheet_config"].iloc[0]
            if not stem:  # no conf/device entry names this device: nothing to compare it with
                assert pd.isna(line["datasheet"].iloc[0]) and pd.isna(line["pct_of_datasheet"].iloc[0])
                continue
            cfg = OmegaConf.load(ROOT / "conf" / "device" / f"{stem}.yaml")
            assert devices.match(device, "gpu")[0].stem == stem and devices.match(device, "gpu")[1], (device, stem)
            if p in cfg.peak_tflops:
                assert line["datasheet"].iloc[0] == pytest.approx(float(cfg.peak_tflops[p]))
                assert line["pct_of_datasheet"].iloc[0] == pytest.approx(100 * best / float(cfg.peak_tflops[p]))
        copies = rows[rows["op"] == "copy"]
        mem = frame[(frame["device"] == device) & (frame["ceiling"] == "memory (copy)")]["measured"].iloc[0]
        if copies.empty:
            assert pd.isna(mem)
        else:
            assert mem == pytest.approx((copies["bytes_min"] / copies["time_median_s"]).max() / 1e9)


def check_intensity_table(path, ds):
    df = raw(path)
    okr = evidence(df)
    okr = okr[okr["op"].fillna("gemm") == "gemm"]
    frame = tables.intensity_frame(ds).set_index("op")
    assert frame.loc["gemm", "chapter_intensity"] == pytest.approx(2 * 1024 ** 3 / (12 * 1024 ** 2))
    at = okr[(okr["m"] == 1024) & (okr["n"] == 1024) & (okr["k"] == 1024)]
    if at.empty:
        assert pd.isna(frame.loc["gemm", "tflops"])
        return
    line = frame.loc["gemm"]
    rows = at[(at["variant"] == line["variant"]) & (at["precision"] == line["precision"])]
    assert line["flops"] == rows["flops"].iloc[0] == 2 * 1024 ** 3
    assert line["bytes_min"] == rows["bytes_min"].iloc[0]
    assert line["intensity"] == pytest.approx(rows["flops"].iloc[0] / rows["bytes_min"].iloc[0])
    best_t = rows["time_median_s"].min()  # the point's best row
    assert line["tflops"] == pytest.approx(2 * 1024 ** 3 / best_t / 1e12)
    # the chapter's operands are FP32: its row is measured at fp32 where the data has it
    if (at["precision"] == "fp32").any():
        assert line["precision"] == "fp32"
        fp32 = at[at["precision"] == "fp32"]
        gpu = fp32[~fp32["backend"].isin(["cpu_blas", "cpu_probe"])]
        assert best_t == (gpu if not gpu.empty else fp32)["time_median_s"].min()  # the fastest variant
    md = tables.render_markdown(tables.build(ds))
    assert style.format_sig(line["tflops"]) in md and style.format_sig(line["intensity"]) in md


def check_ladder_table(path, ds):
    df = raw(path)
    okr = evidence(df)
    okr = data.square(okr[okr["op"].fillna("gemm") == "gemm"], layouts=None)  # batch 1, a layout per precision
    okr = okr.assign(layout=data.layout_of(okr))
    entries = tables.ladder_frame(ds)
    md = tables.render_markdown(tables.build(ds))
    for _, e in entries.iterrows():
        at = okr[(okr["precision"] == e["precision"]) & (okr["m"] == e["n"]) & (okr["n"] == e["n"])
                 & (okr["k"] == e["n"]) & (okr["layout"] == e["layout"])]
        assert e["layout"] == "nn" or not ((okr["precision"] == e["precision"]) & (okr["layout"] == "nn")
                                           & (okr["backend"] == "cuda")).any()
        lib = at[at["backend"].isin(["cublas", "cublaslt"])]
        standalone = lib["time_median_s"].min()  # the best standalone cuBLAS row at that size
        if e["group"] == "cublas":
            assert e["tflops"] == pytest.approx(2 * e["n"] ** 3 / standalone / 1e12)
            assert e["pct_of_standalone"] == pytest.approx(100.0)
            continue
        rows = at[at["variant"] == e["variant"]] if e["group"] == "stage" else at[at["backend"] == "cutlass"]
        if e["group"] == "stage":  # of its current configuration (the YAML's defines), where one ran
            current = rows[ladder.current_configuration(rows, e["variant"])]
            rows = current if not current.empty else rows
        best = rows.loc[rows["time_median_s"].idxmin()]  # the rung: its best row
        assert e["variant"] == best["variant"] and e["run_id"] == best["run_id"]
        assert e["tflops"] == pytest.approx(best["tflops"])
        assert e["rel_error"] == pytest.approx(best["rel_error"])
        if pd.notna(best.get("baseline_time_median_s")):  # its own interleaved baseline
            assert e["pct_of_cublas"] == pytest.approx(100 * best["baseline_time_median_s"] / best["time_median_s"])
            assert e["cublas_tflops"] == pytest.approx(best["baseline_tflops"])
        if pd.notna(standalone):
            assert e["pct_of_standalone"] == pytest.approx(100 * standalone / best["time_median_s"])
            assert e["standalone_tflops"] == pytest.approx(2 * e["n"] ** 3 / standalone / 1e12)
        for key in ("pct_of_cublas", "pct_of_standalone"):  # the table shows both readings
            if pd.notna(e[key]):
                assert f"{e[key]:.1f}" in md
    stages = entries[entries["group"] == "stage"]
    for p, g in stages.groupby("precision", sort=False):  # rungs in the order of their rows' stage
        order = list(g["stage"])
        staged = [s for s in order if pd.notna(s)]
        assert staged == sorted(staged)


@on_the_cpu_run_worker
def test_cpu_dataset_tables(cpu_results):
    ds = data.Dataset.from_paths([cpu_results])
    check_peak_table(cpu_results, ds)
    check_intensity_table(cpu_results, ds)
    check_ladder_table(cpu_results, ds)
    assert tables.ladder_frame(ds).empty
    frame = tables.intensity_frame(ds).set_index("op")
    # the CPU's ridge needs its bandwidth: a copy row or a datasheet that names this CPU
    if ds.cpu_ceilings.measured_bandwidth_gbs is None and ds.cpu_ceilings.sheet is None:
        assert pd.isna(frame.loc["gemm", "bound"]) and pd.isna(frame.loc["gemm", "ridge"])
    else:
        assert frame.loc["gemm", "bound"] in ("bandwidth", "compute")
    assert pd.isna(frame.loc["vecadd", "flops"])  # no vecadd rows: "not measured", no number
    tex = tables.render_latex(tables.build(ds))
    assert r"\begin{tabular}" in tex and "cpu\\_blas" in tex


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_PARAMS)
def test_reference_tables(name):
    ds = dataset(_reference(name))
    check_peak_table(_reference(name), ds)
    check_intensity_table(_reference(name), ds)
    check_ladder_table(_reference(name), ds)


# -- the shared helpers ------------------------------------------------------------------------
@on_the_cpu_run_worker
def test_best_cublas_is_the_faster_library_of_the_same_run(skipped_gpu_results):
    ds = data.Dataset.from_paths([skipped_gpu_results])
    assert data.cublas_per_run(ds.rows).empty and data.cublas_standalone(ds.rows).empty  # skipped: no baseline
    ceil = data.device_ceilings(ds.rows, "gpu")
    assert ceil.device is None and ceil.config.stem == data.FALLBACK_DEVICE_CONFIG["gpu"]
    assert ceil.measured_bandwidth_gbs is None and ceil.bandwidth_gbs == ceil.datasheet_bandwidth_gbs
    cpu = data.device_ceilings(ds.rows, "cpu")
    counted = evidence(raw(skipped_gpu_results))  # rows a slow shared runner measured noisily do not count
    assert cpu.config.kind == "cpu" and set(cpu.measured_tflops) == set(counted.loc[counted["backend"] == "cpu_blas",
                                                                                      "precision"])


def test_device_config_matching():
    h200, matched = data.match_device_config("NVIDIA H200", "gpu")
    assert matched and h200.stem == "h200"
    h100, matched = data.match_device_config("NVIDIA H100 80GB HBM3", "gpu")
    assert matched and h100.stem == "h100"
    other, matched = data.match_device_config("NVIDIA A100-SXM4-80GB", "gpu")
    assert not matched and other.stem == "h200"
    # the generic CPU config describes no model: a CPU named "... CPU @ 2.10GHz" is not it
    for name in ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", "Intel(R) Xeon(R) Processor", "AMD EPYC 9654"):
        assert not data.match_device_config(name, "cpu")[1], name


@on_the_cpu_run_worker
def test_sweep_folder_rows_are_read_once(cpu_results, tmp_path):
    """A sweep folder holds the merged file and each job's file: the same rows, counted once."""
    (tmp_path / "job0").mkdir()
    (tmp_path / "job0" / "results.csv").write_bytes(cpu_results.read_bytes())
    (tmp_path / "results.csv").write_bytes(cpu_results.read_bytes())
    assert len(data.load([tmp_path])) == len(raw(cpu_results))


def test_roof_labels_are_spread_apart():
    from analysis.figures.roofline import spread

    ys = spread([0.0, 0.01, 0.02, 1.0], gap=0.1)
    assert all(b - a >= 0.1 - 1e-9 for a, b in zip(ys, ys[1:]))
    assert sum(ys[:3]) / 3 == pytest.approx(0.01)  # a crowded cluster stays centred on its roofs
    assert ys[3] == 1.0  # a label with room stays at its roof


# -- the hierarchical roofline: measured bytes per memory level ---------------------------------
def with_counters(name):
    """Reference datasets that hold rows with hardware counters among the rows that count."""
    if name is None:
        return False
    df = evidence(_read_raw(str(_reference(name).resolve()), COLLECTION_COLUMNS))
    return any(c in df.columns and df[c].notna().any() for c in COUNTER_COLUMNS)


COUNTER_PARAMS = [p for p in ALL_REFERENCE_PARAMS if with_counters(p.values[0])] or \
    [pytest.param(None, id="reference-counters",
                  marks=pytest.mark.skip(reason="no reference rows with hardware counters yet"))]


@on_the_cpu_run_worker
def test_hierarchical_roofline_without_counters_notes_it(cpu_results, tmp_path):
    """No row has counters: the figure is still made, one empty panel with the DRAM roof, and
    the note says why."""
    ds, figs = build_all(cpu_results)
    fig = figs["hierarchical_roofline"]
    notes = "\n".join(style.notes_of(fig))
    assert hierarchical_roofline.NO_COUNTERS in notes
    assert hierarchical_roofline.LEVEL_ROOFS_MISSING in notes
    assert series(fig, "memroof") == {"dram"}
    assert not (series(fig, "dram") | series(fig, "l2") | series(fig, "l1") | series(fig, "model"))
    style.save(fig, tmp_path, "hierarchical_roofline")
    assert (tmp_path / "hierarchical_roofline.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", COUNTER_PARAMS)
def test_hierarchical_roofline_reference(name, tmp_path):
    """The H200 rows with counters: every kernel at its three levels, same bytes on a rerun, and
    the same dataset with the counter columns emptied still yields the figure, with the note."""
    path = _reference(name)
    okr = evidence(raw(path)).copy()  # the figure draws the rows that count
    okr["gpu"] = ~okr["backend"].isin(["cpu_blas", "cpu_probe"])
    c = counter_rows(okr)
    assert not c.empty
    ds = dataset(path)
    fig = hierarchical_roofline.build(ds)
    check_hierarchical_series(okr, fig)
    again = hierarchical_roofline.build(data.Dataset.from_paths([path]))
    for fmt in ("pdf", "png"):  # deterministic bytes, as every figure
        assert style.render(fig, fmt) == style.render(again, fmt)
    # the measured DRAM roof: the copy rows' bandwidth, as the roofline's
    label = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "label:memroof:dram"][0]
    copies = okr[(okr["op"] == "copy") & okr["gpu"]]
    if not copies.empty:
        bw_tbs = (copies["bytes_min"] / copies["time_median_s"]).max() / 1e12
        assert label == f"DRAM {style.format_sig(bw_tbs)} TB/s"

    stripped = raw(path)
    for col in ("bytes_dram", "bytes_l2", "bytes_l1", "intensity_dram", "intensity_l2", "intensity_l1"):
        stripped[col] = float("nan")
    (tmp_path / "stripped").mkdir()
    stripped.to_csv(tmp_path / "stripped" / "results.csv", index=False)
    bare = hierarchical_roofline.build(data.Dataset.from_paths([tmp_path / "stripped"]))
    assert hierarchical_roofline.NO_COUNTERS in "\n".join(style.notes_of(bare))
    assert not series(bare, "dram")


@pytest.mark.slow
@pytest.mark.parametrize("name", COUNTER_PARAMS)
def test_hierarchical_roofline_draws_a_measured_level_roof(name, tmp_path):
    """Where rows measured the L2 (and L1) bandwidth (op l2_bandwidth / l1_bandwidth, read like the
    copy probe), a roof is drawn at each, labelled with its measured bandwidth. A dataset without
    such rows gets one made here from its copy row with the time halved (a test input, not a
    measurement): an L2 roof, and L1 noted as not measured."""
    df = raw(_reference(name))
    measured = df[df["op"].isin(["l2_bandwidth", "l1_bandwidth"]) & (df["status"] == "ok")]
    if not measured.empty:
        ds = dataset(_reference(name))
        fig = hierarchical_roofline.build(ds)
        levels = {"l2"} | ({"l1"} if (measured["op"] == "l1_bandwidth").any() else set())
        assert series(fig, "memroof") == {"dram"} | levels
        for lvl in levels:
            tbs = hierarchical_roofline.level_bandwidth_gbs(ds, lvl) / 1e3
            labels = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == f"label:memroof:{lvl}"]
            assert labels and all(t == f"{lvl.upper()} {style.format_sig(tbs)} TB/s" for t in labels)
        assert hierarchical_roofline.LEVEL_ROOFS_MISSING not in "\n".join(style.notes_of(fig))
        return
    copy = df[(df["op"] == "copy") & (df["status"] == "ok") & ~df["backend"].isin(["cpu_probe"])]
    if copy.empty:
        pytest.skip("no GPU copy row to derive the test row from")
    row = copy.iloc[:1].copy()
    row["op"], row["time_median_s"] = "l2_bandwidth", row["time_median_s"] / 2
    row["point_key"] = "l2-bandwidth-test-row"  # a point of its own (a read keeps one row per run and point)
    path = tmp_path / "results.csv"
    pd.concat([df, row], ignore_index=True).to_csv(path, index=False)
    fig = hierarchical_roofline.build(data.Dataset.from_paths([path]))
    assert series(fig, "memroof") == {"dram", "l2"}
    notes = "\n".join(style.notes_of(fig))
    assert hierarchical_roofline.LEVEL_ROOFS_MISSING not in notes and "L1 bandwidth not measured" in notes
    l2_tbs = float((row["bytes_min"] / row["time_median_s"]).iloc[0]) / 1e12
    labels = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "label:memroof:l2"]
    assert labels and all(t == f"L2 {style.format_sig(l2_tbs)} TB/s" for t in labels)


def test_hidden_pairs_and_offscale_limit():
    rows = pd.DataFrame({
        "variant": ["a", "b", "c"], "tflops": [50.0, 51.0, 40.0], "intensity": [600.0] * 3,
        "intensity_dram": [346.0, 347.0, 346.0], "intensity_l2": [40.0, 40.5, 40.0],
        "intensity_l1": [float("inf"), float("inf"), 41.0]})
    # a and b: same throughput and bytes (b drawn over a); c differs in TFLOP/s and L1
    assert hierarchical_roofline.hidden_pairs(rows) == [("a", "b")]
    assert hierarchical_roofline.offscale_limit(rows) == hierarchical_roofline.OFFSCALE_FACTOR * 600.0


def test_cupti_timed_rows_are_not_mixed_with_event_timed_ones():
    """A CUPTI kernel span leaves out the launch start-up: figures and claims read event rows."""
    df = data.normalize(pd.DataFrame([
        {"status": "ok", "timer": "cuda_event", "backend": "cublas", "variant": "cublas"},
        {"status": "ok", "timer": "cupti_kernel", "backend": "cublas", "variant": "cublas"},
        {"status": "failed", "timer": "cuda_event", "backend": "cublas", "variant": "cublas"}]))
    assert list(data.ok(df)["timer"]) == ["cuda_event"]



def test_rows_say_what_the_variant_was_when_measured():
    """kind, stage, description and the kernel's defines come from the row (written at measure
    time); rows written before those columns get none from today's config, and a warning names
    the migration that adds them from git history."""
    from analysis import claims

    with pytest.warns(UserWarning, match="gemmlab.migrate"):
        df = data.normalize(pd.DataFrame([
            {"status": "ok", "backend": "cuda", "variant": "naive", "kind": "gpu", "stage": 42,
             "description": "as measured", "defines": '{"BM": 16, "BN": 64}', "kernel_name": "naive<BM=8,BN=32>"},
            {"status": "ok", "backend": "cuda", "variant": "naive", "kernel_name": "naive<BM=8,BN=32>"}]))
    assert df["stage"].iloc[0] == 42 and pd.isna(df["stage"].iloc[1])
    assert df["description"].iloc[0] == "as measured"
    assert df["description"].iloc[1] == ""
    assert list(df["kind"]) == ["gpu", "gpu"]  # a backend's kind is not a setting: the catalog's
    assert claims.defines(df.iloc[0]) == {"BM": 16.0, "BN": 64.0}
    assert claims.defines(df.iloc[1]) == {"BM": 8.0, "BN": 32.0}  # older rows: from the kernel's name


def test_an_empty_panel_says_which_measured_rows_were_left_out(tmp_path):
    """A CPU run timed with measure=quick (3 samples) counts for nothing: the figures say so and
    why, instead of "no CPU BLAS rows"."""
    cfg = compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke", CPU_SIZES, "measure=quick",
                       "measure.max_samples=5", "measure.max_noise=1000", "run.progress=false"], tmp_path)
    # quick stops at 3 to 10 samples; no noise bar, so the only reason left is the sample count
    _, rows = run_points(cfg, tmp_path / "run")
    assert rows and all(r["status"] == "ok" and int(r["samples"]) < 10 for r in rows)
    ds = data.Dataset.from_paths([tmp_path / "run"])
    assert ds.ok.empty
    why = ds.left_out("cpu")
    assert why == f" that count ({len(rows)} left out: fewer than 10 samples: {len(rows)})"
    from analysis.figures import crossover, errors
    notes = "\n".join(style.notes_of(crossover.build(ds)) + style.notes_of(errors.build(ds)))
    assert "no CPU BLAS rows at fp32 that count" in notes and "no rows of cpu_blas" not in notes


def test_current_configuration_reads_rows_older_than_a_define_by_defines_before(monkeypatch):
    """A row that lacks a define ran the YAML's defines_before value where one is given (stage 12's
    clustered rows before MBAR_CLUSTER_SCOPE existed ran the cluster-scope fences), else agrees."""
    import dataclasses

    from gemmlab.variants import VariantInfo

    info = VariantInfo(name="k", backend="cuda", stage=12, description="", tags=(), in_default_sweep=True,
                       path=Path("k.yaml"), defines_items=(("CLUSTER_M", "2"), ("SCOPE", "0")),
                       defines_before_items=(("SCOPE", "1"),))
    rows = pd.DataFrame({"defines": ['{"CLUSTER_M": 2}', '{"CLUSTER_M": 2, "SCOPE": 0}', '{"CLUSTER_M": 1}',
                                     '{"CLUSTER_M": 2, "SCOPE": 1}']})
    monkeypatch.setattr(ladder.variants, "info", lambda name, *a, **k: info)
    assert list(ladder.current_configuration(rows, "k")) == [False, True, False, False]
    assert ladder._defines_text('{"CLUSTER_M": 2}', "k") == "SCOPE 1"
    info = dataclasses.replace(info, defines_before_items=())
    assert list(ladder.current_configuration(rows, "k")) == [True, True, False, False]


def test_ladder_instruction_ceiling_is_the_probe_rate_at_the_rungs_clock(monkeypatch):
    """A stage whose YAML names a ceiling probe: the probe's best TFLOP/s per MHz (same device and
    precision, ok rows) times the highest clock the rung saw, and that as % of its interleaved
    cuBLAS; without a probe row, or without a clock, a note and no number."""
    from gemmlab.variants import VariantInfo

    info = VariantInfo(name="st", backend="cuda", stage=10, description="", tags=(), in_default_sweep=True,
                       path=Path("st.yaml"), ceiling="peak")
    monkeypatch.setattr(ladder.variants, "info", lambda name, *a, **k: info)
    probes = pd.DataFrame({"variant": ["peak", "peak", "peak", "peak", "other"],
                           "device": ["G", "G", "G", "H", "G"], "precision": ["bf16", "bf16", "fp16", "bf16", "bf16"],
                           "status": ["ok", "ok", "ok", "ok", "ok"], "tflops": [600.0, 640.0, 900.0, 2000.0, 5000.0],
                           "sm_clock_max_mhz": [2000.0, 2000.0, 1000.0, 1000.0, 1000.0]})
    assert ladder.ceiling_per_mhz(probes, "peak", "G", "bf16") == pytest.approx(0.32)
    assert ladder.ceiling_per_mhz(probes, "peak", "G", "fp8") is None
    line = {"variant": "st", "precision": "bf16", "tflops": 400.0, "cublas_tflops": 700.0}
    notes = []
    out = ladder._with_ceiling(line, pd.Series({"device": "G", "sm_clock_max_mhz": 1500.0}), probes, notes)
    assert out["ceiling_tflops"] == pytest.approx(480.0) and not notes
    assert out["ceiling_pct_of_cublas"] == pytest.approx(100 * 480 / 700)
    assert out["pct_of_ceiling"] == pytest.approx(100 * 400 / 480)
    out = ladder._with_ceiling(dict(line, precision="fp8"), pd.Series({"device": "G", "sm_clock_max_mhz": 1500.0}),
                               probes, notes)
    assert "ceiling_tflops" not in out and notes == ["st: no peak row on G at fp8: no instruction ceiling"]
    out = ladder._with_ceiling(line, pd.Series({"device": "G", "sm_clock_max_mhz": float("nan")}), probes, notes)
    assert "ceiling_tflops" not in out and "recorded no SM clock" in notes[-1]
    # the clock as the harness reads it for a row's peak: an in-band reading above NVML's counts,
    # for the rung and for the probe
    inband = json.dumps({"timer": {"sm_clock_inband_mhz": [1400.0, 1500.0, 1600.0]}})
    out = ladder._with_ceiling(line, pd.Series({"device": "G", "sm_clock_max_mhz": 1500.0, "extra": inband}),
                               probes, notes)
    assert out["ceiling_tflops"] == pytest.approx(0.32 * 1600)
    probes["extra"] = [json.dumps({"timer": {"sm_clock_inband_mhz": [2500.0]}}), None, None, None, None]
    assert ladder.ceiling_per_mhz(probes, "peak", "G", "bf16") == pytest.approx(0.32)  # 640 / 2000 beats 600 / 2500
    probes.loc[1, "extra"] = json.dumps({"timer": {"sm_clock_inband_mhz": [2560.0]}})
    assert ladder.ceiling_per_mhz(probes, "peak", "G", "bf16") == pytest.approx(0.25)
