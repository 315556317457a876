"""The worker's kept nbgrader state, piece by piece: the kept gradebook (`autograder.harness.kept_gradebook`) rolls
each job back and writes nothing to the disk; the compiled cell check (`autograder.harness.cell_metadata`) accepts
and refuses exactly what nbgrader's CheckCellMetadata does, with the same message."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.preprocessors import CheckCellMetadata

from autograder.harness.cell_metadata import CompiledCheckCellMetadata, CompiledMetadataValidator
from autograder.harness.kept_gradebook import KeptGradebook
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
