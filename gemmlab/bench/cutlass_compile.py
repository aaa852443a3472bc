"""How fast the cutlass backend gets its kernels: one compile alone, N in parallel, the same N again.

Checks the issue's targets: N distinct kernels compiled side by side take less than twice one
compile, and asking for the same N again (all cache hits) takes under 10 s. The kernels are the
first CUTLASS kernels for the precisions and size (the `cutlass_search` candidates, taken from the
precisions in turn) that are not in the cache yet, so a sweep afterwards finds them in the cache.

    python -m gemmlab.bench.cutlass_compile --out results/cutlass_compile.json
    python -m gemmlab.bench.cutlass_compile --kernels 8 --precision fp16,bf16 --size 8192 --jobs 16

The cache is ``paths.cache`` (``$GEMMLAB_CACHE``, else ``~/.cache/gemmlab``) unless ``--cache``
says otherwise; compile logs go beside ``--out``. Needs nvcc and, for the host libraries, libcuda
(a GPU driver); it never touches the GPU itself.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path


def compose(precisions: str, size: int, cache: str | None):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import open_dict

    from gemmlab.config import CONF_DIR, register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name="config", return_hydra_config=True, overrides=[
            "variant=[cutlass_search]", f"precision=[{precisions}]", "sizes=smoke",
            "variant.cutlass_search.cutlass.search_limit=0"])
    with open_dict(cfg):
        cfg.paths.root = os.getcwd()
        cfg.pop("hydra")
        cfg.sizes.square = [size]
        cfg.sizes.shapes = []
        if cache:
            cfg.paths.cache = cache
    return cfg


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=8, help="kernels compiled side by side (N)")
    ap.add_argument("--precision", default="fp16,bf16",
                    help="precisions whose CUTLASS kernels to compile, comma-separated")
    ap.add_argument("--size", type=int, default=8192, help="square size the kernels are listed for")
    ap.add_argument("--jobs", type=int, default=0, help="nvcc processes at once (0 = CPU count)")
    ap.add_argument("--cache", default=None, help="cache root (default: paths.cache)")
    ap.add_argument("--out", default="cutlass_compile.json", help="JSON report")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from gemmlab.backends.cutlass import Cutlass
    from gemmlab.points import expand

    cfg = compose(args.precision, args.size, args.cache)
    backend = Cutlass(cfg)
    reason = backend.unavailable()
    if reason:
        print(f"cutlass backend unavailable: {reason}", file=sys.stderr)
        return 2
    out = Path(args.out)
    log_dir = out.parent / "cutlass_compile_logs"
    points = [p for p in expand(cfg) if not p.skip_reason]
    cache = backend._cache
    lists = [backend.kernels(p) for p in points]
    interleaved = [k for row in zip(*lists) for k in row]  # fp16 #0, bf16 #0, fp16 #1, ...
    fresh = list({k.key_hash: k for k in interleaved if not cache.has(k)}.values())
    jobs = args.jobs or os.cpu_count() or 1
    report = {"precision": args.precision, "size": args.size, "jobs": jobs, "cpu_count": os.cpu_count(),
              "cache": str(cache.db), "candidates_not_cached": len(fresh)}
    if len(fresh) < args.kernels + 1:
        report["error"] = (f"only {len(fresh)} uncached kernels left for {args.precision} at {args.size};"
                           f" need {args.kernels + 1} (use an empty --cache)")
        _write(out, report)
        print(report["error"], file=sys.stderr)
        return 1
    single, group = fresh[0], fresh[1:args.kernels + 1]

    def timed(kernels):
        t0 = time.perf_counter()
        res = cache.build(kernels, jobs, log_dir)
        return time.perf_counter() - t0, [asdict(r) for r in res.values()]

    one_s, one = timed([single])
    group_s, group_res = timed(group)
    again_s, again = timed(group)
    report.update({
        "single": {"wall_s": one_s, "kernel": one},
        "parallel": {"kernels": len(group), "wall_s": group_s, "results": group_res},
        "again": {"wall_s": again_s, "statuses": sorted({r["status"] for r in again})},
        "parallel_over_single": group_s / one_s,
        "ok_parallel_under_2x_single": group_s < 2 * one_s,
        "ok_again_under_10s": again_s < 10.0,
        "failed": [r["name"] for r in one + group_res if r["status"] == "failed"],
    })
    _write(out, report)
    print(json.dumps({k: v for k, v in report.items() if k not in ("single", "parallel", "again")}, indent=1))
    print(f"one kernel {one_s:.1f} s; {len(group)} kernels side by side {group_s:.1f} s "
          f"({group_s / one_s:.2f}x); the same {len(group)} again {again_s:.2f} s")
    return 0 if report["ok_parallel_under_2x_single"] and report["ok_again_under_10s"] and not report["failed"] else 1


def _write(path: Path, report) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
