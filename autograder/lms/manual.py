"""The points given by hand for `export`: what DIR's gradebook holds now, not what ``grades.csv`` held when `grade`
last wrote it.

Points given in nbgrader's formgrader or through its gradebook API after the last run of `grade` are read from
the class gradebook (``DIR/gradebook.db``, or the ``--db`` `grade` was given) for every stored row
(`autograder.reports.state`) that has a manually graded cell, exactly as the class files count them
(`autograder.reports.class_record.class_rows`): a cell with its points adds them, a cell without keeps the grade pending.
Nothing is regraded and nothing in DIR is written (`python -m autograder collect DIR` rewrites the class files).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autograder.lms.grades import Grades
from autograder.lms.table import ExportError


def with_manual_points(out: Path, grades: Grades, db_url: str = "") -> tuple[Grades, int]:
    """``grades`` with each manually graded row's score and pending flag as DIR's gradebook has them now, and the
    number of rows whose score changed since grades.csv was written. `ExportError` when the gradebook cannot be
    read."""
    from autograder.reports.class_record import class_rows
    from autograder.reports.output_folder import OutputFolder
    from autograder.reports.state import stored_rows

    folder = OutputFolder(out)
    manual = {key: entry for key, entry in stored_rows(folder).items() if any(c.manual for c in entry.result.cells)}
    if not manual or (not db_url and not folder.gradebook.is_file()):
        return grades, 0
    from sqlalchemy.exc import SQLAlchemyError

    from autograder.reports.gradebook import read_manual_scores

    try:
        given = read_manual_scores(db_url or folder.gradebook_url, {}, manual)
    except SQLAlchemyError as error:
        raise ExportError(f"cannot read the manual points in {db_url or folder.gradebook} "
                          f"({type(error).__name__}): pass the --db that grade was given") from None
    by_key, changed = dict(grades.by_key), 0
    for row in class_rows(manual, {}, given):
        key = (row.student_id, row.assignment)
        grade = by_key.get(key)
        if grade is None or not grade.graded:
            continue
        changed += row.score != grade.score
        by_key[key] = replace(grade, score=row.score, reason=row.reason, pending=row.pending)
    return Grades(by_key, grades.by_lms_user_id), changed
