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
from autograder.submissions import Found


def make_tasks(found: dict[str, Found], templates: dict[str, Template], grading_key: str) -> list[Task]:
    """A task for every student found and every assignment that anyone handed in (or that the course has)."""
    given = sorted({a for entry in found.values() for part in (entry.files, entry.others, entry.problems)
                    for a in part if a})
    assignments = [a for a in given if a in templates] or sorted(templates)
    unknown = [a for a in given if a not in templates]
    tasks = []
    for student, entry in sorted(found.items()):
        for assignment in assignments:
            tasks.append(_task(student, templates[assignment], entry, grading_key))
        for assignment in unknown:
            if assignment in entry.files or assignment in entry.others:
                tasks.append(Task(student, assignment, note="; ".join(entry.notes),
                                  problem=f"'{assignment}' is not an assignment of this course"))
    return tasks


def _found_instead(entry: Found, assignment: str) -> str:
    """What the student handed in that is not the assignment's notebook, as a clause ('' when nothing)."""
    names = [p.name for p in entry.files.get("", [])] + entry.others.get(assignment, []) + entry.others.get("", [])
    return f"; found instead: {', '.join(names)}" if names else ""


def _task(student: str, template: Template, entry: Found, grading_key: str) -> Task:
    task = Task(student, template.assignment, note="; ".join(entry.notes), lms_user_id=entry.lms_user_id,
                late=template.assignment in entry.late)
    expected = ", ".join(f"{n}.ipynb" for n in template.notebooks)
    problems = entry.problems.get("", []) + entry.problems.get(template.assignment, [])
    files = entry.files.get(template.assignment)
    if problems:
        task.problem = "; ".join(problems)
        return task
    if files is None:
        instead = _found_instead(entry, template.assignment)
        task.problem, task.missing = f"no submission (expected {expected}){instead}", not instead
        return task
    by_name = {p.name: p for p in files}
    unmatched = [p for p in files if p.stem not in template.notebooks]
    for name in template.notebooks:
        path = by_name.get(f"{name}.ipynb")
        if path is None and len(template.notebooks) == 1 and len(unmatched) == 1:
            path = unmatched[0]
            task.note = "; ".join(filter(None, [task.note, f"misnamed notebook: graded {path.name} as {name}.ipynb"]))
        task.notebooks[name] = str(path) if path is not None else None
    if not any(task.notebooks.values()):
        found_names = ", ".join([p.name for p in files] + entry.others.get(template.assignment, [])) or "an empty folder"
        task.problem = f"no notebook named {expected} (found {found_names})"
    else:
        digest = hashlib.sha256(f"{template.key}:{grading_key}".encode())
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


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
GRADES_HEADER = ["student_id", "assignment", "score", "max_score", "reason", "lms_user_id", "late"]


def spreadsheet_safe(text: str) -> str:
    """``text`` as a spreadsheet shows it, never runs it: a field starting with = + - @ tab or CR gets a leading
    single quote (OWASP's advice against CSV injection; the csv module quotes the rest)."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def from_spreadsheet_safe(text: str) -> str:
    """The field `spreadsheet_safe` was given: what a program reading grades.csv back must use."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_STARTS) else text


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """A CSV file for the instructor (grades.csv, similarity.csv): the header, then the rows, every field
    `spreadsheet_safe` (numbers written here are never negative, so they pass unchanged)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([[spreadsheet_safe(field) for field in row] for row in rows])


def write_grades(path: Path, rows: list[dict]) -> None:
    """grades.csv: student_id, assignment, score, max_score, reason (empty when graded normally), lms_user_id
    (the Canvas user id of a Canvas zip, else empty) and late (1 when Canvas marked the submission late, else 0)."""
    write_csv(path, GRADES_HEADER,
              [[row["student_id"], row["assignment"], f"{row['score']:g}", f"{row['max_score']:g}", row["reason"],
                row["lms_user_id"], "1" if row["late"] else "0"] for row in rows])
