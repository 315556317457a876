"""Run a graded notebook in-process, nbgrader-style, with some solution cells replaced.

Used by the wrong-answer bank: hundreds of variants cannot each afford a kernel start. The
scoring follows nbgrader's rule for autograded test cells: a test cell earns its points when it
raises nothing and writes nothing to stderr (warnings included). `tests/test_grading.py` checks
that this agrees with a real `nbgrader autograde` on a sample of variants.
"""

from __future__ import annotations

import contextlib
import io
import traceback
import warnings
from dataclasses import dataclass

from course.chapters import chapter
from course.notebooks import code_cells


@dataclass(frozen=True)
class TestCell:
    """The outcome of one graded test cell."""

    grade_id: str
    points: float
    passed: bool
    message: str


def _run_cell(source: str, namespace: dict) -> str | None:
    """Execute one cell; returns a failure description (error or stderr), or None."""
    stderr = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr), \
            contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        try:
            exec(compile(source, "<cell>", "exec"), namespace)  # noqa: S102 - running our own notebooks
        except BaseException as error:  # noqa: BLE001 - a failing cell is data here
            if isinstance(error, KeyboardInterrupt):
                raise
            return "".join(traceback.format_exception_only(type(error), error)).strip()
    if caught:
        return f"wrote a warning to stderr: {caught[0].category.__name__}: {caught[0].message}"
    if stderr.getvalue():
        return f"wrote to stderr: {stderr.getvalue()[:500]}"
    return None


def run_notebook(assignment: str, replacements: dict[str, str] | None = None) -> list[TestCell]:
    """Run the solution notebook top to bottom with cells replaced by grade_id; score its test cells."""
    replacements = dict(replacements or {})
    namespace: dict = {"__name__": "__main__"}
    results = []
    for meta, source in code_cells(chapter(assignment).solution):
        grade_id = meta.get("grade_id")
        source = replacements.pop(grade_id, source)
        failure = _run_cell(source, namespace)
        if meta.get("grade"):
            results.append(TestCell(grade_id, float(meta.get("points", 0)), failure is None, failure or ""))
    if replacements:
        raise KeyError(f"no such cells in {assignment}: {sorted(replacements)}")
    return results


def score(results: list[TestCell]) -> tuple[float, float]:
    """(points earned, points possible)."""
    return sum(r.points for r in results if r.passed), sum(r.points for r in results)
