"""An instructor's term, end to end (issue 33): two assignments graded into one output folder from Canvas zips, a
late resubmission, a one-student regrade, a manually graded cell given points through nbgrader's gradebook API,
and every earlier grade, feedback page and gradebook score intact at the end.

Hooks for what the LMS intake adds (issue 33, items 8-12, 15-17): a Colab copy and a link entry in a Canvas zip,
a Moodle zip, the exports to Canvas and Moodle and the feedback zip join this term as further steps of
`test_a_term_keeps_every_grade`, each followed by `_assert_intact`."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from autograder.layout import OutputFolder
from autograder.nbgrader_course import course_id
from tests.grading_helpers import (grade_cli, read_grades, released_notebooks, require_sandbox, solution_sources,
                                   student_notebook, write_zip)
from tests.test_manual_grading import manual_course

WRONG_ADD = "def add(a, b):\n    return a - b"
FIGURE = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
          "source": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"}


def _gradebook_scores(db: Path) -> dict[tuple[str, str], float]:
    query = ("select st.id, a.name, sum(coalesce(g.manual_score, g.auto_score, 0)) from grade g "
             "join submitted_notebook n on g.notebook_id = n.id join submitted_assignment s on n.assignment_id = s.id "
             "join assignment a on s.assignment_id = a.id join student st on s.student_id = st.id group by st.id, a.name")
    with sqlite3.connect(db) as connection:
        return {(student, assignment): score for student, assignment, score in connection.execute(query)}


def _assert_intact(out: OutputFolder, expected: dict[tuple[str, str], tuple[str, str]],
                   missing: tuple[tuple[str, str], ...] = ()) -> None:
    """grades.csv holds exactly ``expected`` ((student, assignment) -> (score, late)) and a 'no submission' row for
    each of ``missing``; each graded row has its feedback page and the gradebook agrees."""
    grades = read_grades(out.root)
    assert {k: (r["score"], r["late"]) for k, r in grades.items() if k not in missing} == expected
    assert all(grades[k]["reason"].startswith("not graded: no submission") for k in missing)
    for student, assignment in expected:
        assert any(out.feedback(student, assignment).glob("*.html")), f"{student}/{assignment}: no feedback page"
    scores = _gradebook_scores(out.gradebook)
    assert {k: v for k, v in scores.items() if k not in missing} == {k: float(s) for k, (s, _) in expected.items()}


@pytest.mark.slow
def test_a_term_keeps_every_grade(tmp_path: Path) -> None:
    require_sandbox()
    started = time.monotonic()
    source = manual_course(tmp_path)
    released = released_notebooks(tmp_path / "templates", source)
    toy_answers = solution_sources(source / "toy" / "toy.ipynb") | {"explain": "a + b == b + a"}
    toy = json.dumps(student_notebook(released["toy"], toy_answers))
    wrong = json.dumps(student_notebook(released["toy"], toy_answers | {"add": WRONG_ADD}))
    plotted = student_notebook(released["toy_torch"], solution_sources(source / "toy_torch" / "toy_torch.ipynb"))
    plotted["cells"].append(FIGURE)
    torch = json.dumps(plotted)
    out = OutputFolder(tmp_path / "out")

    def grade(archive: Path, *options: str) -> str:
        run = grade_cli(archive, "--out", out.root, "--source", source, "--jobs", "2", "--quiet", *options)
        assert run.returncode == 0, run.stderr
        return run.stderr

    # Week 1: assignment toy; cy hands in late, with a wrong add.
    # Two students named John Smith: Canvas tells them apart by user id only.
    week1 = write_zip(tmp_path / "toy.zip", {"ada_11_901_toy.ipynb": toy, "bo_12_902_toy.ipynb": toy,
                                             "cy_LATE_13_903_toy.ipynb": wrong, "smithjohn_14_907_toy.ipynb": toy,
                                             "smithjohn_15_908_toy.ipynb": wrong})
    grade(week1)
    expected = {("ada", "toy"): ("5", "0"), ("bo", "toy"): ("5", "0"), ("cy", "toy"): ("2", "1"),
                ("smithjohn_14", "toy"): ("5", "0"), ("smithjohn_15", "toy"): ("2", "0")}
    _assert_intact(out, expected)
    # Week 2: assignment toy_torch, into the same folder; cy resubmits toy late (toy-1.ipynb), now right.
    # Only one John Smith hands in: he keeps the id the folder gave him.
    week2 = write_zip(tmp_path / "toy_torch.zip", {"ada_11_904_toy_torch.ipynb": torch,
                                                   "bo_12_905_toy_torch.ipynb": torch,
                                                   "cy_LATE_13_906_toy-1.ipynb": toy,
                                                   "smithjohn_14_909_toy_torch.ipynb": torch})
    said = grade(week2)
    assert "1 grades changed (old -> new):\n  cy toy: 2 -> 5 (of 8)" in said, said
    expected |= {("cy", "toy"): ("5", "1"), ("ada", "toy_torch"): ("2", "0"), ("bo", "toy_torch"): ("2", "0"),
                 ("smithjohn_14", "toy_torch"): ("2", "0")}
    assert read_grades(out.root)[("smithjohn_14", "toy_torch")]["lms_user_id"] == "14"
    _assert_intact(out, expected, missing=(("cy", "toy_torch"),))
    assert "data:image/png" in (out.feedback("ada", "toy_torch") / "toy_torch.html").read_text(), "the figure is lost"
    # A one-student regrade of week 1: the class files still cover the whole class.
    said = grade(week1, "--student", "bo", "--force")
    assert "(1 run now, 0 kept" in said, said
    _assert_intact(out, expected, missing=(("cy", "toy_torch"),))
    report = out.report.read_text()
    assert all(f"<td>{student}</td>" in report for student in ("ada", "bo", "cy"))
    # Manual grading through nbgrader's gradebook API; the next run takes the points into the class files.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out.gradebook}", course_id()) as gradebook:
        for cell, points in (("explain", 2.0), ("plot_task", 1.0)):
            gradebook.find_grade(cell, "toy", "toy", "ada").manual_score = points
        gradebook.db.commit()
    assert read_grades(out.root)[("ada", "toy")]["reason"].startswith("manual grading pending")
    grade(week2)
    expected |= {("ada", "toy"): ("8", "0")}
    _assert_intact(out, expected, missing=(("cy", "toy_torch"),))
    assert read_grades(out.root)[("bo", "toy")]["reason"] == "manual grading pending: 3 points (explain, plot_task)"
    print(f"term test: {time.monotonic() - started:.0f} s")
