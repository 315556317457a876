"""Every hand-in of an LMS's submissions zip becomes a row (issue 33, items 8-11): Canvas's link and text
entries, anonymously graded Canvas zips, Moodle's *Download all submissions* zip in both layouts,
notebooks a browser or Colab renamed, and a zip a student handed in inside the zip.

Pure Python, no kernels: each zip is named as Canvas and Moodle name their files; the tests check which
student, assignment and file each notebook is staged as, what each row's reason says, and that nothing
lands outside the staging folder.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from autograder.records import Template
from autograder.submissions.find import find, from_zip
from autograder.grading.tasks import make_tasks
from tests.grading_helpers import write_zip

NOTEBOOKS = {"similarity.ipynb": "01_similarity", "scaled_attention.ipynb": "02_scaled_attention"}
TEMPLATE = Template("01_similarity", "key", Path("/nonexistent"), ("similarity",), ())
COLAB = "https://colab.research.google.com/drive/1aBcDeFgHiJkLmNoPqRsTuVwXyZ"
LINK_PAGE = f'<html><head><title>{COLAB}</title></head><body><a href="{COLAB}">{COLAB}</a></body></html>'.encode()
TEXT_PAGE = b"<html><body><p>I could not upload, here is my code: def similarity(a, b): ...</p></body></html>"


def _tasks(found: dict) -> dict:
    return {t.student: t for t in make_tasks(found, {"01_similarity": TEMPLATE}, "limits")}


def _inside(root: Path, staging: Path, *allowed: Path) -> list[Path]:
    """Files under ``root`` that are neither in ``staging`` nor one of ``allowed``."""
    return [p for p in root.rglob("*") if p.is_file() and staging not in p.parents and p not in allowed]


# ---------------------------------------------------------------- Canvas link and text entries (item 8)


def test_canvas_link_and_text_entries_become_rows(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "submissions.zip", {
        "lovelaceada_1001_5001_similarity.ipynb": b"nb",
        "turingalan_1004_link.html": LINK_PAGE,
        "curiemarie_LATE_1003_text.html": TEXT_PAGE})
    found, _ = from_zip(archive, NOTEBOOKS, tmp_path / "staging")
    assert sorted(found) == ["curiemarie_1003", "lovelaceada_1001", "turingalan_1004"], "before: the two entries had no row"
    assert found["turingalan_1004"].lms_user_id == "1004" and found["curiemarie_1003"].lms_user_id == "1003"
    tasks = _tasks(found)
    assert tasks["turingalan_1004"].problem == (
        f"no submission (expected similarity.ipynb); found instead: a website URL entry to {COLAB}, not a notebook "
        "file (a Colab link: ask for the notebook itself, File > Download > .ipynb)")
    assert tasks["curiemarie_1003"].problem == ("no submission (expected similarity.ipynb); found instead: a text entry "
                                           "(text.html), not a notebook file")
    assert not tasks["turingalan_1004"].missing and not tasks["curiemarie_1003"].missing, "handed in: not 'missing'"
    assert tasks["lovelaceada_1001"].problem == ""


def test_a_canvas_zip_of_link_entries_only_is_read_as_canvas(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "submissions.zip", {"turingalan_1004_link.html": LINK_PAGE})
    found, said = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert list(found) == ["turingalan_1004"] and said == []
    assert "website URL entry" in _tasks(found)["turingalan_1004"].problem


# ---------------------------------------------------------------- anonymous grading (item 9)


def test_anonymous_canvas_zip(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "submissions.zip", {
        "anon_Q4bxT_5001_similarity.ipynb": b"on time",
        "LATE_anon_7hKp2_5002_similarity.ipynb": b"late",
        "anon_7hKp2_5000_similarity.ipynb": b"an earlier try",
        "anon_Zr8sN_5003_essay.pdf": b"not a notebook"})
    found, said = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert sorted(found) == ["anon_7hKp2", "anon_Q4bxT", "anon_Zr8sN"], said
    assert [p.read_bytes() for p in found["anon_7hKp2"].files["01_similarity"]] == [b"late"], "the later attachment"
    assert found["anon_7hKp2"].late == {"01_similarity"} and found["anon_Q4bxT"].late == set()
    assert found["anon_Q4bxT"].lms_user_id == "", "an anonymous zip carries no Canvas user id"
    assert _tasks(found)["anon_Zr8sN"].problem.endswith("found instead: essay.pdf")


# ---------------------------------------------------------------- Moodle (item 10)


def test_moodle_zip_in_folders(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "ATT101-Similarity-1234.zip", {
        "Ada Lovelace_2001_assignsubmission_file_/similarity.ipynb": b"ada",
        "Grace Hopper_2002_assignsubmission_file_/work/Copy of similarity.ipynb": b"grace, from Colab",
        "Grace Hopper_2002_assignsubmission_file_/work/.ipynb_checkpoints/similarity-checkpoint.ipynb": b"old",
        "Alan Turing_2003_assignsubmission_onlinetext_/onlinetext.html": b"<p>my answer</p>",
        "Marie Curie_2004_assignsubmission_file_/notes.pdf": b"pdf",
        "Emmy Noether_2005_assignsubmission_file_/similarity.ipynb": b"emmy",
        "Emmy Noether_2006_assignsubmission_file_/similarity.ipynb": b"another Emmy Noether",
        "José O'Brien-Núñez, Jr._2007_assignsubmission_file_/similarity.ipynb": b"jose"})
    staging = tmp_path / "staging"
    found, said = find(archive, NOTEBOOKS, staging)
    assert sorted(found) == ["Ada Lovelace", "Alan Turing", "Emmy Noether_2005", "Emmy Noether_2006", "Grace Hopper",
                             "José O'Brien-Núñez Jr.", "Marie Curie"], said
    tasks = _tasks(found)
    assert tasks["Ada Lovelace"].problem == "" and tasks["José O'Brien-Núñez Jr."].problem == ""
    assert tasks["Grace Hopper"].note == "misnamed notebook: graded Copy of similarity.ipynb as similarity.ipynb"
    assert Path(tasks["Grace Hopper"].notebooks["similarity"]).read_bytes() == b"grace, from Colab"
    assert "online text entry" in tasks["Alan Turing"].problem and not tasks["Alan Turing"].missing
    assert tasks["Marie Curie"].problem.endswith("found instead: notes.pdf")
    assert Path(tasks["Emmy Noether_2006"].notebooks["similarity"]).read_bytes() == b"another Emmy Noether"
    assert _inside(tmp_path, staging, archive) == []


def test_moodle_zip_flat(tmp_path: Path) -> None:
    """Moodle with "Download submissions in folders" off: the file's own name follows the prefix."""
    archive = write_zip(tmp_path / "ATT101-Similarity-1234.zip", {
        "Ada Lovelace_2001_assignsubmission_file_similarity.ipynb": b"ada",
        "Grace Hopper_2002_assignsubmission_file_similarity (1).ipynb": b"grace",
        "Alan Turing_2003_assignsubmission_onlinetext_onlinetext.html": b"<p>text</p>"})
    found, said = find(archive, NOTEBOOKS, tmp_path / "staging")
    assert sorted(found) == ["Ada Lovelace", "Alan Turing", "Grace Hopper"], said
    tasks = _tasks(found)
    assert tasks["Ada Lovelace"].problem == "" and tasks["Ada Lovelace"].note == ""
    assert tasks["Grace Hopper"].note == "misnamed notebook: graded similarity (1).ipynb as similarity.ipynb"
    assert tasks["Alan Turing"].problem.startswith(
        "no submission (expected similarity.ipynb); found instead: an online")


