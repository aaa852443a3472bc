"""Fidelity of the GPU timer against ``triton.testing.do_bench`` on the same cuBLAS call.

The two are alternated for several rounds in one process (so both see the same clock history),
the SM clock is read per round, and the per-round ratio ours / do_bench is reported; its median
should be within 3% of 1. Both flush the L2 before every sample and time with CUDA events.

    python -m gemmlab.bench.fidelity [--rounds 5] [--sizes 2048 4096] [--out fidelity.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    ap.add_argument("--precisions", nargs="+", default=["fp16", "bf16", "fp32"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import cupy
    import torch
    import triton.testing

    from gemmlab.backends.cublas import Cublas
    from gemmlab.config import compose
    from gemmlab.gpu import arrays
    from gemmlab.gpu.device import info
    from gemmlab.gpu.nvml import Nvml, Sampler
    from gemmlab.gpu.timer import GpuTimer
    from gemmlab.points import expand

    dev = info()
    nvml = Nvml(dev["pci_bus_id"])
    results = []
    for prec in args.precisions:
        for n in args.sizes:
            # sustained: a settled clock, as do_bench's 500 ms of back-to-back calls reach
            cfg = compose(["variant=cublas", f"precision={prec}", "measure=sustained"])
            cfg.sizes.square, cfg.sizes.shapes = [n], []
            (p,) = expand(cfg)
            stream = cupy.cuda.Stream(non_blocking=True)
            timer = GpuTimer(cfg.measure, stream, dev["l2_bytes"], lambda: Sampler(nvml))
            with stream:
                rng = cupy.random.default_rng(0)
                a = arrays.cast(cupy, rng.standard_normal((n, n), dtype=cupy.float32), p.in_dtype)
                b = arrays.cast(cupy, rng.standard_normal((n, n), dtype=cupy.float32), p.in_dtype)
                c = arrays.empty(cupy, (n, n), p.out_dtype)
                fn = Cublas(cfg).make_launch(p, a, b, c).fn
                rounds = []
                for r in range(args.rounds):
                    (ours,) = timer.measure([[fn]])
                    clk_ours = (ours.clocks.sm_clock_min_mhz, ours.clocks.sm_clock_max_mhz)
                    # do_bench records its events on torch's current stream: make that ours
                    with torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr)):
                        theirs_ms = triton.testing.do_bench(fn, warmup=100, rep=500, return_mode="median")
                    clk_theirs = nvml.read()[0] if nvml.ok else None
                    rounds.append({"ours_s": ours.summary.median_s, "do_bench_s": theirs_ms * 1e-3,
                                   "ratio": ours.summary.median_s / (theirs_ms * 1e-3),
                                   "noise": ours.summary.noise, "clock_ours_mhz": clk_ours,
                                   "clock_after_do_bench_mhz": clk_theirs})
            med = statistics.median(r["ratio"] for r in rounds)
            results.append({"precision": prec, "n": n, "median_ratio": med, "rounds": rounds,
                            "device": dev["device"]})
            print(f"{prec:5s} N={n:5d}  ours/do_bench median ratio {med:.4f}  "
                  f"rounds {[round(r['ratio'], 3) for r in rounds]}  "
                  f"ours {statistics.median(r['ours_s'] for r in rounds) * 1e3:.4f} ms")
    worst = max(abs(r["median_ratio"] - 1) for r in results)
    print(f"worst |median ratio - 1| = {worst:.2%} (target <= 3%)")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0 if worst <= 0.03 else 1


if __name__ == "__main__":
    sys.exit(main())
