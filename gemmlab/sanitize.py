"""``measure.sanitize``: a GPU point's checked call under compute-sanitizer, in a child process.

Before a GPU point is measured, the runner starts ``compute-sanitizer --tool <tool> python -m
gemmlab.sanitize`` on it: the child rebuilds the point from the run's saved config (as the ncu
child does), makes its inputs, launches the call once and waits for it. Memory comes from plain
``cudaMalloc`` per array there (CuPy's pool and PyTorch's cache are turned off), so memcheck sees
each array's true end: a write one element past C is an "Invalid __global__ write". The row gets
``sanitize_tool``, ``sanitize_errors`` and the first report line (``sanitize_report``); the full
output is kept in ``<run>/sanitize/<point_key>.log``. A point with errors fails, naming the first;
a clean one is then measured as usual, but its timings are not evidence (the runner marks it
unreliable). Where compute-sanitizer is missing or cannot attach, the point is skipped with why.
The sanitizer is about 10-100x slower than the kernel: run it on small sizes.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

PREFIX = "========="
TIMEOUT_S = 600


def executable() -> Optional[str]:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "compute-sanitizer").exists():
            return str(Path(home) / "bin" / "compute-sanitizer")
    return None


def parse(text: str) -> Tuple[Optional[int], Optional[str]]:
    """(errors from the summary line, the first report line) of compute-sanitizer's output;
    errors is None when there is no summary (the tool did not run the program to its end)."""
    errors: Optional[int] = None
    first = None
    for line in text.splitlines():
        if not line.startswith(PREFIX):
            continue
        body = line[len(PREFIX):].strip()
        m = re.search(r"ERROR SUMMARY: (\d+) error", body) or \
            re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", body)
        if m:
            errors = max(errors or 0, int(m.group(1)))
            continue
        indented = line[len(PREFIX):].startswith("  ")  # a report's details: frames, addresses
        if first is None and body and not indented and not body.startswith(
                ("COMPUTE-SANITIZER", "Program hit", "Target application")):
            first = body
    return errors, first


def run_point(point, cfg, out_dir: Path) -> Dict[str, Any]:
    """The sanitizer's verdict on ``point`` as row fields: with ``status`` when the point must not
    be measured further (failed: errors found; skipped: the sanitizer could not run)."""
    from omegaconf import OmegaConf

    tool = cfg.measure.sanitize.value
    base = {"sanitize_tool": tool}
    exe = executable()
    if exe is None:
        why = "compute-sanitizer is not on the PATH (nor under CUDA_HOME)"
        return {**base, "sanitize_report": why, "status": "skipped", "reason": f"measure.sanitize={tool}: {why}"}
    folder = Path(out_dir) / "sanitize"
    folder.mkdir(parents=True, exist_ok=True)
    cfg_file = folder / "config.yaml"
    if not cfg_file.exists():
        OmegaConf.save(cfg, cfg_file, resolve=True)
    # API errors are CuPy's and the libraries' own business (a lookup of a symbol a module lacks
    # returns CUDA_ERROR_NOT_FOUND by design): only what the kernels do counts
    cmd = [exe, "--tool", tool, "--report-api-errors", "no", "--print-limit", "20", "--error-exitcode", "99",
           sys.executable, "-m", "gemmlab.sanitize", "--config", str(cfg_file), "--point-key", point.key]
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "GEMMLAB_RUNNER_PID": str(os.getpid()),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent.parent),
                                                       os.environ.get("PYTHONPATH")]))}
    log_file = folder / f"{point.key}.log"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        text = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        text = f"{e.stdout or ''}{e.stderr or ''}\ntimed out after {TIMEOUT_S} s"
        log_file.write_text(text if isinstance(text, str) else str(text))
        return {**base, "sanitize_report": f"timed out after {TIMEOUT_S} s", "status": "failed",
                "reason": f"compute-sanitizer {tool} timed out after {TIMEOUT_S} s"}
    log_file.write_text(text)
    errors, first = parse(text)
    rel = log_file.relative_to(out_dir) if log_file.is_relative_to(out_dir) else log_file
    if errors is None:
        tail = (text.strip().splitlines() or ["no output"])[-1][:200]
        why = f"compute-sanitizer could not run the point (exit {p.returncode}): {tail} (log: {rel})"
        return {**base, "sanitize_report": why, "status": "skipped", "reason": f"measure.sanitize={tool}: {why}"}
    if errors:
        return {**base, "sanitize_errors": errors, "sanitize_report": first, "status": "failed",
                "reason": f"compute-sanitizer {tool}: {errors} errors, first: {first} (log: {rel})"}
    return {**base, "sanitize_errors": 0, "sanitize_report": "clean"}


def main(config: str, key: str) -> int:
    """Inside compute-sanitizer: rebuild the point, launch its call once on fresh inputs."""
    import cupy

    cupy.cuda.set_allocator(None)  # one cudaMalloc per array: the sanitizer sees each array's end
    cupy.cuda.set_pinned_memory_allocator(None)
    from gemmlab.ncu_child import launch_point

    return launch_point(config, key)


if __name__ == "__main__":
    from gemmlab.ncu_child import point_main

    point_main(main, "launch one point once (used by gemmlab under compute-sanitizer)")
