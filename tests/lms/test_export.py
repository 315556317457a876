"""`python -m autograder export`: grades back into the instructor's own Canvas and Moodle gradebook exports.

No kernels: ``DIR/grades.csv`` is made by the grader's own steps from a Canvas submissions zip
(`autograder.submissions.find.from_zip`, `autograder.grading.tasks.make_tasks`, `autograder.reports.grades_csv.write_grades`)
with scores the test chooses, or written directly as a folder of submissions would have it; the
exports are written as Canvas and Moodle write them. Every check runs the command line: most through its entry
point (`autograder.__main__.main`) in this process, and a few as the instructor runs it, ``python -m autograder``.
"""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from autograder.__main__ import main
from autograder.reports.grades_csv import write_grades
from autograder.reports.output_folder import OutputFolder
from autograder.lms.table import read_table
from autograder.records import GradeRow, Status, Template
from autograder.submissions.find import from_zip
from autograder.grading.tasks import make_tasks
from course import ROOT
from tests.grading_helpers import write_zip

NOTEBOOKS = {"similarity.ipynb": "01_similarity", "scaled_attention.ipynb": "02_scaled_attention"}
BOM = "\ufeff"

# The Canvas submissions zip of 01_similarity: Ada resubmitted (the later file counts), Grace handed in
# late, Marie is excused in Canvas, Alan handed in only a PDF, Will dropped the course (no row in the export).
ZIP = {"lovelaceada_1001_5001_similarity.ipynb": b"first try",
       "lovelaceada_1001_5007_similarity-1.ipynb": b"resubmitted",
       "hoppergrace_LATE_1002_5002_similarity.ipynb": b"late",
       "curiemarie_1003_5003_similarity.ipynb": b"excused anyway",
       "turingalan_1004_5004_essay.pdf": b"not a notebook",
       "noetheremmy_1005_5005_similarity.ipynb": b"unchanged",
       "rikerwill_late_1702_5006_similarity.ipynb": b"dropped the course"}
SCORES = {"lovelaceada_1001": 8.0, "hoppergrace_1002": 10.0, "curiemarie_1003": 5.0, "noetheremmy_1005": 9.0,
          "rikerwill_1702": 4.0}

# Canvas's export (Grades > Export): a BOM, quoted names, two sections, a custom column, other assignments,
# read-only totals, an excused cell, the Test Student.
CANVAS_HEADER = ("Student,ID,SIS User ID,SIS Login ID,Section,Notes,Similarity (1201),Scaled attention (1202),"
                 "Quiz 1 (1300),Assignments Current Score,Current Score,Unposted Current Score,Final Score,Final Grade")
CANVAS = BOM + "\n".join([
    CANVAS_HEADER,
    "    Points Possible,,,,,,20.00,15.00,5.00,(read only),(read only),(read only),(read only),(read only)",
    '"Lovelace, Ada",1001,S1001,ada.lovelace,Section 01,,12.00,15.00,4.00,82.50,82.50,82.50,82.50,B',
    '"Hopper, Grace",1002,S1002,grace.hopper,Section 02,"asked for, and got, an extension",,11.00,EX,55.00,55.00,55.00,'
    '55.00,F',
    '"Curie, Marie",1003,S1003,marie.curie,Section 01,,EX,14.00,5.00,95.00,95.00,95.00,95.00,A',
    '"Turing, Alan",1004,S1004,alan.turing,Section 02,,7.00,,3.00,50.00,50.00,50.00,50.00,F',
    '"Noether, Emmy",1005,S1005,emmy.noether,Section 01,,18,15.00,5.00,96.00,96.00,96.00,96.00,A',
    '"Student, Test",1099,,,Section 01,,,,,,,,,',
]) + "\n"
# Only the rows whose cells change: re-sending an unchanged cell could undo a TA's edit made after the export.
CANVAS_IMPORT = BOM + "\n".join([
    "Student,ID,SIS User ID,SIS Login ID,Section,Similarity (1201)",
    "    Points Possible,,,,,20.00",
    '"Lovelace, Ada",1001,S1001,ada.lovelace,Section 01,16.00',
    '"Hopper, Grace",1002,S1002,grace.hopper,Section 02,20.00',
]) + "\n"

