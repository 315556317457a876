"""The real autograder on the course's own assignments (`python -m autograder grade`, sandboxed kernels).

For every assignment in solutions/: the reference solution gets full marks and the blank exercise
notebook gets zero. For one wrong answer of each assignment's bank, the real autograder and the
in-process harness (tests/stand_in.py, which the bank tests use) agree on every test cell. The class is
tests/grading/course_class.py's, graded once for this file and tests/grading/test_warm_cold.py.
"""

from __future__ import annotations

import pytest

from autograder.grading.secret import hand_in_key, load_secret
from autograder.reports.output_folder import OutputFolder
from autograder.reports.state import stored_results
from course.chapters import chapter, slugs
from tests import bank
from tests.grading.course_class import GradedClass, graded_class, wrong_answers
from tests.grading_helpers import read_grades
from tests.stand_in import StandIn, run_notebook

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

ASSIGNMENTS = list(slugs())
BANK = {module.ASSIGNMENT: module for module in bank.modules()}
SAMPLED = "wrong0"  # the student who hands in each assignment's first wrong answer that names its mistake


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> GradedClass:
    return graded_class(tmp_path_factory.getbasetemp())


def _hand_in_key(graded: GradedClass, student: str, assignment: str) -> str:
    """The key `grade` drew this hand-in's hidden inputs from (the folder's secret, the student, the notebook's
    bytes), so that the harness runs the hidden tests on the same inputs."""
    exercise = chapter(assignment).exercise
    notebooks = {exercise.stem: str(graded.submissions / student / assignment / exercise.name)}
    return hand_in_key(load_secret(OutputFolder(graded.out).secret), student, assignment, notebooks)


def test_course_is_graded(graded: GradedClass) -> None:
    assert ASSIGNMENTS, "no assignment in solutions/"
    assert graded.returncode == 0, graded.stderr


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_gets_full_marks_and_blank_gets_zero(graded: GradedClass, assignment: str) -> None:
    rows = read_grades(graded.out)
    reference, blank = rows[("reference", assignment)], rows[("blank", assignment)]
    assert float(reference["max_score"]) > 0
    assert (reference["score"], reference["reason"]) == (reference["max_score"], ""), reference
    assert (blank["score"], blank["reason"]) == ("0", ""), blank


@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if a in BANK])
def test_autograder_agrees_with_the_harness(graded: GradedClass, bank_kernel: StandIn, assignment: str) -> None:
    answer = wrong_answers(assignment)[0]
    key = _hand_in_key(graded, SAMPLED, assignment)
    harness = {cell.grade_id: cell.passed
               for cell in run_notebook(bank_kernel, assignment, {answer.cell: answer.source}, key)}
    cells = stored_results(OutputFolder(graded.out), assignment)[SAMPLED].cells
    real = {cell.grade_id: cell.passed for cell in cells}
    assert real == harness, f"{answer.mistake}: autograder {real} vs harness {harness}"
    messages = "\n".join(cell.message for cell in cells)
    assert answer.message in messages, messages
