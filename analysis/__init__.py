"""From result rows to figures and tables: the roofline, the ladder, and the rest of the paper.

    python -m analysis.paper [RESULTS ...] [--out DIR]

reads results files (``gemmlab.rows`` CSVs; by default everything under ``outputs/reference/``)
and writes every figure (PDF + PNG) and table (LaTeX + Markdown) to ``outputs/paper/``.
``analysis.data`` holds the loading and baseline logic that other reports reuse.
"""
