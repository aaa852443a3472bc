"""Does the harness add overhead to the CPU baseline? Its fp32 GFLOP/s at N = 2048 against a bare
``numpy.matmul`` loop timed in the same process, alternated for a few rounds.

    python -m gemmlab.bench.cpu_overhead [--n 2048] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def bare_loop_gflops(n: int, seconds: float) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=c)  # warm-up
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        np.matmul(a, b, out=c)
        reps += 1
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def harness_gflops(n: int, out_dir: Path) -> float:
    from gemmlab.config import compose
    from gemmlab.rows import read
    from gemmlab.runner import Runner

    cfg = compose(["variant=cpu_blas", "precision=fp32", f"sizes.square=[{n}]", "sizes.shapes=[]",
                   "run.progress=false", "run.resume=false"], outputs=out_dir)
    Runner(cfg, out_dir).run()
    df = read(out_dir / "results.csv")
    return float(df.tflops.iloc[-1]) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            bare = bare_loop_gflops(args.n, 3.0)
            ours = harness_gflops(args.n, Path(tmp) / str(r))
            ratios.append(ours / bare)
            print(f"round {r}: harness {ours:.1f} GFLOP/s, bare numpy.matmul loop {bare:.1f} GFLOP/s, "
                  f"ratio {ours / bare:.3f}")
    med = statistics.median(ratios)
    print(f"median ratio harness / bare = {med:.3f} (target: within 10% of 1)")
    return 0 if abs(med - 1) <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
