"""The bank of answers a student might write: wrong ones must lose points, right ones keep them all.

One module per assignment (`ch01_similarity.py`, ...), each defining ASSIGNMENT, WRONG and RIGHT.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """A student's version of one solution cell.

    cell: the grade_id of the solution cell it replaces.
    mistake: what the student got wrong (or, for a right answer, how it differs).
    source: the cell's new source.
    message: for a wrong answer, text that some failing test's message must contain, so that the
        feedback names the misconception (empty: any failure will do).
    """

    cell: str
    mistake: str
    source: str
    message: str = ""


def modules() -> list:
    """Every bank module, in assignment order."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]
