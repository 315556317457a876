"""Moodle's grade export (Grades > Export > Plain text file) as Moodle's CSV import reads it.

The import format is the export format: user fields first ("First name", "Last name", "ID number",
"Institution", "Department", "Email address"), then one column per grade item and display type, headed
"<Activity>: <item> (Real)" (or "(Percentage)", "(Letter)", "(Feedback)"), "Course total (Real)", and
"Last downloaded from this course", a timestamp with which Moodle refuses to overwrite a grade changed
since the export. "-" means no grade. Users are identified by email address or ID number; a column
that matches no grade item makes the import fail, so none is added.

The file written keeps every column that is not a grade item (the user fields and the timestamp, as
they were) and only the mapped grade item columns. Moodle's export carries no item's maximum grade, so
the grades are scaled to ``--max-grade ASSIGNMENT=POINTS``, or to the maximum the export implies when it
also holds the item's "(Percentage)" column (a Real grade and its percentage give it); without either the
export is refused, and a grade already in the column above the maximum assumed is warned about.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import replace
from types import MappingProxyType

from autograder.lms.grades import Column, ExportLayout, Grades, StudentRow, check_distinct
from autograder.lms.table import ExportError, Table, parse_number, uses_decimal_comma

MATCH_COLUMNS = MappingProxyType({"email": "Email address", "idnumber": "ID number", "name": "First name"})
GRADE_ITEM = re.compile(r"^(?P<item>.+) \((?P<display>[^()]+)\)$")
NOT_POINTS = ("Percentage", "Letter", "Feedback")


def export_layout(table: Table, mapping: list[tuple[str, str]], grades: Grades, match: str,
                  max_grades: dict[str, float]) -> ExportLayout:
    """The user fields and the mapped grade item columns; each row's student, matched on ``match``
    ("email", case-insensitive, "idnumber", or "name": the full name, either order) against student_id;
    raises `ExportError`."""
    header = [cell.strip() for cell in table.header]
    found = [_column(table, header, assignment, wanted, 0.0) for assignment, wanted in mapping]
    columns = [replace(c, points=max_grades.get(c.assignment) or
                       _implied_maximum(table, header, c.assignment, c.header)) for c in found]
    check_distinct(columns)
    names = [header.index(c) for c in ("First name", "Last name") if c in header]
    students, warnings = (_by_name(table, names, grades) if match == "name"
                          else (_by_key(table, header.index(MATCH_COLUMNS[match]), names, grades, match), []))
    keep = sorted([i for i, h in enumerate(header) if not GRADE_ITEM.match(h)] + [c.index for c in columns])
    cells = [row[c.index] for row in table.rows for c in columns]
    warnings += [warning for column in columns if (warning := _above_maximum(table, column))]
    return ExportLayout(keep=keep, columns=columns, students=students, decimal_comma=uses_decimal_comma(cells),
                  warnings=tuple(warnings))


def _full_name(row: list[str], names: list[int]) -> str:
    return " ".join(row[i].strip() for i in names if row[i].strip())


def _by_key(table: Table, key: int, names: list[int], grades: Grades, match: str) -> list[StudentRow]:
    """Each row's student: the one whose id is the row's email address (without case) or ID number."""
    fold = str.casefold if match == "email" else str
    by_key = {fold(student): student for student, _ in grades.by_key}
    students: list[StudentRow] = []
    for index, row in enumerate(table.rows):
        value, name = row[key].strip(), _full_name(row, names)
        students.append(StudentRow(index, f"{name} ({value})" if name else value or f"row {index + 2}",
                                   by_key.get(fold(value)) if value else None))
    twice = sorted(v for v, n in Counter(fold(row[key].strip()) for row in table.rows if row[key].strip()).items()
                   if n > 1)
    if twice:
        raise ExportError(f"{table.path}: the {MATCH_COLUMNS[match]} '{twice[0]}' is on two rows; Moodle could not "
                          "tell them apart")
    return students


def name_key(name: str) -> str:
    """How a full name compares: NFC, without case, '_' read as a space (Moodle's zip writes it so), one space."""
    return " ".join(unicodedata.normalize("NFC", name).replace("_", " ").casefold().split())


def _by_name(table: Table, names: list[int], grades: Grades) -> tuple[list[StudentRow], list[str]]:
    """Each row's student: the one whose id is the row's full name, "First Last" or "Last First" (a Moodle site
    may show either); a name on two rows matches neither, with a warning."""
    if len(names) < 2:
        raise ExportError(f"{table.path}: --match name needs the First name and Last name columns")
    by_name = {name_key(student): student for student, _ in grades.by_key}
    keys = [{name_key(f"{row[names[0]]} {row[names[1]]}"), name_key(f"{row[names[1]]} {row[names[0]]}")}
            for row in table.rows]
    count = Counter(key for row_keys in keys for key in row_keys)
    students, warnings = [], []
    for index, (row, row_keys) in enumerate(zip(table.rows, keys)):
        label = _full_name(row, names) or f"row {index + 2}"
        found = [by_name[k] for k in sorted(row_keys) if k in by_name]
        if found and any(count[k] > 1 for k in row_keys if k in by_name):
            warnings.append(f"warning: the name '{label}' is on two rows of the export: neither is filled "
                            "(grade those students by email with --match email)")
            found = []
        students.append(StudentRow(index, label, found[0] if found else None))
    return students, warnings


def _implied_maximum(table: Table, header: list[str], assignment: str, wanted: str) -> float:
    """The item's maximum grade as the export implies it: a Real grade divided by its percentage, the same on
    every row that has both; `ExportError` when the export does not say it."""
    match = GRADE_ITEM.match(wanted.strip())
    percentage = f"{match['item']} (Percentage)" if match else ""
    if wanted.strip() in header and percentage in header:
        real, share = header.index(wanted.strip()), header.index(percentage)
        implied = set()
        for row in table.rows:
            grade, percent = parse_number(row[real]), parse_number(row[share].replace("%", ""))
            if grade is not None and percent:
                implied.add(round(grade * 100 / percent, 1))
        if len(implied) == 1 and (maximum := implied.pop()) > 0:
            return float(maximum)
    raise ExportError(f"--map {assignment}=\"{wanted}\": Moodle's export does not say the grade item's maximum "
                      f"grade; give it with --max-grade {assignment}=POINTS (Moodle: the assignment's settings, Grade "
                      "> Maximum grade), or export the item's Percentage display type too")


def _above_maximum(table: Table, column: Column) -> str:
    """A warning when a grade already in ``column`` is above the maximum assumed ('' when none is)."""
    above = [value for row in table.rows if (value := parse_number(row[column.index])) is not None
             and value > column.points]
    if not above:
        return ""
    return (f"warning: '{column.header}' already holds {len(above)} grade(s) above the maximum assumed, "
            f"{column.points:g} (highest {max(above):g}): check --max-grade {column.assignment}=POINTS before "
            "importing")


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
