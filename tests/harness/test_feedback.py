"""Fast unit tests: what a student's feedback keeps of a graded notebook (`autograder.harness.feedback`), that its page
shows and never runs what the student wrote (`autograder.harness.safe_html`), and the class report (`autograder.reports.report`),
without grading anything."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from autograder.harness.feedback import (HIDDEN_OUTPUT, HIDDEN_PLACEHOLDER, OUTPUT_LIMIT, cell_message, hidden_lines,
                                 WRAP_STYLE, incidents, sanitize_for_feedback, shorten, wrapped)
from autograder.harness.safe_html import CSP_META, with_csp
from autograder.records import CellResult, GradeRow, Status, Template
from autograder.reports.report import (StudentCell, failure_summary, failures, not_attempted, render_report,
                                       student_table)

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


def test_what_a_hidden_test_cell_printed_and_copies_of_its_lines_are_not_shown() -> None:
    # Solution code can hook IPython to print each cell's source: into that cell, or later into its own cells.
    printed = nbformat.v4.new_output("stream", name="stdout", text=HIDDEN_TEST)
    shown = nbformat.v4.new_output("display_data",
                                   data={"text/plain": HIDDEN_TEST, "text/html": f"<pre>{HIDDEN_TEST}</pre>"})
    error = _error("AssertionError", "add(2, 3) should be 5", [])
    later = nbformat.v4.new_output("stream", name="stdout", text=f"stolen: {HIDDEN_TEST}")
    notebook = nbformat.v4.new_notebook(cells=[_code(HIDDEN_TEST, [printed, shown, error], grade=True),
                                               _code("mean([1])", [later, shown.copy()], grade_id="mean")])
    sanitize_for_feedback(notebook)
    test, solution = notebook.cells
    assert [o.output_type for o in test.outputs] == ["stream", "error"]
    assert test.outputs[0].text == HIDDEN_OUTPUT
    assert solution.outputs[0].text == \
        "stolen: x = 1\n### BEGIN HIDDEN TESTS\n[hidden test code: not shown]\n### END HIDDEN TESTS\n"
    assert "secret_check" not in nbformat.writes(notebook)


def test_cell_message_leaves_out_the_lines_of_hidden_tests() -> None:
    stderr = nbformat.v4.new_output("stream", name="stderr", text=HIDDEN_TEST)
    error = _error("AssertionError", "expected assert secret_check(add) to hold", [])
    assert "secret_check" not in cell_message(_code(HIDDEN_TEST, [stderr], grade=True))
    assert cell_message(_code(HIDDEN_TEST, [error], grade=True)) == \
        "AssertionError: expected [hidden test code: not shown] to hold"
    assert hidden_lines([_code(HIDDEN_TEST, [])]) == ["assert secret_check(add)"]


def test_a_visible_cell_keeps_its_last_traceback_lines() -> None:
    error = _error("ValueError", "bad", [f"line {i}" for i in range(30)])
    notebook = nbformat.v4.new_notebook(cells=[_code("add(1, 2)", [error])])
    sanitize_for_feedback(notebook)
    assert notebook.cells[0].outputs[0].traceback == [f"line {i}" for i in range(10, 30)]


def test_long_and_large_outputs_are_cut() -> None:
    stream = nbformat.v4.new_output("stream", name="stdout", text="x" * 50_000)
    html = nbformat.v4.new_output("display_data", data={"text/html": "<b>x</b>" * 3_000})
    image = nbformat.v4.new_output("display_data", data={"image/png": "A" * 300_000})
    notebook = nbformat.v4.new_notebook(cells=[_code("print('x' * 50_000)", [stream, html, image])])
    sanitize_for_feedback(notebook)
    stream, html, image = notebook.cells[0].outputs
    assert len(stream.text) < OUTPUT_LIMIT + 100 and "more characters not shown" in stream.text
    assert len(html.data["text/html"]) < OUTPUT_LIMIT + 100 and "more characters not shown" in html.data["text/html"]
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


def _rows() -> tuple[list[GradeRow], dict[str, Template]]:
    template = Template("toy", "key", Path("/nonexistent"), ("toy",), (("toy", "test_add", 3.0), ("toy", "test_mean", 2.0)))
    wrong = CellResult("toy", "test_mean", 0.0, 2.0, False, "AssertionError: <script>alert('mean')</script>")
    right = CellResult("toy", "test_add", 3.0, 3.0, True, "")
    rows = [GradeRow(s, "toy", 3.0, 5.0, cells=(right, wrong)) for s in ("ada", "bo")]
    rows.append(GradeRow("<img src=x onerror=alert(1)>", "toy", 0.0, 5.0, Status.FAILED, "<b>kernel died</b>"))
    return rows, {"toy": template}


def test_the_report_counts_and_escapes_everything_from_submissions() -> None:
    rows, templates = _rows()
    assert failures(rows) == [(("toy", "test_mean", "AssertionError: <script>alert('mean')</script>"), 2)]
    page = render_report(rows, templates)
    assert "<script>" not in page and "<img src=x" not in page and "<b>kernel died" not in page
    assert "&lt;script&gt;" in page and "&lt;b&gt;kernel died&lt;/b&gt;" in page
    assert "3 students, 3 submissions, 2 graded, 1 not graded." in page
    assert page.count("<svg ") == 2 and "data:image/png" not in page, "the histogram and the pass-rate chart, inline"
    assert "<td>test_mean</td><td class=n>0</td><td class=n>2</td><td class=n>0%</td><td class=n>0</td>" in page
    assert "<td>test_add</td><td class=n>2</td><td class=n>2</td><td class=n>100%</td><td class=n>0</td>" in page


def test_an_empty_class_report() -> None:
    page = render_report([], {})
    assert "0 students, 0 submissions" in page and "No test failed." in page and "Every submission was graded." in page


# What a student's solution cell can display that would run in a feedback page, one output each.
SVG_WITH_SCRIPT = ('<svg xmlns="http://www.w3.org/2000/svg" onload="document.title+=\' svg\'">'
                   "<script>document.title+=' svg'</script><circle r='5'/></svg>")
HOSTILE = [
    {"text/html": "<script>document.title += ' script'</script>", "text/plain": "<script>"},
    {"text/html": "<img src=x onerror=\"document.title += ' handler'\">", "text/plain": "img"},
    {"text/html": "<a href=\" JaVaScRiPt:document.title += ' link'\">open</a>", "text/plain": "link"},
    {"text/html": "<iframe src=\"data:text/html,<script>parent.document.title+=1</script>\"></iframe>"
                  "<style>body { display: none }</style>", "text/plain": "frame"},
    {"image/svg+xml": SVG_WITH_SCRIPT, "text/plain": "<Figure size 640x480 with 1 Axes>"},
    {"application/javascript": "document.title += ' js'"},
    {"text/javascript": "document.title += ' js'", "text/plain": "<IPython.core.display.Javascript object>"},
    {"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0},
     "text/plain": "IntSlider(value=0)"},
    {"application/vnd.bokehjs_exec.v0+json": "", "application/javascript": "Bokeh.embed()", "text/html": "<div id=b>"},
    {"application/vnd.plotly.v1+json": {"data": []}, "text/html": "<script>Plotly.newPlot('p')</script>",
     "text/plain": "Figure()"},
    {"text/markdown": "[open](javascript:document.title+=1) <b onclick='x()'>bold</b> <script>x()</script>",
     "text/plain": "<IPython.core.display.Markdown object>"},
]
SAFE_TYPES = {"text/plain", "text/html", "text/latex", "application/json", "image/png", "image/jpeg"}
TABLE = ('<table border="1" class="dataframe"><thead><tr><th>head</th></tr></thead>'
         "<tbody><tr><td>0.5</td></tr></tbody></table>")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


class _Elements(HTMLParser):
    """Every start tag of a page (name, attributes) and the text inside its <script> elements."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[str] = []
        self.in_script = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))
        if tag == "script":
            self.scripts.append("")
            self.in_script = True

    def handle_endtag(self, tag: str) -> None:
        self.in_script = self.in_script and tag != "script"

    def handle_data(self, data: str) -> None:
        if self.in_script:
            self.scripts[-1] += data


