"""Does the harness add overhead to the CPU baseline? Its fp32 GFLOP/s at N = 2048 against a bare
``numpy.matmul`` loop timed in the same process, both as the median of 10 single-call samples,
alternated round by round so both see the same machine state.

    python -m gemmlab.bench.cpu_overhead [--n 2048] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def bare_loop_gflops(n: int, calls: int = 10) -> float:
    """A bare numpy.matmul loop, each call timed alone; GFLOP/s at the median call, as the
    harness reports it."""
    import statistics

    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=c)  # warm-up
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        np.matmul(a, b, out=c)
        times.append((time.perf_counter_ns() - t0) * 1e-9)
    return 2 * n**3 / statistics.median(times) / 1e9


def harness_gflops(n: int, out_dir: Path) -> float:
    from gemmlab.config import compose
    from gemmlab.rows import read
    from gemmlab.runner import Runner

    cfg = compose(["variant=cpu_blas", "precision=fp32", f"sizes.square=[{n}]", "sizes.shapes=[]",
                   "run.progress=false", "run.resume=false", "measure.warmup_min_iters=1",
                   "measure.warmup_s=0", "measure.min_samples=10", "measure.max_samples=10"],
                  outputs=out_dir)
    Runner(cfg, out_dir).run()
    df = read(out_dir / "results.csv")
    return float(df.tflops.iloc[-1]) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            bare = bare_loop_gflops(args.n)
            ours = harness_gflops(args.n, Path(tmp) / str(r))
            ratios.append(ours / bare)
            print(f"round {r}: harness {ours:.1f} GFLOP/s, bare numpy.matmul loop {bare:.1f} GFLOP/s, "
                  f"ratio {ours / bare:.3f}")
    med = statistics.median(ratios)
    q = statistics.quantiles(ratios, n=5) if len(ratios) >= 2 else [med] * 4
    print(f"median ratio harness / bare = {med:.3f} over {len(ratios)} alternating rounds "
          f"(p20 {q[0]:.3f}, p80 {q[3]:.3f}; target: within 10% of 1)")
    return 0 if abs(med - 1) <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
