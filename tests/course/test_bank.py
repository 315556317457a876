"""Tests of the tests: wrong answers lose points, differently written right answers keep them all."""

from __future__ import annotations

import pytest

from tests import bank
from course.chapters import chapter
from course.notebooks import code_cells, solution_sources
from tests.stand_in import StandIn, run_notebook, score

MODULES = bank.modules()
# The fast tier (`make test-fast`) runs a sample of each chapter's answers that does not grow with the bank:
# FAST_WRONG wrong and FAST_RIGHT right ones, each the first answer of another graded function, the functions
# taken in turn from one that moves on with the chapter's number. `make test` runs every answer: each costs a
# notebook run (up to seconds; a wrong one stops at the test cell that settles it), and the bank holds hundreds.
FAST_WRONG, FAST_RIGHT = 2, 1


def _id(case: tuple[str, bank.Answer]) -> str:
    assignment, answer = case
    return f"{assignment}:{answer.cell}:{answer.mistake}"


def _sample(answers: list[bank.Answer], count: int, start: int) -> set[int]:
    """Indices into ``answers`` of the fast sample: the first answer of each of ``count`` graded functions (in the
    order the answers first name them), taken in turn from the ``start``-th, modulo their number."""
    firsts: dict[str, int] = {}
    for index, answer in enumerate(answers):
        firsts.setdefault(answer.cell, index)
    cells = list(firsts)
    return {firsts[cells[(start + k) % len(cells)]] for k in range(min(count, len(cells)))}


def _cases(kind: str) -> list:
    """Every answer of the bank's ``kind`` list (WRONG or RIGHT), those outside the chapter's fast sample marked
    slow. The right answers' sample starts past the wrong ones', so that it tries other functions."""
    count, offset = (FAST_WRONG, 0) if kind == "WRONG" else (FAST_RIGHT, FAST_WRONG)
    cases = []
    for module in MODULES:
        answers = getattr(module, kind)
        fast = _sample(answers, count, int(module.ASSIGNMENT.split("_")[0]) + offset)
        for index, answer in enumerate(answers):
            marks = [] if index in fast else [pytest.mark.slow]
            cases.append(pytest.param((module.ASSIGNMENT, answer), marks=marks, id=_id((module.ASSIGNMENT, answer))))
    return cases


WRONG = _cases("WRONG")
RIGHT = _cases("RIGHT")


@pytest.mark.parametrize("case", WRONG)
def test_wrong_answer_loses_points(bank_kernel: StandIn, case: tuple[str, bank.Answer]) -> None:
    assignment, answer = case
    # A test cell that takes points and names the mistake settles it: the run stops there (the later cells cannot
    # give those points back or take the message away), and runs to the end when none does.
    results = run_notebook(bank_kernel, assignment, {answer.cell: answer.source},
                           until=lambda cell: not cell.passed and cell.points > 0 and answer.message in cell.message)
    earned, possible = score(results)
    assert earned < possible, f"the wrong answer '{answer.mistake}' for {answer.cell} kept full marks"
    messages = "\n".join(r.message for r in results if not r.passed)
    assert answer.message in messages, (
        f"the feedback for '{answer.mistake}' should mention {answer.message!r}; it said:\n{messages}")


@pytest.mark.parametrize("case", RIGHT)
def test_right_answer_keeps_full_marks(bank_kernel: StandIn, case: tuple[str, bank.Answer]) -> None:
    assignment, answer = case
    results = run_notebook(bank_kernel, assignment, {answer.cell: answer.source})
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
def test_reference_solution_passes_every_test_in_process(bank_kernel: StandIn, module) -> None:
    results = run_notebook(bank_kernel, module.ASSIGNMENT)
    earned, possible = score(results)
    assert possible > 0 and earned == possible, [r for r in results if not r.passed]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.ASSIGNMENT)
def test_blank_student_notebook_scores_zero_on_every_test(bank_kernel: StandIn, module) -> None:
    stubs = solution_sources(chapter(module.ASSIGNMENT).exercise)
    passed = [r.grade_id for r in run_notebook(bank_kernel, module.ASSIGNMENT, stubs) if r.passed]
    assert not passed, f"these test cells give points to a blank notebook: {passed}"


def test_a_wrong_answers_run_stops_at_the_first_test_cell_that_settles_it(bank_kernel: StandIn) -> None:
    module = next(m for m in MODULES if m.ASSIGNMENT == "01_similarity")
    answer = module.WRONG[0]
    full = run_notebook(bank_kernel, module.ASSIGNMENT, {answer.cell: answer.source})
    settles = lambda cell: not cell.passed and cell.points > 0  # noqa: E731
    stopped = run_notebook(bank_kernel, module.ASSIGNMENT, {answer.cell: answer.source}, until=settles)
    assert stopped == full[:len(stopped)] and settles(stopped[-1]) and not any(map(settles, stopped[:-1])), (
        f"the run with until= should be the full run's results up to its first failed cell with points: {stopped}")
    assert len(stopped) < len(full), f"{answer.mistake!r} fails {stopped[-1].grade_id}, yet the run went on to the end"
    never = run_notebook(bank_kernel, module.ASSIGNMENT, {answer.cell: answer.source}, until=lambda cell: False)
    assert never == full, "a run whose until= never holds should score every test cell, as a run without it"
