"""The one reader of ``conf/variant/``: which variants exist, the sets a run can select, and what
each variant is.

- ``files()``: every variant's YAML, by name.
- ``info(name)``: its backend (and the backend's kind), stage on the chapter's ladder,
  description, tags, precisions and whether the default sweep runs it, as its YAML says today. Rows carry these at measure time (``stage``,
  ``description``, ``tags``, ``kind``, ``defines``), so analysis reads the rows, never this folder.
- ``sets()``: the computed options of the ``variant`` config group: ``default`` (every variant with
  ``in_default_sweep: true``), ``all``, and one ``tag_<tag>`` per tag
  (``python run.py variant=tag_tensor_core``; experiments select their variants this way, so a new
  stage with the tag joins them with no other edit).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from omegaconf import OmegaConf

from gemmlab.paths import VARIANT_DIR

TAG_PREFIX = "tag_"  # the variant group's option that selects every variant with a tag


@dataclass(frozen=True)
class VariantInfo:
    name: str
    backend: str
    stage: Optional[int]
    description: str
    tags: Tuple[str, ...]
    in_default_sweep: bool
    path: Path
    precisions: Tuple[str, ...] = ()
    probe: Optional[str] = None  # probe.kind of a probe variant (not a GEMM), else None
    defines_items: Tuple[Tuple[str, str], ...] = ()  # cuda.defines of a hand-written kernel
    defines_before_items: Tuple[Tuple[str, str], ...] = ()  # cuda.defines_before: rows older than a define
    ceiling: Optional[str] = None  # the probe variant that measures this stage's instruction rate
    # defines a cuda.point_defines rule of the same name chooses per point (stage 15's BN 0: by waves)
    per_point: Tuple[str, ...] = ()
    point_rules_items: Tuple[Tuple[str, str], ...] = ()  # cuda.point_defines, in order: (name, expression)

    @property
    def point_rules(self) -> Dict[str, str]:
        return dict(self.point_rules_items)

    @property
    def defines_before(self) -> Dict[str, str]:
        return dict(self.defines_before_items)

    @property
    def defines(self) -> Dict[str, str]:
        return dict(self.defines_items)

    @property
    def kind(self) -> str:
        return backend_kind(self.backend)


def files(folder: Path = VARIANT_DIR) -> Dict[str, Path]:
    return {p.stem: p for p in sorted(Path(folder).glob("*.yaml"))}


@functools.lru_cache(maxsize=None)
def _read(path: Path) -> VariantInfo:
    node = OmegaConf.load(path)
    stage = node.get("stage")
    return VariantInfo(name=path.stem, backend=str(node.get("backend", "")),
                       stage=None if stage is None else int(stage), description=str(node.get("description", "")),
                       tags=tuple(str(t) for t in (node.get("tags") or [])),
                       in_default_sweep=bool(node.get("in_default_sweep", True)), path=path,
                       precisions=tuple(str(p) for p in (node.get("precisions") or [])),
                       probe=None if node.get("probe") is None else str(node.probe.get("kind")),
                       defines_items=tuple((str(k), str(v)) for k, v in
                                           ((node.get("cuda") or {}).get("defines") or {}).items()),
                       defines_before_items=tuple((str(k), str(v)) for k, v in
                                                  ((node.get("cuda") or {}).get("defines_before") or {}).items()),
                       ceiling=None if node.get("ceiling") is None else str(node.get("ceiling")),
                       per_point=tuple(str(k) for k in ((node.get("cuda") or {}).get("point_defines") or {})
                                       if str(k) in ((node.get("cuda") or {}).get("defines") or {})),
                       point_rules_items=tuple((str(k), str(v)) for k, v in
                                               ((node.get("cuda") or {}).get("point_defines") or {}).items()))


@functools.lru_cache(maxsize=None)
def backend_kind(backend: str) -> str:
    """cpu or gpu: which executor runs ``backend`` (its class says; unknown names count as GPU
    unless they start with "cpu")."""
    from gemmlab.backends.base import backend_class  # lazy: the backends import their toolkits

    try:
        return backend_class(backend).kind
    except Exception:  # a backend this checkout does not know (rows from a newer harness)
        return "cpu" if backend.startswith("cpu") else "gpu"


def info(name: str, folder: Path = VARIANT_DIR) -> VariantInfo:
    path = files(folder).get(name)
    if path is None:
        raise KeyError(f"unknown variant {name!r}; known: {sorted(files(folder))}")
    return _read(path)


def all_info(folder: Path = VARIANT_DIR) -> List[VariantInfo]:
    return [_read(p) for p in files(folder).values()]


def tagged(tag: str, folder: Path = VARIANT_DIR) -> List[str]:
    """Every variant with ``tag``, ladder stages first in stage order, then by name."""
    return sets(folder).get(TAG_PREFIX + tag, [])


def sets(folder: Path = VARIANT_DIR) -> Dict[str, List[str]]:
    """The computed options of the variant group: default, all, and tag_<tag> per tag."""
    every = all_info(folder)
    out = {"default": [v.name for v in every if v.in_default_sweep], "all": [v.name for v in every]}
    ladder_order = sorted(every, key=lambda v: (v.stage is None, v.stage or 0, v.name))
    for tag in sorted({t for v in every for t in v.tags}):
        out[TAG_PREFIX + tag] = [v.name for v in ladder_order if tag in v.tags]
    return out


# a CUTLASS variant's kernel parameters, as its rows' `defines` record them
CUTLASS_PARAMS = ("opclass", "kernel_cc", "tile", "cluster", "stages", "kernel_schedule", "epilogue_schedule", "tile_scheduler",
                  "swizzle", "raster_order", "layout_a", "layout_b", "search")


def row_fields(variant: dict, kind: str) -> Dict[str, object]:
    """What a variant is, as its rows record it at measure time: the backend's ``kind``, the YAML's
    ``stage``, ``description`` and ``tags``, and ``defines`` (the cuda defines, or CUTLASS's tile,
    cluster and schedules). ``variant`` is the variant's YAML as a plain dict, resolved."""
    defines: dict = {}
    if isinstance(variant.get("cuda"), dict):
        defines = dict(variant["cuda"].get("defines") or {})
    elif isinstance(variant.get("cutlass"), dict):
        c = variant["cutlass"]
        defines = {k: c[k] for k in CUTLASS_PARAMS if c.get(k) not in (None, [], "auto")}
    return {"kind": kind, "stage": variant.get("stage"), "description": variant.get("description"),
            "tags": list(variant.get("tags") or []), "defines": defines or None}

