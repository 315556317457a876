"""Grades back into an LMS: the records every format shares, ``DIR/grades.csv`` read back, and the one
rule set that fills a gradebook column (`fill`).

A format module (`autograder.lms.canvas`, `autograder.lms.moodle`) reads its export's layout: which
columns to keep, where each mapped assignment's column is and what a full score is worth there, and
which student of ``grades.csv`` each row is. `fill` then writes every cell by the same rules:

- a student with a grade in ``DIR`` gets it scaled to the column's points, with 2 decimals (times
  ``1 - late_penalty`` for a late submission when a penalty is given);
- an excused cell (``EX``) stays; a cell that already holds that grade at 2 decimals keeps its text;
- a student with no submission, or whose submission could not be graded, keeps the cell the LMS has:
  nothing is ever blanked;
- a grade still waiting for manual grading (a manually graded cell without its points) is not final: its
  cell is kept unless ``include_pending`` asks to send the partial score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.records import GradeRow
from autograder.reports.grades_csv import GradesUnreadable, read_grade_rows
from autograder.reports.output_folder import OutputFolder
from autograder.lms.table import ExportError, Table, format_number, parse_number


@dataclass(frozen=True)
class Grades:
    """``DIR/grades.csv``: (student_id, assignment) -> its `GradeRow`, and Canvas user id -> student_id."""

    by_key: dict[tuple[str, str], GradeRow]
    by_lms_user_id: dict[str, str]

    @property
    def assignments(self) -> list[str]:
        return sorted({a for _, a in self.by_key})

    def max_score(self, assignment: str) -> float:
        """The assignment's maximum score in DIR (0 when DIR has no row for it)."""
        return max((g.max_score for (_, a), g in self.by_key.items() if a == assignment), default=0.0)

    def graded(self, assignment: str) -> list[GradeRow]:
        return [g for (_, a), g in sorted(self.by_key.items()) if a == assignment and g.graded]


def read_grades(out: Path) -> Grades:
    """Read ``out/grades.csv`` as `python -m autograder grade` writes it (``lms_user_id`` and ``late`` are
    optional, so a folder graded by an earlier version still exports by student id)."""
    try:
        rows = read_grade_rows(OutputFolder(out).grades)
    except OSError:
        raise ExportError(f"{out} holds no grades.csv: grade first with "
                          f"`python -m autograder grade SUBMISSIONS --out {out}`") from None
    except GradesUnreadable as error:
        raise ExportError(str(error)) from None
    by_key = {(row.student_id, row.assignment): row for row in rows}
    return Grades(by_key, {row.lms_user_id: row.student_id for row in rows if row.lms_user_id})


@dataclass(frozen=True)
class Column:
    """A gradebook column that receives an assignment's grades."""

    assignment: str
    index: int  # its position in the export's header
    header: str
    points: float  # what a full score is worth in this column (Canvas: its Points Possible)


def check_distinct(columns: list[Column]) -> None:
    """`ExportError` when two assignments are mapped to one column."""
    owner: dict[int, str] = {}
    for column in columns:
        if column.index in owner:
            raise ExportError(f"--map gives the column '{column.header}' to both {owner[column.index]} and "
                              f"{column.assignment}")
        owner[column.index] = column.assignment


@dataclass(frozen=True)
class StudentRow:
    """A student's row of the export and the student of ``grades.csv`` it matched (None: no match)."""

    row: int  # index into Table.rows
    label: str  # how the summary names this student, e.g. "Lovelace, Ada (1001)"
    student_id: str | None


@dataclass(frozen=True)
class ExportLayout:
    """What a format module found in an export: the columns to write (indices, in the export's order),
    the mapped columns, the student rows, and whether numbers are written with a decimal comma."""

    keep: list[int]
    columns: list[Column]
    students: list[StudentRow]
    decimal_comma: bool
    warnings: tuple[str, ...] = ()  # what the instructor should check before importing


