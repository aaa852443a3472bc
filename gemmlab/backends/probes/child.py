"""Child processes of the GPU probes: :func:`run_child` (the parent's side) and the code that runs
in the child. A probe that may leave a sticky CUDA error (a misaligned access kills the CUDA
context) runs that part here, in a fresh process, so the rest of the run keeps its context::

    python -m gemmlab.backends.probes.child wmma-alignment '<json>'

The child prints one JSON line and exits without CuPy's teardown.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, Sequence

import numpy as np

from gemmlab.config import ROOT
from gemmlab.measure import check

CHILD_TIMEOUT_S = 120


def run_child(command: str, args: Dict[str, Any]) -> Dict[str, Any]:
    """Run ``command`` of :data:`CHILDREN` on ``args`` in a fresh Python process; its JSON result,
    or ``outcome: unknown`` with the error when it printed none (crashed, timed out)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run([sys.executable, "-m", "gemmlab.backends.probes.child", command, json.dumps(args)],
                              capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=str(ROOT), env=env)
    except subprocess.TimeoutExpired:
        return {"outcome": "unknown", "error": f"child process timed out after {CHILD_TIMEOUT_S} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"outcome": "unknown", "error": f"child exit {proc.returncode}: {(proc.stderr or '')[-500:]}"}
    return json.loads(lines[-1])


def _child_wmma_alignment(args: Dict[str, Any]) -> Dict[str, Any]:
    """In a fresh process: time the aligned call, then run the shifted one; report first, so a
    crash (sticky error) still leaves the aligned numbers."""
    import cupy as cp

    cp.cuda.Device(args["device"]).use()
    m, n, k, off = args["m"], args["n"], args["k"], args["offset_bytes"] // 2
    kern = cp.RawModule(path=args["cubin"]).get_function("wmma_gemm")
    rng = cp.random.default_rng(args["seed"])
    spare = 256  # halves past each matrix, so a shifted view stays inside its allocation
    a_buf = rng.standard_normal(m * k + spare, dtype=cp.float32).astype(cp.float16)
    b_buf = rng.standard_normal(k * n + spare, dtype=cp.float32).astype(cp.float16)
    c = cp.empty((m, n), dtype=cp.float32)
    grid = ((m // 16) * (n // 16) // args["warps_per_block"],)
    block = (32 * args["warps_per_block"],)
    dims = (np.int32(m), np.int32(n), np.int32(k))

    def views(o):
        return a_buf[o:o + m * k], b_buf[o:o + k * n]

    def timed(o, reps=10):
        a, b = views(o)
        kern(grid, block, (a, b, c, *dims))  # warm
        ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
        for e0, e1 in ev:
            e0.record()
            kern(grid, block, (a, b, c, *dims))
            e1.record()
        ev[-1][1].synchronize()
        return float(np.median([cp.cuda.get_elapsed_time(e0, e1) * 1e-3 for e0, e1 in ev]))

    def error(o):
        a, b = views(o)
        c.fill(float("nan"))
        kern(grid, block, (a, b, c, *dims))
        cp.cuda.Device().synchronize()
        model = check.error_model("fp16", "float32")  # FP16 inputs, FP32 accumulation and output
        ref = check.Reference.gemm(cp, a.reshape(m, k), b.reshape(k, n), model, args["tolerance"], "float32")
        return ref.verify(c)

    out: Dict[str, Any] = {"offset_bytes": args["offset_bytes"],
                           "pointer_mod_32": int(views(off)[0].data.ptr % 32)}
    aligned = error(0)
    out.update(aligned_rel_error=aligned.rel_error, aligned_s=timed(0))
    try:
        res = error(off)
        out.update(rel_error=res.rel_error, nonfinite=res.nonfinite)
        if not res.passed:
            out["outcome"] = "wrong"
        else:
            out["shifted_s"] = timed(off)
            out["slowdown"] = out["shifted_s"] / out["aligned_s"]
            out["outcome"] = "correct"
    except Exception as e:  # cudaErrorMisalignedAddress and friends: the context is gone now
        out.update(outcome="error", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return out


CHILDREN = {"wmma-alignment": _child_wmma_alignment}


def _child_main(argv: Sequence[str]) -> None:
    command, payload = argv[0], json.loads(argv[1])
    try:
        result = CHILDREN[command](payload)
    except Exception as e:
        result = {"outcome": "unknown", "error": f"{type(e).__name__}: {e}"[:500]}
    print(json.dumps(result, default=float), flush=True)
    os._exit(0)  # skip CuPy's teardown: after a sticky error it can hang or raise again


if __name__ == "__main__":
    _child_main(sys.argv[1:])
