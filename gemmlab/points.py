"""Expand a composed config into measurement points: variant x precision x shape."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from gemmlab import dtypes
from gemmlab.expr import evaluate


class ConfigError(ValueError):
    """A problem with the composed config that no point can run with; raised before any work."""


@dataclass(frozen=True)
class Point:
    variant: str
    backend: str
    precision: str
    m: int
    n: int
    k: int
    in_dtype: str
    out_dtype: str
    compute: str
    tolerance: float
    variant_cfg: Any = field(compare=False, repr=False, default=None)
    precision_cfg: Any = field(compare=False, repr=False, default=None)
    skip_reason: Optional[str] = None  # known before running (unsupported precision, constraint)
    method: Any = field(compare=False, repr=False, default=None)  # how it is timed (METHOD_FIELDS)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def bytes_min(self) -> int:
        """Each input read once and the output written once, at the storage types."""
        a = dtypes.itemsize(self.in_dtype)
        c = dtypes.itemsize(self.out_dtype)
        return a * (self.m * self.k + self.k * self.n) + c * self.m * self.n

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes_min

    def expr_env(self) -> Dict[str, Any]:
        env: Dict[str, Any] = {"m": self.m, "n": self.n, "k": self.k,
                               "elem_bytes": dtypes.itemsize(self.in_dtype),
                               "out_bytes": dtypes.itemsize(self.out_dtype)}
        cuda = self.variant_cfg.get("cuda") if self.variant_cfg is not None else None
        if cuda is not None:
            env.update({str(k): v for k, v in cuda.defines.items()})
        return env

    @property
    def intensity_model(self) -> Optional[float]:
        expr = self.variant_cfg.get("intensity_model") if self.variant_cfg is not None else None
        return None if expr is None else float(evaluate(expr, self.expr_env()))

    @property
    def key(self) -> str:
        """Stable hash of everything that defines the point (for resume and merging)."""
        payload = {
            "variant": OmegaConf.to_container(self.variant_cfg, resolve=True, enum_to_str=True)
            if self.variant_cfg is not None else self.variant,
            "precision": OmegaConf.to_container(self.precision_cfg, resolve=True, enum_to_str=True)
            if self.precision_cfg is not None else self.precision,
            "name": self.variant, "prec": self.precision, "shape": [self.m, self.n, self.k],
        }
        if self.method:  # a sweep over how points are timed keeps one row per setting
            payload["method"] = self.method
        return hashlib.sha1(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def shapes(sizes: DictConfig) -> List[Tuple[int, int, int]]:
    out: List[Tuple[int, int, int]] = []
    for n in sizes.square:
        out.append((n, n, n))
    for s in sizes.shapes:
        if len(s) != 3:
            raise ConfigError(f"sizes.shapes entries are [m, n, k]; got {list(s)}")
        out.append(tuple(s))
    for shape in out:
        for name, v in zip("mnk", shape):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"size {name}={v!r} in {list(shape)} must be a positive integer")
            if v > sizes.max_dim:
                raise ConfigError(
                    f"size {name}={v} in {list(shape)} is larger than sizes.max_dim={sizes.max_dim}; "
                    "raise sizes.max_dim if you mean it")
    if not out:
        raise ConfigError("the sizes config selects no shape (both `square` and `shapes` are empty)")
    # keep order, drop repeats
    return list(dict.fromkeys(out))


# The measure settings that change what a sample is (not how many are taken): part of the key, so
# a sweep over them (measure.timer=events,cupti) merges into one row per setting, and a rerun
# with another timing method measures again instead of resuming.
METHOD_FIELDS = ("cache", "flush_bytes", "flush_discard", "spin", "busy_us", "timer", "cuda_graph",
                 "warmup_s", "distribution", "input_scale", "seed")


def method_of(measure) -> Optional[Dict[str, Any]]:
    if measure is None:
        return None
    m = OmegaConf.to_container(measure, resolve=True, enum_to_str=True) if isinstance(measure, DictConfig) \
        else dict(measure)
    return {f: m.get(f) for f in METHOD_FIELDS if f in m}


def expand(cfg: DictConfig) -> List[Point]:
    """Every point of the run, in order: variant, then precision, then shape."""
    if not cfg.variant:
        raise ConfigError("no variant selected")
    if not cfg.precision:
        raise ConfigError("no precision selected")
    pts: List[Point] = []
    shape_list = shapes(cfg.sizes)
    method = method_of(cfg.get("measure"))
    for vname, v in cfg.variant.items():
        for pname, p in cfg.precision.items():
            out_dtype = v.out_dtype or p.out_dtype
            for m, n, k in shape_list:
                reason = None
                if pname not in v.precisions:
                    reason = f"{vname} does not support {pname} (supports {', '.join(v.precisions)})"
                pt = Point(variant=vname, backend=v.backend.value, precision=pname,
                           m=m, n=n, k=k, in_dtype=p.in_dtype, out_dtype=out_dtype,
                           compute=p.compute, tolerance=float(p.tolerance),
                           variant_cfg=v, precision_cfg=p, skip_reason=reason, method=method)
                if reason is None:
                    reason = requirement_failure(pt)
                    if reason:
                        pt = Point(**{**pt.__dict__, "skip_reason": reason})
                pts.append(pt)
    return pts


def requirement_failure(pt: Point) -> Optional[str]:
    env = pt.expr_env()
    for req in pt.variant_cfg.requires:
        if not evaluate(req.expr, env):
            return f"{req.reason} (requires {req.expr}; m={pt.m}, n={pt.n}, k={pt.k})"
    return None
