"""Did B get faster or slower than A? Point by point, with intervals and verdicts that hold up
under the run-to-run drift of a GPU.

    python -m analysis.compare A B [--threshold 0.05] [--out DIR]
    python -m analysis.compare outputs/reference/h200-2026-11-30/cublas_square MY_RUN
    python -m analysis.compare --paired RUN        # each variant against the baseline timed with it
    python -m analysis.compare DEFAULT_RUN S4_RUN --match warp_tiled_s4=warp_tiled  # another name
    python -m analysis.compare --normalized A B    # each run's times over the baseline timed in it
    python -m analysis.compare --normalized SWEEP  # a define sweep: each job against its first (.sweep)

A and B are runs, sweeps or reference datasets (results.csv files or folders). Points are matched
by what was measured (:mod:`.match`), the ratio of median times gets an interval (:mod:`.stats`:
a bootstrap over the samples in samples.parquet, else the rows' p20/p80) and a verdict against a
threshold from the measured drift: SAME, FASTER, SLOWER or UNSURE (a SAME whose interval excludes
1 says by how much and which way: resolved, but smaller than the threshold). Writes compare.csv,
compare.md and compare.png/.pdf (:mod:`.report`); exits 1 when some point is SLOWER, 2 on bad
input. ``--paired`` compares the two calls of each row of one run, timed interleaved under the
same clock (:mod:`.paired`), with a within-run threshold. ``--normalized`` compares two runs that
each timed a baseline interleaved (``measure.baseline``), each point's time over its baseline's
(:mod:`.normalized`): the drift between the runs divided out, a 1.0% threshold instead of 3.2%.
"""
from .core import Comparison, compare  # noqa: F401
from .match import KEY, Side  # noqa: F401
from .normalized import compare_normalized  # noqa: F401
from .paired import compare_paired  # noqa: F401
