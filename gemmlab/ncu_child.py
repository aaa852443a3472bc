"""The process ncu profiles for ``measure.counters=ncu`` (gemmlab/measure/counters.py starts it):
rebuild one point from the run's saved config, warm up once, then launch it once inside the NVTX
range the counters are read in.

    python -m gemmlab.ncu_child --config RUN/ncu/config.yaml --point-key KEY
"""
from __future__ import annotations

import argparse
import sys

from gemmlab.measure.counters import NVTX_RANGE


def rebuild(config: str, key: str):
    """(cfg, point, backend, executor) of the point ``key`` of a run's saved config, ready to make
    its inputs and launch it once; None when the config has no such point (the reason printed)."""
    from omegaconf import OmegaConf

    from gemmlab.backends.base import backend_class
    from gemmlab.config import GemmlabConf
    from gemmlab.measure.gpu import GpuExecutor
    from gemmlab.points import expand

    # through the schema, as at run time: typed values (enums) and the same point keys
    cfg = OmegaConf.merge(OmegaConf.structured(GemmlabConf), OmegaConf.load(config))
    pts = [p for p in expand(cfg) if p.key == key]
    if not pts:
        print(f"no point with key {key} in {config}", file=sys.stderr)
        return None
    p = pts[0]
    backend = backend_class(p.backend)(cfg)
    backend.prepare([p])
    ex = GpuExecutor(cfg)
    ex._init()
    return cfg, p, backend, ex


def launch_point(config: str, key: str, then=None) -> int:
    """Rebuild point ``key`` of a saved config, make its inputs, launch its call once and wait;
    ``then(launch_fn, synchronize)`` runs after that, on the same inputs. Exit code 2: no such point."""
    built = rebuild(config, key)
    if built is None:
        return 2
    cfg, p, backend, ex = built
    with ex.stream:
        (a, b, _ar, _br, c), = ex.make_sets(p, backend, cfg.measure.seed, 1)
        launch = backend.make_launch(p, a, b, c)
        launch.fn()
        ex.stream.synchronize()
        if then is not None:
            then(launch.fn, ex.stream.synchronize)
    return 0


def main(config: str, key: str) -> int:
    """Inside ncu: rebuild the point, warm up once, then launch once inside the NVTX range."""
    import cupy

    def profiled(fn, synchronize):
        cupy.cuda.nvtx.RangePush(NVTX_RANGE)
        fn()
        synchronize()
        cupy.cuda.nvtx.RangePop()

    return launch_point(config, key, profiled)


def point_main(main, description: str) -> None:
    """The command line of a child that runs one point of a saved config (this one, gemmlab.sanitize)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--config", required=True)
    ap.add_argument("--point-key", required=True)
    a = ap.parse_args()
    sys.exit(main(a.config, a.point_key))


if __name__ == "__main__":
    point_main(main, "profile one point (used by gemmlab under ncu)")
