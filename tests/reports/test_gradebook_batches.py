"""The class gradebook commits its results in batches (`autograder.reports.gradebook.ClassGradebook.record`): another
reader sees them a batch at a time and all of them once it is closed, with the scores nbgrader's rows should hold.
An assignment's own rows (its notebooks and cells) are made in the batch too, as nbgrader's ``update_or_create_*``
make them, without a commit per cell."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, MissingEntry

from autograder.nbgrader_course import course_id
from autograder.harness.notebook import generate
from autograder.records import CellResult, GenerateJob, Result, Task, Template
from autograder.reports.gradebook import ClassGradebook
from tests.grading_helpers import FIXTURE_SOURCE

CELLS = (("toy", "test_add", 1.0), ("toy", "test_add_hidden", 2.0), ("toy", "test_mean", 1.0),
         ("toy", "test_mean_hidden", 1.0))


def _template(root: Path, points: dict[str, float] | None = None) -> Template:
    """The toy's template under ``root``; ``points``: grade id -> the points its cell is given instead."""
    shutil.copytree(FIXTURE_SOURCE / "toy", root / "course" / "source" / "toy")
    source = root / "course" / "source" / "toy" / "toy.ipynb"
    notebook = json.loads(source.read_text())
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in (points or {}):
            cell["metadata"]["nbgrader"]["points"] = points[grade_id]
    source.write_text(json.dumps(notebook))
    cells = tuple((name, grade_id, (points or {}).get(grade_id, top)) for name, grade_id, top in CELLS)
    template = Template("toy", "key", root / "template", ("toy",), cells)
    assert generate(GenerateJob(template, str(root / "course"), "source")).status == "done"
    return template


def _transactions(db: Path) -> int:
    """The transactions that have changed the SQLite file ``db`` (its header's file change counter)."""
    return int.from_bytes(db.read_bytes()[24:28], "big")


def _result(points: float) -> Result:
    return Result("graded", "", tuple(CellResult("toy", grade_id, min(points, top), top, points >= top, "")
                                      for _, grade_id, top in CELLS))


def _committed(db_url: str) -> dict[str, float]:
    """Each student's total auto score, as another connection reads the gradebook (a reader: the course's id, which
    the gradebook holds, so that opening it writes nothing)."""
    with Gradebook(db_url, course_id()) as reader:
        try:
            submissions = reader.find_assignment("toy").submissions
        except MissingEntry:  # nothing committed yet, not even the assignment
            return {}
        return {s.student.id: sum(g.auto_score or 0.0 for nb in s.notebooks for g in nb.grades) for s in submissions}


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


def test_an_assignments_rows_are_written_with_its_first_batch_in_one_transaction(tmp_path: Path) -> None:
    db = tmp_path / "class.db"
    gradebook = ClassGradebook(f"sqlite:///{db}", {"toy": _template(tmp_path)}, batch=1)
    try:
        before = _transactions(db)
        gradebook.record(Task("ada", "toy"), _result(1.0))
        made = _transactions(db) - before
    finally:
        gradebook.close()
    assert made == 1, (f"recording the first result of a new assignment took {made} transactions: its notebook and "
                       "cells should be made in the batch's one, not committed one by one as nbgrader's "
                       "update_or_create_* do")
    assert _committed(f"sqlite:///{db}") == {"ada": 4.0}


def test_a_template_whose_points_changed_updates_the_assignments_cells(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'class.db'}"
    first = ClassGradebook(db_url, {"toy": _template(tmp_path / "before")})
    try:
        first.record(Task("ada", "toy"), _result(1.0))
    finally:
        first.close()
    changed = _template(tmp_path / "after", {"test_add": 3.0})
    second = ClassGradebook(db_url, {"toy": changed})
    try:
        second.record(Task("bo", "toy"), _result(0.0))
    finally:
        second.close()
    with Gradebook(db_url, course_id()) as reader:
        assert reader.find_grade_cell("test_add", "toy", "toy").max_score == 3.0, \
            "a cell's points changed in the template: the class gradebook's cell should say so, as nbgrader's would"
        assert reader.find_assignment("toy").max_score == 7.0
        assert {s.student.id for s in reader.find_assignment("toy").submissions} == {"ada", "bo"}


def test_an_assignment_rolled_back_with_its_batch_is_made_again(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'class.db'}"
    template = _template(tmp_path)
    unknown_cell = Template("toy", "key", template.folder, ("toy",), (*CELLS, ("toy", "no_such_cell", 1.0)))
    gradebook = ClassGradebook(db_url, {"toy": unknown_cell}, batch=1)
    try:
        with pytest.raises(KeyError):
            gradebook.record(Task("ada", "toy"), _result(1.0))
        gradebook.templates["toy"] = template
        gradebook.record(Task("ada", "toy"), _result(1.0))
    finally:
        gradebook.close()
    assert _committed(db_url) == {"ada": 4.0}
