"""Finding submissions (autograder/submissions.py): a folder, a zip of that layout, and Canvas's zip.

Pure Python, no kernels: each test builds a folder or a zip in a temporary directory and checks which
student, assignment and file each notebook is staged as, and that nothing lands outside the staging
folder whatever names a zip holds.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from autograder import submissions
from autograder.records import Template
from autograder.results import make_tasks
from autograder.submissions import find, from_folder, from_zip, valid_student_id

NOTEBOOKS = {"similarity.ipynb": "01_similarity", "scaled_attention.ipynb": "02_scaled_attention"}


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


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
    found = from_folder(tmp_path)
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
    found = from_folder(tmp_path)
    assert list(found) == ["ada"]
    assert found["ada"].files == {"01_similarity": [folder / "similarity.ipynb"], "02_scaled_attention": []}


def test_find_rejects_folders_that_are_not_student_ids(tmp_path: Path) -> None:
    for student in ["ada.lovelace", "b.rown-2", "müller", "-rf", "a b", "_x", "ok@uni.edu"]:
        (tmp_path / student / "01_similarity").mkdir(parents=True)
        (tmp_path / student / "01_similarity" / "similarity.ipynb").write_text("nb")
    found, rejected = find(tmp_path, NOTEBOOKS, tmp_path / "staging")
    assert sorted(found) == ["ada.lovelace", "b.rown-2", "müller", "ok@uni.edu"]
    assert rejected == ["-rf", "_x", "a b"]


@pytest.mark.parametrize("student_id", ["ada", "ada.lovelace", "b.rown-2", "s123", "ok@uni.edu", "jürgen", "smith_jr"])
def test_valid_student_ids(student_id: str) -> None:
    assert valid_student_id(student_id)


@pytest.mark.parametrize("student_id", ["", ".", "..", ".hidden", "-rf", "_x", "a b", "a/b", "a\\b", "a\0b", "x\n"])
def test_invalid_student_ids(student_id: str) -> None:
    assert not valid_student_id(student_id)


# ---------------------------------------------------------------- a zip of the folder layout


@pytest.mark.parametrize("top", ["", "class/", "downloads/class/"], ids=["no top folder", "one top folder", "two"])
def test_folder_zip(tmp_path: Path, top: str) -> None:
    archive = _zip(tmp_path / "class.zip", {f"{top}ada/01_similarity/similarity.ipynb": b"ada",
                                            f"{top}bo/02_scaled_attention/scaled_attention.ipynb": b"bo"})
    staging = tmp_path / "staging"
    found = from_zip(archive, NOTEBOOKS, staging)
    assert _staged(found) == {("ada", "01_similarity"): [("similarity.ipynb", b"ada")],
                              ("bo", "02_scaled_attention"): [("scaled_attention.ipynb", b"bo")]}
    assert found["ada"].files["01_similarity"] == [staging / "ada" / "01_similarity" / "similarity.ipynb"]


def test_folder_zip_skips_non_notebooks_hidden_files_and_bad_ids(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "class.zip", {
        "ada/01_similarity/similarity.ipynb": b"ada",
        "ada/01_similarity/notes.pdf": b"pdf",
        "ada/01_similarity/.similarity.ipynb": b"hidden",
        "__MACOSX/ada/01_similarity/._similarity.ipynb": b"resource fork",
        "a b/01_similarity/similarity.ipynb": b"space",
        "-rf/01_similarity/similarity.ipynb": b"dash",
        "similarity.ipynb": b"no student, no assignment",
    })
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")) == {
        ("ada", "01_similarity"): [("similarity.ipynb", b"ada")]}


def test_folder_zip_with_windows_separators(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "class.zip", {"class\\ada\\01_similarity\\similarity.ipynb": b"ada"})
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")) == {
        ("ada", "01_similarity"): [("similarity.ipynb", b"ada")]}


def test_path_traversal_in_a_folder_zip_stays_in_staging(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = _zip(work / "class.zip", {
        "../evil/01_similarity/similarity.ipynb": b"up one",
        "/abs/01_similarity/similarity.ipynb": b"absolute",
        "ada/01_similarity/../../../../escape.ipynb": b"dotdot",
        "ada/../../01_similarity/similarity.ipynb": b"dotdot student",
        "..\\..\\win/01_similarity/similarity.ipynb": b"windows dotdot",
        "ada/01_similarity/similarity.ipynb": b"ada",
    })
    staging = work / "staging"
    found = from_zip(archive, NOTEBOOKS, staging)
    assert _staged(found) == {("evil", "01_similarity"): [("similarity.ipynb", b"up one")],
                              ("abs", "01_similarity"): [("similarity.ipynb", b"absolute")],
                              ("win", "01_similarity"): [("similarity.ipynb", b"windows dotdot")],
                              ("ada", "01_similarity"): [("similarity.ipynb", b"ada")]}
    assert _files_outside(tmp_path, staging, archive) == []


def test_a_notebook_over_the_size_limit_is_staged_as_a_marker(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(submissions, "MAX_NOTEBOOK_BYTES", 10)
    archive = _zip(tmp_path / "class.zip", {"ada/01_similarity/similarity.ipynb": b"x" * 11,
                                            "bo/01_similarity/similarity.ipynb": b"x" * 10})
    staged = _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging"))
    [(name, data)] = staged[("ada", "01_similarity")]
    assert name.endswith(".too-large") and data == b"", "a notebook over the limit is never unpacked"
    assert staged[("bo", "01_similarity")] == [("similarity.ipynb", b"x" * 10)]


def test_a_notebook_over_the_size_limit_is_reported_as_too_large(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(submissions, "MAX_NOTEBOOK_BYTES", 10)
    archive = _zip(tmp_path / "class.zip", {"ada/01_similarity/similarity.ipynb": b"x" * 11})
    found = from_zip(archive, NOTEBOOKS, tmp_path / "staging")
    template = Template("01_similarity", "key", tmp_path, ("similarity",), (), False)
    [task] = make_tasks(found, {"01_similarity": template}, "limits")
    assert task.problem.startswith("notebook too large to grade"), task.problem


def test_find_reads_a_zip_file(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "class.zip", {"ada/01_similarity/similarity.ipynb": b"ada"})
    found, rejected = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert list(found) == ["ada"] and rejected == []


def test_a_file_that_is_not_a_zip_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "class.zip").write_text("not a zip")
    with pytest.raises(zipfile.BadZipFile):
        from_zip(tmp_path / "class.zip", NOTEBOOKS, tmp_path / "staging")


# ---------------------------------------------------------------- Canvas


def test_canvas_names(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "canvas.zip", {
        "lovelaceada_1701_9001_similarity.ipynb": b"ada 1",
        "lovelaceada_1701_9002_scaled_attention.ipynb": b"ada 2",
        "hopper_1702_9003_similarity.ipynb": b"grace",
    })
    staging = tmp_path / "staging"
    found = from_zip(archive, NOTEBOOKS, staging)
    assert _staged(found) == {("lovelaceada", "01_similarity"): [("similarity.ipynb", b"ada 1")],
                              ("lovelaceada", "02_scaled_attention"): [("scaled_attention.ipynb", b"ada 2")],
                              ("hopper", "01_similarity"): [("similarity.ipynb", b"grace")]}
    assert found["hopper"].files["01_similarity"] == [staging / "hopper" / "01_similarity" / "similarity.ipynb"]


@pytest.mark.parametrize("late", ["LATE", "late"])
def test_canvas_late_submission(tmp_path: Path, late: str) -> None:
    archive = _zip(tmp_path / "canvas.zip", {f"rikerwill_{late}_1702_9003_similarity.ipynb": b"late"})
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")) == {
        ("rikerwill", "01_similarity"): [("similarity.ipynb", b"late")]}


def test_canvas_resubmission_latest_counts(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "canvas.zip", {
        "picard_1701_9001_similarity.ipynb": b"first",
        "picard_1701_9005_similarity-2.ipynb": b"third",
        "picard_1701_9002_similarity-1.ipynb": b"second",
    })
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")) == {
        ("picard", "01_similarity"): [("similarity.ipynb", b"third")]}


def test_canvas_names_with_underscores_and_other_scripts(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "canvas.zip", {
        "de_la_cruzmaria_1703_9004_similarity.ipynb": b"maria",
        "de_la_cruzmaria_LATE_1703_9006_scaled_attention.ipynb": b"maria late",
        "müllerjürgen_1704_9005_similarity.ipynb": b"jurgen",
    })
    found, rejected = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert _staged(found) == {("de_la_cruzmaria", "01_similarity"): [("similarity.ipynb", b"maria")],
                              ("de_la_cruzmaria", "02_scaled_attention"): [("scaled_attention.ipynb", b"maria late")],
                              ("müllerjürgen", "01_similarity"): [("similarity.ipynb", b"jurgen")]}
    assert rejected == []


def test_canvas_users_who_share_a_name_are_told_apart_by_user_id(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "canvas.zip", {"smithjo_11_9001_similarity.ipynb": b"first jo",
                                             "smithjo_12_9002_similarity.ipynb": b"second jo"})
    assert _staged(from_zip(archive, NOTEBOOKS, tmp_path / "staging")) == {
        ("smithjo_11", "01_similarity"): [("similarity.ipynb", b"first jo")],
        ("smithjo_12", "01_similarity"): [("similarity.ipynb", b"second jo")]}


def test_canvas_files_that_are_not_an_assignments_notebook(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "canvas.zip", {
        "troideanna_1703_9004_notes.txt": b"not a notebook",
        "crusherbev_1705_9007_homework.ipynb": b"misnamed",
        "__MACOSX/._crusherbev_1705_9007_similarity.ipynb": b"resource fork",
        "readme.txt": b"no Canvas name",
    })
    found = from_zip(archive, NOTEBOOKS, tmp_path / "staging")
    assert found["troideanna"].files == {}, "a student who handed in only other files has no notebook"
    [misnamed] = found["crusherbev"].files[""]
    assert misnamed.read_bytes() == b"misnamed" and misnamed.parent.parent.name == ".unmatched"
    assert set(found) == {"troideanna", "crusherbev"}


def test_path_traversal_in_a_canvas_zip_stays_in_staging(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = _zip(work / "canvas.zip", {
        "lovelaceada_1701_9001_similarity.ipynb": b"ada",
        "../../picard_1702_9002_similarity.ipynb": b"picard",
        "/etc/riker_1703_9003_similarity.ipynb": b"riker",
        "..\\..\\worf_1704_9004_similarity.ipynb": b"worf",  # a hidden file name: skipped
        "x\\y_1706_9006_similarity.ipynb": b"backslash",
        "../../../data_1705_9005_../../../../escape.ipynb": b"data",
    })
    staging = work / "staging"
    found, rejected = find(archive, NOTEBOOKS, staging)
    assert _staged(found)[("picard", "01_similarity")] == [("similarity.ipynb", b"picard")]
    assert _staged(found)[("riker", "01_similarity")] == [("similarity.ipynb", b"riker")]
    assert rejected == ["x\\y"], "a name with a path separator is not a student id"
    assert not any("worf" in student or "data" in student for student in found)
    assert _files_outside(tmp_path, staging, archive) == []
