"""The book builds with warnings as errors, every chapter has its figures and exercise link, and no
graded solution reaches the site."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from course import ROOT
from course.chapters import chapters
from course.notebooks import code_cells

CHAPTERS = [f"book/{found.slug}" for found in chapters()]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    build = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "-W", "-n",
                            "--keep-going", "--path-output", str(out)], capture_output=True, text=True)
    warnings = [line for line in build.stdout.splitlines() + build.stderr.splitlines()
                if "WARNING:" in line or "ERROR" in line or "Traceback" in line]
    assert build.returncode == 0, "the book build failed:\n" + "\n".join(warnings[-40:] or build.stdout.splitlines()[-40:])
    return out / "_build" / "html"


def _solution_lines() -> dict[str, set[str]]:
    """Distinctive lines of every graded solution (long enough not to occur by chance), by assignment."""
    lines: dict[str, set[str]] = {}
    for chapter in chapters():
        found = lines.setdefault(chapter.slug, set())
        for _, source in code_cells(chapter.solution):
            for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", source, re.S):
                found |= {line.strip() for line in block.splitlines() if len(line.strip()) >= 40}
    return lines


def _secrets_for(path: Path, lines: dict[str, set[str]]) -> set[str]:
    """Solution lines that must not appear in a built file.

    A later chapter's exercise notebook may hand earlier chapters' answers to the student as given
    code (chapter 5 provides chapter 4's KVCache); no other file may contain any solution.
    """
    exercise = {found.exercise.name: found.slug for found in chapters()}.get(path.name)
    return {line for assignment, found in lines.items() if exercise is None or assignment >= exercise
            for line in found}


def test_the_book_builds_with_every_chapter(site: Path) -> None:
    for chapter in ["book/intro", *CHAPTERS]:
        assert (site / f"{chapter}.html").is_file(), f"{chapter} was not built"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_chapter_has_figures_and_links_its_exercise(site: Path, chapter: str) -> None:
    html = (site / f"{chapter}.html").read_text()
    figures = re.findall(r'<img[^>]+src="[^"]*_images/[^"]+\.png"', html)
    assert len(figures) >= 2, f"{chapter} shows {len(figures)} figures made at build time; want at least 2"
    assignment = Path(chapter).name
    assert re.search(rf'_downloads/[0-9a-f]+/[^"]+\.ipynb"', html), f"{chapter} has no download link to its notebook"
    assert f"exercises/{assignment}/" in html, f"{chapter} has no launch link to exercises/{assignment}"


def test_no_graded_solution_reaches_the_site(site: Path) -> None:
    lines = _solution_lines()
    assert all(lines.values()), "found no solution lines to look for"
    for path in site.rglob("*"):
        if path.suffix in {".html", ".ipynb", ".md", ".txt", ".js", ".py"} and path.is_file():
            text = path.read_text(errors="ignore")
            assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, f"{path} holds nbgrader source"
            leaked = [line for line in _secrets_for(path, lines) if line in text]
            assert not leaked, f"{path.relative_to(site)} contains solution code: {leaked[:3]}"
