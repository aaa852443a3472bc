"""``python -m analysis.claims``: see :func:`analysis.claims.report.main`."""
import sys

from .report import main

sys.exit(main())
