"""The class gradebook commits its results in batches (`autograder.reports.gradebook.ClassGradebook.record`): another
reader sees them a batch at a time and all of them once it is closed, with the scores nbgrader's rows should hold."""

from __future__ import annotations

import shutil
from pathlib import Path

from nbgrader.api import Gradebook

from autograder.nbgrader_course import course_id
from autograder.harness.notebook import generate
from autograder.records import CellResult, GenerateJob, Result, Task, Template
from autograder.reports.gradebook import ClassGradebook
from tests.grading_helpers import FIXTURE_SOURCE

CELLS = (("toy", "test_add", 1.0), ("toy", "test_add_hidden", 2.0), ("toy", "test_mean", 1.0),
         ("toy", "test_mean_hidden", 1.0))


def _template(root: Path) -> Template:
    shutil.copytree(FIXTURE_SOURCE / "toy", root / "course" / "source" / "toy")
    template = Template("toy", "key", root / "template", ("toy",), CELLS)
    assert generate(GenerateJob(template, str(root / "course"), "source")).status == "done"
    return template


def _result(points: float) -> Result:
    return Result("graded", "", tuple(CellResult("toy", grade_id, min(points, top), top, points >= top, "")
                                      for _, grade_id, top in CELLS))


def _committed(db_url: str) -> dict[str, float]:
    """Each student's total auto score, as another connection reads the gradebook (a reader: the course's id, which
    the gradebook holds, so that opening it writes nothing)."""
    with Gradebook(db_url, course_id()) as reader:
        return {s.student.id: sum(g.auto_score or 0.0 for nb in s.notebooks for g in nb.grades)
                for s in reader.find_assignment("toy").submissions}


def test_results_are_committed_a_batch_at_a_time_and_all_on_close(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'class.db'}"
    gradebook = ClassGradebook(db_url, {"toy": _template(tmp_path)}, batch=2, batch_seconds=3600)
    try:
        gradebook.record(Task("ada", "toy"), _result(1.0))
        assert _committed(db_url) == {}, "one result is less than a batch: nothing should be committed yet"
        gradebook.record(Task("bo", "toy"), _result(0.0))
        assert _committed(db_url) == {"ada": 4.0, "bo": 0.0}
        gradebook.record(Task("ada", "toy"), _result(5.0))  # graded again: the same rows, new scores
        gradebook.record(Task("cy", "toy"), Result("failed", "the kernel died"))
        gradebook.record(Task("di", "toy"), _result(5.0))
    finally:
        gradebook.close()
    assert _committed(db_url) == {"ada": 5.0, "bo": 0.0, "cy": 0.0, "di": 5.0}
    with Gradebook(db_url, course_id()) as reader:
        grades = reader.find_submission_notebook("toy", "toy", "di").grades
        assert {g.name for g in grades} == {grade_id for _, grade_id, _ in CELLS}
        assert not any(g.needs_manual_grade for g in grades)