def _active(html: str) -> list[str]:
    """What in ``html`` a browser could run or load: script-like elements, event handlers, javascript: links."""
    found = []
    for tag, attrs in _Elements(html).tags:
        if tag in {"script", "svg", "img", "iframe", "object", "embed", "style", "link", "meta", "base", "form"}:
            found.append(f"<{tag}>")
        found += [f"<{tag} {name}>" for name, value in attrs.items()
                  if name.startswith("on") or re.match(r"\s*javascript:", value, re.IGNORECASE)]
    return found


def _student_notebook(outputs: list[dict]) -> nbformat.NotebookNode:
    cell = _code("show()", [nbformat.v4.new_output("display_data", data=data) for data in outputs], grade_id="show")
    cell.metadata["nbgrader"].update(solution=True, locked=False)
    task = nbformat.v4.new_markdown_cell("Use `a < b` here.\n\n> a quote")
    task.metadata["nbgrader"] = {"grade_id": "task", "locked": True, "grade": False, "solution": False}
    added = nbformat.v4.new_markdown_cell("my notes <img src=x onerror=\"document.title+=' md'\"> [go](javascript:x())")
    return nbformat.v4.new_notebook(cells=[task, cell, added])


def test_no_student_script_survives_sanitising() -> None:
    notebook = _student_notebook(HOSTILE)
    sanitize_for_feedback(notebook)
    task, cell, added = notebook.cells
    for before, output in zip(HOSTILE, cell.outputs):
        assert set(output.data) <= SAFE_TYPES, (before, output.data)
        assert not _active(output.data.get("text/html", "")), (before, output.data)
    assert [o.data["text/plain"] for o in cell.outputs[4:8]] == [
        "<Figure size 640x480 with 1 Axes>",
        "[an output of type application/javascript, not shown: feedback pages never run code]",
        "<IPython.core.display.Javascript object>", "IntSlider(value=0)"]
    # Disallowed markup is escaped: the student sees what their cell displayed, as text.
    assert "&lt;script&gt;document.title += ' script'&lt;/script&gt;" in cell.outputs[0].data["text/html"]
    assert '<a>open</a>' in cell.outputs[2].data["text/html"]
    assert "<p><a>open</a> <b>bold</b> &lt;script&gt;x()&lt;/script&gt;</p>" in cell.outputs[10].data["text/html"]
    # The student's own Markdown cell is sanitised; the locked task cell nbgrader restored is the instructor's.
    assert "<img" not in added.source and "&lt;img" in added.source
    assert task.source == "Use `a < b` here.\n\n> a quote"


