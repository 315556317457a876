"""Whether two gradings of one class gave the same grades: the autograder warm against `--cold` (their
grades.csv rows, field by field), and any autograder run against plain nbgrader (the score and maximum of each
student's assignment in nbgrader's gradebook, where both graded it)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from autograder.records import GradeRow
from benchmarks.grading_figures import Agreement

Key = tuple[str, str]  # (student, assignment)


def _keyed(rows: list[GradeRow]) -> dict[Key, GradeRow]:
    return {(row.student_id, row.assignment): row for row in rows}


def _shown(label: str, row: GradeRow | None) -> str:
    if row is None:
        return f"{label}: no row"
    reason = f" ({row.csv_reason})" if row.csv_reason else ""
    return f"{label} {row.score:g}/{row.max_score:g}{reason}"


def same_rows(label: str, rows: list[GradeRow], other_label: str, other: list[GradeRow]) -> Agreement:
    """Every (student, assignment) of either grades.csv compared on every field grades.csv writes; a row only
    one side has differs."""
    left, right = _keyed(rows), _keyed(other)
    keys = sorted(left.keys() | right.keys())
    differing = []
    for student, assignment in keys:
        mine, theirs = left.get((student, assignment)), right.get((student, assignment))
        if mine is None or theirs is None or mine.csv_fields() != theirs.csv_fields():
            differing.append(f"{student} {assignment}: {_shown(label, mine)}; {_shown(other_label, theirs)}")
    return Agreement(f"{label} vs {other_label}", len(keys), tuple(differing))


def same_scores(label: str, rows: list[GradeRow], plain: Mapping[Key, tuple[float, float]]) -> Agreement:
    """The autograder's score and maximum of each row it graded against plain nbgrader's for the same student and
    assignment; rows the autograder did not grade, or nbgrader has no score for, are left out (not comparable)."""
    comparable = [row for row in rows if row.graded and (row.student_id, row.assignment) in plain]
    differing = []
    for row in comparable:
        score, max_score = plain[(row.student_id, row.assignment)]
        if not (math.isclose(row.score, score, abs_tol=1e-6) and math.isclose(row.max_score, max_score, abs_tol=1e-6)):
            differing.append(f"{row.student_id} {row.assignment}: {_shown(label, row)}; "
                             f"plain nbgrader {score:g}/{max_score:g}")
    left_out = len(rows) - len(comparable) + len(plain.keys() - _keyed(rows).keys())
    return Agreement(f"{label} vs plain nbgrader", len(comparable), tuple(differing), left_out,
                     "not graded by the autograder, or no score in nbgrader's gradebook" if left_out else "")
