"""Compile every kernel a run would need, ahead of it, into the shared cache; time nothing.

    python -m gemmlab.bench.precompile variant=default precision=[fp16,bf16] sizes=odd
    python -m gemmlab.bench.precompile --jobs 8 +experiment=cublas_square

Takes the same overrides as ``python run.py`` and calls ``prepare`` of every backend that compiles
(the hand-written kernels' nvcc builds, the CUTLASS kernels) with the points the run would measure,
so a later run of those overrides finds every build in ``paths.cache`` and starts timing at once.
It opens no CUDA context, so it can compile on a GPU host while another run measures there (give
it fewer jobs than cores, ``--jobs``, so the measuring run keeps a core for its own host work).
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Optional, Sequence

COMPILING_BACKENDS = ("cuda", "cutlass")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gemmlab.bench.precompile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=0, help="CUTLASS compile processes at once (0: one per core)")
    ap.add_argument("--out", default="/tmp/gemmlab-precompile", help="where compile logs go")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, as for run.py")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from omegaconf import open_dict

    from gemmlab.backends.base import backend_class
    from gemmlab.config import compose
    from gemmlab.points import expand

    cfg = compose(args.overrides)
    if args.jobs:
        with open_dict(cfg):
            for v in cfg.variant.values():
                if v.get("cutlass") is not None:
                    v.cutlass.compile_jobs = args.jobs
    points = [p for p in expand(cfg) if not p.skip_reason and p.backend in COMPILING_BACKENDS]
    t0 = time.perf_counter()
    for name in COMPILING_BACKENDS:
        pts = [p for p in points if p.backend == name]
        if not pts:
            continue
        backend = backend_class(name)(cfg)
        if hasattr(backend, "out_dir"):
            backend.out_dir = args.out
        reason = backend.unavailable()
        if reason:
            print(f"{name}: not compiled: {reason}")
            continue
        backend.prepare(pts)
        print(f"{name}: {len(pts)} points prepared, {time.perf_counter() - t0:.0f} s so far", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
