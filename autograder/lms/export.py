"""`python -m autograder export DIR --lms canvas|moodle --gradebook EXPORT.csv --map A=COLUMN ... --out IMPORT.csv`:
fill the instructor's own gradebook export with the grades in ``DIR/grades.csv``, as a file the LMS imports.

1. The arguments, ``DIR/grades.csv`` (`autograder.lms.grades.read_grades`), with the manual points DIR's gradebook holds
   now (`autograder.lms.manual`), and the export (`autograder.lms.table.read_table`) are read and checked; any
   problem is refused with one line and exit status 2, and nothing is written. A grade still waiting for manual
   points is not sent unless ``--include-pending``.
2. The format module (`autograder.lms.canvas`, `autograder.lms.moodle`) finds the columns to keep, the
   mapped columns and each row's student; `autograder.lms.grades.fill` writes the cells.
3. The file is written in one step (a temporary file renamed over ``--out``), with the export's BOM,
   delimiter, line ending and quoting, and a summary of what changed is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from types import MappingProxyType

from autograder.lms import canvas as lms_canvas

from autograder.lms import moodle as lms_moodle
from autograder.lms.grades import Grades, Outcome, check_matched, fill, read_grades, rows_to_write
from autograder.lms.manual import with_manual_points
from autograder.lms.table import ExportError, read_table, table_bytes

MATCH = "email"  # how Moodle rows are matched when --match is not given
IMPORT_STEPS = MappingProxyType({
    "canvas": "In Canvas: Grades > Import, choose {out}, check the changes it lists, then Upload.",
    "moodle": "In Moodle: Grades > Import > CSV file, choose {out}, map '{column}' to the user's {column} "
              "and the grade column to its grade item, then Upload grades."})


def add_parser(commands: "argparse._SubParsersAction") -> None:
    """Register the ``export`` subcommand."""
    export = commands.add_parser(
        "export", help="fill your Canvas or Moodle gradebook export with DIR's grades, for the LMS to import",
        description="Write a copy of your own LMS gradebook export (identity columns and the mapped assignment "
                    "columns only) with each graded student's score scaled to the column's points. Never adds a "
                    "column, never blanks a grade, leaves excused cells; the same input gives the same bytes.")
    export.add_argument("dir", type=Path, metavar="DIR", help="the --out folder of `python -m autograder grade`")
    export.add_argument("--lms", choices=["canvas", "moodle"], required=True, help="the export's format")
    export.add_argument("--gradebook", type=Path, required=True, metavar="EXPORT.csv",
                        help="the gradebook you exported (Canvas: Grades > Export; Moodle: Export > Plain text file)")
    export.add_argument("--map", action="append", required=True, metavar="ASSIGNMENT=COLUMN",
                        help="an assignment of DIR and its column: Canvas, the id in the header's brackets "
                             "(Similarity (1201) -> 1201); Moodle, the whole header "
                             "(\"Assignment: Similarity (Real)\"); repeat for each assignment")
    export.add_argument("--out", type=Path, required=True, metavar="IMPORT.csv", help="the file to import")
    export.add_argument("--match", choices=["email", "idnumber", "name"], default=None,
                        help="Moodle only: identify users by email address, by ID number, equal to the student "
                             "id, or by full name (students graded from Moodle's own submissions zip, whose ids are "
                             f"the names Moodle gave its files) (default: {MATCH})")
    export.add_argument("--max-grade", action="append", default=[], metavar="ASSIGNMENT=POINTS",
                        help="Moodle only: the grade item's maximum grade (Moodle's export does not carry it; "
                             "without this option it is taken from the item's Percentage column when the "
                             "export has one, else the export is refused)")
    export.add_argument("--include-pending", action="store_true",
                        help="send the partial score of a submission whose manually graded cells are not all graded "
                             "yet (default: its cell is kept, and the summary lists it)")
    export.add_argument("--db", default="", metavar="URL",
                        help="the gradebook grade was given with --db, where the manual points are (default: "
                             "DIR/gradebook.db)")
    export.add_argument("--late-penalty", type=float, default=0.0, metavar="FRACTION",
                        help="take this fraction off late submissions (default 0: leave it to the LMS's late policy)")


def run(args: argparse.Namespace) -> int:
    """The ``export`` command: exit status 0, or 2 after one line saying what was refused."""
    try:
        outcome, data, columns, warnings = _export(args)
        _write(args.out, data)
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary(args, outcome, columns, warnings))
    return 0


def _pairs(values: list[str], option: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name.strip() or not target.strip():
            raise ExportError(f"{option} {value!r}: expected {option} ASSIGNMENT=VALUE")
        pairs.append((name.strip(), target.strip()))
    names = [name for name, _ in pairs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ExportError(f"{option} names {twice[0]} twice")
    return pairs


def _export(args: argparse.Namespace) -> tuple[Outcome, bytes, list[str], list[str]]:
    """What ``export`` writes: the outcome, the file's bytes, the columns filled and the warnings."""
    if not 0.0 <= args.late_penalty < 1.0:
        raise ExportError(f"--late-penalty {args.late_penalty:g}: a fraction from 0 (none) to below 1 "
                          "(0.1 takes 10% off)")
    if args.lms == "canvas" and (args.match or args.max_grade):
        raise ExportError("--match and --max-grade are for --lms moodle: Canvas rows are matched by Canvas user id, "
                          "then SIS Login ID, and its export carries each column's Points Possible")
    if args.out.resolve() == args.gradebook.resolve():
        raise ExportError(f"--out {args.out} is the export itself: write the import to another file")
    if not args.out.parent.is_dir():
        raise ExportError(f"--out {args.out}: no folder {args.out.parent}")
    mapping = _pairs(args.map, "--map")
    max_grades = {}
    for assignment, points in _pairs(args.max_grade, "--max-grade"):
        try:
            max_grades[assignment] = float(points)
        except ValueError:
            raise ExportError(f"--max-grade {assignment}={points}: POINTS must be a number") from None
        if max_grades[assignment] <= 0 or assignment not in dict(mapping):
            raise ExportError(f"--max-grade {assignment}={points}: give a positive maximum for a mapped assignment")
    grades, taken = with_manual_points(args.dir, read_grades(args.dir), args.db)
    _check_graded(args.dir, grades, [assignment for assignment, _ in mapping])
    if args.lms == "canvas":
        table = read_table(args.gradebook, ",;", required="Section")
        found = lms_canvas.export_layout(table, mapping, grades)
    else:
        match = args.match or MATCH
        table = read_table(args.gradebook, ",;\t:", required=lms_moodle.MATCH_COLUMNS[match])
        found = lms_moodle.export_layout(table, mapping, grades, match, max_grades)
    check_matched(found, grades, [assignment for assignment, _ in mapping], args.gradebook)
    outcome = fill(table, found, grades, args.late_penalty, args.include_pending)
    columns = [f"{c.assignment} -> {c.header} (out of {c.points:g})" for c in found.columns]
    warnings = list(found.warnings)
    if taken:
        warnings.append(f"{taken} score(s) take manual points given in the gradebook since grades.csv was written "
                        f"(`python -m autograder collect {args.dir}` brings grades.csv and the report up to date)")
    return outcome, table_bytes(table, rows_to_write(found, outcome), found.keep), columns, warnings


