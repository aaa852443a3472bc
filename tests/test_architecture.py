"""The house rules of the code (issue 17): rooms of a size one can read, analysis that reads rows
only, imports that run one way, and a new stage that joins everything with one .cu and one YAML."""
from __future__ import annotations

import ast
import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

MAX_LINES = 500
PACKAGES = ("gemmlab", "analysis")
# What analysis may import from the measuring core: rows, what the harness offers today (variants,
# devices: coverage notes, colours and datasheets, never a row's meaning), paths, file writing, and
# the per-sample times beside the rows (samples: a result file, like rows).
ANALYSIS_MAY_IMPORT = {"gemmlab", "gemmlab.rows", "gemmlab.variants", "gemmlab.devices", "gemmlab.paths",
                       "gemmlab.cache", "gemmlab.samples",
                       # the YAML's expression language (what a variant's point rules choose at a row's point)
                       "gemmlab.expr", "gemmlab.expr.evaluate"}


def modules(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def imported(path: Path, root: Path = ROOT):
    """Every module name ``path`` imports (absolute; relative imports resolved in its package)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod
            for a in node.names:  # `from gemmlab import backends` imports gemmlab.backends
                yield f"{mod}.{a.name}"


def test_no_python_file_over_500_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for pkg in PACKAGES for p in modules(pkg)}
    over = {p: n for p, n in sizes.items() if n > MAX_LINES}
    assert not over, f"files over {MAX_LINES} lines: {over}"
    largest = max(sizes, key=sizes.get)
    print(f"largest: {largest} ({sizes[largest]} lines)")


def analysis_violations(path: Path, root: Path = ROOT):
    """What in one analysis module breaks the rule: an import of the measuring core beyond
    ANALYSIS_MAY_IMPORT (the backends, the config, ...), or a path built into conf/."""
    rel = path.relative_to(root)
    bad = []
    for mod in sorted(set(imported(path, root))):
        # `from gemmlab import rows` yields "gemmlab" and "gemmlab.rows": judge the latter
        if mod.startswith("gemmlab.") and not any(mod == ok or mod.startswith(ok + ".")
                                                  for ok in ANALYSIS_MAY_IMPORT - {"gemmlab"}):
            bad.append(f"{rel}: imports {mod}")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value in ("conf", "conf/") or node.value.startswith("conf/")):
            bad.append(f"{rel}:{node.lineno}: builds a path into conf/")
        if isinstance(node, ast.Name) and node.id in ("CONF_DIR", "VARIANT_DIR", "DEVICE_DIR"):
            bad.append(f"{rel}:{node.lineno}: uses {node.id}")
    return bad


def test_analysis_reads_rows_not_the_config():
    """No module of analysis imports the backends or the config, or reads conf/ itself: a row's
    meaning is the row's (gemmlab.migrate added it to rows older than the columns)."""
    bad = [v for path in modules("analysis") for v in analysis_violations(path)]
    assert not bad, "\n".join(bad)


def test_the_import_rule_can_fail(tmp_path):
    """The rule sees an import of the backends or the config in any of Python's forms, and a read
    of conf/."""
    f = tmp_path / "analysis" / "probe.py"
    f.parent.mkdir()
    for text in ("import gemmlab.backends.base", "from gemmlab.backends import base",
                 "from gemmlab import config", "from gemmlab.config import ROOT", "from ..gemmlab import config",
                 "import gemmlab.measure.check", 'p = "conf/variant/naive.yaml"', "x = CONF_DIR"):
        f.write_text(text + "\n")
        assert analysis_violations(f, tmp_path), text
    f.write_text("from gemmlab import rows, variants\nfrom gemmlab.paths import ROOT\n")
    assert not analysis_violations(f, tmp_path)


def test_imports_run_down_the_floors():
    """The measuring core never imports the floors above it: measure/ and gpu/ know no backend,
    runner or sweep; backends know no runner or sweep."""
    rules = {"gemmlab/measure": ("gemmlab.backends", "gemmlab.runner", "gemmlab.sweep"),
             "gemmlab/gpu": ("gemmlab.backends", "gemmlab.runner", "gemmlab.sweep", "gemmlab.measure"),
             "gemmlab/backends": ("gemmlab.runner", "gemmlab.sweep")}
    bad = []
    for folder, banned in rules.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for mod in set(imported(path)):
                if mod.startswith(banned):
                    bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_no_enum_unwrap_outside_the_config():
    """Config values are typed once, at compose (gemmlab.config / gemmlab.validate): nowhere else
    unwraps an enum with getattr(x, "value", x)."""
    bad = []
    for pkg in PACKAGES:
        for path in modules(pkg):
            if path.name in ("config.py", "validate.py"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                        and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                        and node.args[1].value == "value"):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad


# -- the migration of rows written before rows said what their variant was ----------------------
REFERENCE = ROOT / "outputs" / "reference"
FIELDS = ("kind", "stage", "description", "tags", "defines")


def test_every_reference_row_says_what_its_variant_was():
    from gemmlab import migrate

    assert migrate.main(["--check", str(REFERENCE)]) == 0


def test_rows_record_the_defines_a_point_computes(tmp_path):
    """A kernel's row records every define it was built with, the point's own too (stage 12's
    B_KMAJOR follows the layout), so the migration check (defines against kernel_name) holds for
    new rows as for old ones: session9c's rows first came without it."""
    from gemmlab.config import compose
    from gemmlab.points import expand
    from gemmlab.runner import variant_fields

    pts = {p.layout: p for p in expand(compose(["variant=wgmma_ws", "precision=bf16", "sizes.square=[256]",
                                                 "sizes.shapes=[]", "layouts=[nn,nt]"]))}
    assert variant_fields(pts["nt"])["defines"]["B_KMAJOR"] == 1
    assert variant_fields(pts["nn"])["defines"]["B_KMAJOR"] == 0
    assert "B_KMAJOR" not in (variant_fields(next(iter(expand(compose(
        ["variant=warp_tiled", "precision=fp32", "sizes.square=[256]", "sizes.shapes=[]"])))))["defines"])


def test_migration_adds_the_columns_and_touches_no_other_cell(tmp_path):
    """Strip the five columns from a committed file; the migration puts back exactly the committed
    bytes, from the YAML at the rows' git_commit (a ladder run of 2026-11-29)."""
    from gemmlab import migrate

    committed = REFERENCE / "h200-2026-11-29" / "ladder_fp32" / "results.csv"
    if not committed.exists():
        pytest.skip("reference run not in this checkout")
    with open(committed, newline="") as f:
        raw = f.read()
    table = list(csv.reader(io.StringIO(raw, newline="")))
    keep = [i for i, c in enumerate(table[0]) if c not in FIELDS]
    assert len(keep) == len(table[0]) - len(FIELDS)
    stripped = io.StringIO(newline="")
    csv.writer(stripped, lineterminator="\r\n" if "\r\n" in raw[:2000] else "\n").writerows(
        [[r[i] for i in keep] for r in table])
    path = tmp_path / "results.csv"
    with open(path, "w", newline="") as f:
        f.write(stripped.getvalue())
    n, _ = migrate.migrate_file(path)
    assert n == len(table) - 1
    with open(path, newline="") as f:
        assert f.read() == raw
    assert migrate.migrate_file(path) == (0, [])  # a second pass changes nothing
    stages = {r[table[0].index("variant")]: r[table[0].index("stage")] for r in table[1:]}
    assert stages.get("naive") == "1" and stages.get("register_blocked") == "3"


def test_migration_takes_a_swept_kernels_defines_from_its_kernel_name(tmp_path):
    """A sweep over variant.<v>.cuda.defines built other kernels than the YAML names: the defines
    cell says what was built (the kernel name), and a file migrated with the YAML's values is
    repaired in that cell only (a job of the warp_tiled sweep of 2026-11-29, BK 8 and 4 stages)."""
    from gemmlab import migrate

    committed = REFERENCE / "h200-2026-11-29" / "tune_warp_tiled" / "3" / "results.csv"
    if not committed.exists():
        pytest.skip("reference run not in this checkout")
    raw = committed.read_text()
    row = next(csv.DictReader(io.StringIO(raw)))
    assert "BK=8," in row["kernel_name"] and json.loads(row["defines"])["BK"] == 8
    wrong = raw.replace(row["defines"].replace('"', '""'), row["defines"].replace('"BK": 8', '"BK": 16')
                        .replace('"', '""'))
    assert wrong != raw
    path = tmp_path / "results.csv"
    path.write_text(wrong)
    assert migrate.migrate_file(path) == (1, ["defines repaired from kernel_name"])
    assert path.read_text() == raw
    assert migrate.kernel_defines("mma_sync_gemm<BM=128,BN=256>") == {"BM": 128, "BN": 256}
    assert migrate.kernel_defines("cutlass3x_sm90_tensorop_gemm") is None


# -- one .cu and one YAML: a new stage joins the run, the tests, the ladder and the claims --------
NEW = "zz_new_stage"
STAGE = 13


@pytest.fixture(scope="module")
def copy_with_a_new_stage(tmp_path_factory):
    """A copy of the project with one new stage: a .cu (stage 3's kernel under a new entry name)
    and its YAML with tags [ladder, simt], nothing else edited."""
    root = tmp_path_factory.mktemp("house") / "gemmlab"
    for d in ("conf", "experiments", "kernels", "gemmlab", "analysis", "tests"):
        shutil.copytree(ROOT / d, root / d, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for f in ("run.py", "pyproject.toml"):
        shutil.copy2(ROOT / f, root / f)
    src = (ROOT / "kernels/cuda/03_register_blocked.cu").read_text()
    assert "register_blocked(" in src
    (root / f"kernels/cuda/{STAGE}_{NEW}.cu").write_text(
        src.replace("register_blocked(", f"{NEW}(").replace("Stage 3", f"Stage {STAGE}"))
    yaml = (ROOT / "conf/variant/register_blocked.yaml").read_text()
    yaml = (yaml.replace("variant.register_blocked", f"variant.{NEW}")
            .replace("03_register_blocked.cu", f"{STAGE}_{NEW}.cu")
            .replace("entry: register_blocked", f"entry: {NEW}")
            .replace("stage: 3", f"stage: {STAGE}").replace("Stage 3", f"Stage {STAGE}")
            .replace("description: Register blocking", "description: A new stage (register blocking)"))
    (root / f"conf/variant/{NEW}.yaml").write_text(yaml)
    return root


def _in_copy(root: Path, code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.slow
def test_a_new_stage_joins_the_run_the_sets_and_the_claims_experiments(copy_with_a_new_stage):
    out = _in_copy(copy_with_a_new_stage, f"""
import json
from gemmlab.config import compose
from gemmlab.points import expand
res = {{}}
for name, ov in (("default", []), ("simt", ["variant=tag_simt"]), ("claims_ladder", ["+experiment=claims_ladder"])):
    cfg = compose(ov)
    res[name] = sorted({{p.variant for p in expand(cfg)}})
print(json.dumps(res))
""")
    got = json.loads(out.strip().splitlines()[-1])
    for name, variants in got.items():
        assert NEW in variants, (name, variants)


@pytest.mark.slow
def test_a_new_stage_joins_the_tests(copy_with_a_new_stage):
    """The kernel tests are parametrized over the variant folder: the new stage is collected."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "tests/test_cuda_kernels.py", "tests/test_gpu_cuda_kernels.py"],
                       cwd=copy_with_a_new_stage, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert sum(NEW in line for line in r.stdout.splitlines()) >= 2, r.stdout[-2000:]


@pytest.mark.slow
def test_a_new_stage_joins_the_ladder_figure_and_table(copy_with_a_new_stage):
    """Rows of the new stage, written as the runner writes them (its variant_fields) on stage 3's
    measured numbers, take their rung in the ladder table and figure in stage order."""
    out = _in_copy(copy_with_a_new_stage, f"""
import pandas as pd
from gemmlab.config import compose
from gemmlab.points import expand
from gemmlab.runner import variant_fields
from analysis import data, ladder, tables
from analysis.figures import ladder as ladder_fig
pt = [p for p in expand(compose(["variant={NEW}", "precision=fp32", "sizes=smoke"]))][0]
fields = variant_fields(pt)
rows = data.load(["{REFERENCE}/h200-2026-12-01/claims_ladder"])
new = rows[rows["variant"] == "register_blocked"].copy()
assert not new.empty
new["variant"] = "{NEW}"
for k, v in fields.items():
    new[k] = v if not isinstance(v, (dict, list)) else str(v)
new["run_id"] = new["run_id"] + "-copy"
ds = data.Dataset(pd.concat([rows, new], ignore_index=True))
frame = tables.ladder_frame(ds)
md = tables.render_markdown(tables.build(ds)) if hasattr(tables, "render_markdown") else ""
print("TABLE", "{NEW}" in md)
staged = frame[frame["group"] == "stage"]
print("ORDER", list(staged["variant"]))
fig = ladder_fig.build(ds)
labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()] + [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
print("FIG", any("{NEW}" in t for t in labels) or any("{NEW}" in str(h.get_label()) for ax in fig.axes for h in ax.get_legend_handles_labels()[0]))
""")
    order = eval(next(line for line in out.splitlines() if line.startswith("ORDER"))[6:])
    assert NEW in order, order
    assert order.index(NEW) > order.index("register_blocked")  # stage 13 after stage 3
    assert "FIG True" in out, out[-2000:]


# -- the suite's own scheduling (issue 31) -------------------------------------------------------
def test_auto_workers_are_one_more_than_the_cores_unless_the_environment_says(monkeypatch):
    """`-n auto` (the Quick start's and CI's command) gives a worker more than the cores, to fill the
    waits of the tests that wait (tests/conftest.py); PYTEST_XDIST_AUTO_NUM_WORKERS still decides."""
    import os

    import conftest

    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert conftest.pytest_xdist_auto_num_workers(None) == 3
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert conftest.pytest_xdist_auto_num_workers(None) == 5
