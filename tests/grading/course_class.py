"""The course's own class, graded once per test run by `python -m autograder grade` as an instructor runs it
(warm kernels, default options), for the tests that read it: tests/grading/test_grading.py (full marks, zero, and
the harness's agreement) and tests/grading/test_warm_cold.py (which grades the same class again ``--cold`` and
compares).

The class: for every chapter, a student with the reference answers (``reference``), one with the blank exercise
(``blank``) and one with a wrong answer from the chapter's bank (``wrong0``: `wrong_answers`), so that full, zero
and partial marks are all graded. (A second wrong answer per chapter, as test_warm_cold.py once handed in, made 24
more notebooks to grade, warm and cold, and no check that one does not make.)

Under pytest-xdist both test files may run at once on different workers: the first that asks grades the class in
the run's shared temporary folder while the other waits on a file lock, then both read the same output folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from course.chapters import chapters
from course.notebooks import solution_sources, student_notebook
from tests import bank
from tests.grading_helpers import grade_cli, write_submission

WRONG_PER_CHAPTER = 1
GRADE_FLAGS = ("--jobs", "2", "--quiet")  # every option else at its default
GRADE_TIMEOUT = 1200.0


@dataclass(frozen=True)
class GradedClass:
    """The class and what `grade` did with it.

    submissions: the hand-ins, SUBMISSIONS/<student>/<assignment>/<notebook> (read it, never write in it).
    out: `grade`'s output folder.
    returncode, stderr: how `grade` ended and what it said.
    """

    submissions: Path
    out: Path
    returncode: int
    stderr: str


def wrong_answers(assignment: str) -> list[bank.Answer]:
    """The wrong answers the class hands in for ``assignment`` (``wrong0``, ...: WRONG_PER_CHAPTER of them): its
    bank's first wrong answers that name their mistake (so that the feedback message is checked too), then its
    others; none without a bank."""
    found = {module.ASSIGNMENT: module.WRONG for module in bank.modules()}.get(assignment, [])
    return ([answer for answer in found if answer.message] + [answer for answer in found if not answer.message]
            )[:WRONG_PER_CHAPTER]


def _hand_in(submissions: Path) -> None:
    for found in chapters():
        reference = solution_sources(found.solution)
        answers = {"reference": reference, "blank": {}}
        for index, answer in enumerate(wrong_answers(found.slug)):
            answers[f"wrong{index}"] = {**reference, answer.cell: answer.source}
        for student, given in answers.items():
            write_submission(submissions, student, found.slug, student_notebook(found.exercise, given),
                             found.exercise.name)


def _grade(root: Path) -> GradedClass:
    submissions, out = root / "submissions", root / "out"
    _hand_in(submissions)
    done = grade_cli(submissions, "--out", out, *GRADE_FLAGS, timeout=GRADE_TIMEOUT)
    return GradedClass(submissions, out, done.returncode, done.stderr)


def graded_class(basetemp: Path) -> GradedClass:
    """The class graded warm, once per run: ``basetemp`` is the session's `tmp_path_factory.getbasetemp()`; under
    xdist its parent is shared by the workers, and the first to come grades there while the others wait."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = (basetemp.parent if worker else basetemp) / "course-class"
    record = root / "graded.json"
    root.mkdir(exist_ok=True)
    with FileLock(root / "lock"):
        if not record.is_file():
            done = _grade(root)
            record.write_text(json.dumps({"returncode": done.returncode, "stderr": done.stderr}))
    said = json.loads(record.read_text())
    return GradedClass(root / "submissions", root / "out", said["returncode"], said["stderr"])