@dataclass(frozen=True)
class Change:
    """A cell the import changes."""

    student: str
    column: str
    old: str
    new: str
    row: int  # index into Table.rows

    @property
    def replaces_a_grade(self) -> bool:
        """Whether the cell held a grade (a number) that this change replaces."""
        return parse_number(self.old) is not None


@dataclass
class Outcome:
    """The filled rows and what `fill` did, for the summary."""

    rows: list[list[str]]
    changed: list[Change] = field(default_factory=list)
    unchanged: int = 0
    excused: list[tuple[str, str]] = field(default_factory=list)  # (student, column) left as EX
    late: list[tuple[str, str]] = field(default_factory=list)  # (student, column) graded from a late submission
    not_graded: list[tuple[str, str, str]] = field(default_factory=list)  # (student, column, reason): cell kept
    pending: list[tuple[str, str, str]] = field(default_factory=list)  # (student, column, reason): manual points due
    no_submission: dict[str, list[str]] = field(default_factory=dict)  # column -> students whose cell was kept
    not_in_export: dict[str, list[str]] = field(default_factory=dict)  # graded student no row matched -> assignments


def fill(table: Table, layout: ExportLayout, grades: Grades, late_penalty: float,
         include_pending: bool = False) -> Outcome:
    """Write each mapped column's cells by the rules in this module's docstring; ``table`` is not modified. A grade
    waiting for manual grading keeps its cell (listed in ``Outcome.pending``) unless ``include_pending``, which sends
    its partial score (listed there too)."""
    outcome = Outcome(rows=[list(row) for row in table.rows])
    matched = {s.student_id for s in layout.students if s.student_id is not None}
    for column in layout.columns:
        kept = outcome.no_submission.setdefault(column.header, [])
        for student in layout.students:
            grade = grades.by_key.get((student.student_id or "", column.assignment))
            row = outcome.rows[student.row]
            old = row[column.index]
            if grade is None or grade.no_submission:
                kept.append(student.label)
            elif not grade.graded:
                outcome.not_graded.append((student.label, column.header, grade.csv_reason))
            elif old.strip().upper() == "EX":
                outcome.excused.append((student.label, column.header))
            elif grade.pending and not include_pending:
                outcome.pending.append((student.label, column.header, grade.csv_reason))
            else:
                if grade.pending:
                    outcome.pending.append((student.label, column.header, grade.csv_reason))
                fraction = grade.score / grade.max_score if grade.max_score > 0 else 0.0
                if grade.late:
                    outcome.late.append((student.label, column.header))
                    fraction *= 1.0 - late_penalty
                new = format_number(column.points * fraction, layout.decimal_comma)
                current = parse_number(old)
                if current is not None and format_number(current, layout.decimal_comma) == new:
                    outcome.unchanged += 1
                else:
                    row[column.index] = new
                    outcome.changed.append(Change(student.label, column.header, old, new, student.row))
        for grade in grades.graded(column.assignment):
            if grade.student_id not in matched:
                who = grade.student_id + (f" (Canvas user {grade.lms_user_id})" if grade.lms_user_id else "")
                outcome.not_in_export.setdefault(who, []).append(column.assignment)
    return outcome


def rows_to_write(layout: ExportLayout, outcome: Outcome) -> list[list[str]]:
    """The rows the import holds: every row that is no student's (Canvas's Points Possible) and the rows of the
    students whose cells change. An unchanged row is left out, so that importing the file can never undo a grade
    that someone changed in the LMS after the export."""
    students = {s.row for s in layout.students}
    changed = {c.row for c in outcome.changed}
    return [row for index, row in enumerate(outcome.rows) if index not in students or index in changed]


def check_matched(layout: ExportLayout, grades: Grades, assignments: list[str], path: Path) -> None:
    """`ExportError` when no row of the export matches a student graded in DIR (another course's export)."""
    if any(s.student_id is not None for s in layout.students):
        return
    graded = sorted({g.student_id for a in assignments for g in grades.graded(a)})
    raise ExportError(f"{path} matches none of the {len(graded)} students graded in DIR (for example "
                      f"{graded[0] if graded else '-'}): is it this course's export?")