# Moodle's export (Grades > Export > Plain text file, Real display type, comma separator), quoted as PHP's
# fputcsv quotes: every field with a space.
MOODLE = "\n".join([
    '"First name","Last name","ID number",Institution,Department,"Email address","Assignment: Similarity (Real)",'
    '"Assignment: Similarity (Percentage)","Quiz: Quiz 1 (Real)","Course total (Real)",'
    '"Last downloaded from this course"',
    'Ada,Lovelace,S1001,Analytical,Maths,Ada.Lovelace@uni.example,6.00,"60.00 %",4.00,10.00,1764590000',
    'Grace,Hopper,S1002,"US Navy",CS,grace.hopper@uni.example,-,-,5.00,5.00,1764590000',
    'Alan,Turing,S1004,Bletchley,Maths,alan.turing@uni.example,7.00,"70.00 %",3.00,10.00,1764590000',
]) + "\n"


def _graded(tmp_path: Path, members: dict[str, bytes] = ZIP, scores: dict[str, float] = SCORES) -> Path:
    """DIR as `grade` leaves it for a Canvas zip of 01_similarity (out of 10), with these scores."""
    found, _ = from_zip(write_zip(tmp_path / "submissions.zip", members), NOTEBOOKS, tmp_path / "staging")
    template = Template("01_similarity", "key", tmp_path, ("similarity",), (("similarity", "mean", 10.0),))
    rows = [GradeRow(t.student, t.assignment, 0.0 if t.problem else scores[t.student], 10.0,
                     Status.FAILED if t.problem else Status.GRADED, t.problem, t.lms_user_id, t.late)
            for t in make_tasks(found, {"01_similarity": template}, "limits")]
    out = tmp_path / "graded"
    out.mkdir()
    write_grades(OutputFolder(out).grades, rows)
    return out


def _write(path: Path, text: str, newline: str = "\n") -> Path:
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


