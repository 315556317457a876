"""The CSV files for the instructor (``grades.csv``, ``similarity.csv``), written so that a spreadsheet shows every
field and runs none, and ``grades.csv`` read back (`read_grade_rows`)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from autograder.records import GRADES_COLUMNS, GradeRow

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class GradesUnreadable(ValueError):
    """A grades.csv that cannot be read back: the message names the file and the line."""


def spreadsheet_safe(text: str) -> str:
    """``text`` as a spreadsheet shows it, never runs it: a field starting with = + - @ tab or CR gets a leading
    single quote (OWASP's advice against CSV injection; the csv module quotes the rest)."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def from_spreadsheet_safe(text: str) -> str:
    """The field `spreadsheet_safe` was given: what a program reading grades.csv back must use."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_STARTS) else text


def write_csv(path: Path, header: Sequence[str], rows: list[list[str]]) -> None:
    """A CSV file for the instructor (grades.csv, similarity.csv): the header, then the rows, every field
    `spreadsheet_safe` (numbers written here are never negative, so they pass unchanged)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([[spreadsheet_safe(field) for field in row] for row in rows])


def write_grades(path: Path, rows: list[GradeRow]) -> None:
    """grades.csv: student_id, assignment, score, max_score, reason (empty when graded normally), lms_user_id
    (the Canvas user id of a Canvas zip, else empty) and late (1 when Canvas marked the submission late, else 0)."""
    write_csv(path, GRADES_COLUMNS, [row.csv_fields() for row in rows])


def read_grade_rows(path: Path) -> list[GradeRow]:
    """The rows `write_grades` wrote to ``path``, in its order. OSError when there is no such file,
    `GradesUnreadable` for a line that is not a row of grades.csv."""
    with open(path, newline="", encoding="utf-8") as handle:
        lines = list(csv.DictReader(handle))
    rows = []
    for number, line in enumerate(lines, start=2):
        try:
            rows.append(GradeRow.from_csv({key: from_spreadsheet_safe(value or "") for key, value in line.items()
                                           if key is not None}))
        except (KeyError, TypeError, ValueError):
            raise GradesUnreadable(f"{path}, line {number}: not a row of grades.csv (student_id, assignment, score, "
                                   "max_score, reason)") from None
    return rows
