"""The output folder is the class's record for the whole term (issue 33, items 1-7): a run adds to what is stored
and never drops or zeroes an earlier row, feedback page or gradebook score; the class files cover everything
stored; a student keeps one id; two runs at once are refused; outputs are the instructor's only; a rerun says
which grades changed; an output folder that cannot be made is one error line."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.__main__ import main
from autograder.lms.grades import read_grades as read_grades_back
from autograder.reports.class_record import OutputUnavailable, class_rows, open_output
from autograder.reports.grades_csv import read_grade_rows, write_grades
from autograder.reports.output_folder import OutputFolder
from autograder.reports.state import Stored
from autograder.grading.options import Options
from autograder.records import CellResult, GradeRow, Result, Status, Task, Template
from autograder.submissions.find import Found, find, select
from tests.grading_helpers import (FIXTURE_SOURCE, InstantPool, grade_cli, gradebook_scores, plan_of, read_grades,
                                   released_notebooks, require_sandbox, solution_sources, student_notebook, write_zip)

TOY = Template("toy", "key", Path("/nonexistent"), ("toy",), (("toy", "test_add", 1.0),))


class RecordingRecorder:
    """Stands in for `autograder.workers.recorder.Recorder`: which (student, assignment) each run recorded."""

    recorded: list[tuple[str, str, str]] = []

    def __init__(self, *args) -> None: ...

    def record(self, task: Task, result: Result) -> None:
        RecordingRecorder.recorded.append((task.student, task.assignment, result.status))

    def manual_scores(self, *args) -> dict:
        return {}

    def close(self) -> None: ...


def _run(tmp_path: Path, monkeypatch, tasks: list[Task], result: Result, capsys=None) -> tuple[int, str]:
    from autograder.grading import run as grade
    from autograder.workers import recorder

    monkeypatch.setattr(recorder, "Recorder", RecordingRecorder)
    RecordingRecorder.recorded = []
    for task in tasks:
        for path in filter(None, task.notebooks.values()):
            Path(path).write_text("{}")
    options = Options(tmp_path / "in", tmp_path / "out", 1, progress=False)
    pool = InstantPool(result)
    status = grade._grade_tasks(plan_of(options, tasks, {"toy": TOY}), pool, pool, tmp_path)
    return status, capsys.readouterr().err if capsys else ""


def _graded(points: float) -> Result:
    return Result("graded", "", (CellResult("toy", "test_add", points, 1.0, points >= 1.0, ""),),
                  feedback={"toy.html": "<p>feedback</p>"})


def _task(tmp_path: Path, student: str, key: str = "k") -> Task:
    return Task(student, "toy", {"toy": str(tmp_path / f"{student}-{key}.ipynb")}, key=key)


def test_a_no_submission_never_replaces_a_stored_grade(tmp_path: Path, monkeypatch) -> None:
    _run(tmp_path, monkeypatch, [_task(tmp_path, "ada"), _task(tmp_path, "bo")], _graded(1.0))
    missing = Task("ada", "toy", problem="no submission (expected toy.ipynb)", missing=True)
    _run(tmp_path, monkeypatch, [missing], _graded(1.0))
    out = OutputFolder(tmp_path / "out")
    assert read_grades(out.root)[("ada", "toy")]["score"] == "1", "the stored grade was replaced"
    assert (out.feedback("ada", "toy") / "toy.html").exists(), "the stored feedback page was deleted"
    assert RecordingRecorder.recorded == [], "a 'no submission' zeroed the gradebook's scores"


def test_a_one_student_regrade_keeps_every_row_of_the_class_files(tmp_path: Path, monkeypatch) -> None:
    _run(tmp_path, monkeypatch, [_task(tmp_path, "ada"), _task(tmp_path, "bo")], _graded(1.0))
    _run(tmp_path, monkeypatch, [_task(tmp_path, "ada", "resubmitted")], _graded(0.0))
    grades = read_grades(tmp_path / "out")
    assert sorted(grades) == [("ada", "toy"), ("bo", "toy")]
    assert (grades[("ada", "toy")]["score"], grades[("bo", "toy")]["score"]) == ("0", "1")
    report = OutputFolder(tmp_path / "out").report.read_text()
    assert "bo" in report and "ada" in report


def test_a_rerun_says_which_grades_changed(tmp_path: Path, monkeypatch, capsys) -> None:
    _run(tmp_path, monkeypatch, [_task(tmp_path, "ada"), _task(tmp_path, "bo")], _graded(1.0), capsys)
    status, said = _run(tmp_path, monkeypatch, [_task(tmp_path, "ada", "resubmitted"), _task(tmp_path, "bo")],
                        _graded(0.0), capsys)
    assert status == 0
    assert "1 grades changed (old -> new):\n  ada toy: 1 -> 0 (of 1)" in said, said
    assert "bo toy" not in said, "an unchanged (reused) grade is not a change"


def test_outputs_are_the_instructors_only(tmp_path: Path, monkeypatch) -> None:
    given = os.umask(0o022)
    out = OutputFolder(tmp_path / "out")
    held = open_output(out)
    try:
        _run(tmp_path, monkeypatch, [_task(tmp_path, "ada")], _graded(1.0))
    finally:
        held.close()
    assert os.umask(given) == 0o022, "the run did not give the umask back"
    paths = [out.root, *out.root.rglob("*")]
    assert paths[1:], "nothing was written"
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}: readable by others"


def test_an_older_world_readable_folder_is_closed(tmp_path: Path) -> None:
    out = OutputFolder(tmp_path / "out")
    out.root.mkdir(mode=0o755)
    out.root.chmod(0o755)
    open_output(out).close()
    assert stat.S_IMODE(out.root.stat().st_mode) == 0o700


def _one_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured
    return lines[0]


def test_a_second_run_into_the_same_folder_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "subs" / "ada" / "toy").mkdir(parents=True)
    out = OutputFolder(tmp_path / "out")
    held = open_output(out)
    try:
        with pytest.raises(OutputUnavailable):
            open_output(out)
        assert main(["grade", str(tmp_path / "subs"), "--out", str(out.root), "--source", str(FIXTURE_SOURCE)]) == 2
        line = _one_error(capsys)
        assert f"another grading run (pid {os.getpid()}) is writing to {out.root}" in line, line
    finally:
        held.close()
    open_output(out).close()  # released: the next run may start


def test_collect_refuses_a_folder_no_run_wrote_and_a_folder_another_run_holds(tmp_path: Path, capsys) -> None:
    """`collect` (after manual grading) writes DIR's class files under the same lock as `grade`."""
    out = OutputFolder(tmp_path / "out")
    assert main(["collect", str(out.root), "--source", str(FIXTURE_SOURCE)]) == 2
    assert "holds no grading run" in _one_error(capsys) and not out.root.exists(), "nothing is made"
    out.states.mkdir(parents=True)
    held = open_output(out)
    try:
        assert main(["collect", str(out.root), "--source", str(FIXTURE_SOURCE)]) == 2
        assert f"another grading run (pid {os.getpid()}) is writing to {out.root}" in _one_error(capsys)
    finally:
        held.close()