# ---------------------------------------------------------------- renamed notebooks, a zip in the zip (item 11)


def test_misnamed_notebooks_in_a_canvas_zip_are_graded_with_a_note(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "submissions.zip", {
        "lovelaceada_1001_5001_Copy of similarity.ipynb": b"from Colab",
        "hoppergrace_LATE_1002_5002_similarity (1).ipynb": b"from a browser",
        "curiemarie_1003_5003_similarity-2.ipynb": b"Canvas's own resubmission suffix",
        "turingalan_1004_5004_homework.ipynb": b"no such notebook"})
    found, _ = from_zip(archive, NOTEBOOKS, tmp_path / "staging")
    tasks = _tasks(found)
    assert tasks["lovelaceada_1001"].note == "misnamed notebook: graded Copy of similarity.ipynb as similarity.ipynb"
    assert tasks["hoppergrace_1002"].note == "misnamed notebook: graded similarity (1).ipynb as similarity.ipynb"
    assert tasks["hoppergrace_1002"].late, "the late flag follows the renamed notebook"
    assert tasks["curiemarie_1003"].note == "" and tasks["curiemarie_1003"].problem == ""
    assert Path(tasks["lovelaceada_1001"].notebooks["similarity"]).read_bytes() == b"from Colab"
    assert tasks["turingalan_1004"].problem.startswith("no submission (expected similarity.ipynb); found instead: "
                                                  "turingalan_1004_5004_homework.ipynb")


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_zip_inside_the_canvas_zip_is_opened_safely(tmp_path: Path) -> None:
    inner = _zip_bytes({"homework/similarity.ipynb": b"zipped", "../../../escape.ipynb": b"traversal",
                        "/etc/similarity.ipynb": b"absolute, same base name",
                        "__MACOSX/homework/._similarity.ipynb": b"",
                        "homework/.ipynb_checkpoints/similarity-checkpoint.ipynb": b"old"})
    many = _zip_bytes({f"f{i}.txt": b"" for i in range(1001)})
    archive = write_zip(tmp_path / "submissions.zip", {
        "lovelaceada_LATE_1001_5001_submission.zip": inner,
        "hoppergrace_1002_5002_many.zip": many,
        "curiemarie_1003_5003_broken.zip": b"PK not a zip"})
    staging = tmp_path / "staging"
    found, _ = from_zip(archive, NOTEBOOKS, staging)
    tasks = _tasks(found)
    assert tasks["lovelaceada_1001"].problem == "", tasks["lovelaceada_1001"].problem
    assert Path(tasks["lovelaceada_1001"].notebooks["similarity"]).read_bytes() == b"zipped", "the first of one name"
    assert tasks["lovelaceada_1001"].note == "graded similarity.ipynb from the zip submission.zip"
    assert tasks["lovelaceada_1001"].late, "a late zip's notebooks are late"
    assert tasks["hoppergrace_1002"].problem.endswith("many.zip (not opened: 1001 files, more than 1000)")
    assert "broken.zip (not opened:" in tasks["curiemarie_1003"].problem
    assert _inside(tmp_path, staging, archive) == [] and not (tmp_path.parent / "escape.ipynb").exists()
    assert all(staging in p.parents for p in staging.rglob("*"))


