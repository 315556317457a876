"""The stored results of a grading run (``DIR/.state/<student>/<assignment>.json``), each under its task's
key, so that re-running grades only what changed and an interrupted run resumes."""

from __future__ import annotations

import json
from pathlib import Path

from autograder.records import Task


def state_path(out: Path, task: Task) -> Path:
    """Where the result of ``task`` is stored under the output folder ``out``."""
    return out / ".state" / task.student / f"{task.assignment}.json"


def load_state(out: Path, task: Task) -> dict | None:
    """The stored result of ``task`` (None when there is none under its key, or a graded result lost its
    feedback pages)."""
    path = state_path(out, task)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if state.get("key") != task.key:
        return None
    feedback = out / "feedback" / task.student / task.assignment
    if state["result"]["status"] == "graded" and not any(feedback.glob("*.html")):
        return None
    return state["result"]


def save_state(out: Path, task: Task, result: dict) -> None:
    """Store ``result`` under ``task``'s key (written aside, then renamed: a killed run leaves no half file)."""
    path = state_path(out, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps({"key": task.key, "result": result}))
    scratch.replace(path)
