"""Moodle's grade export (Grades > Export > Plain text file) as Moodle's CSV import reads it.

The import format is the export format: user fields first ("First name", "Last name", "ID number",
"Institution", "Department", "Email address"), then one column per grade item and display type, headed
"<Activity>: <item> (Real)" (or "(Percentage)", "(Letter)", "(Feedback)"), "Course total (Real)", and
"Last downloaded from this course", a timestamp with which Moodle refuses to overwrite a grade changed
since the export. "-" means no grade. Users are identified by email address or ID number; a column
that matches no grade item makes the import fail, so none is added.

The file written keeps every column that is not a grade item (the user fields and the timestamp, as
they were) and only the mapped grade item columns. Moodle's export carries no item's maximum grade:
a column is filled with the assignment's points as graded, or scaled to ``--max-grade ASSIGNMENT=POINTS``.
"""

from __future__ import annotations

import re
from collections import Counter

from autograder.lms import Column, Grades, Layout, StudentRow, check_distinct
from autograder.lms_table import ExportError, Table, uses_decimal_comma

MATCH_COLUMNS = {"email": "Email address", "idnumber": "ID number"}
GRADE_ITEM = re.compile(r"^(?P<item>.+) \((?P<display>[^()]+)\)$")
NOT_POINTS = ("Percentage", "Letter", "Feedback")


def layout(table: Table, mapping: list[tuple[str, str]], grades: Grades, match: str,
           max_grades: dict[str, float]) -> Layout:
    """The user fields and the mapped grade item columns; each row's student, matched on ``match``
    ("email", case-insensitive, or "idnumber") against student_id; raises `ExportError`."""
    header = [cell.strip() for cell in table.header]
    key = header.index(MATCH_COLUMNS[match])
    columns = [_column(table, header, assignment, wanted, max_grades.get(assignment) or grades.max_score(assignment))
               for assignment, wanted in mapping]
    check_distinct(columns)
    fold = str.casefold if match == "email" else str
    by_key = {fold(student): student for student, _ in grades.by_key}
    names = [header.index(c) for c in ("First name", "Last name") if c in header]
    students: list[StudentRow] = []
    for index, row in enumerate(table.rows):
        value = row[key].strip()
        name = " ".join(row[i].strip() for i in names if row[i].strip())
        students.append(StudentRow(index, f"{name} ({value})" if name else value or f"row {index + 2}",
                                   by_key.get(fold(value)) if value else None))
    twice = sorted(v for v, n in Counter(fold(row[key].strip()) for row in table.rows if row[key].strip()).items()
                   if n > 1)
    if twice:
        raise ExportError(f"{table.path}: the {MATCH_COLUMNS[match]} '{twice[0]}' is on two rows; Moodle could not "
                          "tell them apart")
    keep = sorted([i for i, h in enumerate(header) if not GRADE_ITEM.match(h)] + [c.index for c in columns])
    cells = [row[c.index] for row in table.rows for c in columns]
    return Layout(keep=keep, columns=columns, students=students, decimal_comma=uses_decimal_comma(cells))


def _column(table: Table, header: list[str], assignment: str, wanted: str, points: float) -> Column:
    """The grade item column headed exactly ``wanted``, filled on a scale of ``points``."""
    if wanted.strip() not in header:
        items = [h for h in header if GRADE_ITEM.match(h) and GRADE_ITEM.match(h)["display"] not in NOT_POINTS]
        raise ExportError(f"--map {assignment}=\"{wanted}\": no such column in {table.path} (its grade item columns: "
                          f"{', '.join(items) or 'none'})")
    index = header.index(wanted.strip())
    match = GRADE_ITEM.match(header[index])
    if match is None:
        raise ExportError(f"--map {assignment}=\"{wanted}\": '{wanted}' is a user field, not a grade item column")
    if match["item"].endswith(" total"):
        raise ExportError(f"--map {assignment}=\"{wanted}\": '{wanted}' is computed by Moodle and cannot be imported")
    if match["display"] in NOT_POINTS:
        raise ExportError(f"--map {assignment}=\"{wanted}\": a {match['display']} column cannot be imported as points; "
                          "export the grade item with the Real display type and map its (Real) column")
    return Column(assignment=assignment, index=index, header=header[index], points=points)
