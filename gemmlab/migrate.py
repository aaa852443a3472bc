"""Add what a variant was to result rows written before rows carried it.

Rows now carry ``kind``, ``stage``, ``description``, ``tags`` and ``defines`` (the runner's
``variant_fields``), so analysis reads a row's meaning from the row, never from today's YAML. Rows
written before those columns get them here from the variant's YAML *as it stood at the row's
``git_commit``* (read from git history), so a later edit of a YAML cannot change what a
committed row means. No other cell is touched: each file is parsed and written back with the same
CSV dialect, and a file whose unchanged cells would not come back byte for byte is left alone.

    python -m gemmlab.migrate outputs/reference          # rewrite files that lack the columns
    python -m gemmlab.migrate --check outputs/reference  # exit 1 if any file still lacks them
"""
from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from omegaconf import OmegaConf

from gemmlab.paths import ROOT
from gemmlab.rows import RESULTS_FILE, _cell, results_files
from gemmlab.variants import row_fields

FIELDS = ("kind", "stage", "description", "tags", "defines")
# Rows whose git_commit is known to be wrong, and the commit they were measured at (said in the
# dataset's README): the first H200 call of 2026-12-01 carried a stale .git.
MEASURED_AT = {("h200-2026-12-01", "57ac1ee6345e+dirty"): "e668aad123afa74eaa22f6da9c5b07a6c07a2bfe"}


class MigrationError(RuntimeError):
    pass


def _git_show(commit: str, path: str) -> Optional[str]:
    r = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


_YAML_CACHE: Dict[Tuple[str, str], Optional[dict]] = {}


def variant_at(commit: str, variant: str) -> Optional[dict]:
    """The variant's YAML at ``commit`` as a plain dict (interpolations resolved where they can
    be), None when the commit has no such file."""
    key = (commit, variant)
    if key not in _YAML_CACHE:
        text = _git_show(commit, f"conf/variant/{variant}.yaml")
        node = None
        if text is not None:
            cfg = OmegaConf.create(text)
            try:
                node = OmegaConf.to_container(cfg, resolve=True)
            except Exception:  # an interpolation into the composed config: keep it as written
                node = OmegaConf.to_container(cfg, resolve=False)
        _YAML_CACHE[key] = node
    return _YAML_CACHE[key]


def backend_kind(backend: str) -> str:
    from gemmlab.backends.base import backend_class

    return backend_class(backend).kind


def fields_at(commit: str, backend: str, variant: str) -> Dict[str, str]:
    """The five cells for a row of ``variant`` measured at ``commit``, as the row writer writes them."""
    out = row_fields(variant_at(commit, variant) or {}, backend_kind(backend))
    return {k: str(_cell(x)) for k, x in out.items()}


def _commit_of(folder_names: Sequence[str], git_commit: str) -> str:
    for name in folder_names:
        fixed = MEASURED_AT.get((name, git_commit))
        if fixed:
            return fixed
    commit = git_commit.split("+")[0]
    if not commit:
        raise MigrationError("a row without git_commit: cannot tell which YAML it was measured with")
    return commit


def _dialect(raw: str) -> str:
    return "\r\n" if "\r\n" in raw.split("\n", 1)[0] + "\n" else "\n"


def migrate_file(path: Path, write: bool = True) -> Tuple[int, List[str]]:
    """Add the missing columns to one results file. Returns (rows changed, notes)."""
    with open(path, newline="") as f:
        raw = f.read()
    if not raw.strip():
        return 0, []
    eol = _dialect(raw)
    table = list(csv.reader(io.StringIO(raw, newline="")))
    header, body = table[0], table[1:]
    missing = [f for f in FIELDS if f not in header]
    if not missing:
        return 0, []
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=eol).writerows(table)
    if buf.getvalue() != raw:
        raise MigrationError(f"{path}: the file does not round-trip through the csv module; left alone")
    col = {c: i for i, c in enumerate(header)}
    for need in ("backend", "variant", "git_commit"):
        if need not in col:
            raise MigrationError(f"{path}: no {need} column")
    parts = path.resolve().parts
    notes = set()
    new_body = []
    for row in body:
        commit = _commit_of(parts, row[col["git_commit"]])
        variant = row[col["variant"]]
        if variant_at(commit, variant) is None:
            notes.add(f"{variant}: no conf/variant/{variant}.yaml at {commit[:12]} (stage, description, "
                      f"tags, defines left empty)")
        cells = fields_at(commit, row[col["backend"]], variant)
        new_body.append(row + [cells[f] for f in missing])
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator=eol).writerows([header + missing] + new_body)
    if write:
        tmp = path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as f:
            f.write(out.getvalue())
        tmp.replace(path)
    return len(body), sorted(notes)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gemmlab.migrate", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help=f"{RESULTS_FILE} files or folders holding them")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file lacks the columns")
    a = ap.parse_args(argv)
    try:
        files = results_files(a.paths)
    except FileNotFoundError as e:
        print(f"migrate: {e}", file=sys.stderr)
        return 2
    pending = 0
    for f in files:
        try:
            n, notes = migrate_file(f, write=not a.check)
        except MigrationError as e:
            print(f"migrate: {e}", file=sys.stderr)
            return 2
        if n:
            pending += 1
            print(f"{'would add' if a.check else 'added'} {', '.join(FIELDS)} to {n} rows: {f}")
            for note in notes:
                print(f"  note: {note}")
    return 1 if a.check and pending else 0


if __name__ == "__main__":
    sys.exit(main())
