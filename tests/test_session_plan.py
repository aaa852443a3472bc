"""Every stage of .ci/h200-session.sh, run dry on this machine (SESSION_DRY: each step recorded, nothing
run): every `run.py` command passes the command-line check, every job of it composes (a sweep's jobs
one by one, as Hydra's basic sweeper makes them) and expands its points, and every hand-written (cuda)
point of it resolves its build and launch within an H200's limits (227 KB of shared memory a block,
1024 threads); every pytest file it names exists and every `-k` selects a test; every `python3 -m`
module imports. A GPU call is ten minutes of a thirty-minute session: a misspelt override, a define
list the YAML's rules refuse or a stage that runs nothing costs one there, and nothing here."""
from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "h200-session.sh"
H200_SMEM_OPTIN = 232448  # bytes of dynamic shared memory a block may opt into (227 KB)
H200_SM_COUNT = 132
MAX_THREADS = 1024
# run in the dry session's folder: stubs that record a command the stage runs itself (not through step)
STUBBED = ("python3", "ncu", "nvidia-smi", "compute-sanitizer", "sleep")
# stages whose sweeps hold points past a block's shared memory on purpose: the GPU skips them with the
# reason (as the committed rows say: session9d/decode_v3, "2 skipped (more shared memory than a block may
# have)"); anywhere else such a point is a mistake in the plan
OVER_SMEM_EXPECTED = {"decode_ablation", "decode_v3"}

pytestmark = pytest.mark.xdist_group("session_plan")  # one worker composes them all (the cache below)


def stages() -> List[str]:
    """The stage names of the script's case statement, in order."""
    body = SCRIPT.read_text().split('for stage in "$@"; do case $stage in', 1)[1]
    return re.findall(r"^  ([a-z_0-9]+)\)", body, flags=re.M)


Step = Tuple[str, int, Tuple[str, ...]]  # name, time limit, command


@functools.lru_cache(maxsize=None)
def dry_run(tmp: str, stage: str, script: str = str(SCRIPT)) -> Tuple[List[Step], List[str], str]:
    """The stage run dry in folder ``tmp``: its steps, the commands it ran itself (stubbed), its output."""
    folder = Path(tmp) / stage
    stubs = folder / "stubs"
    stubs.mkdir(parents=True)
    for name in STUBBED:
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "$SESSION_DIRECT"\n')
        stub.chmod(0o755)
    (folder / "experiments").symlink_to(ROOT / "experiments")  # the claims stage lists them
    record, direct = folder / "steps", folder / "direct"
    env = {**os.environ, "SESSION_DRY": str(record), "SESSION_DIRECT": str(direct),
           "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}", "OUT": str(folder / "out"),
           "LOGS": str(folder / "logs"), "GEMMLAB_GIT_COMMIT": "dry", "GEMMLAB_REF": "dry"}
    for var in ("DEADLINE", "TAIL"):
        env.pop(var, None)
    proc = subprocess.run(["bash", script, stage], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, f"{stage}: the dry session exited {proc.returncode}: {proc.stderr[-2000:]}"
    steps: List[Step] = []
    raw = record.read_bytes() if record.exists() else b""
    for rec in raw.split(b"\x1e\x00"):
        fields = [f.decode() for f in rec.split(b"\x00")][:-1] if rec else []
        if fields:
            steps.append((fields[0], int(fields[1]), tuple(fields[2:])))
    for _ in range(50):  # a stage's own background command (precompile's) records a moment later
        if steps or direct.exists():
            break
        time.sleep(0.1)
    ran = direct.read_text().splitlines() if direct.exists() else []
    return steps, ran, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def dry_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("dry_session"))


def run_py_args(cmd: Tuple[str, ...]) -> List[str] | None:
    """The arguments a command gives run.py (through `bash -c '... run.py "$@"' NAME ARGS` too); None if none."""
    if "run.py" in cmd:
        return list(cmd[cmd.index("run.py") + 1:])
    if cmd[:2] == ("bash", "-c") and 'run.py "$@"' in cmd[2]:
        return list(cmd[4:])
    return None


