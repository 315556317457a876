"""Helpers of the autograder's tests: a tiny fixture course, submissions made from it (folders and zips), the CLI
and the class gradebook's scores."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from autograder.grading.options import Options
from autograder.grading.plan import RunPlan
from autograder.grading.templates import read_course
from autograder.records import Task, Template
from autograder.reports.output_folder import OutputFolder
from autograder.workers.dispatch import Isolation
from course import ROOT
from course.notebooks import solution_sources, student_notebook  # noqa: F401 - re-exported for the tests

FIXTURE_SOURCE = ROOT / "tests" / "fixtures" / "course" / "source"
HIDDEN_MARKER = "SECRET-HIDDEN-TEST-MARKER"
# Each student's total auto score in a class gradebook (nbgrader's schema; SQLite and PostgreSQL alike).
SCORES_BY_STUDENT = ("select student.id, sum(grade.auto_score) from grade "
                     "join submitted_notebook on grade.notebook_id = submitted_notebook.id "
                     "join submitted_assignment on submitted_notebook.assignment_id = submitted_assignment.id "
                     "join student on submitted_assignment.student_id = student.id group by student.id")

# A manually graded answer (2 points) and a task (1 point) to add to the toy notebook: left for manual grading.
MANUAL_ANSWER = {"cell_type": "markdown", "metadata": {"nbgrader": {
    "grade": True, "solution": True, "locked": False, "points": 2, "grade_id": "explain", "schema_version": 3}},
    "source": "Explain why `add` is commutative.\n\n=== BEGIN MARK SCHEME ===\nAny argument.\n=== END MARK SCHEME ==="}
MANUAL_TASK = {"cell_type": "markdown", "metadata": {"nbgrader": {
    "grade": False, "solution": False, "task": True, "locked": True, "points": 1, "grade_id": "plot_task",
    "schema_version": 3}}, "source": "Plot `add` over a grid (graded by hand)."}


def plan_of(options: Options, tasks: list[Task], templates: dict[str, Template]) -> RunPlan:
    """The plan `grade` makes of ``options`` once ``tasks`` of ``templates`` are known (`make_plan`), its output
    folder made and its kernels forked warm where ``options`` asks for it (from no zygote: a stand-in pool starts
    none)."""
    from autograder.grading.secret import load_secret
    from autograder.reports.state import stored_rows

    out = OutputFolder(options.out)
    out.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # as `open_output` makes it in a run of `grade`
    return RunPlan.of(options, out, read_course(options.source), stored_rows(out), templates, tasks,
                      Isolation("", options.warm), {}, load_secret(options.secret_file or out.secret))


class NoRecorder:
    """Stands in for `autograder.workers.recorder.Recorder` where nbgrader's gradebook is not the subject."""

    def __init__(self, *args) -> None: ...
    def record(self, *args) -> None: ...
    def manual_scores(self, *args) -> dict: return {}
    def close(self) -> None: ...


class InstantPool:
    """Stands in for `autograder.workers.pool.Pool`: every job comes back at once with ``result``."""

    def __init__(self, result) -> None:
        self.result = result
        self.jobs = 0

    def run(self, jobs: list, timeout: float, done) -> None:
        for index, _ in enumerate(jobs):
            self.jobs += 1
            done(index, self.result)


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    """A zip at ``path`` holding ``members`` (name in the zip -> bytes); returns ``path``."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def write_submission(folder: Path, student: str, assignment: str, notebook: dict | str | bytes,
                     filename: str | None = None) -> Path:
    """Write SUBMISSIONS/<student>/<assignment>/<filename> (default: <assignment>.ipynb)."""
    path = folder / student / assignment / (filename or f"{assignment}.ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(notebook, dict):
        path.write_text(json.dumps(notebook))
    elif isinstance(notebook, str):
        path.write_text(notebook)
    else:
        path.write_bytes(notebook)
    return path


def grade_cli(*args: str | Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``python -m autograder grade ARGS`` as an instructor would."""
    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def read_grades(out: Path) -> dict[tuple[str, str], dict]:
    """(student_id, assignment) -> the row of grades.csv."""
    with open(OutputFolder(out).grades, newline="") as handle:
        rows = list(csv.DictReader(handle))
    keyed = {(r["student_id"], r["assignment"]): r for r in rows}
    assert len(keyed) == len(rows), "grades.csv has duplicate rows"
    return keyed


def released_notebooks(cache: Path, source: Path = FIXTURE_SOURCE) -> dict[str, Path]:
    """assignment -> its released (student) notebook, generated by the grader's own template step."""
    from autograder.grading.templates import prepare_templates
    from autograder.workers.pool import Pool

    pool = Pool(1, cache / "logs")
    try:
        templates = prepare_templates(read_course(source), cache, pool)
    finally:
        pool.close()
    return {name: template.released / f"{template.notebooks[0]}.ipynb" for name, template in templates.items()}


@dataclass(frozen=True)
class ToyClass:
    """The fixture course's templates, generated once a session (the ``toy_class`` fixture of tests/conftest.py).

    cache: the generated templates, as an output folder's cache holds them: copy it (`OutputFolder.cache`), never
        write in it.
    released: assignment -> its released (student) notebook, in ``cache``.
    """

    cache: Path
    released: dict[str, Path]


def require_sandbox() -> None:
    """Fail (never skip) where no grading sandbox can be made: grading needs one, so the suite must say so."""
    import pytest

    from autograder.sandbox.probe import SandboxUnavailable, check_isolation

    try:
        check_isolation()
    except SandboxUnavailable as error:
        pytest.fail(f"no grading sandbox can be made on this machine: {error}")


def gradebook_scores(db: Path) -> dict[tuple[str, str], float]:
    """(student_id, assignment) -> its points in the nbgrader gradebook ``db``: the manual points where a grader
    gave them, else the automatic ones."""
    query = ("select st.id, a.name, sum(coalesce(g.manual_score, g.auto_score, 0)) from grade g "
             "join submitted_notebook n on g.notebook_id = n.id join submitted_assignment s on n.assignment_id = s.id "
             "join assignment a on s.assignment_id = a.id join student st on s.student_id = st.id "
             "group by st.id, a.name")
    with sqlite3.connect(db) as connection:
        return {(student, assignment): score for student, assignment, score in connection.execute(query)}