def test_an_output_folder_that_cannot_be_made_is_one_error_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "subs" / "ada" / "toy").mkdir(parents=True)
    (tmp_path / "a-file").write_text("not a folder")
    assert main(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "a-file" / "out"),
                 "--source", str(FIXTURE_SOURCE)]) == 2
    assert f"--out {tmp_path / 'a-file' / 'out'} cannot be used" in _one_error(capsys)


def test_assignment_filter_keeps_the_canvas_user_id_and_the_late_flag() -> None:
    found = {"ada": Found({"toy": [Path("toy.ipynb")], "toy_torch": [Path("toy_torch.ipynb")]},
                         lms_user_id="11", late={"toy", "toy_torch"})}
    (chosen,) = select(found, (), ("toy",)).values()
    assert (chosen.lms_user_id, chosen.late) == ("11", {"toy"})


NOTEBOOKS = {"toy.ipynb": "toy", "toy_torch.ipynb": "toy_torch"}


def test_a_canvas_students_id_does_not_depend_on_who_else_is_in_the_zip(tmp_path: Path) -> None:
    """Issue 33, item 3: two users named "Smith, John"; before, the one who handed in alone was `smithjohn` in a fresh
    folder and `smithjohn_11` when his namesake was in the zip too."""
    both = write_zip(tmp_path / "both.zip", {"smithjohn_11_1_toy.ipynb": b"{}", "smithjohn_12_2_toy.ipynb": b"{}"})
    one = write_zip(tmp_path / "one.zip", {"smithjohn_11_3_toy_torch.ipynb": b"{}"})
    other = write_zip(tmp_path / "other.zip", {"smithjohn_12_4_toy.ipynb": b"{}"})
    assert sorted(find(both, NOTEBOOKS, tmp_path / "s1")[0]) == ["smithjohn_11", "smithjohn_12"]
    assert sorted(find(one, NOTEBOOKS, tmp_path / "s2")[0]) == ["smithjohn_11"], "a fresh folder, alone in the zip"
    assert sorted(find(other, NOTEBOOKS, tmp_path / "s3")[0]) == ["smithjohn_12"]


