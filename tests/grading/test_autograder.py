"""`python -m autograder grade` on the fixture course: folder and zip input, outputs, resume, exit status."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.reports.output_folder import OutputFolder
from autograder.harness.safe_html import CSP_META
from tests.grading_helpers import (FIXTURE_SOURCE, HIDDEN_MARKER, ROOT, SCORES_BY_STUDENT, grade_cli, read_grades,
                                   solution_sources, student_notebook, write_submission, write_zip)

pytestmark = pytest.mark.slow

REFERENCE = solution_sources(FIXTURE_SOURCE / "toy" / "toy.ipynb")
OPTIONS = ("--jobs", "1", "--source", FIXTURE_SOURCE, "--cell-timeout", "10", "--timeout", "60", "--quiet")
WRONG_MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)"


def _class(folder: Path, released: Path) -> None:
    """Three students: full marks, a wrong mean, a blank notebook."""
    write_submission(folder, "ada", "toy", student_notebook(released, REFERENCE))
    write_submission(folder, "b.rown-2", "toy", student_notebook(released, {**REFERENCE, "mean": WRONG_MEAN}))
    write_submission(folder, "cy", "toy", student_notebook(released, {}))


# What the grader must not import, in a run that grades (its workers do) or a rerun that grades nothing: torch,
# nbgrader (its package imports its converters), nbconvert.
HEAVY = ("torch", "nbgrader", "nbgrader.converters", "nbconvert", "nbclient", "jupyter_client")
RERUN = f"""import json, sys  # `python -m autograder ARGS`, then what it started and imported, as JSON
started = []
sys.addaudithook(lambda event, args: started.append(list(map(str, args[1]))) if event == "subprocess.Popen" else None)
from autograder.__main__ import main
status = main(sys.argv[1:])
print(json.dumps({{"status": status, "started": started, "imported": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, toy_class):
    root = tmp_path_factory.mktemp("autograder")
    released = toy_class.released["toy"]
    submissions, out = root / "submissions", root / "out"
    shutil.copytree(toy_class.cache, OutputFolder(out).cache)
    _class(submissions, released)
    done = subprocess.run([sys.executable, "-c", RERUN, "grade", submissions, "--out", out, *map(str, OPTIONS[2:]),
                           "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    said = json.loads(done.stdout.splitlines()[-1]) if done.stdout.strip() else {}  # nothing when it crashed
    return {"root": root, "released": released, "submissions": submissions, "out": out, "done": done, "said": said}


def test_grades_csv(first_run) -> None:
    assert first_run["done"].returncode == 0, first_run["done"].stderr
    rows = read_grades(first_run["out"])
    assert {key: (row["score"], row["max_score"], row["reason"]) for key, row in rows.items()} == {
        ("ada", "toy"): ("5", "5", ""),
        ("b.rown-2", "toy"): ("3", "5", ""),
        ("cy", "toy"): ("0", "5", ""),
    }
    header = OutputFolder(first_run["out"]).grades.read_text().splitlines()[0]
    assert header == "student_id,assignment,score,max_score,reason,lms_user_id,late"


def test_feedback_per_student_without_hidden_code(first_run) -> None:
    for student in ("ada", "b.rown-2", "cy"):
        (page,) = OutputFolder(first_run["out"]).feedback(student, "toy").glob("*.html")
        text = page.read_text()
        assert HIDDEN_MARKER not in text and "expect_raises(ValueError" not in text
        assert "hidden tests: not shown" in text
        assert f"<head>\n{CSP_META}" in text, "the page starts with a Content-Security-Policy that forbids scripts"
    wrong = (OutputFolder(first_run["out"]).feedback("b.rown-2", "toy") / "toy.html").read_text()
    assert "mean([1, 2, 3]) should be 2" in wrong, "the failing visible test's message is shown"


def test_report(first_run) -> None:
    report = OutputFolder(first_run["out"]).report.read_text()
    assert report.count("<svg ") == 2, "the assignment's score histogram and its pass-rate chart"
    assert "Pass rate per test" in report and "test_mean_hidden" in report
    assert "Most frequent failures" in report and "mean([1, 2, 3]) should be 2" in report
    assert "not attempted: the solution cell" not in report, "what was not attempted is no mistake of the class"
    assert "<td>cy</td>" in report and "test_add (not attempted)" in report, "the student table: a blank notebook"
    assert "Every submission was graded." in report


def test_gradebook(first_run) -> None:
    with sqlite3.connect(OutputFolder(first_run["out"]).gradebook) as db:
        scores = dict(db.execute(SCORES_BY_STUDENT))
    assert scores == {"ada": 5.0, "b.rown-2": 3.0, "cy": 0.0}


def test_rerun_is_idempotent_and_grades_only_what_changed(first_run) -> None:
    out, submissions = first_run["out"], first_run["submissions"]
    before = OutputFolder(out).grades.read_text()
    again = grade_cli(submissions, "--out", out, *OPTIONS)
    assert again.returncode == 0, again.stderr
    assert "(0 run now, 3 kept from an earlier run)" in again.stderr
    assert OutputFolder(out).grades.read_text() == before
    write_submission(submissions, "cy", "toy", student_notebook(first_run["released"], REFERENCE))
    changed = grade_cli(submissions, "--out", out, *OPTIONS)
    assert "(1 run now, 2 kept from an earlier run)" in changed.stderr, changed.stderr
    assert read_grades(out)[("cy", "toy")]["score"] == "5"
    with sqlite3.connect(OutputFolder(out).gradebook) as db:
        assert db.execute("select count(*) from submitted_assignment").fetchone() == (3,)
        assert db.execute("select count(*) from grade").fetchone() == (12,)


def test_a_rerun_with_every_result_stored_starts_nothing_and_imports_nothing_heavy(first_run) -> None:
    out, submissions = first_run["out"], first_run["submissions"]
    assert grade_cli(submissions, "--out", out, *OPTIONS).returncode == 0  # every result stored
    before = OutputFolder(out).grades.read_text()
    done = subprocess.run([sys.executable, "-c", RERUN, "grade", submissions, "--out", out, *map(str, OPTIONS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["status"] == 0, done.stderr
    assert said["started"] == [], "no worker, zygote or sandbox probe is started when nothing is graded"
    assert said["imported"] == [], "the grader imports no torch and no nbgrader when nothing is graded"
    assert "(0 run now, 3 kept from an earlier run)" in done.stderr and "no kernel is started" in done.stderr
    assert OutputFolder(out).grades.read_text() == before
    log = (OutputFolder(out).logs / "run.log").read_text()  # the run's own log of where its time goes
    assert "first verdict" in log, "an earlier run graded: its log marks the first verdict"
    assert "templates cached, 3 tasks keyed: none to grade" in log.rsplit("--- grade", 1)[1]
    # Another gradebook (--db) gets every stored result: the gradebook is skipped only where it holds them.
    other = first_run["root"] / "other-gradebook.db"
    again = grade_cli(submissions, "--out", out, *OPTIONS, "--db", f"sqlite:///{other}")
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(other) as db:
        assert dict(db.execute(SCORES_BY_STUDENT)) == {"ada": 5.0, "b.rown-2": 3.0, "cy": 5.0}


def test_a_run_that_grades_leaves_nbgrader_to_the_workers(first_run) -> None:
    # The gradebook is recorded by a worker of its own, the templates' cells by the workers that make them: the
    # grader imports none of nbgrader (a second of a core beside the workers); `test_gradebook` reads every score.
    assert first_run["said"].get("status") == 0, first_run["done"].stderr
    assert first_run["said"]["imported"] == [], "the grader imports no torch and no nbgrader: its workers do"


def test_a_gradebook_that_cannot_be_written_stops_the_run_and_keeps_the_grades(first_run) -> None:
    out, submissions = first_run["out"], first_run["submissions"]
    assert grade_cli(submissions, "--out", out, *OPTIONS).returncode == 0  # every result stored
    before = OutputFolder(out).grades.read_text()
    unwritable = f"sqlite:///{first_run['root'] / 'no-such-folder' / 'gradebook.db'}"
    done = grade_cli(submissions, "--out", out, *OPTIONS, "--db", unwritable)
    assert done.returncode == 2, done.stderr
    assert f"error: the class gradebook {unwritable} could not be written: OperationalError" in done.stderr
    assert "the grades are stored, and the next run records them again" in done.stderr
    assert OutputFolder(out).grades.read_text() == before, "grades.csv keeps every grade"


def test_interrupted_run_resumes(first_run) -> None:
    root = first_run["root"]
    submissions, out = root / "many", root / "out-interrupted"
    shutil.copytree(OutputFolder(first_run["out"]).cache, OutputFolder(out).cache)
    count = 8  # more than the workers can finish between the first stored result, the poll and the SIGTERM
    for i in range(count):
        write_submission(submissions, f"s{i}", "toy", student_notebook(first_run["released"], REFERENCE))
    command = [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
               *map(str, OPTIONS[:-1])]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(OutputFolder(out).states.glob("*/toy.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    finished = len(list(OutputFolder(out).states.glob("*/toy.json")))
    assert 1 <= finished < count
    resumed = grade_cli(submissions, "--out", out, *OPTIONS)
    assert f"({count - finished} run now, {finished} kept from an earlier run)" in resumed.stderr, resumed.stderr
    assert all(row["score"] == "5" for row in read_grades(out).values())


def test_canvaswrite_zip(first_run) -> None:
    root = first_run["root"]
    good = (first_run["submissions"] / "ada" / "toy" / "toy.ipynb").read_bytes()
    wrong = (first_run["submissions"] / "b.rown-2" / "toy" / "toy.ipynb").read_bytes()
    archive = write_zip(root / "canvas.zip", {
        "picardjeanluc_1701_9001_toy.ipynb": wrong,
        "picardjeanluc_1701_9002_toy-1.ipynb": good,  # a resubmission: the later one counts
        "rikerwill_late_1702_9003_toy.ipynb": wrong,
        "troideanna_1703_9004_notes.txt": b"not a notebook",
    })
    out = root / "out-canvas"
    shutil.copytree(OutputFolder(first_run["out"]).cache, OutputFolder(out).cache)
    done = grade_cli(archive, "--out", out, *OPTIONS)
    assert done.returncode == 1, done.stderr  # troideanna handed in a file that is not the notebook
    rows = read_grades(out)
    assert {key: row["score"] for key, row in rows.items()} == {
        ("picardjeanluc_1701", "toy"): "5", ("rikerwill_1702", "toy"): "3", ("troideanna_1703", "toy"): "0"}
    assert rows[("troideanna_1703", "toy")]["reason"] == \
        "not graded: no submission (expected toy.ipynb); found instead: notes.txt"
    assert {key: (row["lms_user_id"], row["late"]) for key, row in rows.items()} == {
        ("picardjeanluc_1701", "toy"): ("1701", "0"), ("rikerwill_1702", "toy"): ("1702", "1"),
        ("troideanna_1703", "toy"): ("1703", "0")}, "the Canvas user id and late flag are kept for `export`"


def test_folder_zip_and_nothing_gradable(first_run) -> None:
    root = first_run["root"]
    good = (first_run["submissions"] / "ada" / "toy" / "toy.ipynb").read_bytes()
    archive = write_zip(root / "folder.zip", {"class/ada/toy/toy.ipynb": good, "class/bo/toy/toy.ipynb": b"{broken",
                                         "../evil/toy/toy.ipynb": good})
    out = root / "out-zip"
    shutil.copytree(OutputFolder(first_run["out"]).cache, OutputFolder(out).cache)
    done = grade_cli(archive, "--out", out, *OPTIONS)
    assert done.returncode == 1, done.stderr  # bo's notebook is not JSON: graded, with one failure
    rows = read_grades(out)
    assert set(rows) == {("ada", "toy"), ("bo", "toy"), ("evil", "toy")}
    assert rows[("ada", "toy")]["score"] == "5"
    assert rows[("bo", "toy")]["reason"].startswith("not graded: toy.ipynb is not a readable notebook")
    assert not (root.parent / "evil").exists()
    broken = write_zip(root / "broken.zip", {"bo/toy/toy.ipynb": b"{broken"})
    shutil.copytree(OutputFolder(first_run["out"]).cache, OutputFolder(root / "out-nothing").cache)
    nothing = grade_cli(broken, "--out", root / "out-nothing", *OPTIONS)
    assert nothing.returncode == 2, "nothing could be graded"
    assert read_grades(root / "out-nothing")[("bo", "toy")]["score"] == "0"


def test_a_relative_out_folder_is_made_absolute(tmp_path: Path, monkeypatch) -> None:
    """Workers run in the repository root, so `--out DIR` relative to the instructor's folder must be resolved
    before they get it (a relative DIR once failed while generating the assignments)."""
    import autograder.grading.run
    from autograder.__main__ import main

    seen = []
    monkeypatch.setattr(autograder.grading.run, "grade", lambda options: seen.append(options) or 0)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "submissions").mkdir()
    assert main(["grade", "submissions", "--out", "graded", "--quiet"]) == 0
    assert seen[0].out == tmp_path / "graded"
