"""Assignment templates: each assignment of the course generated once (nbgrader's generate_assignment,
run by a worker) into its own folder, cached under ``DIR/.cache`` by a hash of its source folder,
the nbgrader config and `autograder.checks` (which the hidden tests import). The chapter registry
says which modules each assignment's kernels preload (`preloads`)."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from autograder import NBGRADER_CONFIG
from autograder.workers.digests import hash_folder
from autograder.workers.pool import Pool
from autograder.records import GenerateJob, Result, Status, Template
from course import ROOT
from course.chapters import REGISTRY, chapters, read_registry
from course.notebooks import code_cells

FORMAT_VERSION = 2


UNREGISTERED_PRELOAD = ("torch",)  # an assignment no registry knows: torch, the safe guess (about 2 s a kernel)


def preloads(source: Path) -> dict[str, tuple[str, ...]]:
    """Assignment -> the modules its kernels import before student code, as the registry says: the source
    folder's own ``chapters.yml`` when it has one (a course of another shape), else `course/chapters.yml`."""
    own = source / REGISTRY.name
    return {chapter.slug: chapter.preload for chapter in (read_registry(own) if own.exists() else chapters())}


def kernel_packages(source: Path) -> dict[str, tuple[str, ...] | None]:
    """Assignment -> the only installed packages its kernels see (None: every one), as the registry says
    (`preloads` says which registry)."""
    own = source / REGISTRY.name
    return {chapter.slug: chapter.packages for chapter in (read_registry(own) if own.exists() else chapters())}


def kernel_rules(source: Path) -> dict[str, tuple[str, ...]]:
    """Assignment -> its rules (`autograder.sandbox.rules`), as the registry says (`preloads` says which registry)."""
    own = source / REGISTRY.name
    return {chapter.slug: chapter.forbid for chapter in (read_registry(own) if own.exists() else chapters())}


def test_imports(source: Path, assignments: Iterable[str]) -> tuple[str, ...]:
    """What the test cells of ``assignments`` import, read from the source notebooks (``import x`` gives x;
    ``from x import y`` gives x and x.y, which may name no module): a run's workers import them once, before
    they are forked (`autograder.workers.forks`)."""
    found: set[str] = set()
    for assignment in assignments:
        for path in sorted((source / assignment).glob("*.ipynb")):
            for meta, text in code_cells(path):
                if not meta.get("grade") or meta.get("solution"):
                    continue
                try:
                    tree = ast.parse(text)
                except SyntaxError:
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        found |= {alias.name for alias in node.names}
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return tuple(sorted(found))


def read_template(template: Template) -> Template:
    """``template`` with its notebooks and graded cells, read from the folder it was generated into."""
    from nbgrader.api import Gradebook

    from autograder.harness.nbgrader_course import course_id

    notebooks = tuple(sorted(p.stem for p in template.released.glob("*.ipynb")))
    cells = []
    with Gradebook(f"sqlite:///{template.gradebook}", course_id()) as gradebook:
        for name in notebooks:
            order = [c["metadata"].get("nbgrader", {}).get("grade_id")
                     for c in json.loads((template.released / f"{name}.ipynb").read_text())["cells"]]
            notebook = gradebook.find_notebook(name, template.assignment)
            grade_cells = [*notebook.grade_cells, *notebook.task_cells]  # a task is graded by hand
            for cell in sorted(grade_cells, key=lambda c: order.index(c.name) if c.name in order else len(order)):
                cells.append((name, cell.name, float(cell.max_score)))
    return replace(template, notebooks=notebooks, cells=tuple(cells))


def course_notebooks(source: Path) -> dict[str, str]:
    """Every notebook file name of the assignments in ``source`` -> its assignment (what a Canvas file's
    original name is matched against). An assignment is a folder of ``source`` that holds a notebook."""
    return {path.name: folder.name for folder in sorted(source.iterdir())
            if folder.is_dir() and not folder.name.startswith((".", "_")) for path in sorted(folder.glob("*.ipynb"))}


def prepare_templates(source: Path, cache: Path, pool: Pool, only: set[str] | None = None) -> dict[str, Template]:
    """Generate (or reuse from ``cache``) the template of every assignment folder in ``source`` (of those in
    ``only``, when given)."""
    assignments = sorted({a for a in course_notebooks(source).values() if only is None or a in only})
    shared = hashlib.sha256(NBGRADER_CONFIG.read_bytes() + (ROOT / "autograder" / "checks.py").read_bytes())
    registered, packages, rules = preloads(source), kernel_packages(source), kernel_rules(source)
    templates = {}
    for a in assignments:
        preload = registered.get(a, UNREGISTERED_PRELOAD)
        key = hashlib.sha256(f"{FORMAT_VERSION}:{a}:{hash_folder(source / a)}:{shared.hexdigest()}:{preload}"
                             f":{packages.get(a)}:{rules.get(a, ())}".encode()).hexdigest()
        templates[a] = Template(a, key, cache / f"{a}-{key[:16]}", (), (), preload,  # notebooks, cells: read below
                                packages.get(a), rules.get(a, ()))
    missing = [a for a in assignments if not templates[a].gradebook.exists()]
    jobs = []
    for assignment in missing:
        shutil.rmtree(templates[assignment].folder, ignore_errors=True)
        partial = templates[assignment].folder.with_name(f"{templates[assignment].folder.name}.partial")
        jobs.append(GenerateJob(replace(templates[assignment], folder=partial), str(source.parent), source.name))
    failures = []

    def done(index: int, result: Result) -> None:
        partial = jobs[index].template.folder
        if result.status is Status.DONE:
            partial.rename(templates[missing[index]].folder)
        else:
            shutil.rmtree(partial, ignore_errors=True)
            failures.append(result.reason)

    pool.run(jobs, 600, done)
    if failures:
        raise RuntimeError("\n".join(failures))
    return {a: read_template(templates[a]) for a in assignments}
