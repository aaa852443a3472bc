"""Targets: bars a kernel must clear (">= 1.05x the library at 4096", ">= 90% of the copy roof at
6 decode shapes"), written as YAML and judged on result rows, the reference data by default.

    python -m analysis.targets                          # the project's targets on the reference data
    python -m analysis.targets MY_RUN --targets my.yaml --points
    python -m analysis.targets --out DIR                # targets.md (with every point) and targets.csv
    python -m analysis.targets MY_RUN --targets my.yaml --check   # exit 1 unless every bar holds
    python -m analysis.targets MY_H100_RUN --device H100           # bars for the H200, on an H100's rows

A targets file (:mod:`.spec`) names, for each target, the rows it selects (variants, precision,
layout, shapes or LLM shape parts, FP8 scaling, a candidate's defines; the GPU the bars are for), the number it reads
(:data:`.spec.METRICS`: % of the library timed interleaved, % of the library of the same run, % of
the same run's copy roof, or that the rows are ok) and the bar (``at_least`` at every point, at
N points or as the geomean). :mod:`.evaluate` gives each a verdict, met, not met, not measured or
stated, from each point's latest run, with every earlier run's number beside it. The project's
own targets, its open issues' "Done when" bars, are the YAML files in this folder (``SHIPPED``).
"""
from pathlib import Path

from .evaluate import MET, NOT_MEASURED, NOT_MET, STATED, Result, evaluate, evaluate_all  # noqa: F401
from .spec import METRICS, Target, TargetsError, TargetsFile, load  # noqa: F401

SHIPPED = tuple(sorted(Path(__file__).resolve().parent.glob("*.yaml")))