def test_text_images_and_a_plain_table_survive_sanitising() -> None:
    outputs = [{"text/plain": "tensor([1., 2.])"}, {"image/png": PNG, "text/plain": "<Figure>"},
               {"text/html": TABLE, "text/plain": "   head\n0   0.5"},
               {"text/markdown": "**mean** is `0.5`", "text/plain": "<IPython.core.display.Markdown object>"}]
    notebook = _student_notebook([dict(data) for data in outputs])
    sanitize_for_feedback(notebook)
    text, image, table, markdown = notebook.cells[1].outputs
    assert text.data == {"text/plain": "tensor([1., 2.])"}
    assert image.data == {"image/png": PNG, "text/plain": "<Figure>"}
    assert table.data["text/html"] == TABLE
    assert markdown.data["text/html"].strip() == "<p><strong>mean</strong> is <code>0.5</code></p>"


def test_output_metadata_that_loads_or_frames_is_dropped() -> None:
    metadata = {"filenames": {"image/png": "https://example.org/track.png"}, "text/html": {"isolated": True},
                "image/png": {"width": 40}}
    output = nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/html": TABLE}, metadata=metadata)
    notebook = nbformat.v4.new_notebook(cells=[_code("show()", [output])])
    sanitize_for_feedback(notebook)
    assert notebook.cells[0].outputs[0].metadata == {"text/html": {}, "image/png": {"width": 40}}


