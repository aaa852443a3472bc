"""The page of a run or sweep (``analysis.report``), written when it ends: its path printed, or
one line saying why there is none. A page that cannot be written never fails the run."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from gemmlab.rows import RESULTS_FILE


def write_report(folder: Path) -> Optional[Path]:
    """Write ``folder/report.html`` from the rows under ``folder``; print its path, or a one-line
    warning on any failure. None when nothing was written."""
    folder = Path(folder)
    if not (folder / RESULTS_FILE).exists():
        return None  # no rows (the run stopped before its first point)
    reference = Path(__file__).resolve().parent.parent / "outputs" / "reference"
    if folder.resolve().is_relative_to(reference):  # committed data: rows and config only
        print(f"gemmlab: no report page inside outputs/reference/ (the committed measurements); "
              f"python -m analysis.report {folder} --out DIR writes one elsewhere", flush=True)
        return None
    try:
        # analysis draws with matplotlib: imported here, when a run has ended, never with gemmlab
        from analysis.report import write
        path = write(folder)
    except KeyboardInterrupt:
        print(f"gemmlab: no report page for {folder} (interrupted)", flush=True)
        return None
    except Exception as e:  # noqa: BLE001 - the page is a view of the rows; the rows are what count
        what = " ".join(f"{type(e).__name__}: {e}".split())
        print(f"gemmlab: warning: no report page for {folder} ({what[:300]})", flush=True)
        return None
    print(f"gemmlab: report: {path}", flush=True)
    return path
