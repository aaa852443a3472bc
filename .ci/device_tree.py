"""Before and after a GPU call through the tool library's `device` entry: the working tree that travels, and the rows
that come back.

    python .ci/device_tree.py fit [--limit-mib 62] [--drop 'h100-*']  # before: make what travels fit
    python .ci/device_tree.py ingest FILES_AT          # after: rows and logs into outputs/reference, the tree whole
    python .ci/device_tree.py snap [--rev HEAD]        # the code of one commit, to run from (carry .snap)

`fit`: what travels is every tracked file, every untracked file git does not ignore, and the carried `.whl/`; the
limit is 64 MiB, and the reference data alone has grown past it. It deletes the oldest dated reference folders
(`outputs/reference/<device>-<date>`, the newest date always kept) from the working tree until what travels fits,
and says which; nothing on the GPU host reads them (the session's steps write rows there, read none). `--drop
PATTERN` deletes the folders it names first, whatever their date (e.g. `h100-*`, rows no H200 call needs), with the
same care: a folder holding uncommitted rows is kept, and said so.

`ingest FILES_AT`: unpacks `reference.tgz` (the session's folder of outputs/reference, as .ci/h200-session.sh packs
it after every step) at the repository's root and `logs.tgz` into that folder's `logs/`, removes the lock files the
runner leaves, makes everything readable and restores the tracked files `fit` deleted (and nothing else); a tarball
that holds anything but one new session folder, or would overwrite a committed file, is refused before anything is
unpacked (exit 1): rows that back a claim are never edited. Last, a line per results file: its rows by status and
the commits the rows name. `fit` never deletes a folder holding files git does not track (uncommitted rows).

`snap [--rev REV]`: the tree of one commit, reference data aside, in `.snap/` (git-ignored), with its full hash in
`.snap/COMMIT`, an empty `outputs/reference/` and a link `.snap/.whl -> ../.whl`. Carried (`carry: [".whl", ".snap"]`)
and run from (`cd .snap && ... export GEMMLAB_GIT_COMMIT=$(cat COMMIT)`), a GPU call measures exactly that commit's
code, whatever the working tree holds meanwhile (uncommitted edits, a helper at work), and its rows name it; `ingest`
reads the call's tarballs as before (their paths are relative to the root the session ran in). `fit` counts it.
"""
from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import List, Optional, Sequence

