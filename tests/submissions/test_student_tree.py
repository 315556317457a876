"""The student-only tree of a private term (issue 33, item 19): `python -m autograder release --student-tree DIR`
copies the course without solutions/ and tests/, with the launch links pointing at the student repository,
and no reference solution or hidden test is left anywhere in it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.submissions.student_tree import LEFT_OUT, tracked_files, write_student_tree
from course import ROOT
from course.chapters import chapter, slugs
from course.notebooks import code_cells

URL = "https://github.com/my-university/att101-students"
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(?P<body>.*?)### END HIDDEN TESTS", re.DOTALL)
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(?P<body>.*?)### END SOLUTION", re.DOTALL)


def _secrets() -> list[str]:
    """The body of every reference solution and every hidden test (BEGIN/END SOLUTION, BEGIN/END HIDDEN TESTS) of
    each chapter's nbgrader source notebook."""
    bodies = set()
    for slug in slugs():
        for meta, source in code_cells(chapter(slug).solution):
            bodies |= {m["body"].strip() for m in (HIDDEN if meta.get("grade") else SOLUTION).finditer(source)}
    return sorted(body for body in bodies if len(body) >= 20)


def _texts(path: Path) -> list[str]:
    """A file's text, and each cell's source when it is a notebook."""
    text = path.read_text(errors="replace")
    if path.suffix != ".ipynb":
        return [text]
    return [text] + ["".join(cell["source"]) for cell in json.loads(text)["cells"]]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("student") / "tree"
    write_student_tree(out, URL, "term-2026")
    return out


def test_the_student_tree_leaves_out_solutions_and_tests(tree: Path) -> None:
    assert not any((tree / name).exists() for name in LEFT_OUT)
    assert (tree / "book").is_dir() and (tree / "binder" / "postBuild").is_file()
    for slug in slugs():
        exercise = chapter(slug).exercise.relative_to(ROOT)
        assert (tree / exercise).read_bytes() == (ROOT / exercise).read_bytes(), f"{exercise} is the released notebook"


def test_no_reference_solution_or_hidden_test_is_left_in_the_tree(tree: Path) -> None:
    secrets = _secrets()
    assert len(secrets) > 40, "the check reads the solutions it looks for"
    assert any(secret in text for secret in secrets for text in _texts(chapter("01_similarity").solution)), \
        "the check finds a secret where there is one"
    leaks = [(path.relative_to(tree), secret[:60]) for path in tree.rglob("*") if path.is_file()
             for texts in [_texts(path)] for secret in secrets if any(secret in text for text in texts)]
    assert leaks == [], leaks[:5]


def test_the_launch_links_open_the_student_repository(tree: Path) -> None:
    config = (tree / "_config.yml").read_text()
    assert f"  url: {URL}\n" in config and "  branch: term-2026\n" in config
    original = (ROOT / "_config.yml").read_text()
    assert config.replace(URL, "X").replace("term-2026", "Y") == re.sub(
        r"(?m)^(  url:) .*$", r"\1 X", re.sub(r"(?m)^(  branch:) .*$", r"\1 Y", original, count=1), count=1), \
        "only the repository's url and branch change"


def test_every_tracked_file_but_the_left_out_is_copied(tree: Path) -> None:
    expected = sorted(p for p in tracked_files() if p.parts[0] not in LEFT_OUT and (ROOT / p).is_file())
    assert sorted(p.relative_to(tree) for p in tree.rglob("*") if p.is_file()) == expected


@pytest.mark.parametrize("args, message", [
    (["--repository-url", URL], "--repository-url and --branch go with --student-tree DIR"),
    (["--student-tree", str(ROOT / "book" / "tree")], "is inside the course"),
    (["--student-tree", "NONEMPTY"], "exists and is not an empty folder"),
])
def test_release_refuses_a_bad_student_tree_before_releasing(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "NONEMPTY").mkdir()
    (tmp_path / "NONEMPTY" / "x").write_text("x")
    args = [str(tmp_path / "NONEMPTY") if a == "NONEMPTY" else a for a in args]
    done = subprocess.run([sys.executable, "-m", "autograder", "release", "01_similarity", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr and "released" not in done.stdout, done.stderr