def command(*args: str | Path, process: bool = False) -> subprocess.CompletedProcess:
    """``python -m autograder ARGS``: as an instructor runs it where ``process``, else through the same entry point
    in this process (a second less per check), with its exit status and what it printed."""
    argv = list(map(str, args))
    if process:
        return subprocess.run([sys.executable, "-m", "autograder", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        try:
            status = main(argv)
        except SystemExit as stop:  # argparse's refusal of the arguments
            status = stop.code if isinstance(stop.code, int) else 1
    return subprocess.CompletedProcess(["python", "-m", "autograder", *argv], status, stdout.getvalue(),
                                       stderr.getvalue())


def export(*args: str | Path, process: bool = False) -> subprocess.CompletedProcess:
    """``python -m autograder export ARGS`` (`command`)."""
    return command("export", *args, process=process)


# ---------------------------------------------------------------- what grade keeps for export


def test_grades_csv_keeps_the_canvas_user_id_and_the_late_flag(tmp_path: Path) -> None:
    text = OutputFolder(_graded(tmp_path)).grades.read_text().splitlines()
    assert text[0] == "student_id,assignment,score,max_score,reason,lms_user_id,late", "new columns go at the end"
    assert "hoppergrace_1002,01_similarity,10,10,,1002,1" in text
    assert "lovelaceada_1001,01_similarity,8,10,,1001,0" in text
    assert "rikerwill_1702,01_similarity,4,10,,1702,1" in text, "_late_ in lower case marks a late submission too"
    assert "turingalan_1004,01_similarity,0,10,not graded: no submission (expected similarity.ipynb); found instead: essay.pdf,1004,0" in text


def test_a_resubmission_takes_its_late_flag_from_the_submission_that_counts(tmp_path: Path) -> None:
    found, _ = from_zip(write_zip(tmp_path / "s.zip", {"picard_LATE_1701_9001_similarity.ipynb": b"late first",
                                               "picard_1701_9002_similarity-1.ipynb": b"on time later"}),
                     NOTEBOOKS, tmp_path / "staging")
    assert found["picard_1701"].late == set() and found["picard_1701"].lms_user_id == "1701"
    found, _ = from_zip(write_zip(tmp_path / "t.zip", {"picard_1701_9001_similarity.ipynb": b"on time",
                                               "picard_LATE_1701_9002_similarity-1.ipynb": b"late resubmission"}),
                     NOTEBOOKS, tmp_path / "staging2")
    assert found["picard_1701"].late == {"01_similarity"}


# ---------------------------------------------------------------- Canvas


def test_canvas_import_file(tmp_path: Path) -> None:
    graded, gradebook = _graded(tmp_path), _write(tmp_path / "export.csv", CANVAS)
    done = export(graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "01_similarity=1201",
                  "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "import.csv").read_bytes()
    assert written.decode("utf-8") == CANVAS_IMPORT, (
        "identity columns, Points Possible row, BOM and delimiter kept; only the mapped column; scores scaled to "
        "20 points; only the rows that change: EX, no submission and 18 = 9/10 of 20 at 2 decimals are left out")
    header = read_table(tmp_path / "import.csv", ",", "Section").header
    assert set(header) <= set(CANVAS_HEADER.split(",")), "never a column the export did not have"
    out = done.stdout
    assert "cells changed: 2 (old -> new); the file holds only the rows that change" in out
    assert "warning: 1 existing grade(s) will be replaced" in out, "Ada's 12.00 is overwritten, Grace's empty cell is not"
    assert "Lovelace, Ada (1001)  Similarity (1201): 12.00 -> 16.00" in out
    assert "Hopper, Grace (1002)  Similarity (1201): (empty) -> 20.00" in out
    assert "cells that already hold the grade (rows left out of the file): 1" in out
    assert "excused, left as EX: Curie, Marie (1003) in Similarity (1201)" in out
    assert "late (no penalty here: left to Canvas's late policy): Hopper, Grace (1002) in Similarity (1201)" in out
    assert "graded but not in the export: 1\n  rikerwill_1702 (Canvas user 1702): 01_similarity" in out
    assert ("in the export with no submission, cell kept (Similarity (1201)): 2\n  Turing, Alan (1004)\n"
            "  Student, Test (1099)") in out


def test_a_grade_waiting_for_manual_points_is_sent_only_when_asked(tmp_path: Path) -> None:
    """Issue 33, item 14: before, export sent the partial score of a grade whose manually graded cells had no
    points yet, with no word of it."""
    graded, gradebook = _graded(tmp_path), _write(tmp_path / "export.csv", CANVAS)
    grades = OutputFolder(graded).grades
    grades.write_text(grades.read_text().replace("lovelaceada_1001,01_similarity,8,10,,",
                                                 "lovelaceada_1001,01_similarity,8,10,manual grading pending: 2 points "
                                                 "(explain),"))
    arguments = [graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "01_similarity=1201", "--out",
                 tmp_path / "import.csv"]
    kept = export(*arguments)
    assert kept.returncode == 0, kept.stderr
    assert ("warning: manual grading pending, cell kept (grade by hand in formgrader, or pass --include-pending to "
            "send the partial score):\n  Lovelace, Ada (1001) in Similarity (1201) (manual grading pending: 2 points "
            "(explain))") in kept.stdout, kept.stdout
    assert "Lovelace" not in (tmp_path / "import.csv").read_text()
    sent = export(*arguments, "--include-pending")
    assert sent.returncode == 0, sent.stderr
    assert ("warning: partial scores sent while manual grading is pending (--include-pending): Lovelace, Ada (1001) "
            "in Similarity (1201)") in sent.stdout, sent.stdout
    assert '"Lovelace, Ada",1001,S1001,ada.lovelace,Section 01,16.00' in (tmp_path / "import.csv").read_text()


def test_canvas_export_is_idempotent(tmp_path: Path) -> None:
    graded, gradebook = _graded(tmp_path), _write(tmp_path / "export.csv", CANVAS)
    args = (graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "01_similarity=Similarity (1201)")
    first = export(*args, "--out", tmp_path / "first.csv", process=True)
    second = export(*args, "--out", tmp_path / "second.csv")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert (tmp_path / "first.csv").read_bytes() == (tmp_path / "second.csv").read_bytes()
    assert first.stdout.replace("first.csv", "") == second.stdout.replace("second.csv", "")
    # After the import, Canvas's next export holds the grades: exporting again changes nothing and sends no row.
    imported = CANVAS.replace("Section 01,,12.00", "Section 01,,16.00").replace('extension",,', 'extension",20.00,')
    again = export(graded, "--lms", "canvas", "--gradebook", _write(tmp_path / "next.csv", imported),
                   "--map", "01_similarity=1201", "--out", tmp_path / "third.csv")
    assert again.returncode == 0, again.stderr
    assert "cells changed: 0" in again.stdout and "warning" not in again.stdout
    assert (tmp_path / "third.csv").read_text().splitlines()[1:] == ["    Points Possible,,,,,20.00"], (
        "an export that already holds every grade gives a file with no student row")


def test_canvas_semicolons_decimal_commas_and_crlf_are_kept(tmp_path: Path) -> None:
    text = BOM + ("Student;ID;SIS Login ID;Section;Similarity (1201);Current Score\n"
                  "Points Possible;;;;20,00;(read only)\n"
                  "Lovelace, Ada;1001;ada.lovelace;Section 01;12,00;60,00\n"
                  "Curie, Marie;1003;marie.curie;Section 01;EX;\n"
                  "Noether, Emmy;1005;emmy.noether;Section 02;18;90,00\n")
    graded, gradebook = _graded(tmp_path), _write(tmp_path / "export.csv", text, newline="\r\n")
    done = export(graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "01_similarity=1201",
                  "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "import.csv").read_bytes() == (
        BOM + "Student;ID;SIS Login ID;Section;Similarity (1201)\r\nPoints Possible;;;;20,00\r\n"
        "Lovelace, Ada;1001;ada.lovelace;Section 01;16,00\r\n").encode("utf-8")


def test_two_assignments_into_their_own_columns(tmp_path: Path) -> None:
    graded = tmp_path / "graded"
    graded.mkdir()
    _write(OutputFolder(graded).grades, "student_id,assignment,score,max_score,reason,lms_user_id,late\n"
                                        "ada,01_similarity,10,10,,1001,0\nada,02_scaled_attention,3,12,,1001,0\n")
    gradebook = _write(tmp_path / "export.csv", CANVAS)
    done = export(graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "02_scaled_attention=1202",
                  "--map", "01_similarity=1201", "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    table = read_table(tmp_path / "import.csv", ",", "Section")
    assert table.header[5:] == ["Similarity (1201)", "Scaled attention (1202)"], "the export's column order"
    assert table.rows[1][5:] == ["20.00", "3.75"]
    same = export(graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "02_scaled_attention=1202",
                  "--map", "01_similarity=Scaled attention (1202)", "--out", tmp_path / "other.csv")
    assert same.returncode == 2 and "gives the column 'Scaled attention (1202)' to both" in same.stderr, same.stderr


def test_canvas_students_graded_from_a_folder_match_by_sis_login_id(tmp_path: Path) -> None:
    graded = tmp_path / "graded"
    graded.mkdir()
    # written before lms_user_id existed
    _write(OutputFolder(graded).grades, "student_id,assignment,score,max_score,reason\n"
                                        "ada.lovelace,01_similarity,7.5,10,\nGrace.Hopper,01_similarity,2,10,\n"
                                        "emmy.noether,01_similarity,0,10,not graded: the kernel died\n")
    done = export(graded, "--lms", "canvas", "--gradebook", _write(tmp_path / "export.csv", CANVAS),
                  "--map", "01_similarity=1201", "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    cells = {row[0]: row[5] for row in read_table(tmp_path / "import.csv", ",", "Section").rows}
    assert cells["Lovelace, Ada"] == "15.00" and cells["Hopper, Grace"] == "4.00", "login ids compare without case"
    assert "Noether, Emmy" not in cells, "a submission that could not be graded never overwrites the LMS's grade"
    assert "not graded in DIR, cell kept: Noether, Emmy (1005) in Similarity (1201) (not graded: the kernel died)" \
        in done.stdout


def test_late_penalty(tmp_path: Path) -> None:
    graded, gradebook = _graded(tmp_path), _write(tmp_path / "export.csv", CANVAS)
    done = export(graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "01_similarity=1201",
                  "--late-penalty", "0.15", "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    cells = {row[0]: row[5] for row in read_table(tmp_path / "import.csv", ",", "Section").rows}
    assert cells["Hopper, Grace"] == "17.00" and cells["Lovelace, Ada"] == "16.00", "only the late one loses 15%"
    assert "late (15% taken off here): Hopper, Grace (1002) in Similarity (1201)" in done.stdout


CANVAS_REFUSALS = {
    "a column id not in the export": (("--map", "01_similarity=9999"), CANVAS,
                                      "--map 01_similarity=9999: no column 9999 in"),
    "an assignment DIR never graded": (("--map", "02_scaled_attention=1202"), CANVAS,
                                       "has no graded submission of 02_scaled_attention (graded there: 01_similarity)"),
    "a read-only column": (("--map", "01_similarity=Final Score"), CANVAS, "'Final Score' is read-only"),
    "no Points Possible row": (("--map", "01_similarity=1201"),
                               CANVAS.replace("    Points Possible", "    Something else"), "no Points Possible row"),
    "no Section column": (("--map", "01_similarity=1201"), CANVAS.replace("Section,", "Group,"),
                          "first line has no 'Section' column"),
    "not Canvas identity columns": (("--map", "01_similarity=1201"), CANVAS.replace("SIS User ID", "Phone"),
                                    "between ID and Section Canvas expects only"),
    "a row longer than the header": (("--map", "01_similarity=1201"), CANVAS + "x,1,2,3,4,5,6,7,8,9,10,11,12,13,14\n",
                                     "record 9 has 15 fields, more than the header's 14"),
    "a malformed --map": (("--map", "01_similarity"), CANVAS, "expected --map ASSIGNMENT=VALUE"),
    "an assignment mapped twice": (("--map", "01_similarity=1201", "--map", "01_similarity=1202"), CANVAS,
                                   "--map names 01_similarity twice"),
    "a penalty that is not a fraction": (("--map", "01_similarity=1201", "--late-penalty", "10"), CANVAS,
                                         "--late-penalty 10: a fraction"),
    "a Moodle option": (("--map", "01_similarity=1201", "--match", "email"), CANVAS, "are for --lms moodle"),
}


@pytest.mark.parametrize("case", CANVAS_REFUSALS, ids=list(CANVAS_REFUSALS))
def test_canvas_refusals_write_nothing(tmp_path: Path, case: str) -> None:
    args, text, message = CANVAS_REFUSALS[case]
    graded, gradebook = _graded(tmp_path), _write(tmp_path / "export.csv", text)
    (tmp_path / "import.csv").write_text("an earlier import")
    done = export(graded, "--lms", "canvas", "--gradebook", gradebook, *args, "--out", tmp_path / "import.csv")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert message in done.stderr, done.stderr
    assert (tmp_path / "import.csv").read_text() == "an earlier import", "a refused export writes nothing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.csv", "graded", "import.csv", "staging",
                                                          "submissions.zip"]


@pytest.mark.parametrize("problem", ["no grades.csv", "not UTF-8", "--out is the export", "no such export"])
def test_refusals_of_the_inputs(tmp_path: Path, problem: str) -> None:
    graded, gradebook = _graded(tmp_path), _write(tmp_path / "export.csv", CANVAS)
    out = tmp_path / "import.csv"
    if problem == "no grades.csv":
        graded = tmp_path
    elif problem == "not UTF-8":
        gradebook.write_bytes(CANVAS.encode("utf-16"))
    elif problem == "--out is the export":
        out = gradebook
    else:
        gradebook = tmp_path / "missing.csv"
    before = (tmp_path / "export.csv").read_bytes()
    done = export(graded, "--lms", "canvas", "--gradebook", gradebook, "--map", "01_similarity=1201", "--out", out)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert {"no grades.csv": "holds no grades.csv: grade first", "not UTF-8": "is not UTF-8 text",
            "--out is the export": "is the export itself", "no such export": "cannot read the gradebook export"
            }[problem] in done.stderr
    assert not (tmp_path / "import.csv").exists() and (tmp_path / "export.csv").read_bytes() == before


# ---------------------------------------------------------------- Moodle


def _moodle_dir(tmp_path: Path) -> Path:
    graded = tmp_path / "graded"
    graded.mkdir()
    _write(OutputFolder(graded).grades, "student_id,assignment,score,max_score,reason,lms_user_id,late\n"
                                        "ada.lovelace@uni.example,01_similarity,8,10,,,0\n"
                                        "grace.hopper@uni.example,01_similarity,9.5,10,,,0\n"
                                        "alan.turing@uni.example,01_similarity,0,10,not graded: no submission,,0\n"
                                        "will.riker@uni.example,01_similarity,3,10,,,0\n")
    return graded


def test_moodle_import_file(tmp_path: Path) -> None:
    graded, gradebook = _moodle_dir(tmp_path), _write(tmp_path / "grades_export.csv", MOODLE)
    args = (graded, "--lms", "moodle", "--gradebook", gradebook, "--match", "email",
            "--map", "01_similarity=Assignment: Similarity (Real)")
    done = export(*args, "--out", tmp_path / "import.csv", process=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "import.csv").read_text() == "\n".join([
        '"First name","Last name","ID number",Institution,Department,"Email address","Assignment: Similarity (Real)",'
        '"Last downloaded from this course"',
        "Ada,Lovelace,S1001,Analytical,Maths,Ada.Lovelace@uni.example,8.00,1764590000",
        'Grace,Hopper,S1002,"US Navy",CS,grace.hopper@uni.example,9.50,1764590000']) + "\n", (
        "user fields and the export timestamp kept; only the mapped item; emails match without case; the maximum "
        "(10) from the item's Percentage column; no submission keeps Moodle's grade (its row is left out)")
    assert "Ada Lovelace (Ada.Lovelace@uni.example)  Assignment: Similarity (Real): 6.00 -> 8.00" in done.stdout
    assert "Grace Hopper (grace.hopper@uni.example)  Assignment: Similarity (Real): - -> 9.50" in done.stdout
    assert "graded but not in the export: 1\n  will.riker@uni.example: 01_similarity" in done.stdout
    again = export(*args, "--out", tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == (tmp_path / "import.csv").read_bytes()


def test_moodle_by_id_number_with_the_items_maximum_and_semicolons(tmp_path: Path) -> None:
    graded = tmp_path / "graded"
    graded.mkdir()
    _write(OutputFolder(graded).grades, "student_id,assignment,score,max_score,reason,lms_user_id,late\n"
                                        "S1001,01_similarity,8,10,,,0\nS1004,01_similarity,3.333,10,,,1\n")
    gradebook = _write(tmp_path / "export.csv", MOODLE.replace(",", ";").replace("6.00", "6,00"))
    done = export(graded, "--lms", "moodle", "--gradebook", gradebook, "--match", "idnumber",
                  "--map", "01_similarity=Assignment: Similarity (Real)", "--max-grade", "01_similarity=100",
                  "--late-penalty", "0.5", "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    rows = (tmp_path / "import.csv").read_text().splitlines()
    assert rows[1].split(";")[6] == "80,00", "scaled to the item's maximum of 100, with Moodle's decimal comma"
    assert rows[2].split(";")[6] == "16,67", "a late submission loses half"
    assert len(rows) == 3, "Grace (no grade in DIR) keeps Moodle's '-': her row is left out"
    assert "above the maximum" not in done.stdout


MOODLE_REFUSALS = {
    "a Percentage column": ("Assignment: Similarity (Percentage)", "email", MOODLE,
                            "a Percentage column cannot be imported as points"),
    "the course total": ("Course total (Real)", "email", MOODLE, "is computed by Moodle"),
    "a column not in the export": ("Assignment: Similar (Real)", "email", MOODLE, "no such column"),
    "a user field": ("Email address", "email", MOODLE, "is a user field, not a grade item column"),
    "no ID number column": ("Assignment: Similarity (Real)", "idnumber", MOODLE.replace('"ID number"', '"Phone"'),
                            "first line has no 'ID number' column"),
}


@pytest.mark.parametrize("case", MOODLE_REFUSALS, ids=list(MOODLE_REFUSALS))
def test_moodle_refusals(tmp_path: Path, case: str) -> None:
    mapped, match, text, message = MOODLE_REFUSALS[case]
    done = export(_moodle_dir(tmp_path), "--lms", "moodle", "--gradebook", _write(tmp_path / "export.csv", text),
                  "--match", match, "--map", f"01_similarity={mapped}", "--out", tmp_path / "import.csv")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr, done.stderr
    assert not (tmp_path / "import.csv").exists()


def test_moodle_duplicate_users_are_refused(tmp_path: Path) -> None:
    text = MOODLE + "Ada,Byron,S1009,,,ada.lovelace@uni.example,-,-,-,-,1764590000\n"
    done = export(_moodle_dir(tmp_path), "--lms", "moodle", "--gradebook", _write(tmp_path / "export.csv", text),
                  "--map", "01_similarity=Assignment: Similarity (Real)", "--out", tmp_path / "import.csv")
    assert done.returncode == 2 and "is on two rows" in done.stderr, done.stderr


def test_an_all_quoted_export_stays_all_quoted(tmp_path: Path) -> None:
    quoted = "\n".join(",".join(f'"{cell}"' for cell in line.split(",")) for line in [
        "First name,Last name,Email address,Assignment: Similarity (Real)", "Ada,Lovelace,ada.lovelace@uni.example,-"])
    done = export(_moodle_dir(tmp_path), "--lms", "moodle", "--gradebook", _write(tmp_path / "e.csv", quoted + "\n"),
                  "--map", "01_similarity=Assignment: Similarity (Real)", "--max-grade", "01_similarity=10",
                  "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "import.csv").read_text() == quoted.replace('"-"', '"8.00"') + "\n"


def test_a_title_with_commas_does_not_fool_the_delimiter_guess(tmp_path: Path) -> None:
    text = ("Student;ID;SIS Login ID;Section;Essay, draft, v2, late (1301);Essay, final, v2, late (1302)\n"
            "Points Possible;;;;10;10\nLovelace, Ada;1001;ada.lovelace;Section 01;;\n")
    table = read_table(_write(tmp_path / "export.csv", text), ",;", "Section")
    assert table.delimiter == ";" and table.header[4] == "Essay, draft, v2, late (1301)"


# ---------------------------------------------------------------- what an import may overwrite (issue 33, 15-16)

# Moodle's export of an item graded out of 100, without its Percentage column: nothing says the maximum.
MOODLE_OUT_OF_100 = "\n".join([
    '"First name","Last name","Email address","Assignment: Similarity (Real)","Last downloaded from this course"',
    "Ada,Lovelace,ada.lovelace@uni.example,85.00,1764590000",
    "Grace,Hopper,grace.hopper@uni.example,-,1764590000"]) + "\n"


def test_moodle_without_a_maximum_is_refused(tmp_path: Path) -> None:
    """Before: 8/10 was written as 8.00 over Ada's 85.00 of 100, with no warning."""
    graded = _moodle_dir(tmp_path)
    done = export(graded, "--lms", "moodle", "--gradebook", _write(tmp_path / "e.csv", MOODLE_OUT_OF_100),
                  "--map", "01_similarity=Assignment: Similarity (Real)", "--out", tmp_path / "import.csv")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stdout + done.stderr
    assert "does not say the grade item's maximum grade; give it with --max-grade 01_similarity=POINTS" in done.stderr
    assert not (tmp_path / "import.csv").exists()
    given = export(graded, "--lms", "moodle", "--gradebook", tmp_path / "e.csv", "--max-grade",
                   "01_similarity=100", "--map", "01_similarity=Assignment: Similarity (Real)", "--out",
                   tmp_path / "import.csv")
    assert given.returncode == 0, given.stderr
    assert (tmp_path / "import.csv").read_text().splitlines()[1:] == [
        "Ada,Lovelace,ada.lovelace@uni.example,80.00,1764590000",
        "Grace,Hopper,grace.hopper@uni.example,95.00,1764590000"]


def test_moodle_warns_of_a_grade_above_the_maximum_assumed(tmp_path: Path) -> None:
    gradebook = _write(tmp_path / "e.csv", MOODLE_OUT_OF_100)
    done = export(_moodle_dir(tmp_path), "--lms", "moodle", "--gradebook", gradebook,
                  "--max-grade", "01_similarity=10", "--map", "01_similarity=Assignment: Similarity (Real)",
                  "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    assert ("warning: 'Assignment: Similarity (Real)' already holds 1 grade(s) above the maximum assumed, 10 "
            "(highest 85): check --max-grade 01_similarity=POINTS before importing") in done.stdout
    assert "warning: 1 existing grade(s) will be replaced" in done.stdout


def test_moodle_maximum_from_an_inconsistent_percentage_column_is_refused(tmp_path: Path) -> None:
    text = MOODLE.replace('"60.00 %"', '"30.00 %"')  # 6.00 is 30 % of 20, 7.00 is 70 % of 10: no one maximum
    done = export(_moodle_dir(tmp_path), "--lms", "moodle", "--gradebook", _write(tmp_path / "e.csv", text),
                  "--map", "01_similarity=Assignment: Similarity (Real)", "--out", tmp_path / "import.csv")
    assert done.returncode == 2 and "--max-grade 01_similarity=POINTS" in done.stderr, done.stderr


def test_an_export_that_matches_no_graded_student_is_refused(tmp_path: Path) -> None:
    """Before: another course's export gave an import file that changed nothing, and exit status 0."""
    other = CANVAS.replace(",100", ",200")  # the same layout, other Canvas users, no SIS Login ID we graded
    other = "\n".join(line.replace("ada.lovelace", "x1").replace("grace.hopper", "x2").replace("marie.curie", "x3")
                      .replace("alan.turing", "x4").replace("emmy.noether", "x5") for line in other.split("\n"))
    done = export(_graded(tmp_path), "--lms", "canvas", "--gradebook", _write(tmp_path / "export.csv", other),
                  "--map", "01_similarity=1201", "--out", tmp_path / "import.csv")
    assert done.returncode == 2, done.stdout
    assert "matches none of the 5 students graded in DIR (for example curiemarie_1003): is it this course's export?" \
        in done.stderr, done.stderr
    assert not (tmp_path / "import.csv").exists()


def test_only_the_rows_that_change_are_written(tmp_path: Path) -> None:
    """A TA changed Emmy's grade in Canvas after the export: the import must not send her exported cell back."""
    graded = _graded(tmp_path, scores={**SCORES, "noetheremmy_1005": 9.0})
    done = export(graded, "--lms", "canvas", "--gradebook", _write(tmp_path / "export.csv", CANVAS),
                  "--map", "01_similarity=1201", "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    written = [row[0] for row in read_table(tmp_path / "import.csv", ",", "Section").rows]
    assert written == ["    Points Possible", "Lovelace, Ada", "Hopper, Grace"]


def test_canvas_export_with_split_names(tmp_path: Path) -> None:
    """Canvas's "Split student names" setting exports LastName and FirstName columns; before, refused."""
    split = CANVAS.replace("Student,ID,", "LastName,FirstName,ID,").replace("    Points Possible,",
                                                                         "    Points Possible,,")
    for last, first in [("Lovelace", "Ada"), ("Hopper", "Grace"), ("Curie", "Marie"), ("Turing", "Alan"),
                        ("Noether", "Emmy"), ("Student", "Test")]:
        split = split.replace(f'"{last}, {first}"', f"{last},{first}")
    done = export(_graded(tmp_path), "--lms", "canvas", "--gradebook", _write(tmp_path / "export.csv", split),
                  "--map", "01_similarity=1201", "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "import.csv").read_text(encoding="utf-8-sig").splitlines() == [
        "LastName,FirstName,ID,SIS User ID,SIS Login ID,Section,Similarity (1201)", "    Points Possible,,,,,,20.00",
        "Lovelace,Ada,1001,S1001,ada.lovelace,Section 01,16.00",
        "Hopper,Grace,1002,S1002,grace.hopper,Section 02,20.00"]
    assert "Lovelace, Ada (1001)  Similarity (1201): 12.00 -> 16.00" in done.stdout


def test_moodle_match_by_name(tmp_path: Path) -> None:
    """Students graded from Moodle's own submissions zip have their full names as ids: --match name finds them."""
    graded = tmp_path / "graded"
    graded.mkdir()
    _write(OutputFolder(graded).grades, "student_id,assignment,score,max_score,reason,lms_user_id,late\n"
                                        "Ada Lovelace,01_similarity,8,10,,,0\nHopper Grace,01_similarity,9,10,,,0\n"
                                        "Alan Turing,01_similarity,5,10,,,0\n")
    text = MOODLE + "Alan,Turing,S1044,,,alan.turing2@uni.example,-,-,-,-,1764590000\n"
    done = export(graded, "--lms", "moodle", "--gradebook", _write(tmp_path / "e.csv", text), "--match", "name",
                  "--map", "01_similarity=Assignment: Similarity (Real)", "--out", tmp_path / "import.csv")
    assert done.returncode == 0, done.stderr
    rows = (tmp_path / "import.csv").read_text().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["Ada", "Grace"], "either name order; the two Alan Turings: neither"
    assert "warning: the name 'Alan Turing' is on two rows of the export: neither is filled" in done.stdout
    assert "map 'Email address' to the user's Email address" in done.stdout


# ---------------------------------------------------------------- feedback back to Canvas (issue 33, 17)


def test_feedback_zip_for_canvas_bulk_upload(tmp_path: Path) -> None:
    """Canvas's Re-Upload Submissions finds each file's student by <name>_<user id>_<attachment id>_...; before,
    no command wrote such a zip and the attachment id was dropped."""
    graded = _graded(tmp_path)
    for student in SCORES:
        page = OutputFolder(graded).feedback(student, "01_similarity") / "similarity.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<p>feedback for {student}</p>")
    done = command("feedback-zip", graded, "--submissions", tmp_path / "submissions.zip", "--out",
                   tmp_path / "feedback.zip", process=True)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / "feedback.zip") as archive:
        names = sorted(archive.namelist())
        assert archive.read("lovelaceada_1001_5007_similarity-feedback.html") == b"<p>feedback for lovelaceada_1001</p>"
    assert names == ["curiemarie_1003_5003_similarity-feedback.html", "hoppergrace_1002_5002_similarity-feedback.html",
                     "lovelaceada_1001_5007_similarity-feedback.html", "noetheremmy_1005_5005_similarity-feedback.html",
                     "rikerwill_1702_5006_similarity-feedback.html"], "the attachment of the submission that counted"
    assert "wrote " in done.stdout and "5 feedback pages of 01_similarity" in done.stdout
    assert "Re-Upload Submissions" in done.stdout


def test_feedback_zip_refuses_a_zip_that_is_not_canvas(tmp_path: Path) -> None:
    graded = _graded(tmp_path)
    other = write_zip(tmp_path / "other.zip", {"ada/01_similarity/similarity.ipynb": b"nb"})
    done = command("feedback-zip", graded, "--submissions", other, "--out", tmp_path / "feedback.zip")
    assert done.returncode == 2 and "holds no file named as Canvas's Download Submissions names them" in done.stderr
    assert not (tmp_path / "feedback.zip").exists()
