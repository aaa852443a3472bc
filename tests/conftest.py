"""Shared fixtures: compose configs with Hydra's compose API and run points without a CLI."""
from __future__ import annotations

import copy
import csv
import functools
import os
import re
from pathlib import Path
from typing import List

import pytest

from gemmlab import config
from gemmlab.gpu.device import no_device_reason

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "outputs" / "reference"
EVERY_REFERENCE_SET = "GEMMLAB_EVERY_REFERENCE_SET"  # =1: the per-set tests on every set
EVERY_CONFIG = "GEMMLAB_EVERY_CONFIG"  # =1: the builds and emulations of techniques measured and left off


def reference_kind(name: str) -> str:
    """A reference set's device kind: its folder name less the date (h200x2-2026-11-29: h200x2)."""
    return re.sub(r"-\d{4}-\d{2}-\d{2}$", "", name)


def reference_sets(every: bool = False) -> List[str]:
    """The committed reference sets (outputs/reference/<device>-<date>/, by name) that the tests
    checking one set at a time run on: each device kind's first and latest set. The sets never
    change once committed and the paper's tests read all of them at once, so the per-set checks
    need not grow by a set each session day (~12 s of CI's ~2300 worker-seconds each; the suite
    ran 14:07 of its 15 minutes with all 13). ``every``, or GEMMLAB_EVERY_REFERENCE_SET=1: all."""
    if not REFERENCE.is_dir():
        return []
    names = sorted({p.relative_to(REFERENCE).parts[0] for p in REFERENCE.rglob("results.csv")})
    if every or os.environ.get(EVERY_REFERENCE_SET) == "1":
        return names
    kinds: dict = {}
    for name in names:
        kinds.setdefault(reference_kind(name), []).append(name)
    return sorted({v[0] for v in kinds.values()} | {v[-1] for v in kinds.values()})


def configs(rows, left_off) -> list:
    """``rows`` (tuples, or single values) as pytest parameters; a row for which ``left_off(*row)`` names a technique
    (a define set measured on the GPU and left off, its stage's header and YAML saying why) is skipped with that
    name unless GEMMLAB_EVERY_CONFIG=1. Each such technique keeps a build or an emulation of its plainest set in
    every run; its other combinations (with clusters, the producer warpgroup, other tails) were ~15% of the CPU
    suite's worker time, on CI's two cores, whose limit is 15 minutes (session53: the suite at 16:22 with them)."""
    every = os.environ.get(EVERY_CONFIG) == "1"
    out = []
    for row in rows:
        row = row if isinstance(row, tuple) else (row,)
        why = None if every else left_off(*row)
        marks = [pytest.mark.skip(reason=f"{why}: measured and left off; {EVERY_CONFIG}=1 runs it")] if why else []
        out.append(pytest.param(*row, marks=marks))
    return out


def past_the_first(rows, key, say):
    """configs()'s predicate: a row whose ``key(*row)`` is not empty (its left-off techniques) runs where it is the
    first of ``rows`` with that key; the later ones are left off, ``say(*row)`` naming them."""
    first: dict = {}
    for row in rows:
        row = row if isinstance(row, tuple) else (row,)
        first.setdefault(key(*row), row)
    return lambda *row: say(*row) if key(*row) and first[key(*row)] != row else None


@functools.lru_cache(maxsize=None)
def cuda_device_reason() -> str | None:
    """None when a CUDA device is usable, else why not (the gpu tests' skip reason)."""
    return no_device_reason()


