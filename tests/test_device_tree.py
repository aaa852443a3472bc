""".ci/device_tree.py on a small repository of its own: `fit` deletes the oldest dated reference folders until what
travels (tracked, untracked-not-ignored, .whl/) is within the limit, never the newest date's; `ingest` unpacks a GPU
call's reference.tgz and logs.tgz into the session's folder, restores what `fit` deleted, and refuses a tarball that
would change a committed row or land outside the repository."""
from __future__ import annotations

import importlib.util
import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("device_tree", ROOT / ".ci" / "device_tree.py")
device_tree = importlib.util.module_from_spec(spec)
spec.loader.exec_module(device_tree)

MIB = 2**20


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    """Three dated reference folders of 3, 2 and 1 MiB, a README, a 1 MiB .whl/ (ignored, carried), committed."""
    r = tmp_path / "repo"
    for name, mib in (("h200-2026-12-01", 3), ("h200-2026-12-02", 2), ("h200-2026-12-03", 1)):
        folder = r / "outputs" / "reference" / name / "session1" / "run"
        folder.mkdir(parents=True)
        (folder / "results.csv").write_text("status,git_commit\nok,abc1234def\n")
        (folder / "samples.bin").write_bytes(b"\1" * (mib * MIB))
    (r / "README.md").write_text("x\n")
    (r / ".gitignore").write_text("/.whl/\n.gemmlab-*.lock\n")
    (r / ".whl").mkdir()
    (r / ".whl" / "a.whl").write_bytes(b"\0" * MIB)
    git(r.parent, "init", "-q", str(r))
    git(r, "add", "-A")
    git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "reference")
    return r


def test_fit_deletes_the_oldest_reference_folders_until_what_travels_fits(repo):
    total = device_tree.size_mib(device_tree.travelling(repo))
    assert 7.0 < total < 7.1  # 6 MiB of reference, 1 MiB of wheels, a few small files
    assert device_tree.fit(repo, 8) == []  # fits already: nothing deleted
    removed = device_tree.fit(repo, 4.5)  # 12-01 alone (3 MiB) brings it to ~4
    assert [p.name for p in removed] == ["h200-2026-12-01"]
    assert device_tree.size_mib(device_tree.travelling(repo)) < 4.5
    removed = device_tree.fit(repo, 2.5)
    assert [p.name for p in removed] == ["h200-2026-12-02"]
    with pytest.raises(SystemExit, match="every older reference folder deleted"):
        device_tree.fit(repo, 1.5)  # the newest date (1 MiB) and the wheels stay: over
    assert (repo / "outputs" / "reference" / "h200-2026-12-03").is_dir()


def tgz(path: Path, files: dict) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_ingest_unpacks_rows_and_logs_and_restores_what_fit_deleted(repo, tmp_path, capsys):
    device_tree.fit(repo, 2.5)
    assert not (repo / "outputs" / "reference" / "h200-2026-12-01").exists()
    got = tmp_path / "files"
    got.mkdir()
    session = "outputs/reference/h200-2026-12-06/session30"
    rows = "status,git_commit\nok,1234567aa\nfailed,1234567aa\n"
    tgz(got / "reference.tgz", {f"{session}/decode/bf16/results.csv": rows,
                                f"{session}/decode/bf16/.gemmlab-run.lock": ""})
    tgz(got / "logs.tgz", {"./decode_bf16.log": "ok 1 failed 1\n"})
    assert device_tree.main(["--repo", str(repo), "ingest", str(got)]) == 0
    out = capsys.readouterr().out
    dest = repo / session
    assert (dest / "decode" / "bf16" / "results.csv").exists() and (dest / "logs" / "decode_bf16.log").exists()
    assert not list(dest.rglob(".gemmlab-*.lock"))
    assert (repo / "outputs" / "reference" / "h200-2026-12-01" / "session1" / "run" / "samples.bin").exists()
    assert f"{session}/decode/bf16/results.csv: 2 rows (ok 1, failed 1); commit 1234567" in out
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_ingest_refuses_a_tarball_that_changes_a_committed_row_or_escapes(repo, tmp_path):
    """Refused before anything is unpacked: rows into a committed session's folder, a committed file by way of
    --session, a path that leaves the repository for a sibling, a tarball of two sessions (a GEMMLAB_REF without
    /<session> packs the dated folder)."""
    got = tmp_path / "files"
    got.mkdir()
    committed = "outputs/reference/h200-2026-12-02/session1/run/results.csv"
    tgz(got / "reference.tgz", {committed: "status\nok\n"})
    with pytest.raises(SystemExit, match="holds committed files"):
        device_tree.ingest(repo, got)
    with pytest.raises(SystemExit, match="would overwrite the committed"):
        device_tree.ingest(repo, got, "outputs/reference/h200-2026-12-06/new")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""  # nothing written
    tgz(got / "reference.tgz", {"outputs/reference/h200-2026-12-06/s/../../../../../repo2/evil.txt": "x"})
    with pytest.raises(SystemExit, match="outside"):
        device_tree.ingest(repo, got, "outputs/reference/h200-2026-12-06/s")
    assert not (tmp_path / "repo2").exists()
    tgz(got / "reference.tgz", {"outputs/reference/h200-2026-12-06/a/r/results.csv": "status\nok\n",
                                "outputs/reference/h200-2026-12-06/b/r/results.csv": "status\nok\n"})
    with pytest.raises(SystemExit, match="no single outputs/reference"):
        device_tree.ingest(repo, got)
    (got / "reference.tgz").unlink()
    with pytest.raises(SystemExit, match="give --session"):
        device_tree.ingest(repo, got)


