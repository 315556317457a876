"""Tasks and their results: one task per student and assignment, each keyed by a hash of what it grades;
stored results (``DIR/.state``) that make re-running idempotent; the progress line; the CSV writer of
``grades.csv`` and ``similarity.csv``."""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from pathlib import Path

from autograder.records import Task, Template


def make_tasks(found: dict, templates: dict[str, Template], limits_key: str) -> list[Task]:
    """A task for every student and every assignment that anyone submitted (or that the course has)."""
    given = sorted({a for entry in found.values() for a in entry.files if a})
    assignments = [a for a in given if a in templates] or sorted(templates)
    unknown = [a for a in given if a not in templates]
    tasks = []
    for student, entry in sorted(found.items()):
        stray = [p.name for p in entry.files.get("", [])]
        for assignment in assignments:
            tasks.append(_task(student, templates[assignment], entry.files.get(assignment), stray, limits_key))
            tasks[-1].lms_user_id, tasks[-1].late = entry.lms_user_id, assignment in entry.late
        for assignment in unknown:
            if assignment in entry.files:
                tasks.append(Task(student, assignment, problem=f"'{assignment}' is not an assignment of this course"))
    return tasks


def _task(student: str, template: Template, files: list[Path] | None, stray: list[str], limits_key: str) -> Task:
    task = Task(student, template.assignment)
    expected = ", ".join(f"{n}.ipynb" for n in template.notebooks)
    if files is None:
        task.problem = f"no submission (expected {expected})"
        if stray:
            task.problem += f"; notebooks that match no assignment: {', '.join(stray)}"
        return task
    too_large = [p.name for p in files if p.suffix == ".too-large"]
    if too_large:
        task.problem = f"notebook too large to grade: {', '.join(too_large)}"
        return task
    by_name = {p.name: p for p in files}
    unmatched = [p for p in files if p.stem not in template.notebooks]
    for name in template.notebooks:
        path = by_name.get(f"{name}.ipynb")
        if path is None and len(template.notebooks) == 1 and len(unmatched) == 1:
            path = unmatched[0]
            task.note = f"misnamed notebook: graded {path.name} as {name}.ipynb"
        task.notebooks[name] = str(path) if path is not None else None
    if not any(task.notebooks.values()):
        found_names = ", ".join(p.name for p in files) or "an empty folder"
        task.problem = f"no notebook named {expected} (found {found_names})"
    else:
        digest = hashlib.sha256(f"{template.key}:{limits_key}".encode())
        for name, path in sorted(task.notebooks.items()):
            digest.update(f"\0{name}\0".encode() + (Path(path).read_bytes() if path else b"<missing>"))
        task.key = digest.hexdigest()
    return task


class Progress:
    """Students done, failed and left, on one updating line (a line per event when not a terminal)."""

    def __init__(self, tasks: list[Task], enabled: bool):
        self.left = {}
        for task in tasks:
            self.left[task.student] = self.left.get(task.student, 0) + 1
        self.failed: set[str] = set()
        self.submissions = len(tasks)
        self.finished = 0
        self.enabled = enabled
        self.tty = sys.stderr.isatty()

    def update(self, task: Task, ok: bool) -> None:
        self.left[task.student] -= 1
        self.finished += 1
        if not ok:
            self.failed.add(task.student)
        if not self.enabled:
            return
        students = len(self.left)
        done = sum(1 for s, n in self.left.items() if n == 0 and s not in self.failed)
        failed = sum(1 for s in self.failed if self.left[s] == 0)
        width = 30
        filled = int(width * self.finished / max(1, self.submissions))
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.finished}/{self.submissions} submissions | "
                f"students: {done} done, {failed} with a failure, {students - done - failed} left")
        if self.tty:
            print(f"\r{line}", end="\n" if self.finished == self.submissions else "", file=sys.stderr, flush=True)
        else:
            status = "ok" if ok else "FAILED"
            print(f"{line} ({task.student}/{task.assignment}: {status})", file=sys.stderr, flush=True)


def state_path(out: Path, task: Task) -> Path:
    return out / ".state" / task.student / f"{task.assignment}.json"


def load_state(out: Path, task: Task) -> dict | None:
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
    path = state_path(out, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps({"key": task.key, "result": result}))
    scratch.replace(path)


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """A CSV file for the instructor: the header, then the rows (grades.csv, similarity.csv)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def write_grades(path: Path, rows: list[dict]) -> None:
    """grades.csv: student_id, assignment, score, max_score, reason (empty when graded normally), lms_user_id
    (the Canvas user id of a Canvas zip, else empty) and late (1 when Canvas marked the submission late, else 0)."""
    write_csv(path, ["student_id", "assignment", "score", "max_score", "reason", "lms_user_id", "late"],
              [[row["student_id"], row["assignment"], f"{row['score']:g}", f"{row['max_score']:g}", row["reason"],
                row["lms_user_id"], "1" if row["late"] else "0"] for row in rows])
