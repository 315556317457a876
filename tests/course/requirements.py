"""Requirement tables: every sentence of a task cell that states a requirement, and the test that checks it.

A task cell is the locked markdown cell ``<f>_task`` of a chapter's solution notebook. Its text, with
``<details>`` blocks (hints), fenced code blocks, tables and ``$$`` display math removed, is cut into
paragraphs at blank lines, headings (left out) and list items (their markers left out), and each paragraph into sentences after ``.``,
``!`` or ``?`` (or one of them and a closing ``)`` or ``"``; never after "e.g." or "i.e.") followed by
a space and a character that is not a lowercase letter (inline code never cuts). A sentence that contains the word *must*, *raise(s)* or *return(s)* (any case) states a
requirement. ``docs/requirements/<slug>.md`` holds a table ``| requirement | test |`` with one row
per such sentence: the first column is the sentence verbatim (runs of whitespace as one space, ``|``
written ``\\|``), the second names the test cell that checks it in backticks (``test_<f>`` or
``test_<f>_hidden``) and the case.

``python -m tests.course.requirements 09_backward`` prints the rows a chapter's table lacks.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from course import ROOT
from course.chapters import Chapter, chapter
from course.notebooks import nbgrader_meta, read_notebook, source_of

REQUIREMENTS = ROOT / "docs" / "requirements"
WORD = re.compile(r"\b(must|raises?|returns?)\b", re.IGNORECASE)
REMOVED = re.compile(r"<details>.*?</details>|^```.*?^```|\$\$.*?\$\$", re.DOTALL | re.MULTILINE)
BLOCK_START = re.compile(r"^(#+ |[-*] |\d+\. )")
CODE = re.compile(r"`[^`]*`")
CUT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][)\"]))(?<!e\.g\.)(?<!i\.e\.)\s+(?=[^a-z\s])")
CELL_ID = re.compile(r"`(test_\w+)`")


@dataclass(frozen=True)
class Row:
    """One row of a requirement table."""

    requirement: str
    test: str


def normalise(text: str) -> str:
    """Runs of whitespace as one space, no spaces at either end."""
    return " ".join(text.split())


def _paragraphs(text: str) -> list[str]:
    paragraphs: list[list[str]] = [[]]
    for line in REMOVED.sub("\n\n", text).splitlines():
        if line.startswith("|"):  # a table row: left out
            line = ""
        if not line.strip() or BLOCK_START.match(line):
            paragraphs.append([])
        if line.strip():
            paragraphs[-1].append(line.strip())
    return [" ".join(lines) for lines in paragraphs if lines]


def sentences(text: str) -> list[str]:
    """The sentences of a task cell's text (see the module docstring for the rule)."""
    found = []
    for paragraph in _paragraphs(text):
        if paragraph.startswith("#"):
            continue
        paragraph = BLOCK_START.sub("", paragraph)
        spans = CODE.findall(paragraph)
        masked = CODE.sub(lambda m: f"\0{len(m.group())}\0", paragraph)
        pieces = CUT.split(masked)
        for piece in pieces:
            found.append(normalise(re.sub(r"\0\d+\0", lambda _: spans.pop(0), piece)))
    return found


def task_texts(chap: Chapter) -> dict[str, str]:
    """grade_id -> text of each task cell (``<f>_task``) of the chapter's solution notebook."""
    return {nbgrader_meta(cell)["grade_id"]: source_of(cell) for cell in read_notebook(chap.solution)["cells"]
            if cell["cell_type"] == "markdown" and nbgrader_meta(cell).get("grade_id", "").endswith("_task")}


def requirement_sentences(chap: Chapter) -> list[str]:
    """Every sentence of the chapter's task cells that states a requirement, in order."""
    return [s for text in task_texts(chap).values() for s in sentences(text) if WORD.search(s)]


def table_path(chap: Chapter) -> Path:
    return REQUIREMENTS / f"{chap.slug}.md"


def read_table(path: Path) -> list[Row]:
    """The rows of the ``| requirement | test |`` table in ``path`` (header and rule left out)."""
    rows = []
    for line in path.read_text().splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != 2 or cells[0] == "requirement" or set(cells[0]) <= set("-: "):
            continue
        rows.append(Row(normalise(cells[0].replace("\\|", "|")), cells[1]))
    return rows


def test_cells(chap: Chapter) -> set[str]:
    """grade_ids of the chapter's graded test cells."""
    return {nbgrader_meta(cell)["grade_id"] for cell in read_notebook(chap.solution)["cells"]
            if cell["cell_type"] == "code" and nbgrader_meta(cell).get("grade")}


def missing_rows(chap: Chapter) -> list[str]:
    """Requirement sentences that the chapter's table has no row for."""
    have = {row.requirement for row in read_table(table_path(chap))} if table_path(chap).exists() else set()
    return [s for s in requirement_sentences(chap) if s not in have]


def _skeleton(slug: str) -> str:
    chap = chapter(slug)
    rows = [f"| {s.replace('|', chr(92) + '|')} | `test_` |" for s in missing_rows(chap)]
    return "\n".join(["| requirement | test |", "|---|---|", *rows])


if __name__ == "__main__":
    print(_skeleton(sys.argv[1]))
