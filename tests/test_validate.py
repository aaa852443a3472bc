"""Settings checked at compose time (gemmlab/validate.py): every key against its schema, every
value against its range, one line and exit code 2 before any point is measured."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import typing

import pytest
from conftest import ROOT, compose_cfg

from gemmlab import config as C
from gemmlab import validate as V

EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("*.yaml"))


def _numeric_fields(tp):
    hints = typing.get_type_hints(tp)
    for f in dataclasses.fields(tp):
        t = V._unwrap_optional(hints[f.name])
        if t in (int, float):
            yield f.name


@pytest.mark.parametrize("tp", [C.MeasureConf, C.RunConf])
def test_every_numeric_measure_and_run_setting_has_a_range(tp):
    ranged = {name for name, rules in V.RULES.get(tp, {}).items()
              if any(isinstance(r, V.Range) for r in rules)}
    assert set(_numeric_fields(tp)) <= ranged, "add the new setting's range to validate.RULES"


def test_the_rules_name_only_existing_fields():
    for tp, rules in V.RULES.items():
        fields = {f.name for f in dataclasses.fields(tp)}
        assert set(rules) <= fields, (tp.__name__, set(rules) - fields)
        for name, field_rules in rules.items():
            for r in field_rules:
                other = getattr(r, "other", None) or getattr(r, "field", None)
                assert other is None or other in fields, (tp.__name__, name, other)


# -- the shipped configs are valid -----------------------------------------------------------
def test_the_default_config_is_valid():
    assert V.problems(compose_cfg()) == []


@pytest.mark.slow
@pytest.mark.parametrize("group", ["measure", "sizes", "device", "paths"])
def test_every_option_of_the_setting_groups_is_valid(group):
    for path in sorted((C.CONF_DIR / group).glob("*.yaml")):
        assert V.problems(compose_cfg([f"{group}={path.stem}"])) == [], path.stem


def test_every_variant_is_valid():
    assert V.problems(compose_cfg(["variant=all"])) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_is_valid(name):
    assert V.problems(compose_cfg([f"+experiment={name}"])) == []


# -- ranges ----------------------------------------------------------------------------------
BAD = [
    ("measure.min_samples=-1", "measure.min_samples=-1 is invalid: must be an integer >= 1"),
    ("measure.batch=0", "measure.batch=0 is invalid: must be an integer >= 1"),
    ("measure.warmup_s=-3", "measure.warmup_s=-3.0 is invalid: must be a finite number >= 0"),
    ("measure.max_noise=-1", "measure.max_noise=-1.0 is invalid: must be a finite number > 0"),
    ("measure.max_time_s=0", "measure.max_time_s=0.0 is invalid: must be a finite number > 0"),
    ("measure.warmup_min_iters=0", "measure.warmup_min_iters=0 is invalid: must be an integer >= 1"),
    ("measure.max_samples=0", "measure.max_samples=0 is invalid: must be an integer >= 1"),
    ("measure.min_time_s=-0.1", "measure.min_time_s=-0.1 is invalid: must be a finite number >= 0"),
    ("measure.busy_us=-1", "measure.busy_us=-1.0 is invalid: must be a finite number >= 0"),
    ("measure.flush_bytes=-1", "measure.flush_bytes=-1 is invalid: must be an integer >= 0"),
    ("measure.seed=-1", "measure.seed=-1 is invalid: must be an integer >= 0"),
    ("measure.input_scale=0", "measure.input_scale=0.0 is invalid: must be a finite number > 0"),
    ("measure.input_scale=inf", "measure.input_scale=inf is invalid: must be a finite number > 0"),
    ("measure.input_scale=nan", "measure.input_scale=nan is invalid: must be a finite number > 0"),
    ("measure.check_repeats=0", "measure.check_repeats=0 is invalid: must be an integer >= 1"),
    ("measure.throttle_fraction=0", "measure.throttle_fraction=0.0 is invalid: must be a finite number in (0, 1]"),
    ("measure.clock_stable_fraction=1.5",
     "measure.clock_stable_fraction=1.5 is invalid: must be a finite number in (0, 1]"),
    ("measure.threads=0",
     "measure.threads=0 is invalid: must be null (the library's default) or an integer >= 1"),
    ("run.gpu_wait_s=-1", "run.gpu_wait_s=-1.0 is invalid: must be a finite number >= 0"),
    ("sizes.max_dim=0", "sizes.max_dim=0 is invalid: must be an integer >= 1"),
    ("measure.min_samples=300", "measure.min_samples=300 is invalid: must be <= measure.max_samples (200)"),
    ("measure.min_time_s=9", "measure.min_time_s=9.0 is invalid: must be <= measure.max_time_s (5.0)"),
    ("measure.baseline=[cublas,cublass]",
     "measure.baseline=[cublas, cublass] is invalid: 'cublass' is not a variant (conf/variant/*.yaml); "
     "did you mean cublas?"),
]


@pytest.mark.slow
@pytest.mark.parametrize("override,line", BAD, ids=[b[0] for b in BAD])
def test_an_out_of_range_setting_is_one_problem_naming_key_value_and_range(override, line):
    cfg = compose_cfg([override])  # once: a compose costs about a CPU second, and problems() only reads
    found = V.problems(cfg)
    assert [str(p) for p in found] == [line]
    with pytest.raises(V.SettingError) as e:
        V.check(cfg)
    assert str(e.value) == line


@pytest.mark.slow
@pytest.mark.parametrize("override", ["measure.min_samples=1", "measure.min_samples=200", "measure.batch=1",
                                      "measure.warmup_s=0", "measure.min_time_s=5", "measure.max_noise=1e-9",
                                      "measure.throttle_fraction=1", "measure.threads=1", "measure.threads=null",
                                      "measure.flush_bytes=0", "run.gpu_wait_s=0", "measure.baseline=[]",
                                      "measure.baseline=[cublas]", "measure.seed=12345678901"])
def test_the_edges_of_each_range_are_valid(override):
    assert V.problems(compose_cfg([override])) == []


def test_a_range_error_is_reported_for_the_key_that_is_out_of_range_not_its_partner():
    # max_time_s=0 is also below min_time_s; the line names max_time_s's own range
    found = V.problems(compose_cfg(["measure.max_time_s=0"]))
    assert [p.path for p in found] == ["measure.max_time_s"]


@pytest.mark.slow
def test_exact_inputs_need_a_power_of_two_scale():
    assert V.problems(compose_cfg(["measure.distribution=exact", "measure.input_scale=0.25"])) == []
    assert V.problems(compose_cfg(["measure.distribution=exact", "measure.input_scale=8"])) == []
    assert V.problems(compose_cfg(["measure.distribution=normal", "measure.input_scale=3"])) == []
    (p,) = V.problems(compose_cfg(["measure.distribution=exact", "measure.input_scale=3"]))
    assert str(p).startswith("measure.input_scale=3.0 is invalid: must be a power of two")
    assert "measure.distribution=exact" in str(p)


def test_variant_settings_have_ranges_wherever_the_variant_sits():
    (p,) = V.problems(compose_cfg(["variant=cpu_blas", "variant.cpu_blas.threads=0"]))
    assert p.path == "variant.cpu_blas.threads" and "integer >= 1" in p.message


# -- unknown keys, even when added with `+` --------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("override,path,hint", [
    ("+measure.warmpu_s=1", "measure.warmpu_s", "did you mean measure.warmup_s?"),
    ("+run.foo=1", "run.foo", "valid: name, fail_on_error, progress, resume, gpu_wait_s"),
    ("+run.nmae=x", "run.nmae", "did you mean run.name?"),
    ("+variant.naive.cuda.foo=1", "variant.naive.cuda.foo", "'foo' is not in CudaKernelConf"),
    ("+variant.naive.requires.0.resaon=x", "variant.naive.requires[0].resaon", "did you mean"),
    ("+precision.fp32.tolerence=1", "precision.fp32.tolerence", "did you mean precision.fp32.tolerance?"),
    ("+mesure={seed: 1}", "mesure", "did you mean measure?"),
])
def test_a_key_added_with_plus_is_checked_against_its_schema(override, path, hint):
    overrides = [override] + (["variant=naive"] if "naive" in override else [])
    found = V.problems(compose_cfg(overrides))
    assert [p.path for p in found] == [path]
    assert "unknown key" in str(found[0]) and hint in str(found[0])


def test_free_form_mappings_take_any_key():
    cfg = compose_cfg(["variant=[naive,copy_cpu]", "+variant.naive.cuda.defines.EXTRA=1",
                       "+experiment.note=x", "+variant.copy_cpu.probe.params.anything=1"])
    assert V.problems(cfg) == []


# -- the command line before Hydra parses it -------------------------------------------------
@pytest.mark.parametrize("argv,expected", [
    (["measure.cache=lukewarm"], "measure.cache=lukewarm is invalid: must be one of flush, rotate, warm"),
    (["-m", "measure.timer=events,cuptii"], "measure.timer=events,cuptii is invalid: must be one of events, cupti"),
    (["measure.warmpu_s=1"], "did you mean measure.warmup_s?"),
    (["++measure.warmpu_s=1"], "did you mean measure.warmup_s?"),
    (["variant=naïve"], "valid choices for variant: "),
    (["precision=[fp16,bf16ü]"], "valid choices for precision: bf16, fp16, fp32, fp64, fp8, tf32"),
    (["hydra/launcher=slurm™"], "valid choices for hydra/launcher: "),
])
def test_argv_problems_are_one_line_naming_what_is_valid(argv, expected):
    line = V.argv_problem(argv)
    assert line is not None and expected in line and "\n" not in line


@pytest.mark.parametrize("argv", [
    [], ["measure.cache=rotate"], ["-m", "measure.timer=events,cupti"], ["variant=[naive,cpu_blas]"],
    ["+experiment=cublas_square"], ["variant.warp_tiled.cuda.defines.BK=16"], ["sizes.square=[1,2]"],
    ["hydra.run.dir=/tmp/x"], ["-cn", "config", "measure=quick"], ["--cfg", "job"], ["~measure.threads"],
    ["experiment.anything=1"], ["foo=naïve"],  # not a config group: Hydra's own error stands
])
def test_argv_leaves_valid_and_unrelated_overrides_to_hydra(argv):
    assert V.argv_problem(argv) is None


# -- the command line end to end -------------------------------------------------------------
def _run_py(args, cwd, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p, time.perf_counter() - t0


CLI_BAD = [
    ("measure.min_samples=-1", "gemmlab: measure.min_samples=-1 is invalid: must be an integer >= 1"),
    ("measure.batch=0", "gemmlab: measure.batch=0 is invalid: must be an integer >= 1"),
    ("measure.warmup_s=-3", "gemmlab: measure.warmup_s=-3.0 is invalid: must be a finite number >= 0"),
    ("measure.max_noise=-1", "gemmlab: measure.max_noise=-1.0 is invalid: must be a finite number > 0"),
    ("measure.max_time_s=0", "gemmlab: measure.max_time_s=0.0 is invalid: must be a finite number > 0"),
    ("+measure.warmpu_s=1", "gemmlab: +measure.warmpu_s=1 is invalid: unknown key: 'warmpu_s' is not in "
                            "MeasureConf (measure); did you mean measure.warmup_s?"),
    ("layouts=[nn,tx]", "gemmlab: layouts=[nn, tx] is invalid: 'tx' is not a layout; valid: nn, nt, tn, tt"),
    ("batch=[0]", "gemmlab: batch=[0] is invalid: 0 must be an integer >= 1"),
    # refused where the points are made (gemmlab.points.ConfigError), not by the settings' check
    ("sizes.square=[-5]", "gemmlab: size m=-5 in [-5, -5, -5] must be a positive integer"),
]


@pytest.mark.slow
@pytest.mark.parametrize("override,line", CLI_BAD, ids=[b[0] for b in CLI_BAD])
def test_cli_bad_setting_exits_2_with_one_line_fast_and_writes_no_row(tmp_path, override, line):
    out = tmp_path / "run"
    # the CPU baseline in fp32: it would measure (and write rows) if the setting got through
    p, wall = _run_py([override, "variant=[cpu_blas,cublas]", "precision=fp32", "sizes=smoke",
                       "run.progress=false", f"hydra.run.dir={out}"], tmp_path)
    assert p.returncode == 2, (p.stdout[-1000:], p.stderr[-1000:])
    assert p.stderr.splitlines() == [line]
    assert "Traceback" not in p.stdout + p.stderr
    # fast: refused before any backend starts (2-3 s alone); the bound is loose so a loaded CI
    # runner cannot fail it, yet far below what a compile or a measurement would take
    assert wall < 20.0, f"{override}: {wall:.2f} s"
    assert not (out / "results.csv").exists()


def test_cli_unlexable_group_option_lists_the_choices(tmp_path):
    p, wall = _run_py(["variant=naïve", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert p.returncode == 2
    (line,) = p.stderr.splitlines()
    assert line.startswith("gemmlab: variant=naïve is invalid: ")
    assert "valid choices for variant: " in line and "cpu_blas" in line and "naive" in line
    assert wall < 20.0 and not (tmp_path / "run").exists()


def test_cli_bad_enum_value_is_one_line(tmp_path):
    p, _ = _run_py(["measure.cache=lukewarm", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert p.returncode == 2
    assert p.stderr.splitlines() == ["gemmlab: measure.cache=lukewarm is invalid: must be one of flush, rotate, warm"]


@pytest.mark.slow
def test_cli_help_lists_the_groups_their_options_and_examples_not_the_config(tmp_path):
    p, _ = _run_py(["--help"], tmp_path)
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "== Config groups ==" in text and "== Examples ==" in text and "== Flags ==" in text
    lines = text.splitlines()
    for group in ("variant", "precision", "sizes", "measure", "device", "experiment"):
        options = sorted(x.stem for x in (C.CONF_DIR / group).glob("*.yaml"))
        if group == "variant":  # and the computed sets (gemmlab/variants.py)
            from gemmlab import variants

            options = sorted(options + list(variants.sets()))
        assert f"{group}: {', '.join(options)}" in lines, group
    assert "--multirun,-m" in text  # Hydra's flags
    assert "python run.py" in text and "--cfg job" in text
    # not the composed config: no YAML dump of the measure settings
    assert "warmup_min_iters" not in text and "clock_stable_fraction" not in text
