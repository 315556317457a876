"""The class report (`report.html`): one self-contained page with its charts inline (SVG,
`autograder.reports.charts`), rendered from the Jinja2 template `autograder/reports/templates/report.html` with
autoescaping.

It shows the score distribution of each assignment, the pass rate of each test (and how many did not
attempt it), the failure messages that came back most often (which misconception hit the class; what
was not attempted is not counted there), who could not be graded and why, a table of every student (the name
the LMS gave, the score of each assignment with a link to its feedback pages, late, manual grading pending, and
what failed), then which students' code is similar (`autograder.reports.similarity`), side by side.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from markupsafe import Markup

from autograder.records import CellResult, GradeRow, Template
from autograder.reports.charts import pass_rate_chart, score_histogram
from autograder.reports.similarity import Similarity

SHOWN_PAIRS = 50  # pairs shown side by side in the report; similarity.csv lists them all
MISTAKE = re.compile(r"This is what you get with this mistake: (.+?)\.?$", re.MULTILINE)
ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
NOT_ATTEMPTED = "not attempted:"
# A hidden test that checks what an untouched stub raises ("should raise ValueError, but it raised
# NotImplementedError") says the function was not attempted, as the stub's own NotImplementedError does.
STUB_RAISED = re.compile(r"^NotImplementedError\b|\braised NotImplementedError\b")


@dataclass(frozen=True)
class AssignmentSummary:
    """An assignment's line of the report: its graded submissions' scores and its pass-rate figure."""

    name: str
    graded: int
    mean: float
    median: float
    max_score: float
    figure: Markup  # the pass-rate chart, inline SVG (`autograder.reports.charts`)
    rates: tuple[tuple[str, int, int, int], ...]  # per test: (grade_id, passed, graded, not attempted)


@dataclass(frozen=True)
class StudentCell:
    """A student's result on one assignment in the student table."""

    score: float
    max_score: float
    failed: str  # the tests failed (those not attempted marked so), or why it was not graded
    late: bool
    pending: tuple[str, ...]  # the cells waiting for manual grading
    pages: tuple[str, ...]  # the links to its feedback pages, relative to report.html


@dataclass(frozen=True)
class StudentLine:
    """A student's line of the student table."""

    id: str
    name: str  # the name the LMS gave ('' when the input gave none)
    assignments: dict[str, StudentCell]  # assignment -> its cell


def failure_summary(message: str) -> str:
    """The part of a failure message that names the mistake: the misconception line, else the first line
    (an untouched solution stub counts as not attempted)."""
    mistake = MISTAKE.search(message)
    if mistake:
        return f"mistake: {mistake.group(1)}"
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and STUB_RAISED.search(lines[0]):
        return f"{NOT_ATTEMPTED} the solution cell still raises NotImplementedError"
    # Object addresses differ between students: without them the same failure counts once per class.
    return ADDRESS.sub("0x...", lines[0][:200]) if lines else "(no message)"


def _distribution(rows: list[GradeRow], assignments: list[str], templates: dict[str, Template]) -> list[Markup]:
    """Each assignment's score histogram (`autograder.reports.charts.score_histogram`)."""
    return [score_histogram(assignment, [r.score for r in rows if r.assignment == assignment and r.graded],
                            [r.score for r in rows if r.assignment == assignment and not r.graded],
                            templates[assignment].max_score) for assignment in assignments]


def _pass_rates(rows: list[GradeRow], assignment: str,
                template: Template) -> tuple[Markup, list[tuple[str, int, int, int]]]:
    """The pass-rate chart, and per test (grade_id, passed, graded, not attempted)."""
    graded = [r for r in rows if r.assignment == assignment and r.graded]
    rates = []
    for notebook, grade_id, _ in template.cells:
        outcomes = [c.passed for row in graded for c in row.cells
                    if c.grade_id == grade_id and c.notebook == notebook and not c.manual]
        skipped = sum(not_attempted(c) for row in graded for c in row.cells
                      if c.grade_id == grade_id and c.notebook == notebook and not c.passed)
        rates.append((grade_id, sum(outcomes), len(outcomes), skipped))
    return pass_rate_chart(assignment, rates, len(graded)), rates


