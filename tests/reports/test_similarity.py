"""Fast unit tests of the similarity report (`autograder.reports.similarity`): notebooks built here, nothing executed."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.__main__ import main
from autograder.reports.output_folder import OutputFolder
from autograder.grading.options import SOURCE, Options
from autograder.records import CellResult, Result, Task, Template
from autograder.reports.report import render_report
from autograder.reports.similarity import (DEFAULT_THRESHOLD, MAX_CODE_CHARS, REFERENCE, Similarity, assignment_pairs,
                                   class_similarity, similar_pairs,
                                   write_similarity)
from benchmarks.similarity import copies, independent_right_answers, rename
from course.chapters import chapter, chapters
from course.notebooks import solution_sources, student_notebook
from tests.grading_helpers import InstantPool, NoRecorder, plan_of

CH1 = chapter("01_similarity")
STARTER = solution_sources(CH1.exercise)

# One student's own chapter 1 answers, and a copy with every variable renamed, comments reworded, blank
# lines and spacing changed, and the two checks of cosine_similarity swapped around.
ORIGINAL = {
    "cosine_similarity": '''def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the angle between two 1-D vectors of shape (d,); ValueError if either is zero."""
    # the two lengths
    length_a = np.sqrt(np.sum(a * a))
    length_b = np.sqrt(np.sum(b * b))
    if length_a == 0 or length_b == 0:
        raise ValueError("cannot take the cosine with a zero vector")
    return float(np.sum(a * b) / (length_a * length_b))
''',
    "softmax": '''def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along `axis`; -inf gets weight 0, an all -inf slice gives zeros."""
    biggest = np.max(x, axis=axis, keepdims=True)
    biggest = np.where(np.isfinite(biggest), biggest, 0.0)
    exps = np.exp(x - biggest)  # shift first so exp cannot overflow
    sums = np.sum(exps, axis=axis, keepdims=True)
    return np.where(sums > 0, exps / np.where(sums > 0, sums, 1.0), 0.0)
''',
}
RENAMED = {
    "cosine_similarity": '''def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the angle between two 1-D vectors of shape (d,); ValueError if either is zero."""
    na = np.sqrt(np.sum(a*a))   # norm of a
    nb = np.sqrt(np.sum(b*b))


    if na == 0 or nb == 0:
        raise ValueError("zero vectors have no angle")
    return float(np.sum(a*b) / (na*nb))
''',
    "softmax": '''def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along `axis`; -inf gets weight 0, an all -inf slice gives zeros."""
    top = np.max(x, axis = axis, keepdims = True)
    top = np.where(np.isfinite(top), top, 0.0)

    e = np.exp(x - top)
    # normalise
    total = np.sum(e, axis = axis, keepdims = True)
    return np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
''',
}


def _submit(folder: Path, student: str, answers: dict[str, str] | str) -> dict[str, str]:
    """Write a student's chapter 1 notebook (the released one with ``answers``, or raw text); {notebook: path}."""
    path = folder / student / f"{CH1.notebook}.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(answers if isinstance(answers, str) else json.dumps(student_notebook(CH1.exercise, answers)))
    return {CH1.notebook: str(path)}