def jobs(args: List[str]) -> List[List[str]]:
    """The jobs' overrides (Hydra's own keys left out): one job without -m, the sweep's product with it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    multirun = "-m" in args or "--multirun" in args
    overrides = [a for a in args if not a.startswith("-") and not a.startswith("hydra.")]
    if not multirun:
        return [overrides]
    parser = OverridesParser.create()
    axes = []
    for arg, override in zip(overrides, parser.parse_overrides(overrides)):
        if override.is_sweep_override():
            key = override.get_key_element()
            axes.append([f"{key}={v}" for v in override.sweep_string_iterator()])
        else:
            axes.append([arg])
    return [list(job) for job in itertools.product(*axes)]


@functools.lru_cache(maxsize=None)
def check_job(job: Tuple[str, ...], outputs: str) -> Dict[str, int]:
    """Compose one job as run.py would, check it, expand its points and resolve every cuda point's build
    and launch; the counts of points, cuda builds and points past an H200's shared memory (the GPU skips
    those with the reason); an exception or AssertionError names what fails."""
    from gemmlab import config, points, validate
    from gemmlab.backends.cuda_kernels import build_for, launch_shape

    cfg = config.compose(list(job), outputs=outputs)
    validate.check(cfg)
    pts = points.expand(cfg)
    builds, over = set(), 0
    for pt in pts:
        if pt.backend != "cuda" or pt.skip_reason:
            continue
        where = f"{pt.variant} {pt.precision} {pt.m}x{pt.n}x{pt.k}"
        builds.add(build_for(pt, str(ROOT)))
        shape = launch_shape(pt, sm_count=H200_SM_COUNT)
        over += shape.smem_bytes > H200_SMEM_OPTIN
        assert shape.threads <= MAX_THREADS, f"{where}: {shape.threads} threads a block"
    skips = [p.skip_reason for p in pts if p.skip_reason]
    return {"points": len(pts), "runnable": len(pts) - len(skips), "skip": skips[0] if skips else None,
            "builds": len(builds), "over_smem": over}


def test_the_script_names_its_stages():
    """The stage list the tests walk is the script's (a stage renamed or lost shows here)."""
    names = stages()
    assert len(names) > 50 and len(set(names)) == len(names)
    for name in ("fp8_block_split", "fp8_block_ds3_candidates", "tune_fp8", "validity", "isolation"):
        assert name in names


def test_a_dry_session_runs_nothing(dry_dir):
    """Dry, a stage records its steps and runs none of them (no log, no rows); a stage the script
    does not know is said, as on the GPU host."""
    steps, ran, out = dry_run(dry_dir, "fp8_block_split")
    assert [s[0] for s in steps] == ["fp8_block_split", "fp8_block_wide"]
    assert not ran and not (Path(dry_dir) / "fp8_block_split" / "logs" / "fp8_block_split.log").exists()
    assert not (Path(dry_dir) / "fp8_block_split" / "outputs").exists()
    _, _, out = dry_run(dry_dir, "no_such_stage")
    assert "unknown stage no_such_stage" in out


@functools.lru_cache(maxsize=None)
def selects_tests(marks: Tuple[str, ...], sel: str, files: Tuple[str, ...]) -> bool:
    """Whether ``pytest -k sel`` (with ``marks``) collects a test in ``files``: a pytest run of its own (~2 s), once a
    worker for each selection however many stages name it."""
    collect = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *marks,
                              "-k", sel, *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    return collect.returncode == 0


