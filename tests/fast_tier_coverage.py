"""Which modules the fast tier exercises: every module of gemmlab/ and analysis/ must have code
inside one of its functions run by a test outside `-m slow` (importing it is not enough).

    python tests/fast_tier_coverage.py          # runs `pytest -m "not slow"` under coverage (a few minutes)
    python tests/fast_tier_coverage.py --report # only reads the .coverage file a previous run left

Prints one line per module (functions run / functions defined) and exits 1 naming the modules no
fast test exercises, but for NEEDS_A_DEVICE (modules all of whose functions need a CUDA device). The tier runs in one process here (coverage follows no pytest-xdist worker);
code run only in a subprocess (`python run.py ...`) does not count. Needs coverage (the test extra).
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gemmlab", "analysis")
DATA = Path(tempfile.gettempdir()) / "gemmlab-fast-tier.coverage"
# Modules whose functions all need a CUDA device: no test on a host without one runs them (the
# GPU tests do, `pytest -m gpu`); listed, not failed.
NEEDS_A_DEVICE = {
    "gemmlab/backends/cutlass/search.py": "times candidate kernels on the GPU",
    "gemmlab/backends/probes/child.py": "the child process of a GPU probe",
    "gemmlab/ncu_child.py": "the process Nsight Compute profiles on the GPU",
}


def function_bodies(path: Path) -> dict:
    """{function name: the line numbers of the statements in its body} of every function and
    method in ``path`` (nested ones under their own name)."""
    out = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = set()
            for stmt in node.body:
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            out[f"{node.name}:{node.lineno}"] = lines
    return out


def run_fast_tier() -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "coverage", "run", f"--data-file={DATA}", "--source=" + ",".join(PACKAGES),
           "-m", "pytest", "-m", "not slow", "-n", "0", "-q", "-p", "no:cacheprovider"]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def report() -> int:
    import coverage

    cov = coverage.Coverage(data_file=str(DATA))
    cov.load()
    data = cov.get_data()
    executed = {Path(f).resolve(): set(data.lines(f) or ()) for f in data.measured_files()}
    missing = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            bodies = function_bodies(path)
            ran = executed.get(path.resolve(), set())
            called = [name for name, lines in bodies.items() if lines & ran]
            rel = path.relative_to(ROOT)
            if not bodies:  # constants only (an __init__, a table): importing it is using it
                print(f"  {rel}: no functions, imported: {'yes' if ran else 'NO'}")
                if not ran:
                    missing.append(str(rel))
                continue
            print(f"  {rel}: {len(called)}/{len(bodies)} functions run")
            if not called and rel.as_posix() in NEEDS_A_DEVICE:
                print(f"    needs a device: {NEEDS_A_DEVICE[rel.as_posix()]}")
            elif not called:
                missing.append(str(rel))
    if missing:
        print(f"\nno fast test exercises {len(missing)} module(s): " + ", ".join(missing))
        return 1
    print("\nevery module of " + " and ".join(PACKAGES) + " is exercised by the fast tier, but for "
          + f"{len(NEEDS_A_DEVICE)} that need a device")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="read the previous run's coverage data only")
    args = parser.parse_args(argv)
    if not args.report:
        rc = run_fast_tier()
        if rc not in (0, 5):
            print(f"the fast tier failed (pytest exit {rc}); the report below is of what ran")
    return report()


if __name__ == "__main__":
    sys.exit(main())
