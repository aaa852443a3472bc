"""A targets file: what each target selects, the number it reads and the bar it must clear.

    title: Issue 32: the top rung past the library
    targets:
      - id: bf16_4096_6144                  # unique in the file: [a-z0-9_]+
        what: BF16 >= 1.05x the library timed interleaved, at 4096 and 6144, layout nt
        variants: [wgmma_ws]                # or variant: wgmma_ws
        precision: bf16                     # or a list
        layout: nt                          # optional: any layout
        shapes: [[4096, 4096, 4096], [6144, 6144, 6144]]   # optional: each must be measured
        metric: pct_of_baseline             # see METRICS
        at_least: 105                       # optional: without it the target is only stated
        need: all                           # all (default) | geomean | a count of points

Other selectors, each optional: ``models``, ``projections`` (the parts of an LLM shape name
``<model>.<projection>.t<T>``), ``tokens``, ``tokens_min``, ``tokens_max`` (its T, else m),
``fp8_scaling`` (tensor, rowcol, block) and ``defines`` (a hand-written variant's YAML defines
with these changed: a candidate's configuration; without it, the configuration its YAML has now).

``device`` (at the top of the file, for every target, or in one target): the GPU the bar is for, a
part of the rows' device name (``H200``); only that GPU's rows are judged, and where it has none the
target is not measured, whatever other GPUs measured (they are named). Without it: the GPU with the
most measured rows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import yaml

PCT_OF_BASELINE, PCT_OF_LIBRARY, PCT_OF_ROOF, OK = "pct_of_baseline", "pct_of_library", "pct_of_roof", "ok"
METRICS = {
    PCT_OF_BASELINE: "% of the library timed interleaved with the point (its row's baseline: same clock state)",
    PCT_OF_LIBRARY: "% of the fastest cuBLAS/cuBLASLt row measured as a point of its own in the same run "
                    "(same FP8 scaling)",
    PCT_OF_ROOF: "bandwidth (every operand moved once over the median time) as % of the copy probe of the "
                 "same run",
    OK: "a row whose status is ok (checked against the FP64 reference); the number is its relative error",
}
ALL, GEOMEAN = "all", "geomean"
SELECTORS = ("variants", "precision", "layout", "shapes", "models", "projections", "tokens", "tokens_min",
             "tokens_max", "fp8_scaling", "defines", "device")
KEYS = ("id", "what", "variant", "metric", "at_least", "need") + SELECTORS
_ID = re.compile(r"[a-z0-9_]+")


class TargetsError(ValueError):
    """A targets file that cannot be read: the message names the file, the target and the key."""


@dataclass(frozen=True)
class Target:
    id: str
    what: str
    variants: Tuple[str, ...]
    metric: str
    at_least: Optional[float] = None
    need: Union[str, int] = ALL
    precision: Tuple[str, ...] = ()
    layout: Tuple[str, ...] = ()
    shapes: Tuple[Tuple[int, int, int], ...] = ()
    models: Tuple[str, ...] = ()
    projections: Tuple[str, ...] = ()
    tokens: Tuple[int, ...] = ()
    tokens_min: Optional[int] = None
    tokens_max: Optional[int] = None
    fp8_scaling: Tuple[str, ...] = ()
    defines: Dict[str, object] = field(default_factory=dict)
    device: str = ""  # a part of the GPU's name whose rows are judged ("": the GPU with the most measured rows)

    @property
    def stated(self) -> bool:
        """No bar: the target's numbers are reported, never judged."""
        return self.at_least is None and self.metric != OK

    def bar_text(self) -> str:
        if self.metric == OK:
            return "ok rows" if self.need == ALL else f"ok rows at >= {self.need} points"
        if self.stated:
            return "stated"
        of = {ALL: "every point", GEOMEAN: "the geomean"}.get(self.need, f">= {self.need} points")
        return f"{of} >= {self.at_least:g}"


@dataclass(frozen=True)
class TargetsFile:
    path: Path
    title: str
    targets: Tuple[Target, ...]
    device: str = ""  # the file's device, which its targets take unless they name their own


def _device(v, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise TargetsError(f"{where}: device must be a part of a GPU's name (H200), not {v!r}")
    return v.strip()


def _strings(v, where: str, key: str) -> Tuple[str, ...]:
    items = v if isinstance(v, list) else [v]
    if not items or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in items):
        raise TargetsError(f"{where}: {key} must be a name or a list of names, not {v!r}")
    return tuple(str(x) for x in items)


def _ints(v, where: str, key: str) -> Tuple[int, ...]:
    items = v if isinstance(v, list) else [v]
    if not items or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in items):
        raise TargetsError(f"{where}: {key} must be a positive integer or a list of them, not {v!r}")
    return tuple(items)


