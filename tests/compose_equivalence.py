"""Does tests/conftest.py's shortcut through Hydra compose the configs Hydra composes? Replays override
lists (one JSON list a line, as GEMMLAB_LOG_COMPOSE=FILE makes the suite write them) and writes, for each,
every node of the composed config: its path, type, object type, flags and value, or the error.

    GEMMLAB_LOG_COMPOSE=/tmp/composed.jsonl python -m pytest -n auto     # the suite's override lists
    python tests/compose_equivalence.py /tmp/composed.jsonl > with.txt
    GEMMLAB_COMPOSE_AS_HYDRA=1 python tests/compose_equivalence.py /tmp/composed.jsonl > hydra.txt
    cmp with.txt hydra.txt

Not a test file (pytest collects test_*.py): a tool to rerun when the shortcut or Hydra changes.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conftest  # noqa: E402  (applies the shortcut unless GEMMLAB_COMPOSE_AS_HYDRA is set)
from omegaconf import DictConfig, ListConfig  # noqa: E402

FLAGS = ("struct", "readonly", "allow_objects", "convert")


def nodes(node, path="", out=None):
    """Every node below ``node``: path, class, object type, the flags set on it, and leaves' values."""
    out = [] if out is None else out
    meta = node._metadata
    flags = {f: meta.flags.get(f) for f in FLAGS if meta.flags.get(f) is not None}
    kind = type(node).__name__
    if isinstance(node, DictConfig):
        obj = getattr(meta.object_type, "__qualname__", repr(meta.object_type))
        out.append(f"{path} {kind} {obj} {flags} {meta.ref_type}")
        if node._is_missing() or node._is_none() or node._is_interpolation():
            out.append(f"{path} = {node._value()!r}")
            return out
        for key in node.keys():
            nodes(node._get_node(key), f"{path}.{key}", out)
    elif isinstance(node, ListConfig):
        out.append(f"{path} {kind} {flags} {meta.ref_type}")
        if node._is_missing() or node._is_none() or node._is_interpolation():
            out.append(f"{path} = {node._value()!r}")
            return out
        for i in range(len(node)):
            nodes(node._get_node(i), f"{path}[{i}]", out)
    else:
        out.append(f"{path} {kind} {flags} {meta.ref_type} = {node._value()!r}")
    return out


def main(path: str) -> None:
    from gemmlab import config

    seen = set()
    for line in Path(path).read_text().splitlines():
        overrides = tuple(json.loads(line))
        if overrides in seen:
            continue
        seen.add(overrides)
        print("#", json.dumps(list(overrides)))
        try:
            cfg = config.compose(list(overrides))
        except Exception as e:  # the same error, word for word
            print("error", type(e).__name__, str(e))
            continue
        print("\n".join(nodes(cfg)))


if __name__ == "__main__":
    main(sys.argv[1])
