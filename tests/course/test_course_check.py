"""`python -m course check NOTEBOOK` (course/check.py), the validation book/setup.md offers on Binder.

It runs the notebook in a fresh kernel, every cell in order, and names each test cell passed or FAILED with its
message; its exit status says whether the notebook is ready to hand in. The page's own command is the one run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course import ROOT
from course.__main__ import main
from course.chapters import chapter
from course.check import NOT_WRITTEN, CheckedCell, Outcome, judge, report
from course.notebooks import solution_sources, student_notebook
from tests import bank
from tests.course.test_setup_page import CHAPTERS, PAGE, read_page


def _test_cell(source: str, outputs: list[dict]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade": True, "solution": False,
                                                                    "grade_id": "test_f", "points": 1}})
    cell.outputs = [nbformat.from_dict(output) for output in outputs]
    return cell


def test_a_cell_that_raises_fails_with_its_message() -> None:
    error = {"output_type": "error", "ename": "AssertionError", "evalue": "f(2) should be 4, got 5", "traceback": []}
    assert judge(_test_cell("assert f(2) == 4", [error])) == \
        CheckedCell("test_f", Outcome.FAILED, "AssertionError: f(2) should be 4, got 5")


def test_a_function_not_yet_written_is_named_as_such() -> None:
    error = {"output_type": "error", "ename": "NotImplementedError", "evalue": "", "traceback": []}
    assert judge(_test_cell("f(2)", [error])).message == "NotImplementedError" + NOT_WRITTEN


def test_a_cell_that_writes_to_stderr_fails_even_when_it_passes() -> None:
    """nbgrader scores such a cell zero; a check that passed it would send a student to lose the points."""
    stderr = {"output_type": "stream", "name": "stderr", "text": "RuntimeWarning: divide by zero\n"}
    judged = judge(_test_cell("f(0)", [stderr]))
    assert judged.outcome is Outcome.FAILED and "RuntimeWarning: divide by zero" in judged.message


def test_printed_lines_pass_and_hidden_cells_are_not_counted() -> None:
    stdout = {"output_type": "stream", "name": "stdout", "text": "f: visible tests passed\n"}
    cells = [judge(_test_cell("f(1)\nprint('f: visible tests passed')", [stdout])),
             judge(_test_cell("# Hidden tests: random inputs.", []))]
    assert [cell.outcome for cell in cells] == [Outcome.PASSED, Outcome.HIDDEN]
    text = report("f.ipynb", cells)
    assert "1 of 1 test cells pass: ready to hand in" in text and "1 hidden test cells" in text


def _check(tmp_path: Path, slug: str, answers: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The page's `python -m course check` command on the chapter's notebook, saved with these answers."""
    released = chapter(slug).exercise
    target = tmp_path / released.relative_to(ROOT)
    target.parent.mkdir(parents=True)
    nbformat.write(nbformat.from_dict(student_notebook(released, answers)), target)
    page_path = read_page(PAGE.read_text()).check.split()[-1]
    command = read_page(PAGE.read_text()).check.replace(page_path, str(released.relative_to(ROOT))).split()
    assert command[:4] == ["python", "-m", "course", "check"]
    return subprocess.run([sys.executable, *command[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=900)


def _visible(slug: str) -> list[str]:
    return [cell.metadata.nbgrader["grade_id"] for cell in nbformat.read(chapter(slug).exercise, as_version=4).cells
            if cell.metadata.get("nbgrader", {}).get("grade") and "# Visible test" in cell.source]


@pytest.mark.slow
@pytest.mark.parametrize("slug", CHAPTERS)
def test_the_reference_solutions_pass(tmp_path: Path, slug: str) -> None:
    done = _check(tmp_path, slug, solution_sources(chapter(slug).solution))
    assert done.returncode == 0, done.stdout + done.stderr
    for grade_id in _visible(slug):
        assert f"passed  {grade_id}\n" in done.stdout, done.stdout
    assert f"{len(_visible(slug))} of {len(_visible(slug))} test cells pass: ready to hand in" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("slug", CHAPTERS)
def test_the_blank_notebook_fails_with_each_cell_named(tmp_path: Path, slug: str) -> None:
    done = _check(tmp_path, slug, {})
    assert done.returncode == 1, done.stdout + done.stderr
    for grade_id in _visible(slug):
        assert f"FAILED  {grade_id}\n          NotImplementedError" in done.stdout, done.stdout
    assert f"0 of {len(_visible(slug))} test cells pass" in done.stdout


@pytest.mark.slow
def test_a_wrong_answer_fails_with_the_tests_message(tmp_path: Path) -> None:
    """One wrong function among right ones: only its test fails, and the test's teaching message is shown."""
    answers = solution_sources(chapter("01_similarity").solution)
    answers["dot"] = "def dot(a, b):\n    return float(np.sum(a + b))\n"
    done = _check(tmp_path, "01_similarity", answers)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED  test_dot\n          AssertionError: dot([1, 2, 3], [4, -5, 6]) should be" in done.stdout
    assert "passed  test_softmax\n" in done.stdout and "3 of 4 test cells pass" in done.stdout


def test_a_file_that_is_not_there_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", str(tmp_path / "missing.ipynb")])
    assert exited.value.code == 2 and "missing.ipynb is not a file" in capsys.readouterr().err


def test_a_notebook_without_test_cells_is_not_ready(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain notebook (the book page's download, say) has nothing to check: that is not a pass."""
    path = tmp_path / "page.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    assert main(["check", str(path)]) == 1
    assert "page.ipynb has no test cell" in capsys.readouterr().out


# The visible tests' memory self-checks (issue 34), run where a student runs them: in their own kernel they read the
# process's memory and fail a bank answer that breaks the task's memory rule, saying which rule.
SELF_CHECKS = [
    ("07_flash_attention", "builds the whole (n_q, n_k) causal mask, then slices tiles from it", "test_tiled_attention",
     "the task allows 12 MiB"),
    ("07_flash_attention", "ignores block_q and block_k: always tiles of 64 x 64", "test_tiled_attention",
     "not of a fixed size"),
    ("09_backward", "right values through the (n, n) Jacobian diag(p) - p p^T", "test_softmax_backward",
     "the task allows 8 MiB"),
    ("09_backward", "P saved instead of recomputed: the whole (n_q, n_k) weights saved", "test_flash_attention",
     "the task allows 12 MiB"),
    ("10_serving", "keeps every position (a cache that grows with torch.cat)", "test_RollingKVCache",
     "the task allows 2 MiB"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "mistake", "cell", "text"), SELF_CHECKS, ids=[case[1] for case in SELF_CHECKS])
def test_a_memory_self_check_fails_a_wasteful_answer_in_the_students_kernel(
        tmp_path: Path, slug: str, mistake: str, cell: str, text: str) -> None:
    module = next(module for module in bank.modules() if module.ASSIGNMENT == slug)
    wrong = next(answer for answer in module.WRONG if answer.mistake == mistake)
    answers = solution_sources(chapter(slug).solution)
    answers[wrong.cell] = wrong.source
    done = _check(tmp_path, slug, answers)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAILED  {cell}\n" in done.stdout and text in done.stdout, done.stdout