def _shapes(v, where: str) -> Tuple[Tuple[int, int, int], ...]:
    if not isinstance(v, list) or not v:
        raise TargetsError(f"{where}: shapes must be a list of [m, n, k], not {v!r}")
    out = []
    for s in v:
        if not (isinstance(s, list) and len(s) == 3 and all(isinstance(x, int) and x > 0 for x in s)):
            raise TargetsError(f"{where}: each shape must be [m, n, k] of positive integers, not {s!r}")
        out.append(tuple(s))
    return tuple(out)


def target(node, where: str) -> Target:
    """One target from its YAML mapping (``where``: the file and the entry, for the errors)."""
    if not isinstance(node, dict):
        raise TargetsError(f"{where}: a target is a mapping of {', '.join(KEYS)}, not {node!r}")
    unknown = sorted(set(node) - set(KEYS))
    if unknown:
        raise TargetsError(f"{where}: unknown key(s) {', '.join(map(str, unknown))} (known: {', '.join(KEYS)})")
    tid = node.get("id")
    if not isinstance(tid, str) or not _ID.fullmatch(tid):
        raise TargetsError(f"{where}: id must match [a-z0-9_]+, not {tid!r}")
    where = f"{where} ({tid})"
    if not isinstance(node.get("what"), str) or not node["what"].strip():
        raise TargetsError(f"{where}: what (one line saying what must hold) is required")
    if ("variant" in node) == ("variants" in node):
        raise TargetsError(f"{where}: give variant or variants (one of them)")
    variants = _strings(node.get("variants", node.get("variant")), where, "variants")
    metric = node.get("metric")
    if metric not in METRICS:
        raise TargetsError(f"{where}: metric must be one of {', '.join(METRICS)}, not {metric!r}")
    at_least = node.get("at_least")
    if at_least is not None and (isinstance(at_least, bool) or not isinstance(at_least, (int, float))):
        raise TargetsError(f"{where}: at_least must be a number, not {at_least!r}")
    if metric == OK and at_least is not None:
        raise TargetsError(f"{where}: metric ok takes no at_least (a point holds when its row is ok)")
    need = node.get("need", ALL)
    if not (need in (ALL, GEOMEAN) or (isinstance(need, int) and not isinstance(need, bool) and need > 0)):
        raise TargetsError(f"{where}: need must be all, geomean or a count of points, not {need!r}")
    if need == GEOMEAN and metric == OK:
        raise TargetsError(f"{where}: need geomean has no meaning for metric ok")
    defines = node.get("defines") or {}
    if not isinstance(defines, dict):
        raise TargetsError(f"{where}: defines must be a mapping of define to value, not {defines!r}")
    kw = {}
    for key in ("precision", "layout", "models", "projections", "fp8_scaling"):
        if key in node:
            kw[key] = _strings(node[key], where, key)
    if "tokens" in node:
        kw["tokens"] = _ints(node["tokens"], where, "tokens")
    for key in ("tokens_min", "tokens_max"):
        if key in node:
            kw[key] = _ints(node[key], where, key)[0]
    if "shapes" in node:
        kw["shapes"] = _shapes(node["shapes"], where)
    if "device" in node:
        kw["device"] = _device(node["device"], where)
    return Target(id=tid, what=node["what"].strip(), variants=variants, metric=metric,
                  at_least=None if at_least is None else float(at_least), need=need, defines=dict(defines), **kw)


def load(path) -> TargetsFile:
    """The targets of one YAML file; :class:`TargetsError` says what is wrong and where."""
    path = Path(path)
    try:
        node = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise TargetsError(f"{path}: no such targets file") from None
    except yaml.YAMLError as e:
        raise TargetsError(f"{path}: not YAML: {e}") from None
    if not isinstance(node, dict) or not isinstance(node.get("targets"), list) or not node["targets"]:
        raise TargetsError(f"{path}: a targets file is a mapping with title and a non-empty list targets")
    unknown = sorted(set(node) - {"title", "device", "targets"})
    if unknown:
        raise TargetsError(f"{path}: unknown key(s) {', '.join(map(str, unknown))} (known: title, device, targets)")
    device = _device(node["device"], str(path)) if "device" in node else ""
    targets: List[Target] = [target(t, f"{path}: targets[{i}]") for i, t in enumerate(node["targets"])]
    targets = [t if t.device or not device else replace(t, device=device) for t in targets]
    ids = [t.id for t in targets]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise TargetsError(f"{path}: target id(s) given twice: {', '.join(dup)}")
    return TargetsFile(path, str(node.get("title") or path.stem), tuple(targets), device)
