"""exercises/ is exactly what nbgrader generates from solutions/, and both follow the course's rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.grading.release import release
from course import ROOT
from course.chapters import chapter, slugs
from course.notebooks import only_notebook

pytestmark = pytest.mark.slow

PRESENT = list(slugs())


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _notebook(folder: Path) -> Path:
    """The one notebook of a chapter folder; the registry names it."""
    path = only_notebook(folder)
    assert path.stem == chapter(folder.name).notebook, f"{path} is not the notebook the registry names"
    return path


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release")
    release(out, tuple(PRESENT))
    return out


def test_every_assignment_has_a_solution_and_an_exercise() -> None:
    assert PRESENT[:2] == ["01_similarity", "02_scaled_attention"]
    for assignment in PRESENT:
        assert _notebook(ROOT / "exercises" / assignment).name == _notebook(ROOT / "solutions" / assignment).name


@pytest.mark.parametrize("assignment", PRESENT)
def test_exercises_equal_what_nbgrader_generates(assignment: str, regenerated: Path) -> None:
    committed = _notebook(ROOT / "exercises" / assignment)
    fresh = regenerated / assignment / committed.name
    assert json.loads(committed.read_text()) == json.loads(fresh.read_text()), (
        f"{committed} is out of date: run `python -m autograder release` and commit exercises/")


@pytest.mark.parametrize("assignment", PRESENT)
def test_exercises_hold_no_solution_and_no_hidden_test(assignment: str) -> None:
    text = _notebook(ROOT / "exercises" / assignment).read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "autograder"):
        assert marker not in text, f"the student notebook of {assignment} contains {marker!r}"
    stubs = [c for c in _cells(_notebook(ROOT / "exercises" / assignment))
             if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert stubs and all("raise NotImplementedError()" in "".join(c["source"]) for c in stubs)


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
@pytest.mark.parametrize("assignment", PRESENT)
def test_notebooks_are_committed_without_outputs(folder: str, assignment: str) -> None:
    for cell in _cells(_notebook(ROOT / folder / assignment)):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"{folder}/{assignment} has outputs"


@pytest.mark.parametrize("assignment", PRESENT)
def test_every_graded_cell_is_autograded(assignment: str) -> None:
    ids, points = set(), 0.0
    for cell in _cells(_notebook(ROOT / "solutions" / assignment)):
        meta = cell.get("metadata", {}).get("nbgrader")
        assert meta is not None, f"{assignment}: a cell without nbgrader metadata: {''.join(cell['source'])[:60]!r}"
        assert meta["grade_id"] not in ids, f"{assignment}: duplicate grade_id {meta['grade_id']}"
        ids.add(meta["grade_id"])
        if meta.get("grade"):
            assert cell["cell_type"] == "code" and not meta.get("solution"), (
                f"{assignment}: {meta['grade_id']} would need manual grading; every graded cell must be an autograded test")
            assert meta.get("points", 0) > 0 and meta.get("locked"), f"{assignment}: {meta['grade_id']} needs points and a lock"
            points += meta["points"]
        if meta.get("solution"):
            assert cell["cell_type"] == "code", f"{assignment}: written answers belong in the book, not in graded cells"
    assert points > 0
