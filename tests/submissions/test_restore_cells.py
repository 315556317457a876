"""A notebook whose nbgrader cell metadata is gone (issue 33, item 12): a Colab copy keeps the cells but not
their metadata, cells pasted into a fresh notebook keep only the code. Before, nbgrader found no cell to
grade, and the row read 0 with an empty reason. `autograder.submissions.restore` matches the student's cells to the
assignment's by the functions they define and restores the rest from the released notebook; the row says so.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from autograder.records import Template
from autograder.submissions.restore import defined_names, restore
from autograder.submissions.find import from_folder
from autograder.grading.tasks import make_tasks
from course.chapters import chapter
from course.notebooks import solution_sources
from tests.grading_helpers import grade_cli, read_grades, write_submission

RELEASED = chapter("01_similarity").exercise
ANSWERS = solution_sources(chapter("01_similarity").solution)  # grade_id -> the reference answer
GRADED = ("dot", "cosine_similarity", "similarity_matrix", "softmax")


def _released() -> dict:
    return json.loads(RELEASED.read_text())


def _ids(notebook: dict) -> list[str]:
    """The grade_id of each code cell ("-": none)."""
    return [c["metadata"].get("nbgrader", {}).get("grade_id", "-") for c in notebook["cells"]
            if c["cell_type"] == "code"]


def _colab_copy(answers: dict[str, str] = ANSWERS) -> dict:
    """The released notebook answered, as Colab saves a copy: every cell kept, no nbgrader metadata."""
    notebook = _released()
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].pop("nbgrader")["grade_id"]
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    notebook["metadata"] = {"colab": {"provenance": []}, "kernelspec": {"name": "python3", "display_name": "Python 3"}}
    return notebook


def _pasted(answers: dict[str, str] = ANSWERS) -> dict:
    """The answers pasted into a fresh notebook, one cell each, after an import cell and with a scratch cell."""
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": source, "outputs": [],
              "execution_count": None}
             for i, source in enumerate(["import numpy as np", *answers.values(), "print(dot([1, 2], [3, 4]))"])]
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}


def test_defined_names() -> None:
    assert defined_names("import numpy as np\n%matplotlib inline\ndef f(x):\n    return x\nclass C: ...\ny = 1") == {
        "f", "C"}
    assert defined_names("def broken(:\n") == set()


def test_a_colab_copy_gets_its_metadata_back() -> None:
    restored = restore(_colab_copy(), _released())
    assert restored is not None and restored.problem == ""
    assert _ids(restored.notebook) == _ids(_released()), "every cell matched in place, none inserted twice"
    sources = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in restored.notebook["cells"]
               if "nbgrader" in c["metadata"]}
    assert all(sources[g] == ANSWERS[g] for g in GRADED)
    assert restored.notes == ["nbgrader cell metadata missing (a Colab copy or pasted cells?): graded the cells that "
                              "define cosine_similarity, dot, similarity_matrix, softmax as those answers"]


def test_pasted_cells_get_the_tests_inserted_after_their_answers() -> None:
    restored = restore(_pasted(), _released())
    assert restored is not None
    ids = _ids(restored.notebook)
    assert ids == ["setup", "dot", "test_dot", "test_dot_hidden", "cosine_similarity", "test_cosine_similarity",
                   "test_cosine_similarity_hidden", "similarity_matrix", "test_similarity_matrix",
                   "test_similarity_matrix_hidden", "softmax", "test_softmax", "test_softmax_hidden", "-"], (
        "the import cell is the setup cell's very source; the scratch cell stays last")
    assert len({c["id"] for c in restored.notebook["cells"]}) == len(ids), "cell ids stay unique"


def test_a_missing_answer_is_graded_as_not_attempted() -> None:
    answers = {g: s for g, s in ANSWERS.items() if g != "softmax"}
    restored = restore(_pasted(answers), _released())
    assert "no cell defines the answer of softmax: graded as not attempted" in restored.notes
    softmax = [c for c in restored.notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "softmax"]
    assert "NotImplementedError" in "".join(softmax[0]["source"]), "the released placeholder"


def test_a_notebook_that_defines_no_answer_is_not_graded() -> None:
    restored = restore(_pasted({"x": "print('hello')"}), _released())
    assert restored.notebook is None
    assert restored.problem.startswith("the notebook has lost its nbgrader cell metadata (a Colab copy, or cells "
                                       "pasted into a new notebook?) and none of its cells defines cosine_similarity")


def test_a_deleted_visible_test_is_noted_and_restored() -> None:
    notebook = _released()
    notebook["cells"] = [c for c in notebook["cells"] if c["metadata"]["nbgrader"]["grade_id"] != "test_dot"]
    restored = restore(notebook, _released())
    assert restored.notes == ["visible test cell test_dot deleted: restored from the assignment"]
    assert _ids(restored.notebook) == _ids(_released())
    assert restore(_released(), _released()) is None, "a notebook with every cell is graded as it is"


def test_make_tasks_grades_a_restored_copy_and_leaves_the_hand_in_alone(tmp_path: Path) -> None:
    folder = tmp_path / "release" / "01_similarity"
    folder.mkdir(parents=True)
    (folder / "similarity.ipynb").write_bytes(RELEASED.read_bytes())
    template = Template("01_similarity", "key", tmp_path, ("similarity",), ())
    submissions = tmp_path / "submissions"
    handed_in = write_submission(submissions, "ada", "01_similarity", _colab_copy(), "similarity.ipynb")
    before = handed_in.read_bytes()
    write_submission(submissions, "bo", "01_similarity", _pasted({"x": "print('hello')"}), "similarity.ipynb")
    found, _ = from_folder(submissions)
    tasks = {t.student: t for t in make_tasks(found, {"01_similarity": template}, "limits", tmp_path / "restored")}
    restored = tmp_path / "restored" / "ada" / "01_similarity" / "similarity.ipynb"
    assert Path(tasks["ada"].notebooks["similarity"]) == restored
    assert tasks["ada"].note.startswith("nbgrader cell metadata missing") and handed_in.read_bytes() == before
    assert tasks["bo"].problem.startswith("similarity.ipynb: the notebook has lost its nbgrader cell metadata")


@pytest.mark.slow
def test_a_colab_copy_and_pasted_cells_grade_to_full_marks(tmp_path: Path) -> None:
    """Before: both scored 0 with an empty reason."""
    submissions = tmp_path / "submissions"
    write_submission(submissions, "ada", "01_similarity", _colab_copy(), "Copy of similarity.ipynb")
    write_submission(submissions, "bo", "01_similarity", _pasted(), "similarity.ipynb")
    write_submission(submissions, "cy", "01_similarity", _pasted({"x": "print('hello')"}), "similarity.ipynb")
    done = grade_cli(submissions, "--out", tmp_path / "out", "--no-similarity")
    rows = read_grades(tmp_path / "out")
    assert rows[("ada", "01_similarity")]["score"] == rows[("ada", "01_similarity")]["max_score"], done.stderr
    assert "misnamed notebook" in rows[("ada", "01_similarity")]["reason"]
    assert "nbgrader cell metadata missing" in rows[("ada", "01_similarity")]["reason"]
    assert rows[("bo", "01_similarity")]["score"] == rows[("bo", "01_similarity")]["max_score"], done.stderr
    assert rows[("cy", "01_similarity")]["reason"].startswith("not graded: similarity.ipynb: the notebook has lost")


def test_the_original_notebook_is_not_changed_by_restore() -> None:
    notebook = _colab_copy()
    kept = copy.deepcopy(notebook)
    restore(notebook, _released())
    assert notebook == kept
