"""Finding submissions (autograder/submissions/find.py): a folder, a zip of that layout, and Canvas's zip.

Pure Python, no kernels: each test builds a folder or a zip in a temporary directory and checks which
student, assignment and file each notebook is staged as, and that nothing lands outside the staging
folder whatever names a zip holds.
"""

from __future__ import annotations

import csv
import unicodedata
import zipfile
from pathlib import Path

import pytest

from autograder.submissions import staging

from autograder.submissions import find as submissions
from autograder.reports.grades_csv import spreadsheet_safe, write_grades
from autograder.reports.output_folder import OutputFolder
from autograder.records import GradeRow, Template
from autograder.submissions.find import SubmissionsUnreadable, find, from_folder, from_zip, select, valid_student_id
from autograder.grading.tasks import make_tasks
from tests.grading_helpers import write_zip

NOTEBOOKS = {"similarity.ipynb": "01_similarity", "scaled_attention.ipynb": "02_scaled_attention"}
TEMPLATE = Template("01_similarity", "key", Path("/nonexistent"), ("similarity",), ())


def _staged(found: dict) -> dict[tuple[str, str], list[tuple[str, bytes]]]:
    """(student, assignment) -> [(file name, contents)], for comparing with what a zip held."""
    return {(student, assignment): [(p.name, p.read_bytes()) for p in paths]
            for student, entry in found.items() for assignment, paths in entry.files.items()}


def _files_outside(root: Path, *allowed: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not any(p == a or a in p.parents for a in allowed)]


# ---------------------------------------------------------------- a folder


def test_folder_layout(tmp_path: Path) -> None:
    for student, assignment, name in [("ada", "01_similarity", "similarity.ipynb"),
                                      ("ada", "02_scaled_attention", "scaled_attention.ipynb"),
                                      ("bo", "01_similarity", "similarity.ipynb")]:
        (tmp_path / student / assignment).mkdir(parents=True, exist_ok=True)
        (tmp_path / student / assignment / name).write_text(f"{student} {assignment}")
    found, _ = from_folder(tmp_path)
    assert {k: [n for n, _ in v] for k, v in _staged(found).items()} == {
        ("ada", "01_similarity"): ["similarity.ipynb"], ("ada", "02_scaled_attention"): ["scaled_attention.ipynb"],
        ("bo", "01_similarity"): ["similarity.ipynb"]}
    assert found["bo"].files["01_similarity"][0] == tmp_path / "bo" / "01_similarity" / "similarity.ipynb"


def test_folder_skips_what_is_not_a_notebook(tmp_path: Path) -> None:
    folder = tmp_path / "ada" / "01_similarity"
    (folder / ".ipynb_checkpoints").mkdir(parents=True)
    (folder / ".ipynb_checkpoints" / "similarity-checkpoint.ipynb").write_text("old")
    (folder / "similarity.ipynb").write_text("nb")
    (folder / "notes.pdf").write_text("pdf")
    (folder / "linked.ipynb").symlink_to(folder / "similarity.ipynb")
    (tmp_path / "ada" / "02_scaled_attention").mkdir()  # an empty assignment folder: listed, no files
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.txt").write_text("not a student")
    found, _ = from_folder(tmp_path)
    assert list(found) == ["ada"]
    assert found["ada"].files == {"01_similarity": [folder / "similarity.ipynb"], "02_scaled_attention": []}
    assert found["ada"].others == {"01_similarity": ["notes.pdf"], "02_scaled_attention": []}


def test_every_folder_is_a_student_and_invalid_ids_say_why(tmp_path: Path) -> None:
    for student in ["ada.lovelace", "b.rown-2", "müller", "-rf", "ana maria", "_x", "o'brien", "ok@uni.edu"]:
        (tmp_path / student / "01_similarity").mkdir(parents=True)
        (tmp_path / student / "01_similarity" / "similarity.ipynb").write_text("nb")
    found, said = find(tmp_path, NOTEBOOKS, tmp_path / "staging")
    assert sorted(found) == ["-rf", "_x", "ada.lovelace", "ana maria", "b.rown-2", "müller", "o'brien", "ok@uni.edu"]
    invalid = {s: e.problems[""] for s, e in found.items() if "" in e.problems}
    assert sorted(invalid) == ["-rf", "_x"]
    assert all(problem == [f"'{s}' is not a valid student id (letters, digits, . _ - @ + ' and single spaces; not "
                           "starting with . _ - or a space)"] for s, problem in invalid.items()), invalid
    assert said == ["'-rf' is not a valid student id: listed, not graded",
                    "'_x' is not a valid student id: listed, not graded"]


