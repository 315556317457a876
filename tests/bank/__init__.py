"""The bank of answers a student might write: wrong ones must lose points, right ones keep them all.

One module per assignment (`ch01_similarity.py`, ...), each defining ASSIGNMENT, WRONG and RIGHT.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass

from course.chapters import chapter
from course.notebooks import solution_sources


@dataclass(frozen=True)
class Answer:
    """A student's version of one solution cell.

    cell: the grade_id of the solution cell it replaces.
    mistake: what the student got wrong (or, for a right answer, how it differs).
    source: the cell's new source.
    message: for a wrong answer, text that some failing test's message must contain, so that the
        feedback names the misconception (empty: any failure will do).
    derived: True when the source is the reference with a few edits (`mutant`), not written apart
        from it (the similarity benchmark compares only answers written independently).
    """

    cell: str
    mistake: str
    source: str
    message: str = ""
    derived: bool = False


@functools.cache
def reference(assignment: str, cell: str) -> str:
    """The reference source of one solution cell."""
    return solution_sources(chapter(assignment).solution)[cell]


def edit(source: str, *edits: tuple[str, str], where: str = "the base answer") -> str:
    """``source`` with each edit ``(old, new)`` applied. ValueError unless each ``old`` occurs exactly once,
    so that a bank entry breaks loudly when the source changes under it."""
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"{where}: {old!r} occurs {source.count(old)} times, not once")
        source = source.replace(old, new)
    return source


def mutation(assignment: str, cell: str, *edits: tuple[str, str]) -> str:
    """The reference source of ``cell`` with each edit applied (`edit`): a wrong (or differently written)
    answer as a one-line change of the reference."""
    return edit(reference(assignment, cell), *edits, where=f"{assignment}:{cell}")


def mutant(assignment: str, cell: str, mistake: str, *edits: tuple[str, str], message: str = "") -> Answer:
    """An answer made by :func:`mutation`."""
    return Answer(cell, mistake, mutation(assignment, cell, *edits), message, derived=True)


def modules() -> list:
    """Every bank module, in assignment order."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]