# -- the order the tests start in (pytest-xdist) --------------------------------------------------
# CI runs the suite on 2 cores (pyproject's addopts: --dist loadgroup, so each test, or each
# xdist_group, goes to the next worker that is free, in this order). The wall time is set by the
# tail: a long test that starts last keeps one worker busy while the other idles. So the longest
# tests start first (LONGEST_FIRST, from `pytest --durations=30`), the other slow ones next, and
# the short ones fill in behind. Order changes nothing a test checks; a name missing here only
# loses its place in the queue.
LONGEST_FIRST = (
    "tests/test_slurm.py::",  # a real Slurm sweep, most of it waiting for its jobs
    "tests/test_cutlass.py::test_device_part_compiles_with_local_nvcc",  # one long nvcc build
    "tests/test_gpu_pinning.py::test_per_gpu_launcher_runs_one_job_per_gpu_at_a_time",  # waits
    "tests/test_cutlass_fp8.py::test_fp8_device_part_compiles_for_sm90a_without_spills",  # one long nvcc build
    "tests/test_analysis.py::test_cpu_dataset_writes_every_file_reproducibly",
)


def start_rank(item) -> tuple:
    """Sort key: the LONGEST_FIRST tests in that order, then the other slow tests, then the rest
    (each in collection order: Python's sort is stable)."""
    for i, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return (0, i)
    return (1, 0) if "slow" in item.keywords else (2, 0)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than the cores this process may run on (pytest-xdist's own
    choice is one a core). About a sixth of the suite's worker time is spent waiting, not computing
    (the Slurm sweep, the per-GPU launcher's jobs, watchdog and timeout tests, the browser): with
    two workers on CI's two cores those waits leave a core idle, a third worker fills them.
    Measured on the 2-core machine (issue 31): the full suite 10:03 with 2 workers, 8:23 with 3.
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides where it is set, as in pytest-xdist."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if env:
        return int(env)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


@pytest.hookimpl(trylast=True)  # after pytest's own ordering by fixture scope
def pytest_collection_modifyitems(config, items):
    items.sort(key=start_rank)
    reason = cuda_device_reason()
    if reason:
        reason = f"gpu test: {reason}; run `pytest -m gpu` on a GPU host"
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        # GPU tests measure: two of them at once on one GPU would wait on each other's GPU claim
        # or time each other's work
        reason = "gpu test under pytest-xdist: run `pytest -m gpu` without -n, one test at a time"
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def session_folder(basetemp: Path, name: str) -> Path:
    """``name`` in a folder every pytest-xdist worker of this session shares: the parent of a
    worker's basetemp (xdist puts them in the session's as popen-gwN), else the basetemp itself.
    For builds (nvcc's cubin cache, the host emulators) that one test or worker makes and the
    others reuse; a new session starts empty."""
    base = Path(basetemp)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# -- composing configs: a sixth of the suite's CPU time --------------------------------------------
# The tests compose ~830 configs in process (~720 distinct), each 0.1-2 CPU-s of Hydra (merging
# the YAML files into the schema). compose_cfg keeps every config it composed, pickled (76 KB for
# the default sweep: a copy unpickles in a third of a deepcopy's time), and shares them with the
# session's other pytest-xdist workers through a folder (the two workers compose a tenth of the
# same configs, test_config and test_validate each every option of a group). Any config file
# edited, added or removed, or another CONF_DIR, and it composes again. What a compose costs
# itself, _hydra_reads_each_file_once below cuts.
def _config_files_state() -> tuple:
    """What a compose reads: the config folder, and each file's name, size and mtime (conf/experiment
    is a link to experiments/)."""
    state = [str(config.CONF_DIR)]
    for folder, _dirs, names in os.walk(config.CONF_DIR, followlinks=True):
        for name in names:
            try:
                st = os.stat(os.path.join(folder, name))
                state.append((folder, name, st.st_size, st.st_mtime_ns))
            except OSError:  # a dangling link
                state.append((folder, name))
    return tuple(sorted(state, key=str))


_COMPOSED: dict = {}  # (overrides, files state) -> the config, pickled
_SESSION = {}  # "config": this process's pytest config (pytest_configure), for the shared folder


def pytest_configure(config):
    _SESSION["config"] = config


def _shared_composed_folder() -> Path | None:
    """The folder the session's workers share their composed configs in (None outside pytest-xdist:
    one process has them all in _COMPOSED)."""
    pytest_config = _SESSION.get("config")
    factory = getattr(pytest_config, "_tmp_path_factory", None)
    if not os.environ.get("PYTEST_XDIST_WORKER") or factory is None:
        return None
    return session_folder(factory.getbasetemp(), "composed")


def _composed(overrides: tuple) -> bytes:
    import hashlib
    import pickle

    key = (overrides, _config_files_state())
    if key in _COMPOSED:
        return _COMPOSED[key]
    if os.environ.get("GEMMLAB_LOG_COMPOSE"):  # the override lists tests/compose_equivalence.py replays
        import json

        with open(os.environ["GEMMLAB_LOG_COMPOSE"], "a") as log:
            log.write(json.dumps(list(overrides)) + "\n")
    folder = _shared_composed_folder()
    path = folder / f"{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}.pickle" if folder else None
    if path is not None and path.is_file():
        payload = path.read_bytes()
    else:
        payload = pickle.dumps(config.compose(list(overrides)), protocol=pickle.HIGHEST_PROTOCOL)
        if path is not None:  # whole or absent: the other worker may be reading it
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(payload)
            os.replace(tmp, path)
    _COMPOSED[key] = payload
    return payload


def compose_cfg(overrides: List[str] = (), tmp_path: Path | None = None):
    """The composed run config for ``overrides``, as `python run.py <overrides>` would see it (a
    copy of one composed before with the same overrides and files: callers may change theirs)."""
    import pickle

    from omegaconf import open_dict

    cfg = pickle.loads(_composed(tuple(overrides)))
    if tmp_path is not None:  # what config.compose(..., outputs) does after composing
        with open_dict(cfg):
            cfg.paths.outputs = str(tmp_path / "outputs")
    return cfg


def _hydra_reads_each_file_once() -> None:
    """What every compose redoes with the same result, done once per process: Hydra parses each
    YAML file it reads again (65 variant files for the default sweep, and its own configs: a
    quarter of a compose), and deep-copies the whole ConfigStore (the schema, Hydra's own configs)
    with its repository, though the store hands out a copy of each config it loads. Each file's
    parsed config is kept by path and text (an edited file, or a copy of the folder, parses anew)
    and each compose gets its own copy; a file that cannot be read or parsed goes to Hydra's own
    code, for its own error. The 724 distinct configs of the suite compose to the same nodes, flags
    and values (and the same errors) with and without this, in 28% less time."""
    import io

    from hydra._internal.sources_registry import SourcesRegistry
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigResult, ConfigSource
    from omegaconf import OmegaConf

    Plugins.instance()  # discovering the plugins loads the config sources' modules again: their classes
    FileConfigSource = SourcesRegistry.instance().resolve("file")  # noqa: N806  (the ones used)
    ImportlibResourcesConfigSource = SourcesRegistry.instance().resolve("pkg")  # noqa: N806

    hydra_load = FileConfigSource.load_config
    parsed: dict = {}

    def load_config(self, config_path: str) -> ConfigResult:
        full_path = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
        try:
            with open(full_path, encoding="utf-8") as f:
                text = f.read()
            if (full_path, text) not in parsed:
                parsed[(full_path, text)] = (OmegaConf.load(io.StringIO(text)), ConfigSource._get_header_dict(text[:512]))
        except Exception:
            return hydra_load(self, config_path)
        cfg, header = parsed[(full_path, text)]
        return ConfigResult(config=copy.deepcopy(cfg), path=f"{self.scheme()}://{self.path}", provider=self.provider,
                            header=dict(header))

    FileConfigSource.load_config = load_config

    # Hydra's own configs (hydra/output, hydra/job_logging, ...): installed files, read once
    package_load = ImportlibResourcesConfigSource.load_config
    package_read: dict = {}

    def load_package_config(self, config_path: str) -> ConfigResult:
        key = (self.path, config_path)
        if key not in package_read:
            ret = package_load(self, config_path)
            package_read[key] = (copy.deepcopy(ret.config), ret.path, ret.provider, dict(ret.header))
        cfg, path, provider, header = package_read[key]
        return ConfigResult(config=copy.deepcopy(cfg), path=path, provider=provider, header=dict(header))

    ImportlibResourcesConfigSource.load_config = load_package_config
    # StructuredConfigSource.load_config -> ConfigStore.load deep-copies the node it returns: sharing
    # the store between a repository and its copy changes nothing
    ConfigStore.__deepcopy__ = lambda self, memo: self


_hydra_reads_each_file_once()


def _hydra_merges_each_defaults_list_once() -> None:
    """The two steps of a compose that the settings (`key=value`) do not change, done once per process
    for each choice of config groups: Hydra builds the defaults list (which file of each group, in what
    order) from every override, though only the group choices (`variant=...`, `+experiment=...`) shape
    it, and then merges the files of that list, though the same list merges to the same config. Here
    the list is built from the group choices alone (the settings are classified as Hydra does, by its
    own `Overrides`, and handed back to it as the list's config overrides) and the merged config is
    kept pickled by its list and the config files' state; every compose still applies its settings with
    Hydra's own `_apply_overrides_to_config` and fills the Hydra node as before. A list Hydra refuses is
    refused by Hydra's own code with every override, for its own error. The suite's distinct configs
    compose to the same nodes, flags and values with and without this (tests/compose_equivalence.py)."""
    import pickle

    from hydra._internal import config_loader_impl
    from hydra._internal import defaults_list as dl

    create = dl.create_defaults_list
    lists: dict = {}

    def create_defaults_list(repo, config_name, overrides_list, prepend_hydra, skip_missing):
        settings = dl.Overrides(repo=repo, overrides_list=overrides_list).config_overrides
        ids = {id(o) for o in settings}
        groups = [o for o in overrides_list if id(o) not in ids]
        key = (config_name, tuple(o.input_line for o in groups), prepend_hydra, skip_missing, _config_files_state())
        if key not in lists:
            try:
                lists[key] = create(repo, config_name, groups, prepend_hydra, skip_missing)
            except Exception:
                return create(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        made = lists[key]
        return dl.DefaultsList(defaults=copy.deepcopy(made.defaults), config_overrides=settings,
                               defaults_tree=made.defaults_tree, overrides=made.overrides)

    loader = config_loader_impl.ConfigLoaderImpl
    merge = loader._compose_config_from_defaults_list
    merged: dict = {}

    def compose_config_from_defaults_list(self, defaults, repo):
        key = (tuple((d.config_path, d.parent, d.package, d.is_self, d.primary, d.override_key) for d in defaults),
               _config_files_state())
        if key not in merged:
            merged[key] = pickle.dumps(merge(self, defaults, repo), protocol=pickle.HIGHEST_PROTOCOL)
        return pickle.loads(merged[key])

    config_loader_impl.create_defaults_list = create_defaults_list
    loader._compose_config_from_defaults_list = compose_config_from_defaults_list


if not os.environ.get("GEMMLAB_COMPOSE_AS_HYDRA"):  # tests/compose_equivalence.py compares both ways
    _hydra_merges_each_defaults_list_once()


# -- the whole reference dataset, for the tests of the reference_paper xdist group -----------------
# tests/test_paper_outputs.py and tests/test_decode_figure.py both read all of outputs/reference/ (16 s
# on a 2-core runner) and build the paper's figures from it (a minute), and some README-number tests
# and the targets' test read it all too: they share one pytest-xdist worker (xdist_group
# "reference_paper"), which reads the rows and writes the paper once.
@functools.lru_cache(maxsize=None)
def whole_reference():
    """outputs/reference/ as one analysis Dataset, read once per test process: the fixture below and
    test_analysis.dataset(REFERENCE) (the README-number tests) share it."""
    from analysis import data

    return data.Dataset.from_paths([REFERENCE])


# the tests that read the whole reference: one xdist worker reads it (~15-20 s of a loaded 2-core runner a read)
on_the_reference_worker = pytest.mark.xdist_group("reference_paper")


@pytest.fixture(scope="session")
def reference_dataset():
    """outputs/reference/ as one analysis Dataset (its tests only read it)."""
    if not (REFERENCE.is_dir() and any(REFERENCE.rglob("results.csv"))):
        pytest.skip("no reference data under outputs/reference/")
    return whole_reference()


@pytest.fixture(scope="session")
def reference_paper(reference_dataset, tmp_path_factory):
    """outputs/paper/ rebuilt from outputs/reference/ once per process: (folder, figures by name),
    the very figures analysis.paper wrote."""
    from analysis import paper

    folder, figures = tmp_path_factory.mktemp("paper"), {}
    paper.write_paper(reference_dataset, folder, figures=figures)
    return folder, figures


@pytest.fixture
def compose_run():
    return compose_cfg


def right_only_once(monkeypatch, backend_cls, corrupt):
    """Patch ``backend_cls`` so its launches are right on the first call and then ``corrupt(c)``
    the output on every later one (an accumulator never reset, say): only the check after the
    timed samples can catch it."""
    orig = backend_cls.make_launch

    def make_launch(self, p, a, b, c):
        launch = orig(self, p, a, b, c)
        inner, calls = launch.fn, []

        def fn():
            inner()
            calls.append(1)
            if len(calls) > 1:
                corrupt(c)
        launch.fn = fn
        return launch

    monkeypatch.setattr(backend_cls, "make_launch", make_launch)


def run_points(cfg, out_dir: Path, fresh_worker: bool = False):
    """Run every point of ``cfg`` into ``out_dir``; returns (runner, rows as dicts). GPU points run
    in a worker process (gemmlab/measure/worker): a test that patches gemmlab in its own process
    (monkeypatch) must compose with ``run.isolate=none``, or the worker never sees the patch. The
    runs of the test process share one worker (``run.fresh_worker=false``) unless ``fresh_worker``:
    the tests check behaviour, not timing, and a worker per run took the GPU validity tests from
    72 to 123 s on an H100 (h100-2026-12-06/session39h)."""
    from gemmlab.runner import Runner

    cfg.run.fresh_worker = fresh_worker
    runner = Runner(cfg, out_dir)
    runner.run()
    with open(out_dir / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return runner, rows


@pytest.fixture
def run_cfg():
    return run_points


# -- the evidence rule, written again in plain pandas (independent of analysis/data.py) -----------
def flags(df, column: str, missing: bool):
    """A true/false column as plain pandas reads it; missing values are ``missing``."""
    import pandas as pd

    if column not in df.columns:
        return pd.Series(missing, index=df.index)
    text = df[column].astype(str).str.strip().str.lower()
    return text.isin(["true", "1", "1.0"]) | (~text.isin(["false", "0", "0.0"]) & missing)


def evidence(df):
    """The rows that count, in plain pandas: ok, not CUPTI-timed, reliable not false, contended
    not true (rows written before those columns lack them), inputs not the exact integers, a
    timed row has at least 10 samples, the variant is no control (wrong on purpose), and the row was
    checked (measure.check=false writes "check": "off" into extra)."""
    import pandas as pd

    extra = df["extra"].astype(str) if "extra" in df.columns else pd.Series("", index=df.index)
    unchecked = extra.str.contains('"check": "off"', regex=False)
    timer = df["timer"].astype(str) if "timer" in df.columns else pd.Series("", index=df.index)
    exact = df["distribution"].astype(str).isin(["exact", "sparse"]) if "distribution" in df.columns else False
    samples = pd.to_numeric(df["samples"], errors="coerce") if "samples" in df.columns else pd.Series(float("nan"), index=df.index)
    return df[(df["status"] == "ok") & (timer != "cupti_kernel") & flags(df, "reliable", True)
              & ~flags(df, "contended", False) & ~exact & ~(samples < 10) & ~control(df) & ~unchecked]


def control(df):
    """Rows of a variant wrong on purpose (tags negative_control or conduct_control), in plain pandas."""
    import pandas as pd

    tags = df["tags"].astype(str) if "tags" in df.columns else pd.Series("", index=df.index)
    return tags.str.contains("negative_control") | tags.str.contains("conduct_control")