def _assignment_rows(rows: list[GradeRow], assignments: list[str],
                     templates: dict[str, Template]) -> list[AssignmentSummary]:
    summaries = []
    for assignment in assignments:
        scores = sorted(r.score for r in rows if r.assignment == assignment and r.graded)
        figure, rates = _pass_rates(rows, assignment, templates[assignment])
        summaries.append(AssignmentSummary(assignment, len(scores), sum(scores) / len(scores) if scores else 0.0,
                                           scores[len(scores) // 2] if scores else 0.0,
                                           templates[assignment].max_score, figure, tuple(rates)))
    return summaries


def not_attempted(cell: CellResult) -> bool:
    """Whether a failed cell failed only because the solution cell was left as released."""
    return not cell.manual and failure_summary(cell.message).startswith(NOT_ATTEMPTED)


def failures(rows: list[GradeRow], top: int = 20) -> list[tuple[tuple[str, str, str], int]]:
    """The ``top`` most frequent ((assignment, test, failure summary), students) over the class: real mistakes
    only (what was not attempted is counted per test in the pass-rate table), ties in a stable order."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for row in rows:
        for cell in row.cells:
            if not cell.passed and not cell.manual and not not_attempted(cell):
                counts[(row.assignment, cell.grade_id, failure_summary(cell.message))] += 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]


def student_table(rows: list[GradeRow], assignments: list[str],
                  templates: dict[str, Template] | None = None) -> list[StudentLine]:
    """One line per student, in id order: the name the LMS gave (the first of its rows that has one) and its
    `StudentCell` of each assignment it has a row of."""
    by_student: dict[str, list[GradeRow]] = {}
    for row in sorted(rows, key=lambda r: (r.student_id, r.assignment)):
        by_student.setdefault(row.student_id, []).append(row)
    return [StudentLine(student, next((r.lms_name for r in mine if r.lms_name), ""),
                        {r.assignment: _student_cell(r, (templates or {}).get(r.assignment)) for r in mine})
            for student, mine in by_student.items()]


def _student_cell(row: GradeRow, template: Template | None) -> StudentCell:
    if not row.graded:
        failed = row.csv_reason
    else:
        failed = ", ".join(f"{c.grade_id}{' (not attempted)' if not_attempted(c) else ''}"
                           for c in row.cells if not c.passed and not c.manual)
    pages = tuple(quote(f"feedback/{row.student_id}/{row.assignment}/{name}.html")
                  for name in (template.notebooks if template and row.graded else ()))
    return StudentCell(row.score, row.max_score, failed, row.late, row.pending, pages)


def render_report(rows: list[GradeRow], templates: dict[str, Template], similarity: Similarity | None = None) -> str:
    """The class report's HTML for ``rows`` (one per student and assignment, as `autograder.grading.run` builds
    them) and the ``similarity`` report (no section when None); every text from a submission is escaped by
    the template."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    assignments = [a for a in sorted({r.assignment for r in rows}) if a in templates]
    environment = Environment(loader=PackageLoader("autograder.reports", "templates"), autoescape=select_autoescape(["html"]))
    return environment.get_template("report.html").render(
        students=len({r.student_id for r in rows}), submissions=len(rows),
        failed=[r for r in rows if not r.graded],
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}",
        distribution=_distribution(rows, assignments, templates),
        assignments=_assignment_rows(rows, assignments, templates), failures=failures(rows),
        assignment_names=assignments, student_rows=student_table(rows, assignments, templates),
        names=any(r.lms_name for r in rows),
        similarity=similarity, shown_pairs=SHOWN_PAIRS)


def write_report(path: Path, rows: list[GradeRow], templates: dict[str, Template],
                 similarity: Similarity | None = None) -> None:
    """Write the class report (`render_report`) to ``path``."""
    path.write_text(render_report(rows, templates, similarity))