LIMIT_MIB = 62  # the device's 64 MiB, less a margin for what a call adds (its command's own files)
DATED = re.compile(r"^(?P<device>[a-z0-9]+)-(?P<date>\d{4}-\d{2}-\d{2})$")
REFERENCE = Path("outputs") / "reference"
SNAP = ".snap"  # snap's folder at the repository's root


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def travelling(repo: Path) -> List[Path]:
    """The files that travel: tracked and present, untracked and not ignored, and .whl/'s."""
    names = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    files = [repo / n for n in names if n and (repo / n).is_file()]
    for carried in (".whl", SNAP):
        folder = repo / carried
        if folder.is_dir():
            files += [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    return files


def snap(repo: Path, rev: str = "HEAD") -> Path:
    """``.snap/``: the tree of ``rev`` without outputs/reference (an empty folder there), ``COMMIT`` (the full hash)
    and a link ``.whl -> ../.whl``; an earlier snapshot is replaced. SystemExit unless git ignores ``.snap/``."""
    if subprocess.run(["git", "-C", str(repo), "check-ignore", "-q", f"{SNAP}/"], capture_output=True).returncode != 0:
        raise SystemExit(f"device_tree: git does not ignore {SNAP}/ (add /{SNAP}/ to .gitignore): it would travel twice")
    commit = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    dest = repo / SNAP
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "--", ".", f":!{REFERENCE.as_posix()}"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        tf.extractall(dest, filter="data")
    (dest / REFERENCE).mkdir(parents=True, exist_ok=True)
    (dest / "COMMIT").write_text(commit + "\n")
    (dest / ".whl").symlink_to(Path("..") / ".whl")
    return dest


def size_mib(files: Sequence[Path]) -> float:
    return sum(p.stat().st_size for p in files) / 2**20


def dated_folders(repo: Path) -> List[Path]:
    """outputs/reference/<device>-<date> folders, oldest date first."""
    root = repo / REFERENCE
    found = [p for p in root.iterdir() if p.is_dir() and DATED.match(p.name)] if root.is_dir() else []
    return sorted(found, key=lambda p: (DATED.match(p.name)["date"], p.name))


def _untracked(repo: Path, folder: Path) -> List[str]:
    """Files under ``folder`` git does not track (new rows not yet committed, ignored files): a checkout cannot bring
    them back."""
    return [line for line in _git(repo, "status", "--porcelain", "--ignored", "--untracked-files=all", "--",
                                  str(folder.relative_to(repo))).splitlines() if line[:2] in ("??", "!!")]


def fit(repo: Path, limit_mib: float = LIMIT_MIB, drop: Sequence[str] = ()) -> List[Path]:
    """Delete the dated reference folders named by ``drop`` (fnmatch patterns, e.g. ``h100-*``: rows no GPU call
    needs), then the oldest ones until what travels is within ``limit_mib``; the deleted ones. A folder holding files
    git does not track is never deleted (a checkout would not restore them), whatever names it. SystemExit if even
    the newest date alone leaves it over."""
    removed: List[Path] = []
    folders = dated_folders(repo)
    newest = DATED.match(folders[-1].name)["date"] if folders else None
    kept_back: List[str] = []
    for folder in [f for f in folders if any(fnmatch.fnmatch(f.name, pat) for pat in drop)]:
        if _untracked(repo, folder):
            kept_back.append(str(folder.relative_to(repo)))
            print(f"device_tree: kept {folder.relative_to(repo)}, which --drop names: it holds files git does not "
                  f"track (commit them first)", file=sys.stderr)
            continue
        shutil.rmtree(folder)
        removed.append(folder)
    for folder in [f for f in folders if f not in removed]:
        if size_mib(travelling(repo)) <= limit_mib:
            break
        if DATED.match(folder.name)["date"] == newest:
            continue
        if _untracked(repo, folder):
            if str(folder.relative_to(repo)) not in kept_back:
                kept_back.append(str(folder.relative_to(repo)))
            continue
        shutil.rmtree(folder)
        removed.append(folder)
    total = size_mib(travelling(repo))
    if total > limit_mib:
        if removed:
            _git(repo, "checkout", "--", *[str(f.relative_to(repo)) for f in removed])
        raise SystemExit(f"device_tree: {total:.1f} MiB would travel, over {limit_mib} MiB, with every older reference "
                         f"folder deleted (restored now)" + (f"; kept, holding files git does not track: "
                                                             f"{', '.join(kept_back)}" if kept_back else "")
                         + ": carry less, or ignore more")
    return removed


def _member_paths(tgz: Path) -> List[Path]:
    with tarfile.open(tgz) as tf:
        return [Path(m.name) for m in tf.getmembers() if m.isfile()]


def _session_of(tgz: Path) -> Optional[Path]:
    """outputs/reference/<dated>/<session>: the folder every file of the tarball lies in (None: the files share no
    such folder, e.g. a GEMMLAB_REF without /<session> packed the whole dated folder)."""
    files = _member_paths(tgz)
    roots = {Path(*p.parts[:4]) for p in files if len(p.parts) > 4}
    if len(roots) != 1 or any(len(p.parts) <= 4 for p in files):
        return None
    (root,) = roots
    parts = root.parts
    return root if Path(*parts[:2]) == REFERENCE and DATED.match(parts[2]) else None


def _safe_extract(tgz: Path, dest: Path, tracked: Sequence[str] = ()) -> None:
    """Every member a plain file or folder inside ``dest`` and none a tracked file, checked before anything is
    written; SystemExit naming the first that is not."""
    root = dest.resolve()
    committed = set(tracked)
    try:
        with tarfile.open(tgz) as tf:
            members = tf.getmembers()
            for m in members:
                target = (root / m.name).resolve()
                if not target.is_relative_to(root) or not (m.isfile() or m.isdir()):
                    raise SystemExit(f"device_tree: {tgz} holds {m.name!r}, which would land outside {dest} or is "
                                     f"not a plain file")
                if m.isfile() and str(target.relative_to(root)) in committed:
                    raise SystemExit(f"device_tree: {tgz} would overwrite the committed {m.name}: nothing unpacked")
            tf.extractall(root, members=members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    except tarfile.TarError as e:
        raise SystemExit(f"device_tree: {tgz}: {e}") from None


def ingest(repo: Path, files_at: Path, session: Optional[str] = None) -> Path:
    """Rows and logs of one GPU call into outputs/reference; the session's folder (relative to ``repo``)."""
    ref, logs = files_at / "reference.tgz", files_at / "logs.tgz"
    if session:
        where = Path(session)
        if Path(*where.parts[:2]) != REFERENCE or len(where.parts) != 4 or not DATED.match(where.parts[2]):
            raise SystemExit(f"device_tree: --session {session}: not outputs/reference/<device>-<date>/<session>")
    else:
        where = _session_of(ref) if ref.exists() else None
    if where is None:
        raise SystemExit(f"device_tree: {ref} holds no single outputs/reference/<device>-<date>/<session> folder (no "
                         f"step wrote rows, or GEMMLAB_REF named no session?): give --session "
                         f"outputs/reference/<device>-<date>/<session>")
    if _git(repo, "ls-files", "--", str(where)).strip():
        raise SystemExit(f"device_tree: {where} holds committed files: a call's rows go into a session folder of "
                         f"their own (GEMMLAB_REF=<device>-<date>/<session>)")
    tracked = _git(repo, "ls-files", "-z", "--", str(REFERENCE)).split("\0")
    if ref.exists():
        _safe_extract(ref, repo, tracked)
    dest = repo / where
    dest.mkdir(parents=True, exist_ok=True)
    if logs.exists():
        (dest / "logs").mkdir(parents=True, exist_ok=True)
        _safe_extract(logs, dest / "logs")
    for lock in dest.rglob(".gemmlab-*.lock"):
        lock.unlink()
    for p in [dest, *dest.rglob("*")]:
        p.chmod(p.stat().st_mode | (0o755 if p.is_dir() else 0o644))
    deleted = [f for f in _git(repo, "ls-files", "-z", "--deleted", "--", str(REFERENCE)).split("\0") if f]
    if deleted:  # what fit deleted, and only that
        _git(repo, "checkout", "--", *deleted)
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
    f.add_argument("--drop", action="append", default=[], metavar="PATTERN",
                   help="dated folders to delete first, e.g. 'h100-*' (repeatable; never one with untracked files)")
    i = sub.add_parser("ingest", help="a GPU call's reference.tgz and logs.tgz into outputs/reference")
    i.add_argument("files_at", type=Path)
    i.add_argument("--session", default=None, help="outputs/reference/<device>-<date>/<session>, where the tarball "
                                                   "has no rows to name it")
    sn = sub.add_parser("snap", help="the tree of one commit in .snap/, to carry and run from")
    sn.add_argument("--rev", default="HEAD")
    args = ap.parse_args(argv)
    repo = args.repo.resolve()
    if args.cmd == "snap":
        dest = snap(repo, args.rev)
        print(f"{dest.relative_to(repo)}/: {(dest / 'COMMIT').read_text().strip()}, "
              f"{size_mib([p for p in dest.rglob('*') if p.is_file() and not p.is_symlink()]):.1f} MiB")
        return 0
    if args.cmd == "fit":
        before = size_mib(travelling(repo))
        removed = fit(repo, args.limit_mib, args.drop)
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
