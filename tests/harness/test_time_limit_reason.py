"""An endless loop in a student's function (issue 33, item 13): the row's reason names the function and the
limit it ran past, not "ChannelError: the kernel took too long to answer"; and the progress line does not count
a student who handed nothing in as a failure."""

from __future__ import annotations

import nbformat
import pytest

from autograder.channel.wire import ChannelError
from autograder.harness.feedback import incidents
from autograder.grading.progress import Progress
from autograder.records import Task
from tests.stand_in import StandIn

STUDENT = "def spin(x):\n    while True:\n        pass\n\ndef fine(x):\n    return x\n"


@pytest.mark.slow
def test_a_call_past_the_limit_names_the_function_and_the_limit() -> None:
    kernel = StandIn()
    try:
        session = kernel.session()
        session.request({"op": "exec"}, STUDENT)
        session.timeout = 1.0
        spin = session.lookup(["spin", "fine"])["spin"]
        with pytest.raises(ChannelError) as caught:
            spin(1)
        assert str(caught.value) == ("the notebook's kernel stopped answering the grader: spin() took too long to "
                                     "answer: no result within 1 s (--cell-timeout); an endless loop?")
    finally:
        kernel.close()


@pytest.mark.slow
def test_the_cell_limit_is_named_when_it_is_the_one_that_ran_out() -> None:
    kernel = StandIn()
    try:
        session = kernel.session()
        session.request({"op": "exec"}, STUDENT)
        session.timeout = 30.0
        spin = session.lookup(["spin"])["spin"]
        session.start_cell(1.0)
        with pytest.raises(ChannelError, match=r"spin\(\) took too long to answer: no result within the 1 s a test "
                                               r"cell may take \(--cell-timeout\)"):
            spin(1)
    finally:
        kernel.close()


def test_the_reason_names_the_test_and_the_function() -> None:
    """Before: the reason column was empty and the feedback page said only that the kernel took too long."""
    cell = nbformat.v4.new_code_cell("assert dot([1], [1]) == 1", metadata={"nbgrader": {"grade": True,
                                                                                         "grade_id": "test_dot"}})
    cell.outputs = [nbformat.v4.new_output("error", ename="ChannelError", traceback=[], evalue=(
        "the notebook's kernel stopped answering the grader: dot() took too long to answer: no result within the "
        "60 s a test cell may take (--cell-timeout); an endless loop?"))]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    assert incidents(notebook, 60) == ["test 'test_dot': dot() took too long to answer: no result within the 60 s a "
                                       "test cell may take (--cell-timeout); an endless loop?"]


def test_no_submission_is_no_failure_in_the_progress_line(capsys) -> None:
    handed_in, missing = Task("ada", "01_similarity"), Task("bo", "01_similarity", missing=True)
    progress = Progress([handed_in, missing], enabled=True)
    progress.update(missing, False)
    progress.update(handed_in, True)
    err = capsys.readouterr().err
    assert "students: 2 done, 0 with a failure, 0 left" in err and "bo/01_similarity: no submission" in err, err
    assert "FAILED" not in err
