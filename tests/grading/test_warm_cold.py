"""A warm kernel grades exactly as a cold one: the whole course, graded both ways, gives every student the
same points on every test cell, the same score and the same reasons.

The class is tests/grading/course_class.py's: for every chapter, a student with the reference answers, one with
the blank exercise, and one with a wrong answer from the bank, so that full, zero and partial marks are all
compared. Its warm run (the default) is the one tests/grading/test_grading.py reads; this file grades the same
class again with ``--cold`` and nothing else changed. The run also shows that ``--cold`` is the cold path and the
default the warm one (the timings each stores name their own phases).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.reports.state import stored_results
from course.chapters import chapters
from tests.grading.course_class import GRADE_FLAGS, GRADE_TIMEOUT, graded_class
from tests.grading_helpers import grade_cli, read_grades, require_sandbox

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> dict[str, Path | str]:
    require_sandbox()
    warm = graded_class(tmp_path_factory.getbasetemp())
    assert warm.returncode == 0, warm.stderr[-3000:]
    cold = tmp_path_factory.mktemp("cold") / "out"
    done = grade_cli(warm.submissions, "--out", cold, *GRADE_FLAGS, "--cold", timeout=GRADE_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"warm": warm.out, "warm-said": warm.stderr, "cold": cold, "cold-said": done.stderr}


def test_the_run_says_how_kernels_start(both) -> None:
    assert "warm start: each kernel is forked" in both["warm-said"]
    assert "cold start (--cold)" in both["cold-said"]


def test_each_mode_ran_as_it_says(both) -> None:
    """A warm kernel's timings have the fork and its namespaces; a cold one's the sandbox start and imports."""
    for found in chapters():
        for mode, phase in (("warm", "fork"), ("cold", "kernel_preload")):
            results = stored_results(OutputFolder(both[mode]), found.slug)
            assert results and all(phase in r.timings for r in results.values()), (mode, found.slug)


def test_every_student_gets_the_same_grade_warm_and_cold(both) -> None:
    warm, cold = read_grades(both["warm"]), read_grades(both["cold"])
    assert warm.keys() == cold.keys()
    assert len(warm) >= 3 * len(chapters())
    differ = {key: (warm[key], cold[key]) for key in warm
              if (warm[key]["score"], warm[key]["max_score"], warm[key]["reason"])
              != (cold[key]["score"], cold[key]["max_score"], cold[key]["reason"])}
    assert not differ, differ
    scores = {float(row["score"]) / float(row["max_score"]) for row in warm.values()}
    assert {0.0, 1.0} <= scores and scores - {0.0, 1.0}, "the class should hold full, zero and partial marks"


def test_every_test_cell_scores_the_same_warm_and_cold(both) -> None:
    for found in chapters():
        warm = stored_results(OutputFolder(both["warm"]), found.slug)
        cold = stored_results(OutputFolder(both["cold"]), found.slug)
        for student, result in warm.items():
            ours = [(c.grade_id, c.points, c.passed) for c in result.cells]
            theirs = [(c.grade_id, c.points, c.passed) for c in cold[student].cells]
            assert ours == theirs, (found.slug, student)