@pytest.mark.parametrize("student_id", ["ada", "ada.lovelace", "b.rown-2", "s123", "ok@uni.edu", "jürgen", "smith_jr",
                                        "ana maria", "o'brien", "o\u2019brien", "+1+1", "@SUM1"])
def test_valid_student_ids(student_id: str) -> None:
    assert valid_student_id(student_id)


@pytest.mark.parametrize("student_id", ["", ".", "..", ".hidden", "-rf", "_x", "a/b", "a\\b", "a\0b", "x\n", " ada",
                                        "ada ", "ana  maria", "'quote"])
def test_invalid_student_ids(student_id: str) -> None:
    assert not valid_student_id(student_id)


# ---------------------------------------------------------------- a zip of the folder layout


@pytest.mark.parametrize("top", ["", "class/", "downloads/class/"], ids=["no top folder", "one top folder", "two"])
def test_folderwrite_zip(tmp_path: Path, top: str) -> None:
    archive = write_zip(tmp_path / "class.zip", {f"{top}ada/01_similarity/similarity.ipynb": b"ada",
                                            f"{top}bo/02_scaled_attention/scaled_attention.ipynb": b"bo"})
    staging = tmp_path / "staging"
    found, _ = from_zip(archive, NOTEBOOKS, staging)
    assert _staged(found) == {("ada", "01_similarity"): [("similarity.ipynb", b"ada")],
                              ("bo", "02_scaled_attention"): [("scaled_attention.ipynb", b"bo")]}
    assert found["ada"].files["01_similarity"] == [staging / "ada" / "01_similarity" / "similarity.ipynb"]


def test_folder_zip_skips_hidden_files_and_lists_bad_ids(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "class.zip", {
        "ada/01_similarity/similarity.ipynb": b"ada",
        "ada/01_similarity/notes.pdf": b"pdf",
        "ada/01_similarity/.similarity.ipynb": b"hidden",
        "__MACOSX/ada/01_similarity/._similarity.ipynb": b"resource fork",
        "a b/01_similarity/similarity.ipynb": b"space",
        "-rf/01_similarity/similarity.ipynb": b"dash",
        "similarity.ipynb": b"no student, no assignment",
    })
    found, said = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert _staged(found) == {("ada", "01_similarity"): [("similarity.ipynb", b"ada")],
                              ("a b", "01_similarity"): [("similarity.ipynb", b"space")]}
    assert found["ada"].others == {"01_similarity": ["notes.pdf"]}
    assert "not a valid student id" in found["-rf"].problems[""][0] and found["-rf"].files == {}
    assert "skipped 'similarity.ipynb' in the zip: not in a <student_id>/<assignment>/ folder" in said


def test_folder_zip_with_windows_separators(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "class.zip", {"class\\ada\\01_similarity\\similarity.ipynb": b"ada"})
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")[0]) == {
        ("ada", "01_similarity"): [("similarity.ipynb", b"ada")]}