# ---------------------------------------------------------------- the LMS's names in the report (item 18)


def test_the_lms_names_reach_the_class_record_and_the_report_escaped(tmp_path: Path) -> None:
    """Before, `Task.lms_name` was never filled: the report's name column never showed."""
    from dataclasses import replace

    from autograder.reports.class_record import class_rows, row
    from autograder.reports.output_folder import OutputFolder
    from autograder.records import Result
    from autograder.reports.report import render_report
    from autograder.reports.state import save_state, stored_rows

    canvas = write_zip(tmp_path / "canvas.zip", {"lovelaceada_1001_5001_similarity.ipynb": b"nb"})
    moodle = write_zip(tmp_path / "moodle.zip", {
        "Eve <img src=x onerror=alert(1)>_2001_assignsubmission_file_/similarity.ipynb": b"nb",
        "Grace Hopper_2002_assignsubmission_onlinetext_/onlinetext.html": b"<p>text</p>"})
    tasks = _tasks(from_zip(canvas, NOTEBOOKS, tmp_path / "s1")[0]) | _tasks(from_zip(moodle, NOTEBOOKS,
                                                                                     tmp_path / "s2")[0])
    assert {s: t.lms_name for s, t in tasks.items()} == {
        "lovelaceada_1001": "lovelaceada", "Eve img src x onerror alert 1": "Eve <img src=x onerror=alert(1)>",
        "Grace Hopper": "Grace Hopper"}
    out = OutputFolder(tmp_path / "out")
    for task in tasks.values():
        save_state(out, task, Result("failed", task.problem) if task.problem else Result("graded"), 10.0)
    stored = stored_rows(out)
    assert stored[("Grace Hopper", "01_similarity")].lms_name == "Grace Hopper", "kept for the later runs"
    assert stored[("lovelaceada_1001", "01_similarity")] == row(tasks["lovelaceada_1001"], Result("graded"),
                                                                replace(TEMPLATE, cells=(("similarity", "t", 10.0),)))
    page = render_report(class_rows(stored, {"01_similarity": TEMPLATE}), {"01_similarity": TEMPLATE})
    assert "<td>lovelaceada_1001</td><td>lovelaceada</td>" in page
    assert "<td>Eve &lt;img src=x onerror=alert(1)&gt;</td>" in page and "<img src=x" not in page
