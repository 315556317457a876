"""The real autograder on the course's own assignments (`python -m autograder grade`, sandboxed kernels).

For every assignment in solutions/: the reference solution gets full marks and the blank exercise
notebook gets zero. For one wrong answer of each assignment's bank, the real autograder and the
in-process harness (tests/stand_in.py, which the bank tests use) agree on every test cell.
"""

from __future__ import annotations

import json

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.grading.secret import hand_in_key, load_secret
from autograder.reports.state import stored_results
from tests import bank
from course.chapters import chapter, slugs
from course.notebooks import solution_sources, student_notebook
from tests.grading_helpers import grade_cli, read_grades, write_submission
from tests.stand_in import StandIn, run_notebook

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

ASSIGNMENTS = list(slugs())
BANK = {module.ASSIGNMENT: module for module in bank.modules()}


def _sampled_wrong_answer(assignment: str) -> bank.Answer:
    """The bank's first wrong answer that names its mistake (so the feedback message is checked too)."""
    wrong = BANK[assignment].WRONG
    return next((answer for answer in wrong if answer.message), wrong[0])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    submissions, out = root / "submissions", root / "out"
    for assignment in ASSIGNMENTS:
        exercise = chapter(assignment).exercise
        reference = solution_sources(chapter(assignment).solution)
        write_submission(submissions, "reference", assignment, student_notebook(exercise, reference),
                         exercise.name)
        write_submission(submissions, "blank", assignment, json.loads(exercise.read_text()), exercise.name)
        if assignment in BANK:
            answer = _sampled_wrong_answer(assignment)
            write_submission(submissions, f"bank-{assignment}", assignment,
                             student_notebook(exercise, {**reference, answer.cell: answer.source}),
                             exercise.name)
    done = grade_cli(submissions, "--out", out, "--jobs", "2", "--quiet")
    return {"done": done, "out": out, "submissions": submissions}


def _hand_in_key(graded, student: str, assignment: str) -> str:
    """The key `grade` drew this hand-in's hidden inputs from (the folder's secret, the student, the notebook's
    bytes), so that the harness runs the hidden tests on the same inputs."""
    exercise = chapter(assignment).exercise
    notebooks = {exercise.stem: str(graded["submissions"] / student / assignment / exercise.name)}
    return hand_in_key(load_secret(OutputFolder(graded["out"]).secret), student, assignment, notebooks)


def test_course_is_graded(graded) -> None:
    assert ASSIGNMENTS, "no assignment in solutions/"
    assert graded["done"].returncode == 0, graded["done"].stderr


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_gets_full_marks_and_blank_gets_zero(graded, assignment: str) -> None:
    rows = read_grades(graded["out"])
    reference, blank = rows[("reference", assignment)], rows[("blank", assignment)]
    assert float(reference["max_score"]) > 0
    assert (reference["score"], reference["reason"]) == (reference["max_score"], ""), reference
    assert (blank["score"], blank["reason"]) == ("0", ""), blank


@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if a in BANK])
def test_autograder_agrees_with_the_harness(graded, bank_kernel: StandIn, assignment: str) -> None:
    answer = _sampled_wrong_answer(assignment)
    key = _hand_in_key(graded, f"bank-{assignment}", assignment)
    harness = {cell.grade_id: cell.passed
               for cell in run_notebook(bank_kernel, assignment, {answer.cell: answer.source}, key)}
    cells = stored_results(OutputFolder(graded["out"]), assignment)[f"bank-{assignment}"].cells
    real = {cell.grade_id: cell.passed for cell in cells}
    assert real == harness, f"{answer.mistake}: autograder {real} vs harness {harness}"
    messages = "\n".join(cell.message for cell in cells)
    assert answer.message in messages, messages
