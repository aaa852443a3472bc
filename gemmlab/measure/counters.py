"""Measured bytes at each memory level from Nsight Compute (``measure.counters=ncu``).

The timed run is never profiled. After a GPU point is timed, the runner starts a separate process
under ``ncu`` that rebuilds the same point (same config, same seed), launches the call once to
warm up, and once more inside an NVTX range named ``gemmlab``; ncu profiles only the kernels in
that range (a library call may launch several: their counts are summed). ncu flushes the caches
before each profiled kernel, as the timer does, and ``--clock-control none`` leaves the clocks
alone. The raw CSV is kept in ``<run>/ncu/<point_key>.csv`` next to the rows.

Intensities divide the point's algorithmic FLOPs (2mnk) by the measured bytes at each level.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

METRICS = {
    "dram__bytes_read.sum": "dram_read",
    "dram__bytes_write.sum": "dram_write",
    "lts__t_bytes.sum": "l2",
    "l1tex__t_bytes.sum": "l1",
}
NVTX_RANGE = "gemmlab"
TIMEOUT_S = 300


def parse_ncu_csv(text: str) -> List[Dict[str, str]]:
    """Rows of ``ncu --csv --page raw`` output (one per profiled kernel), other lines ignored."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    return [r for r in rows if (r.get("ID") or "").strip().isdigit()]  # drop the units row


def _number(v: str) -> float:
    return float(str(v).replace(",", ""))


def summarize(rows: List[Dict[str, str]], flops: float) -> Dict[str, object]:
    """Row fields from parsed ncu rows: bytes at each level summed over kernels, and intensities."""
    if not rows:
        return {"counters_reason": "ncu profiled no kernel in the gemmlab NVTX range"}
    tot = {short: sum(_number(r[m]) for r in rows) for m, short in METRICS.items() if m in rows[0]}
    out: Dict[str, object] = {}
    if "dram_read" in tot and "dram_write" in tot:
        out["bytes_dram"] = tot["dram_read"] + tot["dram_write"]
    if "l2" in tot:
        out["bytes_l2"] = tot["l2"]
    if "l1" in tot:
        out["bytes_l1"] = tot["l1"]
    for level in ("dram", "l2", "l1"):
        b = out.get(f"bytes_{level}")
        if b:
            out[f"intensity_{level}"] = flops / b
    out["extra"] = {"ncu_kernels": [r.get("Kernel Name", "") for r in rows],
                    "ncu_dram_read": tot.get("dram_read"), "ncu_dram_write": tot.get("dram_write")}
    return out


def unavailable(point_kind: str) -> Optional[str]:
    if point_kind != "gpu":
        return "hardware counters are read for GPU points only"
    if shutil.which("ncu") is None:
        return "ncu (Nsight Compute) is not on the PATH"
    return None


def profile(point, cfg, out_dir: Path, config_file: Path) -> Dict[str, object]:
    """Run one point under ncu in a child process; returns the counter columns (or the reason)."""
    ncu_dir = out_dir / "ncu"
    ncu_dir.mkdir(parents=True, exist_ok=True)
    cmd = ["ncu", "--clock-control", "none", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
           "--metrics", ",".join(METRICS), "--csv", "--page", "raw", "--print-units", "base",
           sys.executable, "-m", "gemmlab.ncu_child", "--config", str(config_file), "--point-key", point.key]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent.parent),
                                                                    os.environ.get("PYTHONPATH")]))}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return {"counters_reason": f"ncu timed out after {TIMEOUT_S} s"}
    (ncu_dir / f"{point.key}.csv").write_text(p.stdout)
    if p.returncode != 0:
        (ncu_dir / f"{point.key}.log").write_text(p.stderr)
        tail = (p.stderr.strip().splitlines() or ["?"])[-1][:200]
        return {"counters_reason": f"ncu exited {p.returncode}: {tail} (log: ncu/{point.key}.log)"}
    fields = summarize(parse_ncu_csv(p.stdout), point.flops)
    return fields
