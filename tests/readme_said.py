"""What the README says, for the tests that recompute its numbers from the committed rows
(tests/test_readme_*.py): the README's text with its line breaks folded, the number formats the
text uses, and one assertion that names the README sentence a recomputed phrase no longer matches.

Rows come through the per-process cache of the analysis tests (``test_analysis.raw`` and
``test_analysis.dataset``: the reference data is read once per test process, whichever module
asks first).
"""
from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path
from typing import Iterable, Sequence

from conftest import ROOT
from test_analysis import dataset, raw  # noqa: F401  (re-exported: the shared per-process cache)

REFERENCE = ROOT / "outputs" / "reference"


@functools.lru_cache(maxsize=None)
def readme_text(path: str = str(ROOT / "README.md")) -> str:
    """The README with every run of whitespace folded to one space (sentences span lines)."""
    return " ".join(Path(path).read_text().split())


def sentences(text: str) -> list:
    """The text cut into sentences (and table lines), roughly: enough to name where a phrase was."""
    return [s.strip() for s in re.split(r"(?<=[.!?|])\s+(?=[A-Z(`*|])", text) if s.strip()]


def nearest_sentence(phrase: str, text: str) -> str:
    """The README sentence most like ``phrase`` (the longest run of characters they share): where a
    number that no longer matches was said."""
    def shared(s: str) -> int:
        m = difflib.SequenceMatcher(None, phrase, s, autojunk=False)
        return m.find_longest_match(0, len(phrase), 0, len(s)).size
    return max(sentences(text), key=shared, default="")


def assert_said(said: Iterable[str], paragraph: str, text: str | None = None) -> None:
    """Every phrase of ``said`` (recomputed from rows) stands in the README word for word; a failure
    names the paragraph, the recomputed phrase and the README sentence nearest to it."""
    text = readme_text() if text is None else text
    missing = [s for s in said if s not in text]
    if missing:
        lines = [f"the README's {paragraph} no longer matches the rows it names:"]
        for s in missing:
            lines += [f"  the rows say:   {s!r}", f"  README sentence: {nearest_sentence(s, text)!r}"]
        raise AssertionError("\n".join(lines))


def span(values: Sequence[float], fmt: str, sep: str = "-") -> str:
    """A range as the README writes it: 'lo-hi' in ``fmt``, or one number where both round alike."""
    values = [float(v) for v in values]
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}{sep}{hi}"


def tens(x: float) -> str:
    """A number rounded to tens, as the README rounds thousands of TFLOP/s ('1320')."""
    return f"{int(round(float(x) / 10.0)) * 10}"


def folder(name: str) -> Path:
    return REFERENCE / name


def has(*names: str) -> bool:
    return all(folder(n).is_dir() for n in names)