def problems(stage: str, steps: List[Step], outputs: str) -> List[str]:
    """What would go wrong on the GPU host in a stage's steps, one line each (none: the plan holds)."""
    from gemmlab import validate

    found: List[str] = []
    for name, secs, cmd in steps:
        where = f"{stage}/{name}"
        if not 0 < secs <= 600:
            found.append(f"{where}: a step's limit ({secs} s) past a call's 600")
        args = run_py_args(cmd)
        if args is not None:
            problem = validate.argv_problem(args)
            if problem:
                found.append(f"{where}: {problem}")
                continue
            for job in jobs(args):
                line = f"{where}: run.py {' '.join(job)}"
                try:
                    counts = check_job(tuple(job), outputs)
                except Exception as e:
                    found.append(f"{line}: {type(e).__name__}: {e}")
                    continue
                if not counts["runnable"]:
                    found.append(f"{line}: no point runs ({counts['skip']})")
                if counts["over_smem"] and stage not in OVER_SMEM_EXPECTED:
                    found.append(f"{line}: {counts['over_smem']} cuda points need more shared memory than an "
                                 f"H200 block may have ({H200_SMEM_OPTIN} bytes)")
        elif "pytest" in cmd:
            rest = cmd[cmd.index("pytest") + 1:]
            files = [a for a in rest if a.startswith("tests")]
            found += [f"{where}: no {f}" for f in files if not (ROOT / f).exists()]
            if "-k" in rest and all((ROOT / f).exists() for f in files):
                sel = rest[rest.index("-k") + 1]
                marks = ["-m", rest[rest.index("-m") + 1]] if "-m" in rest else []
                if not selects_tests(tuple(marks), sel, tuple(files)):
                    found.append(f"{where}: -k {sel} selects no test in {' '.join(files)}")
        elif "-m" in cmd and cmd[0] in ("python3", "env"):
            module = cmd[cmd.index("-m") + 1]
            if importlib.util.find_spec(module) is None:
                found.append(f"{where}: no module {module}")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("stage", stages())
def test_every_stage_composes_on_a_machine_without_a_gpu(stage, dry_dir):
    steps, ran, out = dry_run(dry_dir, stage)
    assert steps or ran, f"{stage} runs nothing: {out[-500:]}"
    assert "unknown stage" not in out
    # one outputs folder for every stage a worker checks: check_job's cache then serves a job that several stages
    # run (h200_next's and h200_short's steps are their parts' own) from its first check
    assert problems(stage, steps, dry_dir) == []


MUTANTS = {  # (what is written wrong in fp8_block_split's first step, what the check must say)
    "a misspelt key": ("measure.max_time_s=1.5", "measure.max_tim_s=1.5", "unknown key"),
    "a sweep without -m": ("python3 run.py -m variant=wgmma_fp8_block", "python3 run.py variant=wgmma_fp8_block",
                           "ConfigCompositionException"),
    "a define list past shared memory": ("{PROMOTE_OVERLAP:0},{EPI_BOXES:0}'",
                                         "{PROMOTE_OVERLAP:0},{BN:128,STAGES:8},{EPI_BOXES:0}'", "more shared memory"),
    "a shape the stage refuses": ("[[4096,256,7168],[1024,256,7168]]", "[[4096,256,7160]]", "no point runs"),
    "a test file that is not there": ("tests/test_gpu_hopper_fp8_block.py", "tests/test_gpu_hopper_fp8_blocks.py",
                                      "no tests/test_gpu_hopper_fp8_blocks.py"),
    "a -k that selects no test": ("-k any_m -v", "-k any_mm -v", "-k any_mm selects no test"),
}
MUTANT_STAGES = {"a test file that is not there": "fp8_block_tests", "a -k that selects no test": "lt_fp8_any_m"}


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_the_check_finds_a_plan_written_wrong(mutant, tmp_path):
    """Negative controls: the script with one thing written wrong, run dry, fails the check with the reason."""
    old, new, said = MUTANTS[mutant]
    text = SCRIPT.read_text()
    assert old in text, f"{mutant}: the script no longer has {old!r} (update the control)"
    copy = tmp_path / "h200-session.sh"
    stage = MUTANT_STAGES.get(mutant, "fp8_block_split")
    if stage == "fp8_block_split":  # written wrong in that stage's own lines
        body = text[text.index("  fp8_block_split)"):]
        body = body[:body.index(";;")]
        assert old in body, f"{mutant}: fp8_block_split no longer has {old!r} (update the control)"
        text = text.replace(body, body.replace(old, new, 1))
    else:
        text = text.replace(old, new, 1)
    copy.write_text(text)
    steps, _, _ = dry_run(str(tmp_path), stage, str(copy))
    found = problems(stage, steps, str(tmp_path))
    assert any(said in line for line in found), found


