"""Per-sample times beside the rows: ``samples.parquet`` in every run and sweep folder.

One line per timed sample: ``run_id, point_key, call, sample, time_s, sm_clock_mhz``. ``call`` is
the variant whose call the sample timed (the point's own, or a baseline measured interleaved with
it), ``sm_clock_mhz`` the SM clock the spin kernel measured right before that sample (empty where
none was read). With them any statistic can be computed later (``python -m analysis.compare``).

While a run goes, samples are appended to ``samples.csv`` and fsynced with each row, so a crash
keeps them as it keeps the rows; when the run ends they are folded into ``samples.parquet``
(earlier runs into the same folder, resumed, keep theirs). A sweep's merge concatenates its jobs'
samples, keeping those of the rows the merge kept.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

SAMPLES_FILE = "samples.parquet"
JOURNAL = "samples.csv"
COLUMNS = ["run_id", "point_key", "call", "sample", "time_s", "sm_clock_mhz"]


def entry(call: str, times_s: Sequence[float], clocks_mhz: Optional[Sequence[float]] = None) -> Dict[str, Any]:
    """One timed call's samples, as a backend or executor hands them to the runner."""
    return {"call": call, "time_s": list(times_s), "sm_clock_mhz": list(clocks_mhz) if clocks_mhz else None}


class SampleWriter:
    """Appends samples to ``<folder>/samples.csv``; ``close`` folds them into samples.parquet."""

    def __init__(self, folder: os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / JOURNAL
        self._f = None

    def write(self, run_id: str, point_key: str, entries: Iterable[Mapping[str, Any]]) -> None:
        lines = []
        for e in entries:
            clocks = e.get("sm_clock_mhz") or []
            for i, t in enumerate(e["time_s"]):
                clk = clocks[i] if i < len(clocks) else ""
                lines.append([run_id, point_key, e["call"], i, repr(float(t)), "" if clk == "" else repr(float(clk))])
        if not lines:
            return
        if self._f is None:
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._f = open(self.path, "a", newline="")
            self._w = csv.writer(self._f)
            if new:
                self._w.writerow(COLUMNS)
        self._w.writerows(lines)
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> Optional[Path]:
        if self._f is not None:
            self._f.close()
            self._f = None
        return finalize(self.folder)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def finalize(folder: os.PathLike) -> Optional[Path]:
    """Fold ``folder``'s journal (samples.csv) into samples.parquet; returns the parquet path."""
    import pandas as pd

    folder = Path(folder)
    journal, out = folder / JOURNAL, folder / SAMPLES_FILE
    if not journal.exists():
        return out if out.exists() else None
    frames = [_read_journal(journal)]
    if out.exists():
        frames.insert(0, pd.read_parquet(out))
    _write(pd.concat(frames, ignore_index=True), out)
    journal.unlink()
    return out


def _read_journal(path: Path):
    import pandas as pd

    df = pd.read_csv(path, dtype={"run_id": "string", "point_key": "string", "call": "string"})
    return _typed(df)


def _typed(df):
    for c in ("time_s", "sm_clock_mhz"):
        df[c] = df[c].astype("float64")
    df["sample"] = df["sample"].astype("int64")
    for c in ("run_id", "point_key", "call"):
        df[c] = df[c].astype("string")
    return df[COLUMNS]


def _write(df, out: Path) -> None:
    tmp = out.with_suffix(".tmp")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, out)


def read(paths: Iterable[os.PathLike] | os.PathLike):
    """Every sample under ``paths`` (folders searched recursively; a folder's journal included),
    each (run_id, point_key, call, sample) once."""
    import pandas as pd

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    frames: List = []
    for p in map(Path, paths):
        files = [p] if p.is_file() else sorted(p.rglob(SAMPLES_FILE)) + sorted(p.rglob(JOURNAL))
        for f in files:
            frames.append(pd.read_parquet(f) if f.suffix == ".parquet" else _read_journal(f))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("time_s", "sm_clock_mhz") else "string")
                             for c in COLUMNS})
    df = _typed(pd.concat(frames, ignore_index=True))
    return df.drop_duplicates(["run_id", "point_key", "call", "sample"], keep="last").reset_index(drop=True)


def merge(folders: Sequence[os.PathLike], out_folder: os.PathLike, keep) -> Optional[Path]:
    """The samples of ``folders`` whose (run_id, point_key) is in ``keep`` into
    ``out_folder/samples.parquet`` (a sweep's merge, after rows.merge chose the rows)."""
    import pandas as pd

    parts = [read(f) for f in folders if any(Path(f).glob(SAMPLES_FILE)) or any(Path(f).glob(JOURNAL))]
    if not parts:
        return None
    df = pd.concat(parts, ignore_index=True)
    pairs = set(keep)
    df = df[[(r, k) in pairs for r, k in zip(df.run_id, df.point_key)]]
    out = Path(out_folder) / SAMPLES_FILE
    _write(df.reset_index(drop=True), out)
    return out
