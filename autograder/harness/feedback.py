"""What a student sees of a graded notebook.

`sanitize_for_feedback` removes hidden test code (sources, traceback lines, what hidden test cells
printed, and verbatim copies of their lines anywhere in the outputs), shortens outputs and sanitises
what the student wrote (`autograder.harness.safe_html`: shown as text or safe HTML, never run);
`cell_message` and `incidents` turn a graded notebook's outputs into the short reasons stored in
`grades.csv` and the report. The page itself is `autograder.harness.feedback_page`'s.
"""

from __future__ import annotations

import re
from typing import Any

import nbformat

from autograder.harness.safe_html import SafeOutputs

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.DOTALL)
HIDDEN_PLACEHOLDER = "# (hidden tests: not shown)\n"
HIDDEN_OUTPUT = "[what this hidden test cell printed or displayed: not shown]\n"
REDACTED = "[hidden test code: not shown]"
SECRET_MIN = 12  # shorter lines of a hidden test (`)`, `x = f(a)`) identify nothing and would redact plain output
OUTPUT_LIMIT = 2000
MESSAGE_LIMIT = 2000
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# nbconvert's page keeps an output's long lines on one line (a scroll bar far to the right): wrap them.
WRAP_STYLE = "<style>pre { white-space: pre-wrap; overflow-wrap: anywhere; }</style>"
HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)


def wrapped(page: str) -> str:
    """A feedback page whose long lines (messages, outputs) wrap (`WRAP_STYLE`, first in its ``<head>``)."""
    head = HEAD.search(page)
    return page if head is None else f"{page[:head.end()]}\n{WRAP_STYLE}{page[head.end():]}"


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... [{len(text) - limit} more characters not shown]"


def hidden_lines(cells: list[nbformat.NotebookNode]) -> list[str]:
    """The lines of the hidden tests in ``cells`` that could give them away: stripped, at least `SECRET_MIN`
    characters, not also in a visible part of any cell; longest first."""
    hidden: set[str] = set()
    visible: set[str] = set()
    for cell in cells:
        if cell.cell_type == "code":
            hidden.update(line.strip() for block in HIDDEN.findall(cell.source) for line in block.splitlines())
            visible.update(line.strip() for line in HIDDEN.sub("", cell.source).splitlines())
    secret = [line for line in hidden - visible if len(line) >= SECRET_MIN and "HIDDEN TESTS" not in line]
    return sorted(secret, key=len, reverse=True)


def redact(text: str, secret: list[str]) -> str:
    """``text`` with each verbatim copy of a line of ``secret`` replaced by `REDACTED` (an encoded copy stays)."""
    for line in secret:
        text = text.replace(line, REDACTED)
    return text


def _failing_line(output: nbformat.NotebookNode) -> str:
    """The source line an error's traceback marks last (IPython's ``---->``), without its line number."""
    marked = [line for line in ANSI.sub("", "\n".join(output.get("traceback", []))).splitlines()
              if line.lstrip().startswith("---->")]
    return re.sub(r"^\s*---->\s*\d*\s?", "", marked[-1]).strip() if marked else ""


def cell_message(cell: nbformat.NotebookNode) -> str:
    """Why a graded test cell failed: its error (name and message) or what it wrote to stderr, without the lines of
    its hidden tests. A bare ``assert`` of a visible test (no message) is shown by its line; a hidden test's code
    never is."""
    secret = hidden_lines([cell])
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            message = ANSI.sub("", f"{output.ename}: {output.evalue}")
            if not str(output.evalue).strip() and "BEGIN HIDDEN TESTS" not in _text(cell.get("source", "")):
                line = _failing_line(output)
                message = f"{output.ename} in {line}" if line else message
            return redact(shorten(message, MESSAGE_LIMIT), secret)
    for output in cell.get("outputs", []):
        if output.output_type == "stream" and output.name == "stderr":
            text = "wrote to stderr (a graded cell must not): " + _text(output.text).strip()
            return redact(shorten(text, MESSAGE_LIMIT), secret)
    return ""


def incidents(notebook: nbformat.NotebookNode, cell_timeout: int) -> list[str]:
    """Notes on cells outside the tests that were stopped (timeouts, interrupts, memory errors), on a test whose call of
    the student's code ran past the time limit (it names the function), and on the kernel's death anywhere."""
    notes = []
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        notes += [output.evalue for output in cell.get("outputs", [])
                  if output.output_type == "error" and output.ename == "DeadKernelError"][:1]
        notes += [f"test '{meta.get('grade_id', 'a test')}': {output.evalue.rpartition('grader: ')[2]}"
                  for output in cell.get("outputs", []) if output.output_type == "error"
                  and output.ename == "ChannelError" and "took too long to answer" in str(output.evalue)][:1]
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        name = meta.get("grade_id", "a cell")
        for output in cell.get("outputs", []):
            if output.output_type != "error":
                continue
            if output.ename in ("CellTimeoutError", "KeyboardInterrupt"):
                notes.append(f"cell '{name}' ran past the {cell_timeout} s limit and was interrupted")
            elif output.ename == "MemoryError":
                notes.append(f"cell '{name}' ran out of memory")
    return list(dict.fromkeys(notes))


def sanitize_for_feedback(notebook: nbformat.NotebookNode) -> None:
    """Remove hidden test code, shorten every output, then sanitise outputs and the cells a student wrote
    (`SafeOutputs`: after shortening, so that a cut tag is closed again), in place.

    Hidden test code goes from the sources, from tracebacks, from what a hidden test cell printed or displayed
    (solution code can make a cell print its own source) and, as verbatim lines (`hidden_lines`), from every
    output: an encoded copy gets through, which only grading outside the student's kernel can prevent.
    """
    secret = hidden_lines(notebook.cells)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        hidden = "### BEGIN HIDDEN TESTS" in cell.source
        cell.source = HIDDEN.sub(HIDDEN_PLACEHOLDER, cell.source)
        if hidden and any(output.output_type != "error" for output in cell.get("outputs", [])):
            cell.outputs = ([nbformat.v4.new_output("stream", name="stdout", text=HIDDEN_OUTPUT)]
                            + [output for output in cell.outputs if output.output_type == "error"])
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                output.text = redact(shorten(_text(output.text), OUTPUT_LIMIT), secret)
            elif output.output_type == "error":
                output.evalue = redact(shorten(output.evalue, OUTPUT_LIMIT), secret)
                # A traceback quotes the lines of the cell: in a hidden test cell keep only the error.
                output.traceback = ([f"{output.ename}: {output.evalue}"] if hidden else
                                    [redact(shorten(line, OUTPUT_LIMIT), secret) for line in output.traceback[-20:]])
            elif "data" in output:
                data = output.data
                for kind in list(data):
                    if kind.startswith("text/"):
                        data[kind] = redact(shorten(_text(data[kind]), OUTPUT_LIMIT), secret)
                    elif len(_text(data[kind])) > 200_000:
                        del data[kind]
                if not data:
                    data["text/plain"] = "[a large output, not shown]"
    SafeOutputs().preprocess(notebook, {})