def test_fit_keeps_uncommitted_rows_and_ingest_restores_only_what_fit_deleted(repo, tmp_path):
    """An ingested session not yet committed lives in an old dated folder: fit passes that folder over (a checkout
    would not bring it back); a local edit to a tracked file survives ingest's restore."""
    new_rows = repo / "outputs" / "reference" / "h200-2026-12-01" / "session9" / "results.csv"
    new_rows.parent.mkdir()
    new_rows.write_text("status\nok\n")
    edited = repo / "README.md"
    edited.write_text("edited\n")
    with pytest.raises(SystemExit, match="kept, holding files git does not track: outputs/reference/h200-2026-12-01"):
        device_tree.fit(repo, 4.5)  # 12-02 alone is not enough: restored, and the refusal says why
    assert (repo / "outputs" / "reference" / "h200-2026-12-02").is_dir()
    removed = device_tree.fit(repo, 5.5)
    assert [p.name for p in removed] == ["h200-2026-12-02"] and new_rows.exists()
    got = tmp_path / "files"
    got.mkdir()
    tgz(got / "logs.tgz", {"./x.log": "x\n"})
    device_tree.ingest(repo, got, "outputs/reference/h200-2026-12-06/s1")
    assert (repo / "outputs" / "reference" / "h200-2026-12-02" / "session1" / "run" / "samples.bin").exists()
    assert edited.read_text() == "edited\n" and new_rows.exists()
    assert (repo / "outputs" / "reference" / "h200-2026-12-06" / "s1" / "logs" / "x.log").exists()


def test_fit_drops_the_folders_named_first_but_never_uncommitted_rows(repo, capsys):
    """--drop deletes the dated folders it names first, the newest date too (an H100 folder of today's date the H200
    call does not need), and not one that holds rows not yet committed: that one is kept and said so."""
    h100 = repo / "outputs" / "reference" / "h100-2026-12-03" / "session1"
    h100.mkdir(parents=True)
    (h100 / "results.csv").write_text("status\nok\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "h100 rows")
    removed = device_tree.fit(repo, 100, drop=["h100-*"])  # under the limit already: only what --drop names
    assert [p.name for p in removed] == ["h100-2026-12-03"] and not h100.exists()
    git(repo, "checkout", "--", "outputs/reference")
    new_rows = h100.parent / "session2" / "results.csv"
    new_rows.parent.mkdir()
    new_rows.write_text("status\nok\n")
    assert device_tree.fit(repo, 100, drop=["h100-*"]) == [] and new_rows.exists() and h100.exists()
    assert "kept outputs/reference/h100-2026-12-03, which --drop names" in capsys.readouterr().err
    removed = device_tree.fit(repo, 4.5, drop=["h100-*"])  # then the oldest, as without --drop
    assert [p.name for p in removed] == ["h200-2026-12-01"] and new_rows.exists()


def test_snap_is_one_commits_code_whatever_the_tree_holds(repo):
    """`snap`: the committed tree of a revision without the reference data, its hash in COMMIT, a link to the wheels;
    an uncommitted edit stays out of it; `fit` counts what it adds; a .snap/ git would not ignore is refused."""
    with pytest.raises(SystemExit, match="does not ignore"):
        device_tree.snap(repo)
    (repo / ".gitignore").write_text("/.whl/\n/.snap/\n.gemmlab-*.lock\n")
    (repo / "code.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "code")
    head = git(repo, "rev-parse", "HEAD").strip()
    (repo / "code.py").write_text("x = 2  # uncommitted\n")
    before = device_tree.size_mib(device_tree.travelling(repo))
    dest = device_tree.snap(repo)
    assert (dest / "COMMIT").read_text().strip() == head
    assert (dest / "code.py").read_text() == "x = 1\n"  # the commit's, not the working tree's
    assert (dest / "README.md").is_file() and (dest / "outputs" / "reference").is_dir()
    assert not any((dest / "outputs" / "reference").iterdir())
    assert (dest / ".whl").is_symlink() and (dest / ".whl" / "a.whl").is_file()
    after = device_tree.size_mib(device_tree.travelling(repo))
    assert 0 < after - before < 0.1  # the snapshot's few files, not the wheels twice through the link
    # again, at an older revision: replaced, not merged
    device_tree.snap(repo, "HEAD~1")
    assert not (dest / "code.py").exists()
    assert device_tree.main(["--repo", str(repo), "snap"]) == 0
    assert (dest / "COMMIT").read_text().strip() == head
