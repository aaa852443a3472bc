"""Add what a variant was to result rows written before rows carried it.

Rows now carry ``kind``, ``stage``, ``description``, ``tags`` and ``defines`` (the runner's
``variant_fields``), so analysis reads a row's meaning from the row, never from today's YAML. Rows
written before those columns get them here from the variant's YAML *as it stood at the row's
``git_commit``* (read from git history), so a later edit of a YAML cannot change what a
committed row means. No other cell is touched: each file is parsed and written back with the same
CSV dialect, and a file whose unchanged cells would not come back byte for byte is left alone.

A hand-written kernel's ``defines`` come from its ``kernel_name`` (``warp_tiled<BM=128,...,BK=8>``,
the kernel as built) where that names them: a sweep over ``variant.<v>.cuda.defines`` measured
other values than the YAML's, and the YAML at the commit knows nothing of the override. Files
migrated before this rule carry the YAML's defines for such rows; running the migration again
repairs that cell (and only that one) where it disagrees with the kernel name.

    python -m gemmlab.migrate outputs/reference          # rewrite files that lack the columns
    python -m gemmlab.migrate --check outputs/reference  # exit 1 if any file still lacks them
"""
from __future__ import annotations

import argparse
import csv
import io
import re
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


def kernel_defines(kernel_name: str) -> Optional[dict]:
    """``{"BM": 128, ...}`` from a hand-written kernel's name ``entry<BM=128,...>``; None where
    the name carries no such list."""
    m = re.search(r"<([^<>]*)>\s*$", kernel_name or "")
    if not m:
        return None
    out = {}
    for part in m.group(1).split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            return None
        value = value.strip()
        try:
            out[key.strip()] = int(value)
        except ValueError:
            try:
                out[key.strip()] = float(value)
            except ValueError:
                out[key.strip()] = value
    return out or None


def _built_defines(row: List[str], col: Dict[str, int]) -> Optional[str]:
    """The defines cell a cuda row's kernel name gives, None where it gives none."""
    if "kernel_name" not in col or row[col["backend"]] != "cuda":
        return None
    parsed = kernel_defines(row[col["kernel_name"]])
    return None if parsed is None else str(_cell(parsed))


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
    col = {c: i for i, c in enumerate(header)}
    if not missing:  # only the repair of hand-written kernels' defines (see the module's doc)
        changed = 0
        for row in body:
            built = _built_defines(row, col) if "defines" in col else None
            if built is not None and built != row[col["defines"]]:
                row[col["defines"]] = built
                changed += 1
        if changed and write:
            _write(path, table, eol, raw)
        return changed, ["defines repaired from kernel_name"] if changed else []
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=eol).writerows(table)
    if buf.getvalue() != raw:
        raise MigrationError(f"{path}: the file does not round-trip through the csv module; left alone")
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
        built = _built_defines(row, col)
        if built is not None:
            cells["defines"] = built
        new_body.append(row + [cells[f] for f in missing])
    if write:
        _write(path, [header + missing] + new_body, eol, raw)
    return len(body), sorted(notes)


def _write(path: Path, table: List[List[str]], eol: str, raw: str) -> None:
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator=eol).writerows(table)
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        f.write(out.getvalue())
    tmp.replace(path)


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
            what = "repair defines in" if notes == ["defines repaired from kernel_name"] else \
                f"add {', '.join(FIELDS)} to"
            print(f"{'would ' + what if a.check else what.replace('repair', 'repaired').replace('add ', 'added ')} "
                  f"{n} rows: {f}")
            for note in notes:
                print(f"  note: {note}")
    return 1 if a.check and pending else 0


if __name__ == "__main__":
    sys.exit(main())
