"""Manual grading as nbgrader users expect (issue 33, item 14): a course that adds a "manually graded answer" and a
"manually graded task" cell has them left for manual grading (flagged in the class gradebook, never an automatic
0, the feedback says pending); formgrader finds the autograded notebooks and the gradebook in the output folder;
points given through nbgrader's gradebook API flow into grades.csv and the report (on the next `grade`, or at
once through `collect`) and into `export`, which sends no grade still waiting for manual points unless asked;
plain nbgrader reads the course's config without a warning."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.nbgrader_course import course_id
from course import ROOT
from tests.grading_helpers import (FIXTURE_SOURCE, MANUAL_ANSWER, MANUAL_TASK, grade_cli, read_grades,
                                   released_notebooks, require_sandbox, solution_sources, student_notebook,
                                   write_submission)


def manual_course(folder: Path) -> Path:
    """The fixture course with a manually graded answer and a manually graded task added to ``toy``."""
    source = folder / "source"
    shutil.copytree(FIXTURE_SOURCE, source)
    path = source / "toy" / "toy.ipynb"
    notebook = json.loads(path.read_text())
    notebook["cells"] += [MANUAL_ANSWER, MANUAL_TASK]
    path.write_text(json.dumps(notebook))
    return source


@pytest.fixture(scope="module")
def manual(tmp_path_factory):
    require_sandbox()
    root = tmp_path_factory.mktemp("manual")
    source = manual_course(root)
    released = released_notebooks(root / "templates", source)["toy"]
    answers = solution_sources(FIXTURE_SOURCE / "toy" / "toy.ipynb") | {"explain": "a + b == b + a for numbers."}
    write_submission(root / "subs", "ada", "toy", student_notebook(released, answers))
    out = OutputFolder(root / "out")
    first = grade_cli(root / "subs", "--out", out.root, "--source", source, "--jobs", "1", "--quiet")
    return {"out": out, "first": first, "root": root, "source": source}


def _grade(out: OutputFolder, grade_id: str):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out.gradebook}", course_id()) as gradebook:
        grade = gradebook.find_grade(grade_id, "toy", "toy", "ada")
        return grade.auto_score, grade.manual_score, grade.needs_manual_grade


@pytest.mark.slow  # the fixture grades the class
def test_a_manual_cell_is_left_for_manual_grading(manual) -> None:
    out, first = manual["out"], manual["first"]
    assert first.returncode == 0, first.stderr
    row = read_grades(out.root)[("ada", "toy")]
    assert (row["score"], row["max_score"]) == ("5", "8"), row
    assert row["reason"] == "manual grading pending: 3 points (explain, plot_task)", row
    assert _grade(out, "explain") == (None, None, True), "the answer was given an automatic score"
    assert _grade(out, "plot_task") == (None, None, True)
    assert _grade(out, "test_add") == (1.0, None, False)
    page = (out.feedback("ada", "toy") / "toy.html").read_text()
    assert page.count("Pending: this answer is graded by hand") == 2, "the feedback does not say it is pending"
    assert "pending" in out.report.read_text()


@pytest.mark.slow  # the fixture grades the class
def test_formgrader_finds_the_submission_in_the_output_folder(manual) -> None:
    """nbgrader's formgrader opens `autograded/<student>/<assignment>/<notebook>.ipynb` under the course root of
    the config it reads: the one grade writes into the output folder."""
    from traitlets.config.loader import PyFileConfigLoader

    from nbgrader.coursedir import CourseDirectory

    out = manual["out"]
    config = PyFileConfigLoader("nbgrader_config.py", str(out.root)).load_config()
    coursedir = CourseDirectory(config=config)
    autograded = Path(coursedir.format_path(coursedir.autograded_directory, "ada", "toy")) / "toy.ipynb"
    assert autograded.is_file(), f"formgrader would answer 404 for {autograded}"
    cells = {c["metadata"].get("nbgrader", {}).get("grade_id") for c in json.loads(autograded.read_text())["cells"]}
    assert {"explain", "plot_task", "test_add"} <= cells
    assert coursedir.db_url == f"sqlite:///{out.gradebook}"


@pytest.mark.slow  # the fixture grades the class
def test_manual_points_given_through_the_gradebook_api_reach_grades_csv(manual) -> None:
    from nbgrader.api import Gradebook

    out = manual["out"]
    with Gradebook(f"sqlite:///{out.gradebook}", course_id()) as gradebook:
        grade = gradebook.find_grade("explain", "toy", "toy", "ada")
        grade.manual_score = 1.5
        gradebook.db.commit()
    again = grade_cli(manual["root"] / "subs", "--out", out.root, "--source", manual["source"], "--jobs", "1",
                      "--quiet")
    assert again.returncode == 0 and "(0 run now, 1 kept from an earlier run)" in again.stderr, again.stderr
    row = read_grades(out.root)[("ada", "toy")]
    assert (row["score"], row["reason"]) == ("6.5", "manual grading pending: 1 points (plot_task)"), row
    assert _grade(out, "explain") == (None, 1.5, False), "a rerun overwrote the manual score"


def test_plain_nbgrader_reads_the_course_config_without_warnings(caplog) -> None:
    """The root nbgrader_config.py loads the course's, and nbgrader's Execute knows every option set in it."""
    from traitlets.config.loader import PyFileConfigLoader

    from nbgrader.preprocessors import Execute

    config = PyFileConfigLoader("nbgrader_config.py", str(ROOT)).load_config()
    assert (config.CourseDirectory.source_directory, config.CourseDirectory.course_id) == ("solutions", course_id())
    with caplog.at_level("WARNING"):
        Execute(config=config)
    assert "not recognized" not in caplog.text, caplog.text


CANVAS_EXPORT = ("Student,ID,SIS User ID,SIS Login ID,Section,Toy (1201)\n    Points Possible,,,,,8.00\n"
                 '"Lovelace, Ada",1001,S1001,ada,Section 01,\n')


def _export(out: OutputFolder, folder: Path, *options: str) -> tuple[subprocess.CompletedProcess, str]:
    """``export`` of DIR to a Canvas export with ada's empty Toy column, and the import file it wrote."""
    (folder / "export.csv").write_text(CANVAS_EXPORT)
    (folder / "import.csv").unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "autograder", "export", str(out.root), "--lms", "canvas",
                           "--gradebook", str(folder / "export.csv"), "--map", "toy=1201", "--out",
                           str(folder / "import.csv"), *options], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done, (folder / "import.csv").read_text()


