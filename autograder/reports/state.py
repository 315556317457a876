"""The stored results of grading runs (``DIR/.state/<student>/<assignment>.json``, `autograder.reports.output_folder`): the class's
record. Each is stored under its task's key, so that re-running grades only what changed and an interrupted run
resumes; every row of the class files (grades.csv, similarity.csv, report.html) is read back from here, so
that they cover every run into the folder (`autograder.reports.class_record`).

A stored file is ``{"key": task key, "result": Result.to_dict(stored=True), "row": {...}}``: ``row`` holds what
a row of grades.csv needs besides the result (`Stored`). Results stored before ``row`` existed are read with an
empty one; results stored before `autograder.records.Result` existed have the same shape (only ``timings``
could be missing) and are read as they are, not graded again."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

from autograder.reports.output_folder import OutputFolder
from autograder.records import Result, Task


@dataclass(frozen=True)
class Stored:
    """One stored row of the class: a student's result for one assignment, and what its row says besides."""

    result: Result
    note: str = ""  # the task's note (a misnamed notebook...), shown before the result's reason
    lms_user_id: str = ""
    late: bool = False
    max_score: float = 0.0  # the assignment's maximum when it was graded
    missing: bool = False  # a 'no submission' row: any later row of this student and assignment replaces it
    lms_name: str = ""  # the student's name as the LMS gave it

    @property
    def reason(self) -> str:
        """The note, then the result's reason (`autograder.records.GradeRow.reason`)."""
        return "; ".join(r for r in (self.note, self.result.reason) if r)


def load_state(out: OutputFolder, task: Task) -> Result | None:
    """The stored result of ``task`` (None when there is none under its key, or a graded result lost its
    feedback pages)."""
    try:
        state = json.loads(out.state(task.student, task.assignment).read_text())
    except (OSError, ValueError):
        return None
    if not task.key or state.get("key") != task.key:
        return None
    result = Result.from_dict(state["result"])
    if result.graded and not any(out.feedback(task.student, task.assignment).glob("*.html")):
        return None
    return result


def save_state(out: OutputFolder, task: Task, result: Result, max_score: float = 0.0) -> None:
    """Store ``result`` under ``task``'s key with its row (written aside, then renamed: a killed run leaves no
    half file). The result is stored without the task's note, which the row holds."""
    path = out.state(task.student, task.assignment)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    row = Stored(result, task.note, task.lms_user_id, task.late, max_score, task.missing, task.lms_name)
    scratch = path.with_suffix(".tmp")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps({"key": task.key, "result": result.to_dict(stored=True),
                                 "row": {k: v for k, v in asdict(row).items() if k != "result"}}))
    scratch.replace(path)


def stored_rows(out: OutputFolder) -> dict[tuple[str, str], Stored]:
    """Every stored row of the folder: (student, assignment) -> `Stored`."""
    rows = {}
    for path in sorted(out.states.glob("*/*.json")):
        try:
            state = json.loads(path.read_text())
            rows[(path.parent.name, path.stem)] = Stored(Result.from_dict(state["result"]), **state.get("row", {}))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a file that is not a stored row (edited by hand): the next run grades it again
    return rows


def stored_results(out: OutputFolder, assignment: str) -> dict[str, Result]:
    """Every stored result of ``assignment`` in ``out``, by student, whatever its key (what a benchmark or a
    test reads back after a run)."""
    return {path.parent.name: Result.from_dict(json.loads(path.read_text())["result"])
            for path in sorted(out.states.glob(f"*/{assignment}.json"))}
