"""Before and after a GPU call through the tool library's `device` entry: the working tree that travels, and the rows
that come back.

    python .ci/device_tree.py fit [--limit-mib 62]     # before: make what travels fit
    python .ci/device_tree.py ingest FILES_AT          # after: rows and logs into outputs/reference, the tree whole

`fit`: what travels is every tracked file, every untracked file git does not ignore, and the carried `.whl/`; the
limit is 64 MiB, and the reference data alone has grown past it. It deletes the oldest dated reference folders
(`outputs/reference/<device>-<date>`, the newest date always kept) from the working tree until what travels fits,
and says which; nothing on the GPU host reads them (the session's steps write rows there, read none).

`ingest FILES_AT`: unpacks `reference.tgz` (the session's folder of outputs/reference, as .ci/h200-session.sh packs
it after every step) at the repository's root and `logs.tgz` into that folder's `logs/`, removes the lock files the
runner leaves, makes everything readable and restores what `fit` deleted (`git checkout -- outputs/reference`); a
tarball that would overwrite a committed reference file is refused (exit 1, the file put back): rows that back a
claim are never edited. Last, a line per results file: its rows by status and the commits the rows name.
"""
from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import List, Optional, Sequence

LIMIT_MIB = 62  # the device's 64 MiB, less a margin for what a call adds (its command's own files)
DATED = re.compile(r"^(?P<device>[a-z0-9]+)-(?P<date>\d{4}-\d{2}-\d{2})$")
REFERENCE = Path("outputs") / "reference"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def travelling(repo: Path) -> List[Path]:
    """The files that travel: tracked and present, untracked and not ignored, and .whl/'s."""
    names = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    files = [repo / n for n in names if n and (repo / n).is_file()]
    whl = repo / ".whl"
    if whl.is_dir():
        files += [p for p in whl.rglob("*") if p.is_file()]
    return files


def size_mib(files: Sequence[Path]) -> float:
    return sum(p.stat().st_size for p in files) / 2**20


def dated_folders(repo: Path) -> List[Path]:
    """outputs/reference/<device>-<date> folders, oldest date first."""
    root = repo / REFERENCE
    found = [p for p in root.iterdir() if p.is_dir() and DATED.match(p.name)] if root.is_dir() else []
    return sorted(found, key=lambda p: (DATED.match(p.name)["date"], p.name))


def fit(repo: Path, limit_mib: float = LIMIT_MIB) -> List[Path]:
    """Delete the oldest dated reference folders until what travels is within ``limit_mib``; the deleted ones.
    SystemExit if even the newest date alone leaves it over."""
    import shutil

    removed: List[Path] = []
    total = size_mib(travelling(repo))
    folders = dated_folders(repo)
    newest = DATED.match(folders[-1].name)["date"] if folders else None
    for folder in folders:
        if total <= limit_mib:
            break
        if DATED.match(folder.name)["date"] == newest:
            continue
        freed = size_mib([p for p in folder.rglob("*") if p.is_file()])
        shutil.rmtree(folder)
        removed.append(folder)
        total -= freed
    if total > limit_mib:
        raise SystemExit(f"device_tree: {total:.1f} MiB would travel, over {limit_mib} MiB, with every older reference "
                         f"folder deleted: carry less, or ignore more")
    return removed


def _members_root(tgz: Path) -> Optional[Path]:
    """outputs/reference/<dated>/<session> of the tarball's first member (None: no such member)."""
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            parts = Path(m.name).parts
            if len(parts) >= 4 and Path(*parts[:2]) == REFERENCE and DATED.match(parts[2]):
                return Path(*parts[:4])
    return None


def _safe_extract(tgz: Path, dest: Path) -> None:
    with tarfile.open(tgz) as tf:
        for m in tf.getmembers():
            target = (dest / m.name).resolve()
            if not str(target).startswith(str(dest.resolve())) or m.issym() or m.islnk():
                raise SystemExit(f"device_tree: {tgz} holds {m.name!r}, which would land outside {dest} or is a link")
        tf.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))


def ingest(repo: Path, files_at: Path, session: Optional[str] = None) -> Path:
    """Rows and logs of one GPU call into outputs/reference; the session's folder (relative to ``repo``)."""
    ref, logs = files_at / "reference.tgz", files_at / "logs.tgz"
    where = Path(session) if session else (_members_root(ref) if ref.exists() else None)
    if where is None:
        raise SystemExit(f"device_tree: {ref} names no outputs/reference/<device>-<date>/<session> folder (no step "
                         f"wrote rows?): give --session outputs/reference/<device>-<date>/<session> for the logs")
    if ref.exists():
        _safe_extract(ref, repo)
        overwritten = _git(repo, "diff", "--name-only", "--diff-filter=M", "--", str(REFERENCE)).split()
        if overwritten:  # committed rows are never edited: put them back, and say so
            _git(repo, "checkout", "--", *overwritten)
            raise SystemExit(f"device_tree: {ref} would overwrite committed reference files (restored): "
                             f"{', '.join(overwritten[:5])}")
    dest = repo / where
    if logs.exists():
        (dest / "logs").mkdir(parents=True, exist_ok=True)
        _safe_extract(logs, dest / "logs")
    for lock in dest.rglob(".gemmlab-*.lock"):
        lock.unlink()
    for p in [dest, *dest.rglob("*")]:
        p.chmod(p.stat().st_mode | (0o755 if p.is_dir() else 0o644))
    _git(repo, "checkout", "--", str(REFERENCE))  # what fit deleted
    return where


def summary(repo: Path, where: Path) -> List[str]:
    """A line per results.csv under the session's folder: rows by status, and the commits they name."""
    out = []
    for path in sorted((repo / where).rglob("results.csv")):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        status = Counter(r.get("status", "") for r in rows)
        commits = sorted({(r.get("git_commit") or "")[:7] for r in rows} - {""})
        counts = ", ".join(f"{k} {v}" for k, v in status.most_common())
        out.append(f"{path.relative_to(repo)}: {len(rows)} rows ({counts})"
                   f"; commit {', '.join(commits) or 'not named'}")
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python .ci/device_tree.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="delete the oldest reference folders until what travels fits")
    f.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    i = sub.add_parser("ingest", help="a GPU call's reference.tgz and logs.tgz into outputs/reference")
    i.add_argument("files_at", type=Path)
    i.add_argument("--session", default=None, help="outputs/reference/<device>-<date>/<session>, where the tarball "
                                                   "has no rows to name it")
    args = ap.parse_args(argv)
    repo = args.repo.resolve()
    if args.cmd == "fit":
        before = size_mib(travelling(repo))
        removed = fit(repo, args.limit_mib)
        for p in removed:
            print(f"deleted {p.relative_to(repo)} (git checkout -- {REFERENCE} restores it; ingest does)")
        print(f"travels: {size_mib(travelling(repo)):.1f} MiB (was {before:.1f}; limit {args.limit_mib:g})")
        return 0
    where = ingest(repo, args.files_at.resolve(), args.session)
    print(f"ingested into {where}; the reference folders restored, no tracked reference file changed")
    for line in summary(repo, where):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