def _ran_starter(folder: Path, student: str) -> dict[str, str]:
    """A notebook that only ran the released code: every solution cell raised NotImplementedError."""
    notebook = nbformat.read(CH1.exercise, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            cell.outputs = [nbformat.v4.new_output("error", ename="NotImplementedError", evalue="", traceback=[])]
            cell.execution_count = 1
    path = folder / student / f"{CH1.notebook}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return {CH1.notebook: str(path)}


def test_a_copy_with_renamed_variables_is_found_and_its_shared_code_marked(tmp_path: Path) -> None:
    students = {"ada": _submit(tmp_path, "ada", ORIGINAL), "bob": _submit(tmp_path, "bob", RENAMED)}
    found = assignment_pairs(CH1.slug, students, CH1.exercise.parent, DEFAULT_THRESHOLD, CH1.solution.parent)
    assert found.students == 2
    (pair,) = found.pairs
    assert (pair.student_a, pair.student_b) == ("ada", "bob") and pair.similarity >= 0.9, pair.row
    marked = "".join(s.text for s in pair.segments_b if s.shared)
    assert "total = np.sum(e, axis = axis" in marked and "na = np.sqrt" in marked
    assert "".join(s.text for s in pair.segments_a) == pair.code_a, "the segments cut the code, losing nothing"


def test_reordered_renamed_copies_of_every_reference_solution_are_found() -> None:
    scores = copies()
    assert len(scores) == len(chapters()) and min(scores.values()) >= DEFAULT_THRESHOLD + 0.1, scores


def test_reordered_functions_in_one_cell_are_found() -> None:
    helpers = ["def scale(v, s):\n    out = []\n    for item in v:\n        out.append(item * s + 0.5)\n"
               "    return out\n",
               "def clip(v, lo, hi):\n    return [min(max(item, lo), hi) for item in v if item is not None]\n",
               "def total(v):\n    acc = 0.0\n    for item in v:\n        acc = acc + abs(item) ** 2\n    return acc\n"]
    codes = {"ada": "\n".join(helpers), "bob": rename("\n".join(reversed(helpers)), "b")}
    (pair,) = similar_pairs(CH1.slug, codes, "\n\n".join(STARTER.values()), DEFAULT_THRESHOLD)
    assert pair.similarity >= 0.9, pair.row


def test_blank_and_starter_only_notebooks_are_never_flagged(tmp_path: Path) -> None:
    students = {"blank1": _submit(tmp_path, "blank1", {}), "blank2": _submit(tmp_path, "blank2", {}),
                "ran1": _ran_starter(tmp_path, "ran1"), "ran2": _ran_starter(tmp_path, "ran2"),
                "broken": _submit(tmp_path, "broken", '{"cells": [{"cell_type": "code", "metadata": 3'),
                "missing": {CH1.notebook: None}, "ada": _submit(tmp_path, "ada", ORIGINAL)}
    found = assignment_pairs(CH1.slug, students, CH1.exercise.parent, 0.0, CH1.solution.parent)
    assert found.students == len(students) and found.cut == ()
    assert {(p.student_a, p.student_b) for p in found.pairs} <= {(REFERENCE, "ada")}, [p.row for p in found.pairs]


def test_one_identical_short_line_is_no_evidence(tmp_path: Path) -> None:
    dot = STARTER["dot"].replace("raise NotImplementedError()", "return float(a @ b)")
    students = {s: _submit(tmp_path, s, {"dot": dot}) for s in ("ada", "bob")}
    students["cy"] = _submit(tmp_path, "cy", {"dot": dot, "softmax": ORIGINAL["softmax"]})
    students["dee"] = _submit(tmp_path, "dee", {"softmax": RENAMED["softmax"]})
    pairs = assignment_pairs(CH1.slug, students, CH1.exercise.parent, DEFAULT_THRESHOLD, None).pairs
    assert [(p.student_a, p.student_b) for p in pairs] == [("cy", "dee")], [p.row for p in pairs]


def test_starter_code_is_what_makes_blank_notebooks_differ_from_copies() -> None:
    """Without the starter left out, two blank notebooks would be identical: the exclusion is what saves them."""
    blank = "\n\n".join(STARTER.values())
    assert similar_pairs(CH1.slug, {"a": blank, "b": blank}, blank, 0.0) == []
    assert similar_pairs(CH1.slug, {"a": blank, "b": blank}, "", 0.0)[0].similarity == 1.0


def test_independent_right_answers_score_low_and_set_the_default_threshold() -> None:
    scores = sorted(s for s, _ in independent_right_answers())
    above = [s for s in scores if s >= DEFAULT_THRESHOLD]
    assert len(scores) >= 50
    assert scores[len(scores) // 2] < 0.3, "the median independent pair should share little"
    assert len(above) <= 0.05 * len(scores), f"{len(above)} of {len(scores)} independent pairs would be listed"


def _template(folder: Path) -> Template:
    released = folder / "release" / CH1.slug
    released.mkdir(parents=True)
    shutil.copy(CH1.exercise, released)
    return Template(CH1.slug, "key", folder, (CH1.notebook,), ((CH1.notebook, "test_dot", 1.0),))


def test_similarity_reaches_the_instructor_never_the_feedback(tmp_path: Path, monkeypatch) -> None:
    from autograder.workers import recorder
    from autograder.grading import run as grade

    # Every submission "graded" at once, with a feedback page of its own.
    pool = InstantPool(Result("graded", "", (CellResult(CH1.notebook, "test_dot", 1.0, 1.0, True, ""),),
                              feedback={f"{CH1.notebook}.html": "<p>your grade</p>"}))
    monkeypatch.setattr(recorder, "Recorder", NoRecorder)
    templates = {CH1.slug: _template(tmp_path / "template")}
    tasks = [Task(s, CH1.slug, _submit(tmp_path / "in", s, a)) for s, a in (("ada", ORIGINAL), ("bob", RENAMED))]
    out = tmp_path / "out"
    options = Options(tmp_path / "in", out, 1, progress=False, similarity_threshold=DEFAULT_THRESHOLD)
    assert grade._grade_tasks(plan_of(options, tasks, templates), pool, pool, tmp_path) == 0
    with open(OutputFolder(out).similarity, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["assignment"], r["student_a"], r["student_b"]) for r in rows] == [(CH1.slug, "ada", "bob")]
    assert 0.9 <= float(rows[0]["similarity"]) <= 1 and int(rows[0]["shared_fingerprints"]) >= 50
    report = OutputFolder(out).report.read_text()
    assert "Similar code" in report and "not a verdict" in report and "<mark>" in report
    feedback = OutputFolder(out).all_feedback
    pages = sorted(p.relative_to(feedback).as_posix() for p in feedback.rglob("*") if p.is_file())
    assert pages == [f"ada/{CH1.slug}/{CH1.notebook}.html", f"bob/{CH1.slug}/{CH1.notebook}.html"]
    for page in pages:
        text = (feedback / page).read_text()
        assert text == "<p>your grade</p>", f"{page} holds more than the student's own feedback"

    off = Options(tmp_path / "in", out, 1, progress=False, similarity_threshold=None)
    assert grade._grade_tasks(plan_of(off, tasks, templates), pool, pool, tmp_path) == 0
    assert not OutputFolder(out).similarity.exists() and "Similar code" not in OutputFolder(out).report.read_text()


def test_the_report_escapes_student_code(tmp_path: Path) -> None:
    hostile = ORIGINAL["softmax"].replace("# shift first", "# </pre><script>alert('x')</script> shift first")
    codes = {"ada": hostile, "<img src=x onerror=alert(1)>": hostile}
    pairs = similar_pairs(CH1.slug, codes, "", DEFAULT_THRESHOLD)
    page = render_report([], {}, Similarity(DEFAULT_THRESHOLD, {CH1.slug: 2}, tuple(pairs)))
    assert len(pairs) == 1 and "<script>" not in page and "<img src=x" not in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and page.count("<mark>") >= 2


def test_an_empty_class_writes_the_header_only_and_turned_off_writes_nothing(tmp_path: Path) -> None:
    path = OutputFolder(tmp_path).similarity
    write_similarity(path, class_similarity([], {}, DEFAULT_THRESHOLD, SOURCE))
    assert path.read_text().splitlines() == ["assignment,student_a,student_b,similarity,shared_fingerprints,note"]
    write_similarity(path, class_similarity([], {}, None, SOURCE))
    assert not path.exists(), "a stale similarity.csv stays behind when the report is turned off"


def test_the_threshold_option_takes_a_similarity_between_0_and_1(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["grade", "submissions", "--out", "out", "--similarity-threshold", "1.5"])
    assert "a similarity is between 0 and 1, got 1.5" in capsys.readouterr().err


def _with_cells(folder: Path, student: str, answers: dict[str, str], extra: list[dict]) -> dict[str, str]:
    """A chapter 1 notebook with ``answers`` in its solution cells and ``extra`` cells added at the end."""
    notebook = student_notebook(CH1.exercise, answers)
    notebook["cells"] += [{"cell_type": "code", "execution_count": None, "outputs": [], **cell} for cell in extra]
    path = folder / student / f"{CH1.notebook}.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(notebook))
    return {CH1.notebook: str(path)}


def test_code_copied_into_cells_of_the_students_own_is_compared(tmp_path: Path) -> None:
    """Solution cells left blank, the copy in an unmarked cell, or in one whose metadata claims it is locked."""
    copied = ORIGINAL["cosine_similarity"] + "\n\n" + ORIGINAL["softmax"]
    students = {"ada": _submit(tmp_path, "ada", ORIGINAL),
                "bob": _with_cells(tmp_path, "bob", {}, [{"metadata": {}, "source": copied}]),
                "cy": _with_cells(tmp_path, "cy", {}, [{"metadata": {"nbgrader": {"locked": True, "grade": False,
                                                                                  "solution": False}},
                                                        "source": RENAMED["softmax"] + RENAMED["cosine_similarity"]}])}
    found = assignment_pairs(CH1.slug, students, CH1.exercise.parent, DEFAULT_THRESHOLD, None)
    pairs = {(p.student_a, p.student_b): p.similarity for p in found.pairs}
    assert pairs.get(("ada", "bob"), 0) >= 0.9 and pairs.get(("ada", "cy"), 0) >= 0.9, pairs


def test_code_behind_a_long_comment_or_string_is_compared_and_a_cut_is_flagged(tmp_path: Path) -> None:
    padding = "# " + "x" * MAX_CODE_CHARS + "\n" + '"""' + "y" * MAX_CODE_CHARS + '"""\n'
    long_own = "\n".join(f"def f{i}(v):\n    return [item * {i} + {i % 7} for item in v if item > {i}]\n"
                         for i in range(2000))
    students = {"ada": _submit(tmp_path, "ada", ORIGINAL),
                "bob": _submit(tmp_path, "bob", {cell: padding + code for cell, code in RENAMED.items()}),
                "cy": _with_cells(tmp_path, "cy", {}, [{"metadata": {}, "source": long_own}])}
    found = assignment_pairs(CH1.slug, students, CH1.exercise.parent, DEFAULT_THRESHOLD, None)
    assert [(p.student_a, p.student_b) for p in found.pairs] == [("ada", "bob")], [p.row for p in found.pairs]
    assert found.pairs[0].similarity >= 0.9 and found.cut == ("cy",)
    similarity = Similarity(DEFAULT_THRESHOLD, {CH1.slug: 3}, tuple(found.pairs), {CH1.slug: found.cut})
    path = OutputFolder(tmp_path).similarity
    write_similarity(path, similarity)
    with open(path, newline="") as handle:
        rows = {row["student_a"]: row for row in csv.DictReader(handle)}
    assert rows["ada"]["note"] == "" and "cy" in rows and "cut at 100000 characters" in rows["cy"]["note"], rows
    assert "the code of cy was cut" in render_report([], {}, similarity)


def test_a_copy_of_the_published_reference_solution_is_listed(tmp_path: Path) -> None:
    reference = solution_sources(CH1.solution)
    students = {"ada": _submit(tmp_path, "ada", ORIGINAL),
                "bob": _submit(tmp_path, "bob", {cell: rename(code, "b") for cell, code in reference.items()})}
    found = assignment_pairs(CH1.slug, students, CH1.exercise.parent, DEFAULT_THRESHOLD, CH1.solution.parent)
    assert [(p.student_a, p.student_b) for p in found.pairs] == [(REFERENCE, "bob")], [p.row for p in found.pairs]
    assert found.pairs[0].similarity >= 0.9 and found.students == 2
    assert assignment_pairs(CH1.slug, students, CH1.exercise.parent, DEFAULT_THRESHOLD, None).pairs == []
