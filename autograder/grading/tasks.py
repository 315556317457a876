"""Tasks: one per student and assignment, each with what to grade (or why it cannot be) and a key, a hash of
the submitted notebooks, the template and the grading settings (`autograder.grading.options.Options.grading_key`),
under which its result is stored (`autograder.reports.state`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from autograder.submissions.canvas_names import expected_name
from autograder.records import Task, Template
from autograder.submissions.restore import restore_file
from autograder.submissions.find import Found


def make_tasks(found: Mapping[str, Found], templates: Mapping[str, Template], grading_key: str,
               restored: Path | None = None) -> list[Task]:
    """A task for every student found and every assignment that anyone handed in (or that the course has).
    With ``restored`` (a folder of the grader's own), a notebook that lost nbgrader cells is graded from a
    restored copy written there (`autograder.submissions.restore`)."""
    given = sorted({a for entry in found.values() for part in (entry.files, entry.others, entry.problems)
                    for a in part if a})
    assignments = [a for a in given if a in templates] or sorted(templates)
    unknown = [a for a in given if a not in templates]
    tasks = []
    for student, entry in sorted(found.items()):
        for assignment in assignments:
            tasks.append(_task(student, templates[assignment], entry, grading_key, restored))
        for assignment in unknown:
            if assignment in entry.files or assignment in entry.others:
                tasks.append(Task(student, assignment, note="; ".join(entry.notes), lms_name=entry.lms_name,
                                  problem=f"'{assignment}' is not an assignment of this course"))
    return tasks


def _found_instead(entry: Found, assignment: str) -> str:
    """What the student handed in that is not the assignment's notebook, as a clause ('' when nothing)."""
    names = [p.name for p in entry.files.get("", [])] + entry.others.get(assignment, []) + entry.others.get("", [])
    return f"; found instead: {', '.join(names)}" if names else ""


def _task(student: str, template: Template, entry: Found, grading_key: str, restored: Path | None) -> Task:
    task = Task(student, template.assignment, note="; ".join(entry.notes), lms_user_id=entry.lms_user_id,
                late=template.assignment in entry.late, lms_name=entry.lms_name)
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
        renamed = [p for p in unmatched if expected_name(p.name, {f"{name}.ipynb"})]
        if path is None and (len(renamed) == 1 or (len(template.notebooks) == 1 and len(unmatched) == 1)):
            path = renamed[0] if len(renamed) == 1 else unmatched[0]
            task.note = "; ".join(filter(None, [task.note, f"misnamed notebook: graded {path.name} as {name}.ipynb"]))
        task.notebooks[name] = str(path) if path is not None else None
    if restored is not None and any(task.notebooks.values()):
        _restore(task, template, restored)
        if task.problem:
            return task
    if not any(task.notebooks.values()):
        found_names = ", ".join([p.name for p in files] + entry.others.get(template.assignment, [])) or "an empty folder"
        task.problem = f"no notebook named {expected} (found {found_names})"
    else:
        digest = hashlib.sha256(f"{template.key}:{grading_key}".encode())
        for name, path in sorted(task.notebooks.items()):
            digest.update(f"\0{name}\0".encode() + (Path(path).read_bytes() if path else b"<missing>"))
        task.key = digest.hexdigest()
    return task


def _restore(task: Task, template: Template, restored: Path) -> None:
    """Point ``task`` at restored copies of notebooks that lost nbgrader cells, with the notes that say so, or set
    its problem when one cannot be graded."""
    for name, path in sorted(task.notebooks.items()):
        if path is None:
            continue
        graded, notes, problem = restore_file(Path(path), template.released / f"{name}.ipynb",
                                              restored / task.student / task.assignment / f"{name}.ipynb")
        if problem:
            task.problem = f"{Path(path).name}: {problem}"
            return
        task.notebooks[name] = str(graded)
        task.note = "; ".join(filter(None, [task.note, *notes]))