def _check_graded(out: Path, grades: Grades, assignments: list[str]) -> None:
    for assignment in assignments:
        if not grades.graded(assignment):
            graded = [a for a in grades.assignments if grades.graded(a)]
            raise ExportError(f"--map {assignment}=...: {out}/grades.csv has no graded submission of {assignment} "
                              f"(graded there: {', '.join(graded) or 'nothing'})")


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` in one step: a reader never sees half a file, and a failed write leaves nothing."""
    try:
        handle, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise ExportError(f"cannot write {path}: {error.strerror}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(scratch, path)
    except OSError as error:
        Path(scratch).unlink(missing_ok=True)
        raise ExportError(f"cannot write {path}: {error.strerror}") from None


def summary(args: argparse.Namespace, outcome: Outcome, columns: list[str], warnings: list[str]) -> str:
    """What the import will do, for the instructor to check before importing."""
    lms = "Canvas" if args.lms == "canvas" else "Moodle"
    replaced = sum(c.replaces_a_grade for c in outcome.changed)
    lines = [f"wrote {args.out} for {lms}: " + "; ".join(columns), *warnings]
    if replaced:
        lines.append(f"warning: {replaced} existing grade(s) will be replaced (listed below with old -> new)")
    lines.append(f"cells changed: {len(outcome.changed)} (old -> new); the file holds only the rows that change")
    width = max((len(c.student) for c in outcome.changed), default=0)
    lines += [f"  {c.student:<{width}}  {c.column}: {c.old.strip() or '(empty)'} -> {c.new}" for c in outcome.changed]
    lines.append(f"cells that already hold the grade (rows left out of the file): {outcome.unchanged}")
    if outcome.excused:
        lines.append("excused, left as EX: " + ", ".join(f"{s} in {c}" for s, c in outcome.excused))
    if outcome.late:
        how = (f"{args.late_penalty:.0%} taken off here" if args.late_penalty
               else f"no penalty here: left to {lms}'s late policy")
        lines.append(f"late ({how}): " + ", ".join(f"{s} in {c}" for s, c in outcome.late))
    if outcome.pending and args.include_pending:
        lines.append("warning: partial scores sent while manual grading is pending (--include-pending): "
                     + ", ".join(f"{s} in {c}" for s, c, _ in outcome.pending))
    elif outcome.pending:
        lines.append("warning: manual grading pending, cell kept (grade by hand in formgrader, or pass "
                     "--include-pending to send the partial score):")
        lines += [f"  {s} in {c} ({reason})" for s, c, reason in outcome.pending]
    for student, column, reason in outcome.not_graded:
        lines.append(f"not graded in DIR, cell kept: {student} in {column} ({reason})")
    lines.append(f"graded but not in the export: {len(outcome.not_in_export)}")
    lines += [f"  {student}: {', '.join(assignments)}" for student, assignments in outcome.not_in_export.items()]
    for column, students in outcome.no_submission.items():
        lines.append(f"in the export with no submission, cell kept ({column}): {len(students)}")
        lines += [f"  {student}" for student in students]
    column = lms_moodle.MATCH_COLUMNS["idnumber" if args.match == "idnumber" else "email"]
    lines.append(IMPORT_STEPS[args.lms].format(out=args.out, column=column))
    return "\n".join(lines)