def test_path_traversal_in_a_folder_zip_stays_in_staging(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = write_zip(work / "class.zip", {
        "../evil/01_similarity/similarity.ipynb": b"up one",
        "/abs/01_similarity/similarity.ipynb": b"absolute",
        "ada/01_similarity/../../../../escape.ipynb": b"dotdot",
        "ada/../../01_similarity/similarity.ipynb": b"dotdot student",
        "..\\..\\win/01_similarity/similarity.ipynb": b"windows dotdot",
        "ada/01_similarity/similarity.ipynb": b"ada",
    })
    staging = work / "staging"
    found, _ = from_zip(archive, NOTEBOOKS, staging)
    assert _staged(found) == {("evil", "01_similarity"): [("similarity.ipynb", b"up one")],
                              ("abs", "01_similarity"): [("similarity.ipynb", b"absolute")],
                              ("win", "01_similarity"): [("similarity.ipynb", b"windows dotdot")],
                              ("ada", "01_similarity"): [("similarity.ipynb", b"ada")]}
    assert _files_outside(tmp_path, staging, archive) == []


def test_a_notebook_over_the_size_limit_is_never_unpacked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(staging, "MAX_NOTEBOOK_BYTES", 10)
    archive = write_zip(tmp_path / "class.zip", {"ada/01_similarity/similarity.ipynb": b"x" * 11,
                                            "bo/01_similarity/similarity.ipynb": b"x" * 10})
    found, _ = from_zip(archive, NOTEBOOKS, tmp_path / "staging")
    assert found["ada"].files == {} and not (tmp_path / "staging" / "ada").exists()
    assert found["ada"].problems == {"01_similarity": [
        "too large: similarity.ipynb is 11 bytes unpacked; a notebook may have at most 10 bytes"]}
    assert _staged(found) == {("bo", "01_similarity"): [("similarity.ipynb", b"x" * 10)]}
    [task, _] = make_tasks(found, {"01_similarity": TEMPLATE}, "limits")
    assert task.problem.startswith("too large: similarity.ipynb is 11 bytes"), task.problem


def test_a_notebook_over_the_size_limit_in_a_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(submissions, "MAX_NOTEBOOK_BYTES", 10)
    (tmp_path / "ada" / "01_similarity").mkdir(parents=True)
    (tmp_path / "ada" / "01_similarity" / "similarity.ipynb").write_bytes(b"x" * 11)
    found, _ = from_folder(tmp_path)
    [task] = make_tasks(found, {"01_similarity": TEMPLATE}, "limits")
    assert task.problem == "too large: similarity.ipynb is 11 bytes; a notebook may have at most 10 bytes"


def test_the_total_unpacked_budget_costs_only_the_students_past_it(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "class.zip", {f"s{i}/01_similarity/similarity.ipynb": b"x" * 10 for i in range(4)})
    found, _ = from_zip(archive, NOTEBOOKS, tmp_path / "staging", budget=25)
    assert sorted(s for s, e in found.items() if e.files) == ["s0", "s1"]
    for student in ("s2", "s3"):
        assert found[student].problems == {"01_similarity": [
            "too large: similarity.ipynb (10 bytes unpacked) would pass the 25 bytes that a run may unpack in all "
            "(--max-unpacked)"]}
    assert sum(p.stat().st_size for p in (tmp_path / "staging").rglob("*") if p.is_file()) == 20


def test_find_reads_a_zip_file(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "class.zip", {"ada/01_similarity/similarity.ipynb": b"ada"})
    found, said = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert list(found) == ["ada"] and said == []


def _corrupt(archive: Path, data: bytes) -> None:
    """Flip one byte of a stored member's data: its CRC no longer matches."""
    raw = archive.read_bytes()
    at = raw.index(data)
    archive.write_bytes(raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1:])


@pytest.mark.parametrize("layout", ["folder zip", "canvas"])
def test_a_corrupt_member_costs_only_its_student(tmp_path: Path, layout: str) -> None:
    names = ({"ada": "ada/01_similarity/similarity.ipynb", "bo": "bo/01_similarity/similarity.ipynb"}
             if layout == "folder zip" else
             {"ada": "ada_1_11_similarity.ipynb", "bo": "bo_2_12_similarity.ipynb"})
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as handle:
        handle.writestr(names["ada"], b"ADA-NOTEBOOK-BYTES")
        handle.writestr(names["bo"], b"BO-NOTEBOOK-BYTES")
    _corrupt(archive, b"ADA-NOTEBOOK-BYTES")
    found, _ = find(archive, NOTEBOOKS, tmp_path / "staging")
    ada, bo = ("ada", "bo") if layout == "folder zip" else ("ada_1", "bo_2")
    assert _staged(found) == {(bo, "01_similarity"): [("similarity.ipynb", b"BO-NOTEBOOK-BYTES")]}
    [problem] = found[ada].problems["01_similarity"]
    assert problem.startswith(f"{Path(names['ada']).name} could not be read from the zip (BadZipFile: Bad CRC-32"), problem