@pytest.mark.slow  # the fixture grades the class
def test_manual_points_reach_export_and_the_class_files_without_grading_again(manual, tmp_path: Path) -> None:
    """Before, points given by hand reached grades.csv, the report and export only through another run of grade,
    and export sent a partial score while manual grading was pending."""
    from nbgrader.api import Gradebook

    out = manual["out"]

    def give(points: dict[str, float | None]) -> None:
        with Gradebook(f"sqlite:///{out.gradebook}", course_id()) as gradebook:
            for cell, given in points.items():
                gradebook.find_grade(cell, "toy", "toy", "ada").manual_score = given
            gradebook.db.commit()

    give({"explain": 1.5, "plot_task": None})
    pending, written = _export(out, tmp_path)
    assert "warning: manual grading pending, cell kept" in pending.stdout, pending.stdout
    assert "Lovelace, Ada" in pending.stdout and "Lovelace" not in written, "a grade that is not final was sent"
    partial, written = _export(out, tmp_path, "--include-pending")
    assert "partial scores sent while manual grading is pending (--include-pending)" in partial.stdout
    assert written.splitlines()[-1].endswith(",6.50"), written
    give({"plot_task": 1.0})
    final, written = _export(out, tmp_path)
    assert written.splitlines()[-1].endswith(",7.50"), (written, final.stdout)
    assert "take manual points given in the gradebook since grades.csv was written" in final.stdout
    collected = subprocess.run([sys.executable, "-m", "autograder", "collect", str(out.root), "--source",
                                str(manual["source"])], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert collected.returncode == 0, collected.stderr
    assert "1 rows of 1 students; 2 manually graded cells have their points, 0 still wait" in collected.stdout
    row = read_grades(out.root)[("ada", "toy")]
    assert (row["score"], row["reason"]) == ("7.5", ""), row
    assert "7.5 / 8" in out.report.read_text() and "(pending:" not in out.report.read_text()
