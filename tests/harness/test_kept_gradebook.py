"""The worker's kept nbgrader state, piece by piece: the kept gradebook (`autograder.harness.kept_gradebook`) rolls
each job back and writes nothing to the disk; the compiled cell check (`autograder.harness.cell_metadata`) accepts
and refuses exactly what nbgrader's CheckCellMetadata does, with the same message; the kept OverwriteCells,
SaveAutoGrades and OverwriteKernelspec give what nbgrader's give, through rows read once
(`autograder.harness.template_rows`) instead of a query a cell."""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.preprocessors import CheckCellMetadata, OverwriteCells, OverwriteKernelspec, SaveAutoGrades
from sqlalchemy import event

from autograder.harness.cell_metadata import CompiledCheckCellMetadata, CompiledMetadataValidator
from autograder.harness.kept_gradebook import (KeptGradebook, KeptOverwriteCells, KeptOverwriteKernelspec,
                                               KeptSaveAutoGrades)
from autograder.harness.template_rows import TemplateRows
from autograder.nbgrader_course import course_id, stamp_new_gradebook

GRADED = {"grade": True, "solution": False, "locked": True, "points": 2, "grade_id": "test_add", "schema_version": 3}
ANSWER = {"grade": False, "solution": True, "locked": False, "grade_id": "add", "schema_version": 3}


def _gradebook(folder: Path) -> str:
    """A gradebook of one assignment ``a``, one notebook ``nb``, one test cell worth 2 and one student's rows."""
    url = f"sqlite:///{folder / 'gradebook.db'}"
    stamp_new_gradebook(url)
    with warnings.catch_warnings(), Gradebook(url, course_id()) as gradebook:
        warnings.simplefilter("ignore")  # nbgrader's update_or_create_submission trips SQLAlchemy's autoflush warnings
        gradebook.add_assignment("a")
        gradebook.add_notebook("nb", "a")
        gradebook.add_grade_cell("test_add", "nb", "a", max_score=2, cell_type="code")
        gradebook.update_or_create_student("student")
        gradebook.update_or_create_submission("a", "student")
    return url


def _grade(gradebook: Gradebook):  # noqa: ANN202 - nbgrader's Grade
    return gradebook.find_grade("test_add", "nb", "a", "student")


def test_each_job_is_rolled_back_and_nothing_reaches_the_disk(tmp_path: Path) -> None:
    url = _gradebook(tmp_path)
    on_disk = (tmp_path / "gradebook.db").read_bytes()
    kept = KeptGradebook(url, course_id())
    try:
        with kept.job():
            _grade(kept).auto_score = 2.0
            kept.db.commit()  # as nbgrader's SaveAutoGrades commits each cell: a savepoint of the job's transaction
            with Gradebook(url, course_id()) as other:
                assert _grade(other).auto_score is None, "a job's commit should stay inside its transaction"
            assert _grade(kept).score == 2.0
        with pytest.raises(RuntimeError), kept.job():
            _grade(kept).auto_score = 1.0
            kept.db.commit()
            raise RuntimeError("the job failed")
        with kept.job():
            assert _grade(kept).auto_score is None, "the previous jobs' scores should be gone"
    finally:
        kept.dispose()
    assert (tmp_path / "gradebook.db").read_bytes() == on_disk


def _notebook(*metadata: dict, cell_type: str = "code") -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    for meta in metadata:
        cell = nbformat.v4.new_code_cell("x = 1") if cell_type == "code" else nbformat.v4.new_markdown_cell("x")
        cell.metadata["nbgrader"] = copy.deepcopy(meta)
        notebook.cells.append(cell)
    return notebook


CASES = {
    "valid": _notebook(GRADED, ANSWER),
    "points not a number": _notebook({**GRADED, "points": "all of them"}),
    "a key of the wrong type": _notebook({**GRADED, "locked": "yes"}),
    "a required key missing": _notebook({key: value for key, value in GRADED.items() if key != "grade_id"}),
    "schema too old": _notebook({**GRADED, "schema_version": 2}),
    "schema too new": _notebook({**GRADED, "schema_version": 4}),
    "duplicate grade ids": _notebook(GRADED, GRADED),
    "markdown grade cell not a solution": _notebook(GRADED, cell_type="markdown"),
}


def _outcome(check, notebook: nbformat.NotebookNode) -> str:  # noqa: ANN001 - a validator's validate_nb
    try:
        check(copy.deepcopy(notebook))
    except Exception as error:  # noqa: BLE001 - the outcome compared is whatever is raised
        return f"{type(error).__name__}: {error}"
    return "ok"


