"""Fast unit tests: what a student's feedback keeps of a graded notebook (`autograder.feedback`) and the class
report (`autograder.report`), without grading anything."""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.feedback import (HIDDEN_PLACEHOLDER, OUTPUT_LIMIT, cell_message, incidents, sanitize_for_feedback,
                                 shorten)
from autograder.records import Template
from autograder.report import failure_summary, failures, render_report, student_table

HIDDEN_TEST = "x = 1\n### BEGIN HIDDEN TESTS\nassert secret_check(add)\n### END HIDDEN TESTS\n"


def _code(source: str, outputs: list, grade_id: str = "cell", grade: bool = False) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source, outputs=outputs)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": grade}
    return cell


def _error(ename: str, evalue: str, traceback: list[str]) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=traceback)


def test_hidden_test_code_and_its_traceback_are_removed() -> None:
    error = _error("AssertionError", "add(2, 3) should be 5", ["Traceback", "assert secret_check(add)", "AssertionError"])
    notebook = nbformat.v4.new_notebook(cells=[_code(HIDDEN_TEST, [error], grade=True)])
    sanitize_for_feedback(notebook)
    (cell,) = notebook.cells
    assert cell.source == "x = 1\n" + HIDDEN_PLACEHOLDER
    assert cell.outputs[0].traceback == ["AssertionError: add(2, 3) should be 5"]
    assert "secret_check" not in nbformat.writes(notebook)


def test_a_visible_cell_keeps_its_last_traceback_lines() -> None:
    error = _error("ValueError", "bad", [f"line {i}" for i in range(30)])
    notebook = nbformat.v4.new_notebook(cells=[_code("add(1, 2)", [error])])
    sanitize_for_feedback(notebook)
    assert notebook.cells[0].outputs[0].traceback == [f"line {i}" for i in range(10, 30)]


def test_long_and_large_outputs_are_cut() -> None:
    stream = nbformat.v4.new_output("stream", name="stdout", text="x" * 50_000)
    html = nbformat.v4.new_output("display_data", data={"text/html": "<p>" * 10_000})
    image = nbformat.v4.new_output("display_data", data={"image/png": "A" * 300_000})
    notebook = nbformat.v4.new_notebook(cells=[_code("print('x' * 50_000)", [stream, html, image])])
    sanitize_for_feedback(notebook)
    stream, html, image = notebook.cells[0].outputs
    assert len(stream.text) < OUTPUT_LIMIT + 100 and "more characters not shown" in stream.text
    assert len(html.data["text/html"]) < OUTPUT_LIMIT + 100
    assert image.data == {"text/plain": "[a large output, not shown]"}


def test_shorten_says_how_much_was_cut() -> None:
    assert shorten("abc", 10) == "abc"
    assert shorten("a" * 15, 10) == "a" * 10 + "\n... [5 more characters not shown]"


def test_cell_message_prefers_the_error_then_stderr() -> None:
    error = _error("AssertionError", "\x1b[31mwrong\x1b[0m", [])
    stderr = nbformat.v4.new_output("stream", name="stderr", text="careful\n")
    assert cell_message(_code("", [stderr, error])) == "AssertionError: wrong"
    assert cell_message(_code("", [stderr])) == "wrote to stderr (a graded cell must not): careful"
    assert cell_message(_code("", [])) == ""


TRACEBACK = ["\x1b[31m---------------------------------------------------------------------------\x1b[0m",
             "\x1b[31mAssertionError\x1b[0m                            Traceback (most recent call last)",
             "Cell \x1b[0;32mIn[7], line 2\x1b[0m\n\x1b[1;32m      1\x1b[0m x \x1b[38;5;241m=\x1b[39m \x1b[38;5;241m1\x1b[39m\n"
             "\x1b[0;32m----> 2\x1b[0m \x1b[38;5;28;01massert\x1b[39;00m mean([\x1b[38;5;241m1\x1b[39m]) \x1b[38;5;241m==\x1b[39m "
             "\x1b[38;5;241m1\x1b[39m\n", "\x1b[31mAssertionError\x1b[0m: "]


def test_a_bare_assert_of_a_visible_test_is_shown_by_its_line_a_hidden_one_never() -> None:
    visible = _code("x = 1\nassert mean([1]) == 1", [_error("AssertionError", "", TRACEBACK)], grade=True)
    assert cell_message(visible) == "AssertionError in assert mean([1]) == 1"
    hidden = _code(HIDDEN_TEST, [_error("AssertionError", "", TRACEBACK)], grade=True)
    assert cell_message(hidden) == "AssertionError: "
    with_message = _code("assert mean([1]) == 1, 'mean([1]) should be 1'",
                         [_error("AssertionError", "mean([1]) should be 1", TRACEBACK)], grade=True)
    assert cell_message(with_message) == "AssertionError: mean([1]) should be 1"


def test_incidents_name_timeouts_and_memory_errors_outside_tests() -> None:
    cells = [_code("", [_error("CellTimeoutError", "", [])], grade_id="add"),
             _code("", [_error("MemoryError", "", [])], grade_id="mean"),
             _code("", [_error("MemoryError", "", [])], grade_id="test_mean", grade=True)]
    notes = incidents(nbformat.v4.new_notebook(cells=cells), cell_timeout=3)
    assert notes == ["cell 'add' ran past the 3 s limit and was interrupted", "cell 'mean' ran out of memory"]