@pytest.mark.parametrize("content", [b"not a zip", "truncated"])
def test_an_unreadable_zip_is_one_clear_error(tmp_path: Path, content) -> None:
    archive = write_zip(tmp_path / "class.zip", {f"s{i}/01_similarity/similarity.ipynb": b"x" * 100 for i in range(3)})
    data = archive.read_bytes()
    archive.write_bytes(data[:len(data) // 2] if content == "truncated" else content)
    with pytest.raises(SubmissionsUnreadable, match=r"cannot read .*class.zip as a zip \(File is not a zip file\)"):
        find(archive, NOTEBOOKS, tmp_path / "staging")


def test_a_missing_submissions_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SubmissionsUnreadable, match="cannot read .*nowhere: No such file or directory"):
        find(tmp_path / "nowhere", NOTEBOOKS, tmp_path / "staging")


# ---------------------------------------------------------------- Canvas


def test_canvas_names(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "canvas.zip", {
        "lovelaceada_1701_9001_similarity.ipynb": b"ada 1",
        "lovelaceada_1701_9002_scaled_attention.ipynb": b"ada 2",
        "hopper_1702_9003_similarity.ipynb": b"grace",
    })
    staging = tmp_path / "staging"
    found, _ = from_zip(archive, NOTEBOOKS, staging)
    assert _staged(found) == {("lovelaceada_1701", "01_similarity"): [("similarity.ipynb", b"ada 1")],
                              ("lovelaceada_1701", "02_scaled_attention"): [("scaled_attention.ipynb", b"ada 2")],
                              ("hopper_1702", "01_similarity"): [("similarity.ipynb", b"grace")]}
    assert found["hopper_1702"].files["01_similarity"] == [staging / "hopper_1702" / "01_similarity" / "similarity.ipynb"]


@pytest.mark.parametrize("late", ["LATE", "late"])
def test_canvas_late_submission(tmp_path: Path, late: str) -> None:
    archive = write_zip(tmp_path / "canvas.zip", {f"rikerwill_{late}_1702_9003_similarity.ipynb": b"late"})
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")[0]) == {
        ("rikerwill_1702", "01_similarity"): [("similarity.ipynb", b"late")]}


def test_canvas_resubmission_latest_counts(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "canvas.zip", {
        "picard_1701_9001_similarity.ipynb": b"first",
        "picard_1701_9005_similarity-2.ipynb": b"third",
        "picard_1701_9002_similarity-1.ipynb": b"second",
    })
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")[0]) == {
        ("picard_1701", "01_similarity"): [("similarity.ipynb", b"third")]}


def test_canvas_names_with_underscores_and_other_scripts(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "canvas.zip", {
        "de_la_cruzmaria_1703_9004_similarity.ipynb": b"maria",
        "de_la_cruzmaria_LATE_1703_9006_scaled_attention.ipynb": b"maria late",
        "müllerjürgen_1704_9005_similarity.ipynb": b"jurgen",
    })
    found, rejected = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert _staged(found) == {("de_la_cruzmaria_1703", "01_similarity"): [("similarity.ipynb", b"maria")],
                              ("de_la_cruzmaria_1703", "02_scaled_attention"): [("scaled_attention.ipynb", b"maria late")],
                              ("müllerjürgen_1704", "01_similarity"): [("similarity.ipynb", b"jurgen")]}
    assert rejected == []


def test_canvas_users_who_share_a_name_are_told_apart_by_user_id(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "canvas.zip", {"smithjo_11_9001_similarity.ipynb": b"first jo",
                                             "smithjo_12_9002_similarity.ipynb": b"second jo"})
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")[0]) == {
        ("smithjo_11", "01_similarity"): [("similarity.ipynb", b"first jo")],
        ("smithjo_12", "01_similarity"): [("similarity.ipynb", b"second jo")]}


