"""Expand a composed config into measurement points: variant x precision x shape."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from gemmlab import dtypes, fp8
from gemmlab.expr import evaluate, evaluate_rules, names
from gemmlab.operands import DEFAULT_LAYOUT


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
    # the workload axes (gemmlab/operands.py): how A and B are stored, how many GEMMs of this
    # shape one strided batched call computes, and the shape's name in a named shape set
    layout: str = DEFAULT_LAYOUT
    batch: int = 1
    shape_name: str = ""
    # the device's SM count as the run's device config gives it (device.sm_count): what a rule that
    # chooses a build by it reads (cuda.point_defines; None: read from the GPU when first needed)
    sm_count: Optional[int] = field(compare=False, default=None)

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def bytes_min(self) -> int:
        """Each input read once and the output written once, at the storage types (a transposed
        operand holds as many elements; a batch holds ``batch`` of each)."""
        a = dtypes.itemsize(self.in_dtype)
        c = dtypes.itemsize(self.out_dtype)
        return self.batch * (a * (self.m * self.k + self.k * self.n) + c * self.m * self.n)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes_min

    def expr_env(self) -> Dict[str, Any]:
        """The names a YAML rule sees: the point's fields, the defines and the point defines."""
        env = self._defines_env()
        env.update(self.point_defines(env))
        return env

    def _defines_env(self) -> Dict[str, Any]:
        env: Dict[str, Any] = {"m": self.m, "n": self.n, "k": self.k,
                               "elem_bytes": dtypes.itemsize(self.in_dtype),
                               "out_bytes": dtypes.itemsize(self.out_dtype),
                               # how fp8 operands are scaled (a kernel's `requires` names the scales it reads)
                               "fp8_scaling": (self.method or {}).get("fp8_scaling", "none"),
                               # how A and B are stored (gemmlab/operands.py): 'nn', 'nt', 'tn', 'tt'
                               "layout": self.layout}
        if self.sm_count is not None:  # the device config's (launch_shape's grids read the GPU's own)
            env["sm_count"] = self.sm_count
        env.update(self._cuda_tables[0])
        return env

    @functools.cached_property
    def _cuda_tables(self) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """The variant's ``cuda.defines`` and ``cuda.point_defines`` as plain dicts, read from the config once
        a point (an OmegaConf read costs ~100x a dict's, and a point's rules are evaluated many times over)."""
        cuda = self.variant_cfg.get("cuda") if self.variant_cfg is not None else None
        if cuda is None:
            return {}, {}
        return {str(k): v for k, v in cuda.defines.items()}, dict((cuda.get("point_defines") or {}).items())

    def _point_rules(self) -> Dict[str, Any]:
        return dict(self._cuda_tables[1])

    def rules_read_sm_count(self) -> bool:
        """Whether the variant's ``cuda.point_defines`` choose the build by the SM count."""
        return any("sm_count" in names(rule) for rule in self._point_rules().values())

    def point_defines(self, env: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The variant's ``cuda.point_defines`` evaluated for this point, in order, each over the
        point's fields, ``sm_count`` (the device config's, :attr:`sm_count`), the defines and the point
        defines before it (a bool as 0 or 1): defines the build passes beside the YAML's (stage 12's
        B_KMAJOR follows the layout). A rule named after a define refines it if it reads it (stage
        15's ``BN: "BN if BN > 0 else ..."``: the YAML's 0 is chosen per point, an override's value
        kept): its value replaces the define's; any other name already taken is an error."""
        rules = self._point_rules()
        if not rules:
            return {}
        env = dict(self._defines_env() if env is None else env)
        if "sm_count" not in env and self.rules_read_sm_count():
            env["sm_count"] = gpu_sm_count(self.variant)
        defines = set(self._cuda_tables[0])

        def check(name: str, rule: Any, env: Mapping[str, Any]) -> None:
            if name in env and not (name in defines and name in names(rule)):
                raise ConfigError(f"{self.variant}: cuda.point_defines.{name} would hide the name {name!r} "
                                  "(a point field or a define; a rule refines a define of its name only "
                                  "by reading it)")
        return evaluate_rules(rules, env, check)

    @property
    def intensity_model(self) -> Optional[float]:
        expr = self.variant_cfg.get("intensity_model") if self.variant_cfg is not None else None
        return None if expr is None else float(evaluate(expr, self.expr_env()))

    @property
    def key(self) -> str:
        """Stable hash of everything that defines the point (for resume and merging)."""
        variant = OmegaConf.to_container(self.variant_cfg, resolve=True, enum_to_str=True) \
            if self.variant_cfg is not None else self.variant
        if isinstance(variant, dict):
            if variant.get("layouts") is None:
                variant.pop("layouts", None)  # a field added with the layout axis: unset keeps old keys
            # what analysis reads (a stage's instruction-ceiling probe; what rows older than a define
            # ran) changes no measurement: it stays out of the key
            variant.pop("ceiling", None)
            if isinstance(variant.get("cuda"), dict):
                variant["cuda"].pop("defines_before", None)
                # launch fields added later: unset, they leave every older point's key as it was
                if not variant["cuda"].get("let"):
                    variant["cuda"].pop("let", None)
                if not variant["cuda"].get("point_defines"):
                    variant["cuda"].pop("point_defines", None)
                if variant["cuda"].get("workspace_bytes") is None:
                    variant["cuda"].pop("workspace_bytes", None)
        payload = {
            "variant": variant,
            "precision": OmegaConf.to_container(self.precision_cfg, resolve=True, enum_to_str=True)
            if self.precision_cfg is not None else self.precision,
            "name": self.variant, "prec": self.precision, "shape": [self.m, self.n, self.k],
        }
        if self.method:  # a sweep over how points are timed keeps one row per setting
            payload["method"] = self.method
        # The workload axes enter the key only away from their defaults, so every point measured
        # before they existed (nn, one GEMM, unnamed) keeps its key: resume and the reference
        # rows' matching depend on it (tests/test_workloads.py pins one such key).
        if self.layout != DEFAULT_LAYOUT:
            payload["layout"] = self.layout
        if self.batch != 1:
            payload["batch"] = self.batch
        if self.shape_name:
            payload["shape_name"] = self.shape_name
        # a build chosen by the SM count (the device config's) is another point on another count
        # (only such variants: every other key stays as it was)
        if self.rules_read_sm_count():
            payload["sm_count"] = self.sm_count
        return hashlib.sha1(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def gpu_sm_count(variant: str) -> int:
    """The GPU's SM count: for rules that read sm_count where the device config gives none, and for the
    launches (persistent grids, the count a build was chosen for); without a GPU, a clear error."""
    from gemmlab.gpu.device import info, no_device_reason

    why = no_device_reason()
    if why:
        raise ConfigError(f"{variant}: cuda.point_defines read sm_count, the device config gives none "
                          f"(device.sm_count) and there is {why}; set device.sm_count")
    return int(info()["sm_count"])


@dataclass(frozen=True)
class Shape:
    """One GEMM shape of a sizes config; ``name`` and ``batch`` only for named shape sets
    (batch None: the run's batch axis applies)."""

    m: int
    n: int
    k: int
    name: str = ""
    batch: Optional[int] = None


def named_shapes(sizes: DictConfig) -> List[Shape]:
    """The sizes config's shapes: ``square`` and ``shapes`` unnamed, then the named LLM shapes
    (gemmlab/llm_shapes.py) when the config lists models."""
    out = [Shape(m, n, k) for m, n, k in shapes(sizes, allow_empty=bool(sizes.get("models")))]
    if sizes.get("models"):
        from gemmlab import llm_shapes

        try:
            named = llm_shapes.expand(sizes)
        except ValueError as e:  # an unknown model family
            raise ConfigError(f"sizes.models: {e}") from None
        for s in named:
            for name, v in zip("mnk", (s.m, s.n, s.k)):
                if v <= 0:
                    raise ConfigError(f"size {name}={v} of {s.name} must be a positive integer")
                if v > sizes.max_dim:
                    raise ConfigError(f"size {name}={v} of {s.name} is larger than sizes.max_dim={sizes.max_dim}")
            out.append(Shape(s.m, s.n, s.k, s.name, s.batch))
    if not out:
        raise ConfigError("the sizes config selects no shape (`square`, `shapes` and `models` are empty)")
    return list(dict.fromkeys(out))


def shapes(sizes: DictConfig, allow_empty: bool = False) -> List[Tuple[int, int, int]]:
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
    if not out and not allow_empty:
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
    out = {f: m.get(f) for f in METHOD_FIELDS if f in m}
    if "fp8_scaling" in m:  # read by point_method, for fp8 points only
        out["_fp8_scaling"] = m["fp8_scaling"]
    return out


def point_method(method: Optional[Dict[str, Any]], compute: str) -> Optional[Dict[str, Any]]:
    """The method of one point: fp8 points add ``measure.fp8_scaling`` away from ``none`` (so every
    key from before the setting holds, and a scaled rerun measures again instead of resuming)."""
    if method is None:
        return None
    scaling = method.get("_fp8_scaling", "none")
    base = {k: v for k, v in method.items() if k != "_fp8_scaling"}
    return base if compute != "fp8" or scaling == "none" else {**base, "fp8_scaling": scaling}


def expand(cfg: DictConfig) -> List[Point]:
    """Every point of the run, in order: variant, then precision, then shape."""
    if not cfg.variant:
        raise ConfigError("no variant selected")
    if not cfg.precision:
        raise ConfigError("no precision selected")
    pts: List[Point] = []
    shape_list = named_shapes(cfg.sizes)
    method = method_of(cfg.get("measure"))
    layouts = list(cfg.get("layouts") or [DEFAULT_LAYOUT])
    batches = [int(b) for b in (cfg.get("batch") or [1])]
    device = cfg.get("device")
    sm_count = device.get("sm_count") if device is not None else None
    for vname, v in cfg.variant.items():
        for pname, p in cfg.precision.items():
            out_dtype = v.out_dtype or p.out_dtype
            for layout in layouts:
                for batch in batches:
                    for s in shape_list:
                        reason = None
                        if pname not in v.precisions:
                            reason = f"{vname} does not support {pname} (supports {', '.join(v.precisions)})"
                            if p.compute == "fp8" and v.backend.value == "cutlass":
                                reason += f": {fp8.CUTLASS_REASON}"
                        pt = Point(variant=vname, backend=v.backend.value, precision=pname,
                                   m=s.m, n=s.n, k=s.k, in_dtype=p.in_dtype, out_dtype=out_dtype,
                                   compute=p.compute, tolerance=float(p.tolerance),
                                   variant_cfg=v, precision_cfg=p, skip_reason=reason,
                                   method=point_method(method, p.compute),
                                   layout=layout, batch=s.batch or batch, shape_name=s.name,
                                   sm_count=None if sm_count is None else int(sm_count))
                        if reason is None:
                            reason = requirement_failure(pt)
                            if reason:
                                pt = replace(pt, skip_reason=reason)
                        pts.append(pt)
    # a shape with its own batch (an MoE layer's experts) is one point whatever the batch axis
    return list(dict.fromkeys(pts))


def requirement_failure(pt: Point) -> Optional[str]:
    env = pt.expr_env()
    for req in pt.variant_cfg.requires:
        if not evaluate(req.expr, env):
            return f"{req.reason} (requires {req.expr}; m={pt.m}, n={pt.n}, k={pt.k})"
    return None