def test_an_older_folder_keeps_the_ids_it_uses(tmp_path: Path) -> None:
    """A folder an earlier version filled holds `smithjohn` for user 11: he keeps it in every zip, his namesake
    never takes it."""
    known = {"11": "smithjohn"}
    both = write_zip(tmp_path / "both.zip", {"smithjohn_11_1_toy.ipynb": b"{}", "smithjohn_12_2_toy.ipynb": b"{}"})
    one = write_zip(tmp_path / "one.zip", {"smithjohn_11_3_toy_torch.ipynb": b"{}"})
    other = write_zip(tmp_path / "other.zip", {"smithjohn_12_4_toy.ipynb": b"{}"})
    assert sorted(find(both, NOTEBOOKS, tmp_path / "s1", known=known)[0]) == ["smithjohn", "smithjohn_12"]
    assert sorted(find(one, NOTEBOOKS, tmp_path / "s2", known=known)[0]) == ["smithjohn"]
    assert sorted(find(other, NOTEBOOKS, tmp_path / "s3", known=known)[0]) == ["smithjohn_12"]


def test_a_moodle_students_id_is_the_same_in_every_zip(tmp_path: Path) -> None:
    """Moodle numbers participants per assignment (2001 in one zip, 3107 in the next): the id is the full name,
    whoever else is in the zip; namesakes, whom only that number tells apart, are graded apart with a note."""
    alone = write_zip(tmp_path / "a1.zip", {"John Smith_2001_assignsubmission_file_/toy.ipynb": b"{}"})
    others = write_zip(tmp_path / "a2.zip", {"Ada Lovelace_3100_assignsubmission_file_/toy_torch.ipynb": b"{}",
                                             "John Smith_3107_assignsubmission_file_/toy_torch.ipynb": b"{}"})
    assert sorted(find(alone, NOTEBOOKS, tmp_path / "s1")[0]) == ["John Smith"]
    assert sorted(find(others, NOTEBOOKS, tmp_path / "s2")[0]) == ["Ada Lovelace", "John Smith"]
    namesakes = write_zip(tmp_path / "a3.zip", {"John Smith_4001_assignsubmission_file_/toy.ipynb": b"{}",
                                                "John Smith_4002_assignsubmission_file_/toy.ipynb": b"{}"})
    found, said = find(namesakes, NOTEBOOKS, tmp_path / "s3")
    assert sorted(found) == ["John Smith_4001", "John Smith_4002"]
    assert "participant number 4001, which differs in each assignment" in found["John Smith_4001"].notes[0]
    assert said[0].startswith("2 participants of the Moodle zip are named 'John Smith': graded as John Smith_4001, "
                              "John Smith_4002"), said


def _reference(released: dict[str, Path], assignment: str) -> str:
    return json.dumps(student_notebook(released[assignment],
                                       solution_sources(FIXTURE_SOURCE / assignment / f"{assignment}.ipynb")))



@pytest.mark.slow
def test_grading_another_assignment_into_the_folder_keeps_the_earlier_ones(tmp_path: Path) -> None:
    """The issue's reproduction: a Canvas zip of one assignment, then one of another in which one student also
    handed in the first assignment's notebook (so every other student 'has no submission' of it)."""
    require_sandbox()
    released = released_notebooks(tmp_path / "templates")
    toy, torch = _reference(released, "toy"), _reference(released, "toy_torch")
    first = write_zip(tmp_path / "a1.zip", {"ada_11_901_toy.ipynb": toy, "bo_12_902_toy.ipynb": toy})
    second = write_zip(tmp_path / "a2.zip", {"ada_11_903_toy_torch.ipynb": torch, "bo_12_904_toy_torch.ipynb": torch,
                                             "bo_12_905_toy.ipynb": toy})
    out = OutputFolder(tmp_path / "out")
    for archive in (first, second):
        run = grade_cli(archive, "--out", out.root, "--source", FIXTURE_SOURCE, "--jobs", "2", "--quiet")
        assert run.returncode == 0, run.stderr
    grades = read_grades(out.root)
    assert {k: (r["score"], r["lms_user_id"]) for k, r in grades.items()} == {
        ("ada_11", "toy"): ("5", "11"), ("bo_12", "toy"): ("5", "12"), ("ada_11", "toy_torch"): ("2", "11"),
        ("bo_12", "toy_torch"): ("2", "12")}
    assert all(any(out.feedback(s, a).glob("*.html")) for s, a in grades), "a feedback page was deleted"
    assert gradebook_scores(out.gradebook) == {("ada_11", "toy"): 5.0, ("bo_12", "toy"): 5.0,
                                                ("ada_11", "toy_torch"): 2.0, ("bo_12", "toy_torch"): 2.0}
    # Another folder sharing this gradebook (--db), where ada's toy is 'no submission', zeroes none of it.
    shared = grade_cli(second, "--out", tmp_path / "other", "--source", FIXTURE_SOURCE, "--jobs", "2", "--quiet",
                       "--db", f"sqlite:///{out.gradebook}")
    assert shared.returncode == 0, shared.stderr
    assert gradebook_scores(out.gradebook)[("ada_11", "toy")] == 5.0, "a shared gradebook lost ada's grade"
    # ada's toy was not in the second zip: the pair is found from the hand-in the folder kept.
    assert "\ntoy,ada_11,bo_12," in out.similarity.read_text()
    report = out.report.read_text()
    assert report.count("toy_torch") and "Similar code" in report


