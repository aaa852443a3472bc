"""Every figure and table of the paper from result files, in one command.

    python -m analysis.paper RESULTS                  # RESULTS/paper/
    python -m analysis.paper RESULTS ... --out DIR    # results.csv files or folders holding them
    python -m analysis.paper --out outputs/paper      # the reference data -> the committed outputs

Writes roofline, ladder, throughput_vs_size, error_vs_precision, cpu_gpu_crossover,
hierarchical_roofline, tuning_regret, energy_efficiency, power_clock, inputs_power, decode (.pdf and .png) and tables.tex / tables.md. Same rows, same bytes: files
whose content did not change are not rewritten. What the data lacks (a backend, a precision, the copy or transfer probes) is
noted in the figure concerned and listed at the end, never an error.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import cli, data, style, tables
from .figures import FIGURES

TABLE_FILES = ("tables.tex", "tables.md")


def expected_files() -> List[str]:
    """Names of every file the command writes (tests and CI check them)."""
    from .claims import CLAIMS_FILE

    return ([f"{name}.{fmt}" for name in FIGURES for fmt in ("pdf", "png")] + list(TABLE_FILES)
            + [CLAIMS_FILE])


def write_paper(ds: data.Dataset, out_dir: Path, figures: Optional[dict] = None) -> Dict[str, List[str]]:
    """Write every figure and table of ``ds`` to ``out_dir``; returns each figure's gap notes.
    ``figures``, where given, receives each Figure by name (for a caller that inspects what was
    written without building it again)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    notes: Dict[str, List[str]] = {}
    for name, build in FIGURES.items():
        fig = build(ds)
        style.save(fig, out_dir, name)
        notes[name] = style.notes_of(fig)
        if figures is not None:
            figures[name] = fig
    made = tables.build(ds)
    style.write_if_changed(out_dir / "tables.tex", tables.render_latex(made).encode())
    style.write_if_changed(out_dir / "tables.md", tables.render_markdown(made).encode())
    from .claims import write_claims  # the chapter's claims, verdicts computed from the same rows

    write_claims(ds, out_dir)
    return notes


def main(argv: Sequence[str] | None = None) -> int:
    got = cli.read("analysis.paper", __doc__.splitlines()[0], "outputs", argv)
    if got is None:
        return 2
    out, results, ds = got
    notes = write_paper(ds, out)
    n_ok = int((ds.rows["status"] == "ok").sum())
    print(f"analysis.paper: {len(ds.rows)} rows ({n_ok} ok) from {', '.join(map(str, results))}")
    for f in expected_files():
        print(f"  {out / f}")
    for name, lines in notes.items():
        for line in lines:
            for part in line.splitlines():
                print(f"  gap in {name}: {part}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
