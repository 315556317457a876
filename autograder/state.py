"""The stored results of a grading run (``DIR/.state/<student>/<assignment>.json``, `autograder.layout`), each
under its task's key, so that re-running grades only what changed and an interrupted run resumes.

A stored file is ``{"key": task key, "result": Result.to_dict(stored=True)}``; results stored before
`autograder.records.Result` existed have the same shape (only ``timings`` could be missing) and are read
as they are, not graded again."""

from __future__ import annotations

import json

from autograder.layout import OutputFolder
from autograder.records import Result, Task


def load_state(out: OutputFolder, task: Task) -> Result | None:
    """The stored result of ``task`` (None when there is none under its key, or a graded result lost its
    feedback pages)."""
    try:
        state = json.loads(out.state(task.student, task.assignment).read_text())
    except (OSError, ValueError):
        return None
    if state.get("key") != task.key:
        return None
    result = Result.from_dict(state["result"])
    if result.graded and not any(out.feedback(task.student, task.assignment).glob("*.html")):
        return None
    return result


def save_state(out: OutputFolder, task: Task, result: Result) -> None:
    """Store ``result`` under ``task``'s key (written aside, then renamed: a killed run leaves no half file)."""
    path = out.state(task.student, task.assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps({"key": task.key, "result": result.to_dict(stored=True)}))
    scratch.replace(path)


def stored_results(out: OutputFolder, assignment: str) -> dict[str, Result]:
    """Every stored result of ``assignment`` in ``out``, by student, whatever its key (what a benchmark or a
    test reads back after a run)."""
    return {path.parent.name: Result.from_dict(json.loads(path.read_text())["result"])
            for path in sorted(out.states.glob(f"*/{assignment}.json"))}