@pytest.mark.parametrize("case", CASES)
def test_the_compiled_check_says_what_nbgraders_says(case: str) -> None:
    notebook = CASES[case]
    expected = _outcome(MetadataValidator().validate_nb, notebook)
    assert (expected == "ok") == (case == "valid"), expected
    assert _outcome(CompiledMetadataValidator().validate_nb, notebook) == expected
    step = CompiledCheckCellMetadata()
    for _ in range(2):  # one validator kept from notebook to notebook
        assert _outcome(lambda nb: step(nb, {}), notebook) == _outcome(lambda nb: CheckCellMetadata()(nb, {}),
                                                                       notebook)


KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def _template_gradebook(folder: Path) -> tuple[str, nbformat.NotebookNode]:
    """A template's gradebook of assignment ``a`` (notebook ``nb``: a locked test cell worth 2, an answer cell and
    a task worth 3, their source cells with nbgrader's checksums) and the released notebook it was made from."""
    from nbgrader.utils import compute_checksum

    test = nbformat.v4.new_code_cell("assert add(1, 2) == 3")
    test.metadata["nbgrader"] = copy.deepcopy(GRADED)
    answer = nbformat.v4.new_code_cell("def add(a, b):\n    raise NotImplementedError()")
    answer.metadata["nbgrader"] = copy.deepcopy(ANSWER)
    task = nbformat.v4.new_markdown_cell("Explain add.")
    task.metadata["nbgrader"] = {"grade": False, "solution": False, "task": True, "locked": True, "points": 3,
                                 "grade_id": "explain", "schema_version": 3}
    released = nbformat.v4.new_notebook(cells=[answer, test, task])
    url = f"sqlite:///{folder / 'gradebook.db'}"
    stamp_new_gradebook(url)
    with warnings.catch_warnings(), Gradebook(url, course_id()) as gradebook:
        warnings.simplefilter("ignore")  # nbgrader's update_or_create_submission trips SQLAlchemy's autoflush warnings
        gradebook.add_assignment("a")
        gradebook.add_notebook("nb", "a", kernelspec=json.dumps(KERNELSPEC))
        gradebook.add_grade_cell("test_add", "nb", "a", max_score=2, cell_type="code")
        gradebook.add_solution_cell("add", "nb", "a")
        gradebook.add_task_cell("explain", "nb", "a", max_score=3, cell_type="markdown")
        for cell in released.cells:
            meta = cell.metadata["nbgrader"]
            meta["checksum"] = compute_checksum(cell)
            gradebook.add_source_cell(meta["grade_id"], "nb", "a", cell_type=cell.cell_type, locked=meta["locked"],
                                      source=cell.source, checksum=meta["checksum"])
        gradebook.update_or_create_student("student")
        gradebook.update_or_create_submission("a", "student")
    return url, released


def _tampered(released: nbformat.NotebookNode, case: str) -> nbformat.NotebookNode:
    notebook = copy.deepcopy(released)
    answer, test, task = notebook.cells
    if case == "test edited":
        test.source = "pass"
    elif case == "points changed":
        test.metadata.nbgrader["points"] = 100
        task.metadata.nbgrader["points"] = 100
    elif case == "unlocked":
        test.metadata.nbgrader["locked"] = False
    elif case == "made markdown":
        notebook.cells[1] = nbformat.v4.new_markdown_cell(test.source, metadata=test.metadata, id=test.id)
    elif case == "unknown cell":
        answer.metadata.nbgrader["grade_id"] = "not_in_the_template"
    elif case == "answered":
        answer.source = "def add(a, b):\n    return a + b"
    return notebook


def _resources(url: str) -> dict:
    """What nbgrader's converter gives each step of notebook ``nb`` of ``a``, graded as ``student``."""
    return {"nbgrader": {"notebook": "nb", "assignment": "a", "student": "student", "db_url": url}}


@contextmanager
def _kept_job(url: str) -> Iterator[tuple[KeptGradebook, TemplateRows, list[str]]]:
    """The template's rows (`TemplateRows`), its kept gradebook in one job, and the SELECTs the kept gradebook
    makes until the job ends."""
    with Gradebook(url, course_id()) as gradebook:
        rows = TemplateRows(gradebook, "a", "student")
    kept = KeptGradebook(url, course_id())
    selects: list[str] = []
    event.listen(kept.engine, "before_cursor_execute",
                 lambda *args: selects.append(args[2]) if args[2].lstrip().upper().startswith("SELECT") else None)
    try:
        with kept.job():
            yield kept, rows, selects
    finally:
        kept.dispose()


