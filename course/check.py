"""`python -m course check NOTEBOOK`: run a notebook's tests the way the grader will, and name the ones that fail.

A fresh kernel runs every cell in order from the notebook's own folder and goes on past an error, as nbgrader
does. Then each test cell (nbgrader's `grade` without `solution`) is reported by its id: passed; failed, with the
error it raised; or failed because it wrote to stderr (a warning, say), which the grader scores zero even when
the cell passes. A released notebook's hidden test cells hold only a comment (the grader puts the tests back
after you hand in); they are listed as hidden, neither passed nor failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import nbformat
from nbclient import NotebookClient

# One cell may train a model on a CPU (chapter 9); nbgrader's own default is 30 s a cell.
CELL_TIMEOUT_S = 600
NOT_WRITTEN = " (a function this test calls still says `raise NotImplementedError()`: write it, run its cell)"


class Outcome(Enum):
    PASSED = "passed"
    FAILED = "FAILED"
    HIDDEN = "hidden"


@dataclass(frozen=True)
class CheckedCell:
    grade_id: str
    outcome: Outcome
    message: str  # what a failing cell raised or wrote to stderr; "" otherwise


def _is_test(cell: nbformat.NotebookNode) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _is_comment_only(source: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in source.splitlines())


def judge(cell: nbformat.NotebookNode) -> CheckedCell:
    """One executed test cell: hidden (comments only), FAILED (an error or stderr) or passed."""
    grade_id = str(cell.metadata["nbgrader"].get("grade_id", "?"))
    if _is_comment_only(cell.source):
        return CheckedCell(grade_id, Outcome.HIDDEN, "")
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            hint = NOT_WRITTEN if output.ename == "NotImplementedError" else ""
            return CheckedCell(grade_id, Outcome.FAILED, f"{output.ename}: {output.evalue}".rstrip(": ") + hint)
    stderr = "".join(output.text for output in cell.get("outputs", [])
                     if output.output_type == "stream" and output.name == "stderr")
    if stderr:
        return CheckedCell(grade_id, Outcome.FAILED, "wrote to stderr, which the grader scores 0 even when the cell "
                                                  f"passes: remove the cause, do not silence it:\n{stderr.strip()}")
    return CheckedCell(grade_id, Outcome.PASSED, "")


def check(path: Path, timeout: int = CELL_TIMEOUT_S) -> list[CheckedCell]:
    """Execute the notebook at `path` in a fresh kernel (every cell, in order) and judge its test cells."""
    notebook = nbformat.read(path, as_version=4)
    if not any(_is_test(cell) for cell in notebook.cells):
        return []  # not a course notebook: nothing to run
    client = NotebookClient(notebook, timeout=timeout, allow_errors=True,
                            resources={"metadata": {"path": str(path.resolve().parent)}})
    client.execute()
    return [judge(cell) for cell in notebook.cells if _is_test(cell)]


def report(name: str, cells: list[CheckedCell]) -> str:
    """What `course check` prints: one line per test cell, a failure's message under it, then the count."""
    lines = [f"{name}: every cell run in order in a fresh kernel, as the grader runs it"]
    visible = [cell for cell in cells if cell.outcome is not Outcome.HIDDEN]
    for cell in visible:
        lines.append(f"  {cell.outcome.value:<7} {cell.grade_id}")
        lines.extend(f"          {line}" for line in cell.message.splitlines())
    passed = sum(cell.outcome is Outcome.PASSED for cell in visible)
    verdict = "ready to hand in" if passed == len(visible) else "fix the cells marked FAILED, then check again"
    lines.append(f"{passed} of {len(visible)} test cells pass: {verdict}")
    if hidden := len(cells) - len(visible):
        lines.append(f"({hidden} hidden test cells hold only a comment here: the grader runs its own tests there)")
    return "\n".join(lines)