@pytest.mark.slow
def test_the_decode_experiment_runs_at_each_precisions_picks(tmp_path, monkeypatch):
    """decode_wgmma_auto's last part reads the sweep's picks (analysis.compare --pick --by precision,m): a precision
    whose token counts all picked one define set is one run at it; one whose picks differ is a run per token count at
    its own; a pick of "-" (job 0 without the key), a group the file lacks and a group no job measured ok (job -1,
    said in the log) are the YAML's defines. Every run composes (the check above)."""
    picks = tmp_path / "picks.tsv"
    picks.write_text("precision\tm\tjob\tvalue\tgeomean_ratio\tpoints\n"
                     "bf16\t1\t2\t{KSPAN:2}\t0.95\t2\nbf16\t16\t2\t{KSPAN:2}\t0.97\t1\n"
                     "bf16\t64\t2\t{KSPAN:2}\t0.96\t2\n"
                     "fp8\t1\t-1\t-\t\t0\nfp8\t64\t5\t{CLUSTER:2}\t0.93\t2\n")
    monkeypatch.setenv("DECODE_WGMMA_PICKS", str(picks))
    steps, _, out = dry_run(str(tmp_path), "decode_wgmma_auto")
    assert "fp8 at 1 tokens: no define set measured every point ok" in out
    runs = {name: cmd for name, _, cmd in steps if name.startswith("decode_wgmma_picked")}
    assert sorted(runs) == ["decode_wgmma_picked_bf16_t1_16_64", "decode_wgmma_picked_fp8_t1",
                            "decode_wgmma_picked_fp8_t16", "decode_wgmma_picked_fp8_t64"]
    assert "variant.decode_wgmma.cuda.defines={KSPAN:2}" in runs["decode_wgmma_picked_bf16_t1_16_64"]
    assert not any("defines" in a for a in runs["decode_wgmma_picked_fp8_t1"] + runs["decode_wgmma_picked_fp8_t16"])
    assert "sizes.tokens=[16]" in runs["decode_wgmma_picked_fp8_t16"]
    assert "variant.decode_wgmma.cuda.defines={CLUSTER:2}" in runs["decode_wgmma_picked_fp8_t64"]
    assert any(a.endswith("decode_wgmma_picked/fp8/t64") for a in runs["decode_wgmma_picked_fp8_t64"])
    assert [s[0] for s in steps][:2] == ["decode_wgmma_auto", "decode_wgmma_pick"]
    pick_cmd = steps[1][2]
    assert pick_cmd[pick_cmd.index("--out") + 1] == f"{tmp_path}/decode_wgmma_auto/logs/decode_wgmma_pick"
    assert "outputs/reference/dry/decode_wgmma_auto" in pick_cmd  # the pick reads the sweep the first step writes
    assert "hydra.sweep.dir=outputs/reference/dry/decode_wgmma_auto" in steps[0][2]
    # no picks file (the pick failed): every run at the YAML's defines, and the log says so
    monkeypatch.setenv("DECODE_WGMMA_PICKS", str(tmp_path / "none.tsv"))
    steps, _, out = dry_run(str(tmp_path / "again"), "decode_wgmma_auto")
    assert "every run at the YAML's defines" in out
    runs = [cmd for name, _, cmd in steps if name.startswith("decode_wgmma_picked")]
    assert len(runs) == 2 and not any("defines" in a for cmd in runs for a in cmd)
    assert problems("decode_wgmma_auto", steps, str(tmp_path)) == []


def test_the_gpu_suite_halves_hold_every_gpu_test_file_once(dry_dir):
    """gpu_a and gpu_b (the GPU suite in two calls: 302 tests no longer fit gpu_all's one step) name every
    tests/test_gpu_*.py between them, each once: a new GPU test file must join one of them."""
    files = []
    for stage in ("gpu_a", "gpu_b"):
        (step,), _, _ = dry_run(dry_dir, stage)
        files += [a for a in step[2] if a.startswith("tests/test_gpu_")]
    assert sorted(files) == sorted(f"tests/{p.name}" for p in (ROOT / "tests").glob("test_gpu_*.py")), files
