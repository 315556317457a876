"""Tricks inside the student's kernel change no grade and show no hidden test (issue 18, trusted scoring).

Every trick of the tampering bank (tests/harness/tampering.py) is handed in appended to a blank notebook (alone) and
to a partly right one (with the other tricks of its group), next to the same notebooks without tricks; the
class is graded once by root and once by an unprivileged instructor (uid 65534, tests/unprivileged.py's
`unprivileged_python`), through ``python -m autograder grade`` only. For each tricked student: the score is
no more than the notebook's without tricks, and a blank notebook with a trick scores 0. No hidden test's
text reaches the feedback, grades.csv, the report, the stored results or the logs, in any encoding the
leaking tricks use, and no script a solution cell displays is live in the feedback page.

Until the tests run outside the student's kernel (issue 18) most tricks win: these tests fail on purpose.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from autograder.reports.output_folder import OutputFolder
from course import ROOT
from course.notebooks import code_cells
from tests.grading_helpers import grade_cli, read_grades, released_notebooks, require_sandbox, student_notebook, \
    write_submission
from tests.harness.tampering import HIDDEN_MARKERS, HONEST, SCRIPT_MARKER, Student, encodings, students
from tests.unprivileged import course_copy, grade_as_unprivileged, unprivileged_folder

AS_ROOT = "the class is graded by root and by an unprivileged user that root becomes"
pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.sandbox,
              pytest.mark.skipif(os.geteuid() != 0, reason=AS_ROOT)]
ASSIGNMENTS = sorted({base.assignment for base in HONEST})
CLASS = students()
TRICKED = [student for student in CLASS if student.tricks]
LIMITS = ("--jobs", "2", "--cell-timeout", "30", "--timeout", "120", "--quiet")
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.DOTALL)  # nbgrader's hidden tests


@dataclass(frozen=True)
class GradedClass:
    """One grading run of the whole class: the command's result, its output folder and each student's score."""

    done: subprocess.CompletedProcess
    out: Path
    scores: dict[str, float]


def _notebook(released: Path, student: Student) -> dict:
    """What ``student`` hands in: its base notebook with each trick appended to its answer cell (after the
    base's answer, or the released stub where the base has none)."""
    stubs = {meta["grade_id"]: source for meta, source in code_cells(released) if meta.get("solution")}
    answers = dict(student.base.answers)
    for trick in student.tricks:
        answers[trick.cell] = answers.get(trick.cell, stubs[trick.cell]) + "\n" + trick.code
    return student_notebook(released, answers)


def _write_class(submissions: Path, released: dict[str, Path]) -> None:
    """SUBMISSIONS/<student>/<assignment>/<notebook> for every student of `CLASS` (``released``: assignment ->
    its released notebook)."""
    for student in CLASS:
        notebook = released[student.base.assignment]
        write_submission(submissions, student.id, student.base.assignment, _notebook(notebook, student),
                         filename=notebook.name)


def _scores(out: Path) -> dict[str, float]:
    """Each student's score on the assignment they handed in."""
    rows = read_grades(out)
    return {student.id: float(rows[(student.id, student.base.assignment)]["score"]) for student in CLASS}


def _chapters(source: Path) -> Path:
    """``source`` holding a copy of the assignments' solution folders (the templates of just those)."""
    for assignment in ASSIGNMENTS:
        shutil.copytree(ROOT / "solutions" / assignment, source / assignment)
    return source


def _by_root(root: Path, templates: Path) -> GradedClass:
    """The class graded by root with this checkout's grader, in ``root``."""
    submissions, out = root / "submissions", root / "out"
    released = released_notebooks(templates, _chapters(root / "source"))
    shutil.copytree(templates, OutputFolder(out).cache)
    _write_class(submissions, released)
    done = grade_cli(submissions, "--out", out, *LIMITS)
    return GradedClass(done, out, _scores(out) if OutputFolder(out).grades.exists() else {})


def _by_unprivileged(templates: Path) -> Iterator[GradedClass]:
    """The class graded by uid 65534 from its own copy of the course, under a folder root made for it."""
    with unprivileged_folder("autograder-tampering-") as base:
        copy = course_copy(base / "course", toy=False)
        released = released_notebooks(templates, _chapters(copy / "source"))
        submissions, out = base / "submissions", base / "out"
        shutil.copytree(templates, OutputFolder(out).cache)
        _write_class(submissions, released)
        done = grade_as_unprivileged(base, submissions, out, "--source", copy / "source", *LIMITS)
        yield GradedClass(done, out, _scores(out) if OutputFolder(out).grades.exists() else {})


@pytest.fixture(scope="module", params=["root", "unprivileged"])
def graded(request, tmp_path_factory) -> Iterator[GradedClass]:
    require_sandbox()
    templates = tmp_path_factory.mktemp("templates") / "cache"
    if request.param == "root":
        yield _by_root(tmp_path_factory.mktemp("tampering"), templates)
    else:
        yield from _by_unprivileged(templates)


def test_the_class_is_graded_and_honest_notebooks_score_as_written(graded: GradedClass) -> None:
    assert graded.done.returncode in (0, 1), graded.done.stderr
    assert "warm start: each kernel is forked" in graded.done.stderr, graded.done.stderr  # two at a time, warm
    honest = {student.base.name: graded.scores[student.id] for student in CLASS if not student.tricks}
    assert honest == {base.name: base.points for base in HONEST}, graded.done.stderr


@pytest.mark.parametrize("student", TRICKED, ids=[student.id for student in TRICKED])
def test_a_trick_earns_nothing(graded: GradedClass, student: Student) -> None:
    tricks = ", ".join(trick.name for trick in student.tricks)
    honest, tricked = graded.scores[student.base.student], graded.scores[student.id]
    assert tricked <= honest, f"{tricks} raised {student.base.name} from {honest:g} to {tricked:g} points"
    if not student.base.answers:
        assert tricked == 0, f"a blank notebook with {tricks} scored {tricked:g}"


def _shown_files(out: Path) -> list[Path]:
    """What the grading run wrote for people to read: feedback, grades.csv, the report, the stored results and
    the logs (not the templates in .cache or the gradebook, which hold the hidden tests by design)."""
    folder = OutputFolder(out)
    return [path for path in out.rglob("*") if path.is_file()
            and not path.is_relative_to(folder.cache) and path != folder.gradebook]


def test_no_hidden_test_is_shown(graded: GradedClass) -> None:
    files = _shown_files(graded.out)
    assert OutputFolder(graded.out).grades in files and OutputFolder(graded.out).report in files
    assert any(OutputFolder(graded.out).logs in path.parents for path in files), "the workers' logs are checked too"
    secrets = [text for marker in HIDDEN_MARKERS for text in encodings(marker)]
    leaks = [f"{path.relative_to(graded.out)}: {secret}" for path in files
             for secret in secrets if secret in path.read_text(errors="replace")]
    leaks += [f"the command's output: {s}" for s in secrets if s in graded.done.stdout + graded.done.stderr]
    assert not leaks, "hidden test text (as it is, reversed or hex-encoded) in:\n" + "\n".join(leaks)


def test_the_markers_are_hidden_test_text_only() -> None:
    sources = [source for assignment in ASSIGNMENTS for path in (ROOT / "solutions" / assignment).glob("*.ipynb")
               for _, source in code_cells(path)]
    hidden = "".join(HIDDEN.findall("".join(sources)))
    for marker in HIDDEN_MARKERS:
        assert marker in hidden and marker not in HIDDEN.sub("", "".join(sources)), marker


def _live_scripts(page: BeautifulSoup) -> list[str]:
    """Elements of ``page`` that would run the student's script: a <script> holding it, an event handler, a
    javascript: address, or a frame document that holds it."""
    live = []
    for element in page.find_all(True):
        if element.name == "script" and SCRIPT_MARKER in element.get_text() + str(element.get("src", "")):
            live.append(str(element)[:200])
        for name, value in element.attrs.items():
            text = " ".join(value) if isinstance(value, list) else str(value)
            if SCRIPT_MARKER in text and (name.startswith("on") or name == "srcdoc" or "javascript:" in text):
                live.append(f"{element.name} {name}={text[:200]}")
    return live


def test_no_script_a_solution_cell_displays_is_live(graded: GradedClass) -> None:
    showing = [student for student in TRICKED if "displays_a_script" in [t.name for t in student.tricks]]
    assert len(showing) == 2
    for student in showing:
        pages = sorted(OutputFolder(graded.out).feedback(student.id, student.base.assignment).glob("*.html"))
        assert pages, f"{student.id} has no feedback page"
        for page in pages:
            soup = BeautifulSoup(page.read_text(), "html.parser")
            assert not _live_scripts(soup), page
            shown = [e for e in soup.select(".output_subarea") if SCRIPT_MARKER in e.get_text()]
            assert shown, f"{page}: the displayed script should be shown as text"


def test_the_script_check_finds_a_live_script() -> None:
    page = (f"<html><body><script>document.title = '{SCRIPT_MARKER}'</script>"
            f"<img src=x onerror=\"{SCRIPT_MARKER}\"><a href=\"javascript:{SCRIPT_MARKER}\">x</a></body></html>")
    assert len(_live_scripts(BeautifulSoup(page, "html.parser"))) == 3
    escaped = f"<pre>&lt;script&gt;{SCRIPT_MARKER}&lt;/script&gt;</pre>"
    assert _live_scripts(BeautifulSoup(escaped, "html.parser")) == []
