"""A grading template's gradebook is built in memory and written once (`autograder.nbgrader_course.generate_template`):
the same rows as nbgrader writes to a gradebook on disk, one transaction instead of nbgrader's commit per cell, and
no file when nbgrader fails. A template's gradebook holds the submission every job is graded as, so that a worker's
first job of an assignment only copies it (`autograder.harness.autograde.Assignments`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from nbgrader.api import Gradebook

from autograder.harness.autograde import STUDENT, Assignments
from autograder.harness.notebook import generate
from autograder.nbgrader_course import course_id, generate_assignment, generate_template
from autograder.records import GenerateJob, Template
from tests.grading_helpers import FIXTURE_SOURCE


def _course(root: Path) -> Path:
    shutil.copytree(FIXTURE_SOURCE / "toy", root / "source" / "toy")
    return root


def _rows(db: Path) -> dict[str, object]:
    """What the gradebook ``db`` says of the toy: its cells, their points, sources and checksums."""
    with Gradebook(f"sqlite:///{db}", course_id()) as gradebook:
        notebook = gradebook.find_notebook("toy", "toy")
        return {"grade": sorted((c.name, c.max_score, c.cell_type) for c in notebook.grade_cells),
                "solution": sorted(c.name for c in notebook.solution_cells),
                "task": sorted(c.name for c in notebook.task_cells),
                "source": sorted((c.name, c.cell_type, c.locked, c.source, c.checksum) for c in notebook.source_cells)}


def _transactions(db: Path) -> int:
    """The transactions that have changed the SQLite file ``db`` (its header's file change counter)."""
    return int.from_bytes(db.read_bytes()[24:28], "big")


def test_a_templates_gradebook_holds_nbgraders_rows_written_in_one_transaction(tmp_path: Path) -> None:
    course = _course(tmp_path / "course")
    on_disk, in_memory = tmp_path / "disk.db", tmp_path / "template.db"
    assert generate_assignment("toy", course, "source", tmp_path / "disk", f"sqlite:///{on_disk}") == ""
    assert generate_template("toy", course, "source", tmp_path / "release", in_memory) == ""
    assert _rows(in_memory) == _rows(on_disk)
    assert (tmp_path / "release" / "toy" / "toy.ipynb").exists()
    assert _transactions(on_disk) > 10, "nbgrader commits once per cell on disk: this test no longer tells them apart"
    assert _transactions(in_memory) == 1, (f"the template's gradebook took {_transactions(in_memory)} transactions: "
                                           "it should be built in memory and written at once")


def test_an_sqlite_without_memdb_has_nbgrader_write_the_same_rows_itself(tmp_path: Path, monkeypatch) -> None:
    from autograder import nbgrader_course

    monkeypatch.setattr(nbgrader_course, "MEMDB", False)  # SQLite before 3.36 (this one has it)
    course = _course(tmp_path / "course")
    on_disk, template = tmp_path / "disk.db", tmp_path / "template.db"
    assert generate_assignment("toy", course, "source", tmp_path / "disk", f"sqlite:///{on_disk}") == ""
    assert generate_template("toy", course, "source", tmp_path / "release", template, STUDENT) == ""
    assert _rows(template) == _rows(on_disk)
    with Gradebook(f"sqlite:///{template}", course_id()) as gradebook:
        assert gradebook.find_submission("toy", STUDENT).student.id == STUDENT


def test_a_failed_generation_writes_no_gradebook(tmp_path: Path) -> None:
    course = _course(tmp_path / "course")
    gradebook = tmp_path / "template.db"
    assert generate_template("no_such_assignment", course, "source", tmp_path / "release", gradebook) != ""
    assert not gradebook.exists()


def test_a_workers_copy_of_a_template_holds_the_graded_submission_already(tmp_path: Path) -> None:
    course = _course(tmp_path / "course")
    template = Template("toy", "key", tmp_path / "template", ("toy",), ())
    assert generate(GenerateJob(template, str(course), "source")).status == "done"
    with Gradebook(f"sqlite:///{template.gradebook}", course_id()) as gradebook:
        grades = gradebook.find_submission_notebook("toy", "toy", STUDENT).grades
        assert {g.name for g in grades} == {c.name for c in gradebook.find_notebook("toy", "toy").grade_cells}
    made = _transactions(template.gradebook)
    assignments = Assignments()  # its folder of copies lives as long as it does
    kept = assignments.get(template, str(tmp_path))
    try:
        copied = _transactions(Path(kept.db_url.removeprefix("sqlite:///")))
    finally:
        kept.gradebook.close()
    assert copied == made, (f"a worker's copy of the template took {copied - made} transactions more: the template "
                            "should hold the submission its jobs are graded as")


def test_a_template_checks_its_cells_with_the_compiled_check(tmp_path: Path, monkeypatch) -> None:
    # nbgrader's CheckCellMetadata validates each cell with jsonschema.validate, which checks the schema itself every
    # time; a template is made with the worker's compiled check instead (autograder.harness.cell_metadata).
    from nbgrader.nbgraderformat import common

    checked: list[object] = []
    validate = common.jsonschema.validate
    monkeypatch.setattr(common.jsonschema, "validate", lambda *args, **kwargs: (checked.append(args),
                                                                                 validate(*args, **kwargs)))
    course = _course(tmp_path / "course")
    assert generate_assignment("toy", course, "source", tmp_path / "plain", f"sqlite:///{tmp_path / 'plain.db'}") == ""
    assert checked, "nbgrader's own generation no longer checks cells this way: this test tells nothing apart"
    checked.clear()
    assert generate(GenerateJob(Template("toy", "key", tmp_path / "template", ("toy",), ()), str(course),
                                "source")).status == "done"
    assert not checked, f"a template's generation checked {len(checked)} cells with nbgrader's uncompiled check"
