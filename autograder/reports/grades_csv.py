"""The CSV files for the instructor (``grades.csv``, ``similarity.csv``), written so that a spreadsheet shows every
field and runs none."""

from __future__ import annotations

import csv
from pathlib import Path

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
GRADES_HEADER = ["student_id", "assignment", "score", "max_score", "reason", "lms_user_id", "late"]


def spreadsheet_safe(text: str) -> str:
    """``text`` as a spreadsheet shows it, never runs it: a field starting with = + - @ tab or CR gets a leading
    single quote (OWASP's advice against CSV injection; the csv module quotes the rest)."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def from_spreadsheet_safe(text: str) -> str:
    """The field `spreadsheet_safe` was given: what a program reading grades.csv back must use."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_STARTS) else text


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """A CSV file for the instructor (grades.csv, similarity.csv): the header, then the rows, every field
    `spreadsheet_safe` (numbers written here are never negative, so they pass unchanged)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([[spreadsheet_safe(field) for field in row] for row in rows])


def write_grades(path: Path, rows: list[dict]) -> None:
    """grades.csv: student_id, assignment, score, max_score, reason (empty when graded normally), lms_user_id
    (the Canvas user id of a Canvas zip, else empty) and late (1 when Canvas marked the submission late, else 0)."""
    write_csv(path, GRADES_HEADER,
              [[row["student_id"], row["assignment"], f"{row['score']:g}", f"{row['max_score']:g}", row["reason"],
                row["lms_user_id"], "1" if row["late"] else "0"] for row in rows])
