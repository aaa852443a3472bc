"""The one reader of ``conf/variant/``: which variants exist, the sets a run can select, and what
each variant is.

- ``files()``: every variant's YAML, by name.
- ``info(name)``: its backend, stage on the chapter's ladder, description, tags and whether the
  default sweep runs it, as its YAML says today. Rows carry these at measure time (``stage``,
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


def files(folder: Path = VARIANT_DIR) -> Dict[str, Path]:
    return {p.stem: p for p in sorted(Path(folder).glob("*.yaml"))}


@functools.lru_cache(maxsize=None)
def _read(path: Path) -> VariantInfo:
    node = OmegaConf.load(path)
    stage = node.get("stage")
    return VariantInfo(name=path.stem, backend=str(node.get("backend", "")),
                       stage=None if stage is None else int(stage), description=str(node.get("description", "")),
                       tags=tuple(str(t) for t in (node.get("tags") or [])),
                       in_default_sweep=bool(node.get("in_default_sweep", True)), path=path)


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