def test_canvas_files_that_are_not_an_assignments_notebook(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "canvas.zip", {
        "troideanna_1703_9004_notes.txt": b"not a notebook",
        "crusherbev_1705_9007_homework.ipynb": b"misnamed",
        "__MACOSX/._crusherbev_1705_9007_similarity.ipynb": b"resource fork",
        "readme.txt": b"no Canvas name",
    })
    found, _ = from_zip(archive, NOTEBOOKS, tmp_path / "staging")
    assert found["troideanna_1703"].files == {}, "a student who handed in only other files has no notebook"
    assert found["troideanna_1703"].others == {"": ["notes.txt"]}
    [task] = make_tasks({"troideanna_1703": found["troideanna_1703"]}, {"01_similarity": TEMPLATE}, "limits")
    assert task.problem == "no submission (expected similarity.ipynb); found instead: notes.txt" and not task.missing
    [misnamed] = found["crusherbev_1705"].files[""]
    assert misnamed.read_bytes() == b"misnamed" and misnamed.parent.parent.name == ".unmatched"
    assert set(found) == {"troideanna_1703", "crusherbev_1705"}


def test_path_traversal_in_a_canvas_zip_stays_in_staging(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = write_zip(work / "canvas.zip", {
        "lovelaceada_1701_9001_similarity.ipynb": b"ada",
        "../../picard_1702_9002_similarity.ipynb": b"picard",
        "/etc/riker_1703_9003_similarity.ipynb": b"riker",
        "..\\..\\worf_1704_9004_similarity.ipynb": b"worf",  # a hidden file name: skipped
        "x\\y_1706_9006_similarity.ipynb": b"backslash",
        "../../../data_1705_9005_../../../../escape.ipynb": b"data",
    })
    staging = work / "staging"
    found, rejected = find(archive, NOTEBOOKS, staging)
    assert _staged(found)[("picard_1702", "01_similarity")] == [("similarity.ipynb", b"picard")]
    assert _staged(found)[("riker_1703", "01_similarity")] == [("similarity.ipynb", b"riker")]
    assert "not a valid student id" in found["x\\y_1706"].problems[""][0], "a name with a path separator is no id"
    assert found["x\\y_1706"].files == {}, "nothing of an invalid id is staged"
    assert not any("worf" in student or "data" in student for student in found)
    assert _files_outside(tmp_path, staging, archive) == []


# ---------------------------------------------------------------- names: Unicode, duplicates, case


NFD = unicodedata.normalize("NFD", "müller")


def test_a_decomposed_folder_name_is_the_composed_id(tmp_path: Path) -> None:
    (tmp_path / NFD / "01_similarity").mkdir(parents=True)
    (tmp_path / NFD / "01_similarity" / "similarity.ipynb").write_text("nb")
    found, said = find(tmp_path, NOTEBOOKS, tmp_path / "staging")
    assert list(found) == ["müller"] and NFD != "müller" and said == []
    assert found["müller"].files["01_similarity"] == [tmp_path / NFD / "01_similarity" / "similarity.ipynb"]


@pytest.mark.parametrize("name, student", [(f"{NFD}/01_similarity/similarity.ipynb", "müller"),
                                           (f"{NFD}_1704_9005_similarity.ipynb", "müller_1704")],
                         ids=["folder zip", "canvas"])
def test_a_decomposed_name_in_a_zip_is_the_composed_id(tmp_path: Path, name: str, student: str) -> None:
    archive = write_zip(tmp_path / "class.zip", {name: b"nb"})
    found, _ = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert _staged(found) == {(student, "01_similarity"): [("similarity.ipynb", b"nb")]}


def test_two_folders_of_one_id_are_reported_not_merged(tmp_path: Path) -> None:
    for name in ("müller", NFD):
        (tmp_path / name / "01_similarity").mkdir(parents=True)
        (tmp_path / name / "01_similarity" / "similarity.ipynb").write_text(name)
    found, said = find(tmp_path, NOTEBOOKS, tmp_path / "staging")
    [task] = make_tasks(found, {"01_similarity": TEMPLATE}, "limits")
    assert task.student == "müller" and task.problem.startswith("two folders name this student"), task
    assert said == [f"'müller' names two folders of {tmp_path}: not graded"]


def test_the_same_id_twice_in_a_zip_is_reported_never_overwritten(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "class.zip", {"a/ok.student/01_similarity/similarity.ipynb": b"right",
                                            "b/ok.student/01_similarity/similarity.ipynb": b"wrong",
                                            "a/other/01_similarity/similarity.ipynb": b"other"})
    found, said = find(archive, NOTEBOOKS, tmp_path / "staging")
    tasks = {t.student: t for t in make_tasks(found, {"01_similarity": TEMPLATE}, "limits")}
    assert tasks["ok.student"].problem == ("two entries of the input name this student: a/ok.student/01_similarity/ "
                                           "and b/ok.student/01_similarity/ (neither graded: keep one and grade again)")
    assert not tasks["other"].problem
    assert said == ["'ok.student' appears twice in the zip (a/ok.student/01_similarity/ and "
                    "b/ok.student/01_similarity/): not graded"]


def test_ids_that_differ_only_in_case_are_noted_in_each_row(tmp_path: Path) -> None:
    for name in ("Ada", "ada", "bo"):
        (tmp_path / name / "01_similarity").mkdir(parents=True)
        (tmp_path / name / "01_similarity" / "similarity.ipynb").write_text(name)
    found, said = find(tmp_path, NOTEBOOKS, tmp_path / "staging")
    tasks = {t.student: t for t in make_tasks(found, {"01_similarity": TEMPLATE}, "limits")}
    assert said == ["ids that differ only in case: Ada, ada (graded as different students)"]
    assert tasks["Ada"].note == "this id differs only in case from 'ada'" and not tasks["Ada"].problem
    assert tasks["ada"].note == "this id differs only in case from 'Ada'" and tasks["bo"].note == ""


def test_a_folder_with_other_files_says_what_was_found(tmp_path: Path) -> None:
    (tmp_path / "ada" / "01_similarity").mkdir(parents=True)
    (tmp_path / "ada" / "01_similarity" / "similarity.py").write_text("def f(): pass")
    (tmp_path / "ada" / "01_similarity" / "similarity.pdf").write_text("pdf")
    (tmp_path / "bo").mkdir()
    found, _ = find(tmp_path, NOTEBOOKS, tmp_path / "staging")
    tasks = {t.student: t for t in make_tasks(found, {"01_similarity": TEMPLATE}, "limits")}
    assert tasks["ada"].problem == "no notebook named similarity.ipynb (found similarity.pdf, similarity.py)"
    assert tasks["bo"].problem == "no submission (expected similarity.ipynb)" and tasks["bo"].missing


def test_select_keeps_the_named_students_and_assignments(tmp_path: Path) -> None:
    for student, assignment, name in [("ada", "01_similarity", "similarity.ipynb"),
                                      ("ada", "02_scaled_attention", "scaled_attention.ipynb"),
                                      ("bo", "01_similarity", "similarity.ipynb")]:
        (tmp_path / student / assignment).mkdir(parents=True, exist_ok=True)
        (tmp_path / student / assignment / name).write_text("nb")
    found, _ = find(tmp_path, NOTEBOOKS, tmp_path / "staging")
    assert {s: sorted(e.files) for s, e in select(found, ("ada",), ()).items()} == {
        "ada": ["01_similarity", "02_scaled_attention"]}
    assert {s: sorted(e.files) for s, e in select(found, (), ("02_scaled_attention",)).items()} == {
        "ada": ["02_scaled_attention"], "bo": []}


# ---------------------------------------------------------------- grades.csv in a spreadsheet


@pytest.mark.parametrize("text", ["=1+1", "+1+1", "-1+1", "@SUM1", "\tx", "\rx"])
def test_formula_fields_are_escaped(text: str) -> None:
    assert spreadsheet_safe(text) == "'" + text


def test_grades_csv_escapes_text_fields_only(tmp_path: Path) -> None:
    rows = [GradeRow("+1+1", "01_similarity", 2.0, 5.0, reason="=HYPERLINK(\"http://x\")"),
            GradeRow("@SUM1", "01_similarity", 0.0, 5.0, lms_user_id="-7", late=True)]
    write_grades(OutputFolder(tmp_path).grades, rows)
    with open(OutputFolder(tmp_path).grades, newline="") as handle:
        written = list(csv.reader(handle))
    assert written[1:] == [["'+1+1", "01_similarity", "2", "5", "'=HYPERLINK(\"http://x\")", "", "0"],
                           ["'@SUM1", "01_similarity", "0", "5", "", "'-7", "1"]]
