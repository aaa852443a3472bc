"""gemmlab.rows.read as analysis uses it: each row once for a run, a sweep or a tree of both, and
identifiers (run ids, point keys, commits, hashes) as text."""
from __future__ import annotations

import pandas as pd

from gemmlab import rows as result_rows


def test_rows_read_returns_each_row_once_with_identifiers_as_text(tmp_path):
    """gemmlab.rows.read on a run, a sweep and a tree of both: each (run_id, point_key) once, the
    job's copy where a sweep's merged file repeats it, every job's rows where the merge kept fewer
    (jobs whose points shared a key); hashes and commits stay text."""
    def write(path, lines):
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(lines).to_csv(path, index=False)

    def line(run, key, t, commit="7080e82"):
        return {"run_id": run, "point_key": key, "git_commit": commit, "status": "ok", "time_median_s": t,
                "gpu_uuid": "GPU-0e8431a9", "variant": "cublas"}

    sweep = tmp_path / "sweep"
    jobs = {0: [line("r0", "0123", 1.0), line("r0", "1e5", 2.0)], 1: [line("r1", "0123", 3.0)]}
    for j, rows in jobs.items():
        write(sweep / str(j) / "results.csv", rows)
    write(sweep / "results.csv", [line("r1", "0123", 3.0)])  # a merge that kept one job's copy of the key
    write(tmp_path / "run" / "results.csv", [line("r2", "0123", 4.0, commit="12345e6")])
    for path, expected in ((sweep, 3), (sweep / "results.csv", 1), (sweep / "0", 2), (tmp_path, 4)):
        df = result_rows.read(path)
        assert len(df) == expected, path
        assert not df.duplicated(["run_id", "point_key"]).any()
    df = result_rows.read(tmp_path)
    assert set(df["git_commit"]) == {"7080e82", "12345e6"}  # not 7.08e+85, not 1.23e+10
    assert set(df["point_key"]) == {"0123", "1e5"} and set(df["run_id"]) == {"r0", "r1", "r2"}
    assert sorted(df["time_median_s"]) == [1.0, 2.0, 3.0, 4.0]  # numbers stay numbers
    assert len(result_rows.read([sweep, sweep / "0" / "results.csv"])) == 3  # a file given twice: once


def test_rows_appended_to_an_older_results_file_land_in_their_columns(tmp_path):
    """Resuming into a results.csv written by an older harness (fewer columns, another order)
    rewrites its header once, pads its rows, and appends the new row under the right names."""
    import csv

    from gemmlab import rows as result_rows

    old_cols = ["status", "variant", "run_id", "point_key", "backend", "tflops"]
    with open(tmp_path / "results.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(old_cols)
        w.writerow(["ok", "naive", "r0", "k0", "cuda", "4.03"])
    with result_rows.RowWriter(tmp_path) as w:
        w.write({"status": "ok", "variant": "cublas", "run_id": "r1", "point_key": "k1", "backend": "cublas",
                 "tflops": 51.4, "layout": "nt", "batch": 2})
    df = result_rows.read(tmp_path)
    assert list(df["variant"]) == ["naive", "cublas"] and list(df["backend"]) == ["cuda", "cublas"]
    assert [float(x) for x in df["tflops"]] == [4.03, 51.4]
    assert df["layout"].iloc[1] == "nt" and int(df["batch"].iloc[1]) == 2
    with open(tmp_path / "results.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert header[:len(old_cols)] == old_cols  # the file's own columns first, as they were


def test_a_tree_read_twice_is_parsed_once_past_a_thousand_files_and_past_the_cache(tmp_path, monkeypatch):
    """rows.read_file's cache: a tree of more files than the old count cap (1024, which outputs/reference
    passed in session49: every read then evicted each file before its next read) is parsed once for two
    reads; and where the tree's text is more than the cache holds, the files that fit stay cached (evicting
    the oldest would parse every file on every read), and what is read is the same either way."""
    monkeypatch.setattr(result_rows, "_PARSED", {})
    monkeypatch.setattr(result_rows, "_PARSED_BYTES", [0])
    for i in range(1100):  # each file's bytes its own (the cache is keyed by content)
        path = tmp_path / f"run{i // 100}" / f"{i:04d}" / "results.csv"
        path.parent.mkdir(parents=True)
        path.write_text(f"run_id,point_key,status,tflops\nr{i},k{i},ok,{i}.5\n")
    parsed = []
    real = pd.read_csv
    monkeypatch.setattr(pd, "read_csv", lambda *a, **k: parsed.append(1) or real(*a, **k))
    first = result_rows.read(tmp_path)
    assert len(first) == 1100 and len(parsed) == 1100
    again = result_rows.read(tmp_path)
    assert len(parsed) == 1100, f"a second read parsed {len(parsed) - 1100} of 1100 files again"
    pd.testing.assert_frame_equal(first, again)

    size = len((tmp_path / "run0" / "0000" / "results.csv").read_bytes())  # 40-42 bytes a file
    monkeypatch.setattr(result_rows, "_PARSED", {})
    monkeypatch.setattr(result_rows, "_PARSED_BYTES", [0])
    monkeypatch.setattr(result_rows, "_PARSED_MAX_BYTES", 500 * size)  # room for about 480 of them
    parsed.clear()
    small = result_rows.read(tmp_path)
    kept = len(result_rows._PARSED)
    assert 400 <= kept <= 500 and result_rows._PARSED_BYTES[0] <= 500 * size
    result_rows.read(tmp_path)
    assert len(parsed) == 1100 + (1100 - kept), "the files the cache kept were parsed again"
    pd.testing.assert_frame_equal(first, small)
