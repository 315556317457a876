"""Tests of the tests: wrong answers lose points, differently written right answers keep them all."""

from __future__ import annotations

import pytest

from tests import bank
from course.chapters import chapter
from course.notebooks import code_cells, solution_sources
from tests.harness import run_notebook, score

MODULES = bank.modules()
# The fast tier (`make test-fast`) runs the first answers of each graded function, the whole bank runs in
# `make test`: a chapter's answers cost up to 2 s each, and the bank holds hundreds.
FAST_WRONG, FAST_RIGHT = 2, 1


def _id(case: tuple[str, bank.Answer]) -> str:
    assignment, answer = case
    return f"{assignment}:{answer.cell}:{answer.mistake}"


def _cases(kind: str, fast: int) -> list:
    """Every answer of the bank's ``kind`` list (WRONG or RIGHT), each one past the first ``fast`` of its
    function marked slow."""
    cases, seen = [], {}
    for module in MODULES:
        for answer in getattr(module, kind):
            key = (module.ASSIGNMENT, answer.cell)
            seen[key] = seen.get(key, 0) + 1
            marks = [] if seen[key] <= fast else [pytest.mark.slow]
            cases.append(pytest.param((module.ASSIGNMENT, answer), marks=marks, id=_id((module.ASSIGNMENT, answer))))
    return cases


WRONG = _cases("WRONG", FAST_WRONG)
RIGHT = _cases("RIGHT", FAST_RIGHT)


@pytest.mark.parametrize("case", WRONG)
def test_wrong_answer_loses_points(case: tuple[str, bank.Answer]) -> None:
    assignment, answer = case
    results = run_notebook(assignment, {answer.cell: answer.source})
    earned, possible = score(results)
    assert earned < possible, f"the wrong answer '{answer.mistake}' for {answer.cell} kept full marks"
    messages = "\n".join(r.message for r in results if not r.passed)
    assert answer.message in messages, (
        f"the feedback for '{answer.mistake}' should mention {answer.message!r}; it said:\n{messages}")


@pytest.mark.parametrize("case", RIGHT)
def test_right_answer_keeps_full_marks(case: tuple[str, bank.Answer]) -> None:
    assignment, answer = case
    results = run_notebook(assignment, {answer.cell: answer.source})
    failed = [f"{r.grade_id}: {r.message}" for r in results if not r.passed]
    assert not failed, f"the correct answer '{answer.mistake}' for {answer.cell} lost points:\n" + "\n".join(failed)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.ASSIGNMENT)
def test_bank_covers_every_graded_function(module) -> None:
    solution_cells = [meta["grade_id"] for meta, _ in code_cells(chapter(module.ASSIGNMENT).solution)
                      if meta.get("solution")]
    for cell in solution_cells:
        wrong = sum(a.cell == cell for a in module.WRONG)
        right = sum(a.cell == cell for a in module.RIGHT)
        assert wrong >= 3, f"{module.ASSIGNMENT}: only {wrong} wrong answers for {cell} (want at least 3)"
        assert right >= 1, f"{module.ASSIGNMENT}: no differently written right answer for {cell}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.ASSIGNMENT)
def test_reference_solution_passes_every_test_in_process(module) -> None:
    results = run_notebook(module.ASSIGNMENT)
    earned, possible = score(results)
    assert possible > 0 and earned == possible, [r for r in results if not r.passed]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.ASSIGNMENT)
def test_blank_student_notebook_scores_zero_on_every_test(module) -> None:
    stubs = solution_sources(chapter(module.ASSIGNMENT).exercise)
    passed = [r.grade_id for r in run_notebook(module.ASSIGNMENT, stubs) if r.passed]
    assert not passed, f"these test cells give points to a blank notebook: {passed}"
