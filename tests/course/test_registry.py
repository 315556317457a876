"""The chapter registry (course/chapters.yml) is the one list of chapters: every other list agrees
with it, each chapter's files exist, and `python -m course new` adds a chapter everywhere at once."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course import ROOT
from course.chapters import chapters, read_registry
from course.notebooks import code_cells, only_notebook
from course.tables import INTRO, README, chapter_rows, intro_row, readme_row, toc_files
from tests import bank


def test_toc_lists_every_chapter_in_order() -> None:
    assert toc_files() == [f"book/{c.slug}" for c in chapters()], (
        "_toc.yml and course/chapters.yml disagree: a chapter missing from _toc.yml is silently not built")


@pytest.mark.parametrize(("path", "render"), [(README, readme_row), (INTRO, intro_row)], ids=["README", "intro"])
def test_chapter_tables_agree_with_the_registry(path: Path, render) -> None:
    assert chapter_rows(path) == [render(c) for c in chapters()], f"the chapter table of {path.name} is out of date"


@pytest.mark.parametrize("chapter", chapters(), ids=lambda c: c.slug)
def test_each_chapter_has_its_files(chapter) -> None:
    assert chapter.page.read_text().count(f"\n# {chapter.heading}\n") == 1, f"{chapter.page.name}: title is not '# {chapter.heading}'"
    assert only_notebook(chapter.solution.parent) == chapter.solution
    assert only_notebook(chapter.exercise.parent) == chapter.exercise
    solutions = [meta["grade_id"] for meta, _ in code_cells(chapter.solution) if meta.get("solution")]
    for name in chapter.functions:
        assert any(name in grade_id or grade_id in name.lower() for grade_id in solutions) or any(
            f"def {name}(" in source or f"class {name}(" in source for _, source in code_cells(chapter.solution)), (
            f"{chapter.slug}: the registry names {name}, which no solution cell defines")


@pytest.mark.parametrize("chapter", chapters(), ids=lambda c: c.slug)
def test_each_chapter_preloads_exactly_the_libraries_its_kernel_imports(chapter) -> None:
    # Test cells run in the grader, not in the kernel: only the cells the kernel runs count.
    imports = {module for module in ("torch", "transformers") for meta, source in code_cells(chapter.solution)
               if not (meta.get("grade") and not meta.get("solution"))
               and re.search(rf"^\s*(import|from) {module}\b", source, re.MULTILINE)}
    assert imports <= set(chapter.preload), (
        f"{chapter.slug}'s own cells import {sorted(imports)} but the registry preloads "
        f"{list(chapter.preload)}: add them to its `preload` in course/chapters.yml, or the checks may capture "
        "functions a student replaced")
    assert set(chapter.preload) <= imports, (
        f"{chapter.slug}'s registry entry preloads {sorted(set(chapter.preload) - imports)}, which none of the "
        "cells its kernel runs imports (its test cells run in the grader): every warm run's zygote would import "
        "it for nothing. Take it out of its `preload` in course/chapters.yml")
    assert chapter.packages is None or imports <= set(chapter.packages), (
        f"{chapter.slug}'s own cells import {sorted(imports)}, which its kernel cannot see (`packages` in "
        "course/chapters.yml)")


def test_every_chapter_has_a_bank_and_nothing_else_does() -> None:
    assert [module.ASSIGNMENT for module in bank.modules()] == [c.slug for c in chapters()]


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_no_chapter_folder_outside_the_registry(folder: str) -> None:
    # `grade --source solutions/` and nbgrader see every folder here: each must be a registered chapter.
    found = sorted(p.name for p in (ROOT / folder).iterdir() if p.is_dir() and not p.name.startswith("."))
    assert found == [c.slug for c in chapters()], f"{folder}/ and course/chapters.yml disagree: {found}"


def test_the_registry_rejects_chapters_out_of_order(tmp_path: Path) -> None:
    registry = tmp_path / "chapters.yml"
    registry.write_text("- {slug: 02_b, title: B, notebook: b, library: NumPy, functions: [f], learn: x}\n"
                        "- {slug: 01_a, title: A, notebook: a, library: NumPy, functions: [g], learn: x}\n")
    with pytest.raises(ValueError, match="unique and in order"):
        read_registry(registry)


@pytest.mark.slow  # a copy of the checkout and `python -m course new` in subprocesses
def test_new_chapter_is_scaffolded_and_registered_everywhere(tmp_path: Path) -> None:
    copy = tmp_path / "course"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "_build", "*.db", "__pycache__"))
    slug = f"{max(c.number for c in chapters()) + 1:02d}_example"  # the next free number
    command = [sys.executable, "-m", "course", "new", slug, "--title", "An example", "--functions", "blend"]
    done = subprocess.run(command, cwd=copy, capture_output=True, text=True, env={"PYTHONPATH": str(copy), "PATH": ""})
    assert done.returncode == 0, done.stderr
    registry = read_registry(copy / "course" / "chapters.yml")
    assert [c.slug for c in registry] == sorted([c.slug for c in chapters()] + [slug])
    added = next(c for c in registry if c.slug == slug)
    assert toc_files(copy / "_toc.yml") == [f"book/{c.slug}" for c in registry]
    assert chapter_rows(copy / "README.md") == [readme_row(c) for c in registry]
    assert chapter_rows(copy / "book" / "intro.md") == [intro_row(c) for c in registry]
    notebook = copy / "solutions" / slug / "example.ipynb"
    cells = {meta["grade_id"]: meta for meta, _ in code_cells(notebook)}
    assert cells["blend"]["solution"] and cells["test_blend"]["grade"] and cells["test_blend_hidden"]["points"] > 0
    page = (copy / "book" / f"{slug}.md").read_text()
    assert f"{{exercise}} {slug}" in page
    assert all(f"\n## {heading}\n" in page for heading in  # the page rules' sections, in tests/course/test_book.py
               ("You will learn", "A worked example by hand", "Summary", "What's next", "Exercise"))
    assert (copy / "tests" / "bank" / f"ch{slug}.py").is_file()
    assert added.title == "An example" and added.functions == ("blend",)
    assert added.packages == (("numpy",) if added.library == "NumPy" else None), "a NumPy chapter's kernel sees numpy only"
    again = subprocess.run(command, cwd=copy, capture_output=True, text=True, env={"PYTHONPATH": str(copy), "PATH": ""})
    assert again.returncode != 0 and "already exists" in again.stderr


@pytest.mark.slow  # a copy of the checkout and `python -m course new` in subprocesses
def test_new_chapter_takes_a_quoted_list_of_functions_and_rejects_names_that_are_not_python(tmp_path: Path) -> None:
    copy = tmp_path / "course"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "_build", "*.db", "__pycache__"))
    slug = f"{max(c.number for c in chapters()) + 1:02d}_example"
    env = {"PYTHONPATH": str(copy), "PATH": ""}
    base = [sys.executable, "-m", "course", "new", slug, "--title", "An example", "--functions"]
    bad = subprocess.run(base + ["blend-in"], cwd=copy, capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and "Python names" in bad.stderr
    assert not (copy / "solutions" / slug).exists()
    done = subprocess.run(base + ["blend mix"], cwd=copy, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    added = next(c for c in read_registry(copy / "course" / "chapters.yml") if c.slug == slug)
    assert added.functions == ("blend", "mix")