def test_failure_summary_names_the_mistake_or_the_first_line() -> None:
    assert failure_summary("AssertionError: x\nThis is what you get with this mistake: dividing by d_k.") == \
        "mistake: dividing by d_k"
    assert failure_summary("NotImplementedError: \n") == "not attempted: the solution cell still raises NotImplementedError"
    assert failure_summary("TypeError: <object at 0x7f00deadbeef>\nmore") == "TypeError: <object at 0x...>"
    assert failure_summary("") == "(no message)"


def _rows() -> tuple[list[dict], dict[str, Template]]:
    template = Template("toy", "key", Path("/nonexistent"), ("toy",), (("toy", "test_add", 3.0), ("toy", "test_mean", 2.0)),
                        False)
    wrong = {"notebook": "toy", "grade_id": "test_mean", "points": 0.0, "max_points": 2.0, "passed": False,
             "message": "AssertionError: <script>alert('mean')</script>"}
    right = {"notebook": "toy", "grade_id": "test_add", "points": 3.0, "max_points": 3.0, "passed": True, "message": ""}
    rows = [{"student_id": s, "assignment": "toy", "score": 3.0, "max_score": 5.0, "reason": "",
             "result": {"status": "graded", "reason": "", "cells": [right, wrong]}} for s in ("ada", "bo")]
    rows.append({"student_id": "<img src=x onerror=alert(1)>", "assignment": "toy", "score": 0.0, "max_score": 5.0,
                 "reason": "not graded: x", "result": {"status": "failed", "reason": "<b>kernel died</b>", "cells": []}})
    return rows, {"toy": template}


def test_the_report_counts_and_escapes_everything_from_submissions() -> None:
    rows, templates = _rows()
    assert failures(rows) == [(("toy", "test_mean", "AssertionError: <script>alert('mean')</script>"), 2)]
    page = render_report(rows, templates)
    assert "<script>" not in page and "<img src=x" not in page and "<b>kernel died" not in page
    assert "&lt;script&gt;" in page and "&lt;b&gt;kernel died&lt;/b&gt;" in page
    assert "3 students, 3 submissions, 2 graded, 1 not graded." in page
    assert page.count("data:image/png;base64,") == 2
    assert "<td>test_mean</td><td class=n>0</td><td class=n>2</td><td class=n>0%</td><td class=n>0</td>" in page
    assert "<td>test_add</td><td class=n>2</td><td class=n>2</td><td class=n>100%</td><td class=n>0</td>" in page


def test_an_empty_class_report() -> None:
    page = render_report([], {})
    assert "0 students, 0 submissions" in page and "No test failed." in page and "Every submission was graded." in page


def _cell(grade_id: str, message: str) -> dict:
    return {"notebook": "toy", "grade_id": grade_id, "points": 0.0, "max_points": 1.0, "passed": False,
            "message": message}


def test_not_attempted_is_counted_per_test_not_among_the_mistakes() -> None:
    rows, templates = _rows()
    blank = [_cell("test_add", "NotImplementedError: "), _cell("test_mean", "NotImplementedError: ")]
    rows += [{"student_id": f"blank{i}", "assignment": "toy", "score": 0.0, "max_score": 5.0, "reason": "",
              "result": {"status": "graded", "reason": "", "cells": blank}} for i in range(3)]
    assert failures(rows) == [(("toy", "test_mean", "AssertionError: <script>alert('mean')</script>"), 2)]
    page = render_report(rows, templates)
    assert "<td>test_add</td><td class=n>2</td><td class=n>5</td><td class=n>40%</td><td class=n>3</td>" in page


def test_ties_among_the_most_frequent_failures_keep_a_stable_order() -> None:
    cells = [_cell(f"test_{name}", f"AssertionError: {name} is wrong") for name in "dcba"]
    rows = [{"student_id": "ada", "assignment": "toy", "score": 0.0, "max_score": 4.0, "reason": "",
             "result": {"status": "graded", "reason": "", "cells": cells}}]
    assert [key[1] for key, _ in failures(rows, top=3)] == ["test_a", "test_b", "test_c"]


def test_the_student_table_shows_each_score_and_what_failed() -> None:
    rows, templates = _rows()
    rows[1]["result"]["cells"] = [_cell("test_add", "NotImplementedError: "), _cell("test_mean", "AssertionError: x")]
    table = {entry["id"]: entry["assignments"]["toy"] for entry in student_table(rows, ["toy"])}
    assert table["ada"] == {"score": 3.0, "max_score": 5.0, "failed": "test_mean"}
    assert table["bo"]["failed"] == "test_add (not attempted), test_mean"
    assert table["<img src=x onerror=alert(1)>"]["failed"] == "not graded: x"
    page = render_report(rows, templates)
    assert "<h2>Students</h2>" in page and "<td class=n>3 / 5</td><td>test_mean</td>" in page