@pytest.mark.parametrize("case", ["as released", "answered", "test edited", "points changed", "unlocked",
                                  "made markdown", "unknown cell"])
def test_the_kept_overwrite_cells_restores_what_nbgraders_does(tmp_path: Path, case: str, caplog) -> None:
    url, released = _template_gradebook(tmp_path)
    expected, _ = OverwriteCells()(_tampered(released, case), _resources(url))
    said = [record.getMessage() for record in caplog.records]
    caplog.clear()
    with _kept_job(url) as (kept, rows, selects):
        got, _ = KeptOverwriteCells(kept=kept, rows=rows)(_tampered(released, case), _resources(url))
    assert got == expected, f"{case}: the kept step restored another notebook than nbgrader's OverwriteCells"
    assert [record.getMessage() for record in caplog.records] == said, f"{case}: it warned otherwise"
    assert bool(said) == (case in ("test edited", "points changed", "made markdown", "unknown cell")), (
        f"{case}: nbgrader's step warns of what it restores (a test cell is locked whatever its flag says): {said}")
    assert selects == [], (
        "the kept OverwriteCells queried the gradebook: it should look the template's cells up in TemplateRows")


def _graded(released: nbformat.NotebookNode, case: str) -> nbformat.NotebookNode:
    """The released notebook as Execute leaves it: the test passed, failed, or was not answered."""
    notebook = copy.deepcopy(released)
    answer, test, _ = notebook.cells
    if case in ("passed", "failed"):
        answer.source = "def add(a, b):\n    return a + b"
    if case == "failed":
        test.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="", traceback=[])]
    return notebook


def _rows(gradebook: Gradebook) -> list[tuple]:
    submission = gradebook.find_submission_notebook("nb", "a", "student")
    return sorted([(g.name, g.auto_score, g.needs_manual_grade) for g in submission.grades] +
                  [(c.name, c.auto_comment) for c in submission.comments], key=str)


@pytest.mark.parametrize("case", ["not answered", "passed", "failed"])
def test_the_kept_save_auto_grades_writes_what_nbgraders_does(tmp_path: Path, case: str) -> None:
    url, released = _template_gradebook(tmp_path)
    with _kept_job(url) as (kept, rows, selects):
        KeptSaveAutoGrades(kept=kept, rows=rows)(_graded(released, case), _resources(url))
        queries = len(selects)
        got = _rows(kept)
    with warnings.catch_warnings(), Gradebook(url, course_id()) as gradebook:
        warnings.simplefilter("ignore")
        before = _rows(gradebook)
    SaveAutoGrades()(_graded(released, case), _resources(url))  # nbgrader's, on the file itself
    with Gradebook(url, course_id()) as gradebook:
        expected = _rows(gradebook)
    assert got == expected != before, f"{case}: the kept step wrote {got}, nbgrader's {expected} (before: {before})"
    assert queries <= 2, (
        f"{case}: the kept SaveAutoGrades made {queries} queries: it should load the submission's grades and "
        "comments once (TemplateRows' ids), not query each cell's")


def test_a_cell_the_template_lacks_is_refused_as_nbgrader_refuses_it(tmp_path: Path) -> None:
    url, released = _template_gradebook(tmp_path)
    notebook = _graded(released, "passed")
    notebook.cells[1].metadata.nbgrader["solution"] = True  # a test cell made an answer: no comment row for it
    with pytest.raises(MissingEntry):
        SaveAutoGrades()(copy.deepcopy(notebook), _resources(url))
    with pytest.raises(MissingEntry), _kept_job(url) as (kept, rows, _):
        KeptSaveAutoGrades(kept=kept, rows=rows)(notebook, _resources(url))


def test_the_kept_overwrite_kernelspec_gives_the_templates_kernelspec_without_a_query(tmp_path: Path) -> None:
    url, released = _template_gradebook(tmp_path)
    submitted = copy.deepcopy(released)
    submitted.metadata["kernelspec"] = {"name": "the-students-own", "display_name": "theirs", "language": "python"}
    expected, _ = OverwriteKernelspec()(copy.deepcopy(submitted), _resources(url))
    assert expected.metadata["kernelspec"] == KERNELSPEC
    with _kept_job(url) as (kept, rows, selects):
        got, _ = KeptOverwriteKernelspec(kept=kept, rows=rows)(copy.deepcopy(submitted), _resources(url))
    assert got == expected, "the kept step gave another notebook than nbgrader's OverwriteKernelspec"
    assert selects == [], (
        "the kept OverwriteKernelspec queried the gradebook: the template's kernelspec is in TemplateRows")
