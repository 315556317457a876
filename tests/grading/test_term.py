"""An instructor's term, end to end (issue 33), in one output folder: two assignments graded from Canvas zips, a
late resubmission, a Colab copy and a link entry, two namesakes told apart by their Canvas user ids, a one-student
regrade, a Moodle zip, manually graded cells given points through nbgrader's gradebook API and collected without
grading again, the exports to Canvas and Moodle and the feedback zip for Canvas; every earlier grade, feedback page
and gradebook score intact after each step."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.nbgrader_course import course_id
from course import ROOT
from tests.grading_helpers import (grade_cli, gradebook_scores, read_grades, released_notebooks, require_sandbox,
                                   solution_sources, student_notebook, write_zip)
from tests.reports.test_manual_grading import manual_course

WRONG_ADD = "def add(a, b):\n    return a - b"
FIGURE = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
          "source": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"}



def _assert_intact(out: OutputFolder, expected: dict[tuple[str, str], tuple[str, str]],
                   missing: tuple[tuple[str, str], ...] = ()) -> None:
    """grades.csv holds exactly ``expected`` ((student, assignment) -> (score, late)) and a 'no submission' row for
    each of ``missing``; each graded row has its feedback page and the gradebook agrees."""
    grades = read_grades(out.root)
    assert {k: (r["score"], r["late"]) for k, r in grades.items() if k not in missing} == expected
    assert all(grades[k]["reason"].startswith("not graded: no submission") for k in missing)
    for student, assignment in expected:
        assert any(out.feedback(student, assignment).glob("*.html")), f"{student}/{assignment}: no feedback page"
    scores = gradebook_scores(out.gradebook)
    assert {k: v for k, v in scores.items() if k not in missing} == {k: float(s) for k, (s, _) in expected.items()}


CANVAS_EXPORT = "\n".join([
    "Student,ID,SIS User ID,SIS Login ID,Section,Toy (1201),Toy torch (1202)",
    "    Points Possible,,,,,16.00,10.00",
    '"Lovelace, Ada",11,,ada,Section 01,,', '"Bo, Bo",12,,bo,Section 01,,', '"Cy, Cy",13,,cy,Section 01,,',
    '"Smith, John",14,,jsmith1,Section 01,,', '"Smith, John",15,,jsmith2,Section 01,,']) + "\n"
MOODLE_EXPORT = "\n".join([
    '"First name","Last name","ID number","Email address","Assignment: Toy torch (Real)",'
    '"Last downloaded from this course"',
    "Dana,Scully,S1,dana@uni.example,-,1764590000", "Fox,Mulder,S2,fox@uni.example,1.00,1764590000"]) + "\n"


def _command(*args: str | Path) -> str:
    """``python -m autograder ARGS`` as an instructor runs it; its standard output."""
    done = subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _imported(path: Path) -> dict[str, list[str]]:
    """The rows of an import file by their first field (the student's name)."""
    return {line.split(",")[0].strip('"'): line.split(",") for line in path.read_text().splitlines()[1:]}


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

    def grade(archive: Path, *options: str, status: int = 0) -> str:
        run = grade_cli(archive, "--out", out.root, "--source", source, "--jobs", "2", "--quiet", *options)
        assert run.returncode == status, run.stderr
        return run.stderr

    # Week 1: assignment toy; cy hands in late, with a wrong add.
    # Two students named John Smith: their ids come from their Canvas user ids, in every zip.
    week1 = write_zip(tmp_path / "toy.zip", {"ada_11_901_toy.ipynb": toy, "bo_12_902_toy.ipynb": toy,
                                             "cy_LATE_13_903_toy.ipynb": wrong, "smithjohn_14_907_toy.ipynb": toy,
                                             "smithjohn_15_908_toy.ipynb": wrong})
    grade(week1)
    expected = {("ada_11", "toy"): ("5", "0"), ("bo_12", "toy"): ("5", "0"), ("cy_13", "toy"): ("2", "1"),
                ("smithjohn_14", "toy"): ("5", "0"), ("smithjohn_15", "toy"): ("2", "0")}
    _assert_intact(out, expected)
    # Week 2: assignment toy_torch, into the same folder; cy resubmits toy late (toy-1.ipynb), now right, and hands
    # in a Colab link for toy_torch; bo hands in the notebook Colab copied. Only one John Smith hands in.
    week2 = write_zip(tmp_path / "toy_torch.zip", {"ada_11_904_toy_torch.ipynb": torch,
                                                   "bo_12_905_Copy of toy_torch.ipynb": torch,
                                                   "cy_LATE_13_906_toy-1.ipynb": toy,
                                                   "cy_13_link.html": b"<a href='https://colab.research.google.com/"
                                                                      b"drive/1x'>mine</a>",
                                                   "smithjohn_14_909_toy_torch.ipynb": torch})
    said = grade(week2, status=1)  # the link entry could not be graded
    assert "1 grades changed (old -> new):\n  cy_13 toy: 2 -> 5 (of 8)" in said, said
    expected |= {("cy_13", "toy"): ("5", "1"), ("ada_11", "toy_torch"): ("2", "0"), ("bo_12", "toy_torch"): ("2", "0"),
                 ("smithjohn_14", "toy_torch"): ("2", "0")}
    grades = read_grades(out.root)
    assert grades[("smithjohn_14", "toy_torch")]["lms_user_id"] == "14"
    assert grades[("bo_12", "toy_torch")]["reason"].startswith(
        "misnamed notebook: graded Copy of toy_torch.ipynb as toy_torch.ipynb"), grades[("bo_12", "toy_torch")]
    assert "found instead: a website URL entry to https://colab.research.google.com/drive/1x" in \
        grades[("cy_13", "toy_torch")]["reason"]
    _assert_intact(out, expected, missing=(("cy_13", "toy_torch"),))
    assert "data:image/png" in (out.feedback("ada_11", "toy_torch") / "toy_torch.html").read_text(), "figure lost"
    # A one-student regrade of week 1: the class files still cover the whole class.
    said = grade(week1, "--student", "bo_12", "--force")
    assert "(1 run now, 0 kept" in said, said
    _assert_intact(out, expected, missing=(("cy_13", "toy_torch"),))
    # A Moodle class's zip of toy_torch into the same folder: ids are the full names.
    moodle = write_zip(tmp_path / "moodle.zip", {
        "Dana Scully_7001_assignsubmission_file_/toy_torch.ipynb": torch,
        "Fox Mulder_7002_assignsubmission_file_/work/toy_torch.ipynb": torch})
    grade(moodle)
    expected |= {("Dana Scully", "toy_torch"): ("2", "0"), ("Fox Mulder", "toy_torch"): ("2", "0")}
    _assert_intact(out, expected, missing=(("cy_13", "toy_torch"),))
    report = out.report.read_text()
    assert all(f"<td>{student}</td><td>{name}</td>" in report
               for student, name in (("ada_11", "ada"), ("cy_13", "cy"), ("Dana Scully", "Dana Scully")))
    # Manual grading through nbgrader's gradebook API, collected into the class files without grading again.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out.gradebook}", course_id()) as gradebook:
        for cell, points in (("explain", 2.0), ("plot_task", 1.0)):
            gradebook.find_grade(cell, "toy", "toy", "ada_11").manual_score = points
        gradebook.db.commit()
    assert read_grades(out.root)[("ada_11", "toy")]["reason"].startswith("manual grading pending")
    assert "2 manually graded cells have their points" in _command("collect", out.root, "--source", source)
    expected |= {("ada_11", "toy"): ("8", "0")}
    _assert_intact(out, expected, missing=(("cy_13", "toy_torch"),))
    assert read_grades(out.root)[("bo_12", "toy")]["reason"] == "manual grading pending: 3 points (explain, plot_task)"
    # Grades back to Canvas and to Moodle; a grade still waiting for manual points is not sent.
    (tmp_path / "canvas.csv").write_text(CANVAS_EXPORT)
    said = _command("export", out.root, "--lms", "canvas", "--gradebook", tmp_path / "canvas.csv", "--map",
                    "toy=1201", "--map", "toy_torch=1202", "--out", tmp_path / "canvas-import.csv")
    assert "manual grading pending, cell kept" in said and "Bo, Bo (12) in Toy (1201)" in said, said
    canvas = _imported(tmp_path / "canvas-import.csv")
    # Only the rows that change: cy (toy pending, a link entry for toy_torch) and the second John Smith keep theirs.
    assert sorted(canvas) == ["    Points Possible", "Bo", "Lovelace", "Smith"], canvas
    assert canvas["Lovelace"][-2:] == ["16.00", "10.00"] and canvas["Bo"][-2:] == ["", "10.00"], canvas
    assert canvas["Smith"][2] == "14" and canvas["Smith"][-2:] == ["", "10.00"], canvas
    (tmp_path / "moodle.csv").write_text(MOODLE_EXPORT)
    said = _command("export", out.root, "--lms", "moodle", "--match", "name", "--gradebook", tmp_path / "moodle.csv",
                    "--map", "toy_torch=Assignment: Toy torch (Real)", "--max-grade", "toy_torch=10",
                    "--out", tmp_path / "moodle-import.csv")
    moodle_rows = _imported(tmp_path / "moodle-import.csv")
    assert moodle_rows["Dana"][4] == "10.00" and moodle_rows["Fox"][4] == "10.00", moodle_rows
    assert "1 existing grade(s) will be replaced" in said, said
    # Feedback back to Canvas: each page named as Canvas's bulk upload wants it.
    said = _command("feedback-zip", out.root, "--submissions", week1, "--assignment", "toy",
                    "--out", tmp_path / "feedback.zip")
    with zipfile.ZipFile(tmp_path / "feedback.zip") as archive:
        assert {"ada_11_901_toy-feedback.html", "smithjohn_15_908_toy-feedback.html"} <= set(archive.namelist())
    _assert_intact(out, expected, missing=(("cy_13", "toy_torch"),))
    print(f"term test: {time.monotonic() - started:.0f} s")