# ---------------------------------------------------------------- one typed row, from grading to grades.csv and export


def _stored_class() -> dict[tuple[str, str], Stored]:
    """One stored row of each kind grades.csv holds."""
    manual = CellResult("toy", "explain", 0.0, 3.0, False, "pending", manual=True)
    return {("ada", "toy"): Stored(_graded(1.0), lms_user_id="11", late=True, lms_name="Ada Lovelace"),
            ("bo", "toy"): Stored(Result(Status.GRADED, "", (_graded(0.5).cells[0], manual)),
                                  note="misnamed notebook: graded Toy.ipynb as toy.ipynb"),
            ("cy", "toy"): Stored(Result(Status.FAILED, "the kernel died"), max_score=1.0),
            ("dee", "toy"): Stored(Result(Status.FAILED, "no submission (expected toy.ipynb)"), missing=True),
            ("=1+1", "toy"): Stored(_graded(1.0), note="@SUM(A1)", lms_user_id="-7")}


def test_a_grade_row_is_written_as_grades_csv_always_was_and_read_back_the_same(tmp_path: Path) -> None:
    rows = class_rows(_stored_class(), {"toy": TOY})
    write_grades(tmp_path / "grades.csv", rows)
    assert (tmp_path / "grades.csv").read_bytes().decode().splitlines() == [
        "student_id,assignment,score,max_score,reason,lms_user_id,late",
        "'=1+1,toy,1,1,'@SUM(A1),'-7,0",
        "ada,toy,1,1,,11,1",
        "bo,toy,0.5,1,misnamed notebook: graded Toy.ipynb as toy.ipynb; manual grading pending: 3 points (explain),,0",
        "cy,toy,0,1,not graded: the kernel died,,0",
        "dee,toy,0,1,not graded: no submission (expected toy.ipynb),,0"]
    read = read_grade_rows(tmp_path / "grades.csv")
    assert read == [replace(row, lms_name="", cells=()) for row in rows], "what the report alone reads is not in the csv"
    assert [(r.status, r.pending, r.no_submission) for r in read] == [
        (Status.GRADED, (), False), (Status.GRADED, (), False), (Status.GRADED, ("explain",), False),
        (Status.FAILED, (), False), (Status.FAILED, (), True)]


def test_a_status_is_typed_and_keeps_its_text() -> None:
    assert Result("graded").status is Status.GRADED, "a worker's JSON line gives the status as its text"
    assert json.loads(Result(Status.FAILED, "x").to_json())["status"] == "failed"
    assert Result.from_dict({"status": "done"}).status is Status.DONE
    with pytest.raises(ValueError):
        Result("finished")


def test_a_note_quoting_the_pending_phrase_does_not_hold_a_grade_back(tmp_path: Path) -> None:
    """A student names a notebook after grades.csv's pending note: the grade is final all the same, and export
    sends it (before, any reason containing the phrase kept the LMS's cell)."""
    note = "misnamed notebook: graded manual grading pending: 1 points (x).ipynb as toy.ipynb"
    write_grades(OutputFolder(tmp_path).grades, [GradeRow("ada", "toy", 1.0, 1.0, reason=note)])
    assert not read_grades_back(tmp_path).by_key[("ada", "toy")].pending
