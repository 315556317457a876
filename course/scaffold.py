"""`python -m course new NN_name`: a new chapter's files, registered everywhere the course lists chapters.

It writes the book page, the nbgrader source notebook (one graded function with its task, solution,
visible-test and hidden-test cells, each with the right nbgrader metadata) and an empty bank file,
then adds the chapter to course/chapters.yml, _toc.yml, the README's table and the introduction's
map. Fill in the files, then run `python -m autograder release`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from course import ROOT, SOLUTIONS
from course.chapters import REGISTRY, Chapter, read_registry
from course.tables import INTRO, README, chapter_rows, insert_row, insert_toc_entry, intro_row, readme_row

SLUG = re.compile(r"^\d\d_[a-z][a-z0-9_]*$")

PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# {heading}

(One paragraph: what this chapter adds to the previous one, and why it matters.)

## You will learn

- (a concrete objective)
- (a concrete objective)
- (a concrete objective)

```{{code-cell}} ipython3
:tags: [hide-input]
import numpy as np
import matplotlib.pyplot as plt

from course.plotting import use_course_style

use_course_style()
```

## A worked example by hand

(A small example computed step by step with plain operations on concrete numbers, every
intermediate number printed; it comes before any `load_solution(` call.)

```{{code-cell}} ipython3
x = np.array([1.0, 2.0])
print("x =", x)
```

## Summary

- (what the reader learned)
- (what the reader learned)
- (what the reader learned)

## What's next

(One paragraph leading into the next chapter.)

## Exercise

```{{exercise}} {slug}
```
"""


def _cell(kind: str, grade_id: str, source: str, *, solution: bool = False, points: float = 0) -> nbformat.NotebookNode:
    """A cell with nbgrader metadata: locked unless it is a solution; graded when it has points."""
    meta = {"grade": points > 0, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
            "solution": solution}
    if points:
        meta["points"] = points
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    return make(source, metadata={"nbgrader": meta})


def skeleton(chapter: Chapter) -> nbformat.NotebookNode:
    """The source notebook of a new chapter: one graded function, ``chapter.functions[0]``."""
    name = chapter.functions[0]
    module = "numpy as np" if chapter.library == "NumPy" else "torch"
    cells = [
        _cell("markdown", "intro", f"# Exercise {chapter.number} · {chapter.title}\n\n*Attention, by hand* · "
                                   f"chapter {chapter.number} · {chapter.library}"),
        _cell("code", "setup", f"import {module}"),
        _cell("markdown", f"{name}_task", f"## 1. `{name}` ⭐\n\nGoal, difficulty, time, the math, the edge cases.\n\n"
                                         "<details><summary>Hint</summary>\n\n</details>"),
        _cell("code", name, f"def {name}(x):\n    \"\"\"State the shapes here.\"\"\"\n    ### BEGIN SOLUTION\n"
                            "    return x\n    ### END SOLUTION", solution=True),
        _cell("code", f"test_{name}", f"# Visible test: a worked example.\nassert {name}(1) == 1, "
                                      f"f\"{name}(1) should be 1, got {{{name}(1)!r}}\"\nprint(\"{name}: visible tests passed\")",
              points=1),
        _cell("code", f"test_{name}_hidden", "# Hidden tests: what they cover.\n### BEGIN HIDDEN TESTS\n"
                                             "from autograder.checks import expect_equal\n\n"
                                             f"expect_equal({name}(2), 2, \"{name}(2)\")\n### END HIDDEN TESTS",
              points=1),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return notebook


def _registry_entry(chapter: Chapter) -> str:
    entry = (f"- slug: {chapter.slug}\n  title: {json.dumps(chapter.title)}\n  notebook: {chapter.notebook}\n"
             f"  library: {chapter.library}\n  functions: [{', '.join(chapter.functions)}]\n")
    entry += "  optional: true\n" if chapter.optional else ""
    entry += f"  preload: [{', '.join(chapter.preload)}]\n" if chapter.preload else ""
    entry += f"  packages: [{', '.join(chapter.packages)}]\n" if chapter.packages is not None else ""
    entry += f"  forbid: [{', '.join(chapter.forbid)}]\n" if chapter.forbid else ""
    return entry + f"  learn: {json.dumps(chapter.learn)}\n"


def new_chapter(slug: str, title: str, library: str, functions: tuple[str, ...], learn: str,
                root: Path = ROOT) -> Chapter:
    """Create and register a chapter under ``root`` (the repository, or a copy of it); returns it."""
    if not SLUG.match(slug):
        raise ValueError(f"a chapter slug looks like 07_flash_attention (two digits, _, lower case), not {slug!r}")
    if not functions or not all(name.isidentifier() for name in functions):
        raise ValueError(f"graded functions are Python names, one per word, not {list(functions)!r}")
    registry = root / REGISTRY.relative_to(ROOT)
    known = read_registry(registry)
    if any(c.slug == slug or c.number == int(slug[:2]) for c in known):
        raise ValueError(f"chapter {slug[:2]} already exists in {registry}")
    chapter = Chapter(slug=slug, title=title, notebook=slug.split("_", 1)[1], library=library,
                      functions=functions, learn=learn, preload=("torch",) if library == "PyTorch" else (),
                      packages=("numpy",) if library == "NumPy" else None)
    for path in (root / "book" / f"{slug}.md", root / SOLUTIONS / slug, root / "tests" / "bank" / f"ch{slug}.py"):
        if path.exists():
            raise FileExistsError(f"{path} already exists")
    (root / "book" / f"{slug}.md").write_text(PAGE.format(heading=chapter.heading, slug=slug))
    (root / SOLUTIONS / slug).mkdir(parents=True)
    nbformat.write(skeleton(chapter), root / SOLUTIONS / slug / f"{chapter.notebook}.ipynb")
    (root / "tests" / "bank" / f"ch{slug}.py").write_text(
        f'"""Chapter {chapter.number} answers: {", ".join(functions)}."""\n\nfrom tests.bank import Answer\n\n'
        f'ASSIGNMENT = "{slug}"\n\nWRONG: list[Answer] = []\n\nRIGHT: list[Answer] = []\n')

    position = sum(c.slug < slug for c in known)
    entries = registry.read_text().split("\n- slug: ")
    entries.insert(position + 1, _registry_entry(chapter).removeprefix("- slug: ").rstrip("\n"))
    registry.write_text("\n- slug: ".join(entries).rstrip("\n") + "\n")
    insert_toc_entry(slug, root / "_toc.yml")
    for table, row in ((root / README.relative_to(ROOT), readme_row(chapter)),
                       (root / INTRO.relative_to(ROOT), intro_row(chapter))):
        insert_row(table, row, chapter_rows(table), position)
    return chapter