def _feedback_page(notebook: nbformat.NotebookNode, root: Path) -> str:
    """The HTML nbgrader's GenerateFeedback writes for ``notebook`` (its exporter, template and config)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    exporter = HTMLExporter(config=GenerateFeedback(coursedir=CourseDirectory(root=str(root))).config)
    resources = {"nbgrader": {"notebook": "toy", "score": 0.0, "max_score": 1.0, "late_penalty": 0.0}}
    page, _ = exporter.from_notebook_node(notebook, resources=resources)
    return page


def test_a_feedback_page_starts_its_head_with_a_policy_that_forbids_scripts(tmp_path: Path) -> None:
    notebook = _student_notebook(HOSTILE)
    sanitize_for_feedback(notebook)
    page = with_csp(_feedback_page(notebook, tmp_path))
    elements = _Elements(page)
    tags = [tag for tag, _ in elements.tags]
    assert tags[tags.index("head") + 1] == "meta" and page.count(CSP_META) == 1
    policy = elements.tags[tags.index("head") + 1][1]
    assert policy["http-equiv"] == "Content-Security-Policy"
    for directive in ("default-src 'none'", "script-src 'none'", "object-src 'none'", "connect-src 'none'",
                      "frame-src 'none'", "img-src data:"):
        assert directive in policy["content"]
    # The only scripts left are the template's MathJax (which the policy blocks too); no output has a handler.
    assert all("mathjax" in attrs.get("src", attrs.get("type", "")) for tag, attrs in elements.tags if tag == "script")
    assert not any("document.title" in script for script in elements.scripts)
    assert not [a for _, attrs in elements.tags for a in attrs if a.startswith("on")]


def test_with_csp_refuses_a_page_without_head() -> None:
    with pytest.raises(ValueError, match="without <head>"):
        with_csp("<html><body>hi</body></html>")


def _title_in_chromium(page: str, folder: Path) -> str:
    path = folder / "page.html"
    path.write_text(page)
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={folder / 'profile'}",
               "--dump-dom", path.as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    return re.search(r"<title>(.*?)</title>", dom, re.DOTALL).group(1)


@pytest.mark.slow  # starts headless Chromium twice
@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="Debian's chromium is not installed (.ci/run does not install it): this test opens a "
                           "feedback page in a real browser to show a planted script does not run")
def test_a_browser_runs_no_planted_script_under_the_policy(tmp_path: Path) -> None:
    # Not sanitised, so the scripts are really in the page: only the policy stands between them and the browser.
    notebook = _student_notebook(HOSTILE[:2])
    page = _feedback_page(notebook, tmp_path)
    assert _title_in_chromium(page, tmp_path) == "toy script handler md", "the control page should run its scripts"
    assert _title_in_chromium(with_csp(page), tmp_path) == "toy"


def _cell(grade_id: str, message: str) -> CellResult:
    return CellResult("toy", grade_id, 0.0, 1.0, False, message)


def test_not_attempted_is_counted_per_test_not_among_the_mistakes() -> None:
    rows, templates = _rows()
    blank = [_cell("test_add", "NotImplementedError: "), _cell("test_mean", "NotImplementedError: ")]
    rows += [GradeRow(f"blank{i}", "toy", 0.0, 5.0, cells=tuple(blank)) for i in range(3)]
    assert failures(rows) == [(("toy", "test_mean", "AssertionError: <script>alert('mean')</script>"), 2)]
    page = render_report(rows, templates)
    assert "<td>test_add</td><td class=n>2</td><td class=n>5</td><td class=n>40%</td><td class=n>3</td>" in page


def test_ties_among_the_most_frequent_failures_keep_a_stable_order() -> None:
    cells = [_cell(f"test_{name}", f"AssertionError: {name} is wrong") for name in "dcba"]
    rows = [GradeRow("ada", "toy", 0.0, 4.0, cells=tuple(cells))]
    assert [key[1] for key, _ in failures(rows, top=3)] == ["test_a", "test_b", "test_c"]


def test_the_student_table_shows_each_score_and_what_failed() -> None:
    rows, templates = _rows()
    rows[1] = replace(rows[1], cells=(_cell("test_add", "NotImplementedError: "), _cell("test_mean", "AssertionError: x")))
    table = {line.id: line.assignments["toy"] for line in student_table(rows, ["toy"])}
    assert table["ada"] == StudentCell(3.0, 5.0, "test_mean", late=False, pending=(), pages=())
    assert table["bo"].failed == "test_add (not attempted), test_mean"
    assert table["<img src=x onerror=alert(1)>"].failed == "not graded: <b>kernel died</b>"
    page = render_report(rows, templates)
    assert '<h2 id="students">Students</h2>' in page
    assert '<td class=n><a href="feedback/ada/toy/toy.html">3 / 5</a></td><td></td><td>test_mean</td>' in page


def test_a_hidden_test_of_an_unattempted_function_counts_as_not_attempted() -> None:
    """A hidden test that checks what the untouched stub raises says so in a CheckFailed, not a mistake."""
    stub = _cell("test_mean_hidden", "CheckFailed: mean([]) should raise ValueError, but it raised NotImplementedError: ")
    rows = [GradeRow("blank", "toy", 0.0, 5.0, cells=(stub,))]
    assert not_attempted(stub) and failures(rows) == []
    assert not not_attempted(_cell("test_mean", "CheckFailed: mean([]) should raise ValueError, but it returned 0"))


def test_the_student_table_comes_before_the_code_and_shows_late_names_links_and_pending() -> None:
    from autograder.reports.similarity import Pair, Similarity

    rows, templates = _rows()
    rows[0] = replace(rows[0], late=True, lms_name="Ada Lovelace")
    rows[1] = replace(rows[1], pending=("explain",))
    code = "def add(a, b): return a + b"
    pair = Pair(assignment="toy", student_a="ada", student_b="bo", similarity=1.0, shared=9, code_a=code,
                code_b=code, spans_a=((0, 5),), spans_b=((0, 5),))
    page = render_report(rows, templates, Similarity(0.5, {"toy": 2}, (pair,)))
    assert page.index('<h2 id="students">') < page.index('<h2 id="similar-code">') < page.index("<mark>")
    assert "<th>name</th>" in page and "<td>ada</td><td>Ada Lovelace</td>" in page
    assert '<a href="feedback/ada/toy/toy.html">3 / 5</a></td><td>late</td>' in page
    assert "3 / 5</a> (pending: explain)</td><td></td>" in page
    assert "feedback/%3Cimg" not in page, "a row that was not graded has no feedback page to link"


def test_a_feedback_page_wraps_long_lines() -> None:
    page = wrapped("<html><head><title>t</title></head><body><pre>" + "x" * 5000 + "</pre></body></html>")
    assert page.index(WRAP_STYLE) < page.index("<title>") and "white-space: pre-wrap" in WRAP_STYLE
