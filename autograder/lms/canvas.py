"""Canvas's gradebook export (Grades > Export) as Canvas's importer (Grades > Import) reads it.

The header starts ``Student,ID`` (or ``LastName,FirstName,ID`` when the gradebook splits names), then
the optional ``SIS User ID``, ``SIS Login ID``, ``Integration ID``
and ``Root Account``, and ends its identity columns with ``Section``. Assignment columns are headed
``Title (12345)``; a header that matches no assignment makes Canvas create one, so no column is ever
added. A row whose first cell holds "Points Possible" gives each column's maximum, or "(read only)" for
columns Canvas ignores on import (Current Score, Final Grade, ...). ``EX`` marks an excused cell. Rows
with an empty ID (Points Possible, "Manual Posting") are kept as they are.

Students are matched by the Canvas user id that the submissions zip's file names carried
(``lms_user_id`` in grades.csv), else, for students graded from a folder, by SIS Login ID = student_id.
"""

from __future__ import annotations

import re
from collections import Counter

from autograder.lms.grades import Column, ExportLayout, Grades, StudentRow, check_distinct
from autograder.lms.table import ExportError, Table, parse_number, uses_decimal_comma

NAME_COLUMNS = ("Student",)
SPLIT_NAME_COLUMNS = ("LastName", "FirstName")
IDENTITY = ("SIS User ID", "SIS Login ID", "Integration ID", "Root Account")
ASSIGNMENT = re.compile(r"^(?P<title>.*)\s+\((?P<id>\d+)\)$")
READ_ONLY = re.compile(r"read\s+only", re.IGNORECASE)
NOT_AN_ASSIGNMENT = re.compile(r"Current (Score|Points|Grade)|Final (Score|Points|Grade)|Override (Score|Grade|Status)")


def export_layout(table: Table, mapping: list[tuple[str, str]], grades: Grades) -> ExportLayout:
    """The identity columns and the mapped ones; each row's student; raises `ExportError` for an export
    that is not Canvas's, a column that is not in it or that Canvas would not import."""
    header = [cell.strip() for cell in table.header]
    names = _name_columns(table, header)
    section = _identity_end(table, header, names)
    points_rows = [row for row in table.rows if "Points Possible" in row[0]]
    if not points_rows:
        raise ExportError(f"{table.path} is not a Canvas gradebook export: it has no Points Possible row "
                          "(export the gradebook again from Grades > Export)")
    points_row = points_rows[0]
    columns = [_column(table, header, points_row, assignment, wanted) for assignment, wanted in mapping]
    check_distinct(columns)
    login = header.index("SIS Login ID") if "SIS Login ID" in header[:section] else None
    from_canvas = set(grades.by_lms_user_id.values())
    by_login = {s: s for s, _ in grades.by_key if s not in from_canvas}
    by_login_folded = {s.casefold(): s for s in by_login}
    students: list[StudentRow] = []
    seen: dict[str, str] = {}
    for index, row in enumerate(table.rows):
        canvas_id, name = row[names].strip(), ", ".join(cell.strip() for cell in row[:names] if cell.strip())
        if not canvas_id or "Points Possible" in row[0]:
            continue
        if not canvas_id.isdigit():
            raise ExportError(f"{table.path}: '{name}' has the ID '{canvas_id}', not a Canvas user id: "
                              "is this Canvas's gradebook export?")
        if canvas_id in seen:
            raise ExportError(f"{table.path}: the Canvas user id {canvas_id} is on two rows ({seen[canvas_id]}, "
                              f"{name})")
        seen[canvas_id] = name
        student = grades.by_lms_user_id.get(canvas_id)
        if student is None and login is not None and row[login].strip():
            value = row[login].strip()
            student = by_login.get(value) or by_login_folded.get(value.casefold())
        students.append(StudentRow(index, f"{name} ({canvas_id})", student))
    twice = sorted(s for s, n in Counter(s.student_id for s in students if s.student_id).items() if n > 1)
    if twice:
        raise ExportError(f"{table.path}: the student {twice[0]} matches two rows (by Canvas user id and by "
                          "SIS Login ID)")
    cells = [points_row[c.index] for c in columns] + [row[c.index] for row in table.rows for c in columns]
    return ExportLayout(keep=list(range(section + 1)) + sorted(c.index for c in columns), columns=columns,
                  students=students, decimal_comma=uses_decimal_comma(cells))


def _name_columns(table: Table, header: list[str]) -> int:
    """How many columns name the student before ID: 1 (Student) or 2 (LastName, FirstName)."""
    for names in (NAME_COLUMNS, SPLIT_NAME_COLUMNS):
        if len(header) > len(names) and all(n in h for n, h in zip(names, header)) and header[len(names)] == "ID":
            return len(names)
    raise ExportError(f"{table.path} is not a Canvas gradebook export: its header must start with Student, ID (or "
                      "LastName, FirstName, ID) and end the identity columns with Section")


def _identity_end(table: Table, header: list[str], names: int) -> int:
    """The index of the Section column that ends the identity columns."""
    if "Section" not in header:
        raise ExportError(f"{table.path} is not a Canvas gradebook export: its header must start with Student, ID "
                          "and end the identity columns with Section")
    section = header.index("Section")
    others = [h for h in header[names + 1:section] if h not in IDENTITY]
    if others:
        raise ExportError(f"{table.path} is not a Canvas gradebook export: between ID and Section Canvas expects "
                          f"only {', '.join(IDENTITY)}, not {', '.join(others)}")
    return section


def _column(table: Table, header: list[str], points_row: list[str], assignment: str, wanted: str) -> Column:
    """The column ``wanted`` names (the id in its header's brackets, or the whole header)."""
    found = [i for i, h in enumerate(header) if h == wanted or
             ((match := ASSIGNMENT.match(h)) is not None and match["id"] == wanted)]
    if not found:
        ids = [h for h in header if ASSIGNMENT.match(h) and not NOT_AN_ASSIGNMENT.search(h)]
        shown = ", ".join(ids[:12]) + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")
        raise ExportError(f"--map {assignment}={wanted}: no column {wanted} in {table.path} (its assignment columns: "
                          f"{shown or 'none'})")
    index = found[0]
    if NOT_AN_ASSIGNMENT.search(header[index]) or READ_ONLY.search(points_row[index]):
        raise ExportError(f"--map {assignment}={wanted}: '{header[index]}' is read-only, Canvas ignores it on import")
    points = parse_number(points_row[index])
    if points is None or points <= 0:
        raise ExportError(f"--map {assignment}={wanted}: '{header[index]}' has no Points Possible (found "
                          f"'{points_row[index]}')")
    return Column(assignment=assignment, index=index, header=header[index], points=points)
