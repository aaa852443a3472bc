"""What a folder of results says about how it was made: the run folders under it (a run, a
sweep's jobs, a dataset's runs), each one's Hydra overrides, and the configuration the run saved
(``.hydra/config.yaml``, or a sweep's ``multirun.yaml``), shown as written.

The configuration is shown, never read for a row's meaning: what a row measured is the row's
(analysis reads rows only); this is the record of what was asked for.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from gemmlab import rows as result_rows

HYDRA = ".hydra"
SWEEP_CONFIG = "multirun.yaml"


@dataclass
class RunFolder:
    """One folder holding a results file: where it is (relative to what was given), its
    overrides as the command line gave them, and the run ids of its rows."""

    rel: str  # "." for the folder given
    overrides: Optional[List[str]]  # None: the folder kept no .hydra/overrides.yaml
    run_ids: List[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return "run-" + "".join(c if c.isalnum() else "-" for c in self.rel)


def _read_yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None


def run_folders(given: os.PathLike) -> List[RunFolder]:
    """Every folder under ``given`` that holds a results file, shallowest first; a run id seen in
    several (a sweep's merged copy of its jobs' rows) belongs to the deepest."""
    given = Path(given)
    base = given if given.is_dir() else given.parent
    owner: Dict[str, Path] = {}
    folders = {}
    for f in result_rows.results_files(given):  # deepest first
        folder = f.parent
        ids = result_rows.read_file(f)["run_id"].dropna().astype(str)
        for rid in dict.fromkeys(ids):
            owner.setdefault(rid, folder)
        folders.setdefault(folder, None)
    out = []
    for folder in sorted(folders, key=lambda p: (len(p.relative_to(base.resolve()).parts), str(p))):
        rel = folder.relative_to(base.resolve()).as_posix() or "."
        ov = _read_yaml(folder / HYDRA / "overrides.yaml")
        out.append(RunFolder(rel, [str(o) for o in ov] if isinstance(ov, list) else None,
                             sorted(r for r, f in owner.items() if f == folder)))
    return out


def folder_of_run(folders: List[RunFolder]) -> Dict[str, str]:
    """run_id -> the relative folder its rows were written in."""
    return {rid: f.rel for f in folders for rid in f.run_ids}


def saved_config(given: os.PathLike) -> Optional[Dict[str, object]]:
    """The configuration the run or sweep at ``given`` saved, by top-level section (Hydra's own
    section left out): a run's ``.hydra/config.yaml``, else a sweep's ``multirun.yaml``; None for
    a folder of several runs (each keeps its own)."""
    given = Path(given)
    base = given if given.is_dir() else given.parent
    for path in (base / HYDRA / "config.yaml", base / SWEEP_CONFIG):
        cfg = _read_yaml(path)
        if isinstance(cfg, dict):
            return {k: v for k, v in cfg.items() if k != "hydra"}
    return None


def section_yaml(value) -> str:
    """One section of the configuration as YAML text."""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=100).rstrip()


def section_summary(name: str, value) -> str:
    """A one-line gist of a section, for its heading (the full text is below it)."""
    if isinstance(value, dict):
        if name in ("variant", "precision"):
            return ", ".join(map(str, value)) or "none"
        flat = [f"{k}={v}" for k, v in value.items() if not isinstance(v, (dict, list)) and v not in (None, "")]
        text = ", ".join(flat)
        return text if len(text) <= 160 else text[:157] + "..."
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)
