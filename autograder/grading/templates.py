"""Assignment templates: each assignment of the course generated once (nbgrader's generate_assignment,
run by a worker) into its own folder, cached under ``DIR/.cache`` by a hash of its source folder,
the nbgrader config and `autograder.checks` (which the hidden tests import). The chapter registry
says which modules each assignment's kernels preload, which packages they see and which rules they keep
(`read_course`)."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from autograder import NBGRADER_CONFIG
from autograder.workers.digests import hash_folder
from autograder.workers.pool import Pool
from autograder.records import GenerateJob, Result, Status, Template
from autograder.workers.dispatch import KernelSet
from course import ROOT
from course.chapters import REGISTRY, chapters, read_registry
from course.notebooks import code_cells

FORMAT_VERSION = 4  # 3: the cells are recorded beside the template (`Template.cells_record`); 4: its gradebook holds
# the submission every job is graded as (`autograder.harness.notebook.generate`)


UNREGISTERED = KernelSet(("torch",), None, ())  # an assignment no registry knows: torch, the safe guess (about 2 s)


@dataclass(frozen=True)
class Course:
    """What a source folder holds, read once: its notebooks and the kernels each assignment's registry entry
    asks for (the source folder's own ``chapters.yml`` when it has one, a course of another shape, else
    `course/chapters.yml`)."""

    source: Path
    notebooks: Mapping[str, str]  # every notebook file name -> its assignment (`course_notebooks`)
    registered: Mapping[str, KernelSet]  # assignment -> its kernels, for those the registry knows

    @property
    def assignments(self) -> frozenset[str]:
        return frozenset(self.notebooks.values())

    def kernels(self, assignment: str) -> KernelSet:
        """What ``assignment``'s kernels preload, see and may not call (`UNREGISTERED` when no registry knows it)."""
        return self.registered.get(assignment, UNREGISTERED)


def read_course(source: Path) -> Course:
    """The `Course` in ``source``."""
    notebooks, own = course_notebooks(source), source / REGISTRY.name
    registry = read_registry(own) if own.exists() else chapters()
    return Course(source, notebooks,
                  {chapter.slug: KernelSet(chapter.preload, chapter.packages, chapter.forbid) for chapter in registry})


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
    """``template`` with its notebooks and graded cells, as the worker that made it wrote them
    (`autograder.harness.notebook.record_cells`): reading them needs no nbgrader, so that the grader imports
    none."""
    recorded = json.loads(template.cells_record.read_text())
    return replace(template, notebooks=tuple(recorded["notebooks"]),
                   cells=tuple((notebook, grade_id, float(points)) for notebook, grade_id, points in recorded["cells"]))


def course_notebooks(source: Path) -> dict[str, str]:
    """Every notebook file name of the assignments in ``source`` -> its assignment (what a Canvas file's
    original name is matched against). An assignment is a folder of ``source`` that holds a notebook."""
    return {path.name: folder.name for folder in sorted(source.iterdir())
            if folder.is_dir() and not folder.name.startswith((".", "_")) for path in sorted(folder.glob("*.ipynb"))}


def keyed_templates(course: Course, cache: Path, only: set[str] | None = None) -> dict[str, Template]:
    """The template of every assignment of ``course`` (of those in ``only``, when given), keyed and placed in
    ``cache`` but not read: a hash of its source folder, the nbgrader config, `autograder.checks` and its
    kernels (no import, no worker). `generated` says whether ``cache`` holds it."""
    source = course.source
    shared = hashlib.sha256(NBGRADER_CONFIG.read_bytes() + (ROOT / "autograder" / "checks.py").read_bytes())
    templates = {}
    for a in sorted(a for a in course.assignments if only is None or a in only):
        kernels = course.kernels(a)
        key = hashlib.sha256(f"{FORMAT_VERSION}:{a}:{hash_folder(source / a)}:{shared.hexdigest()}:{kernels.preload}"
                             f":{kernels.packages}:{kernels.forbid}".encode()).hexdigest()
        templates[a] = Template(a, key, cache / f"{a}-{key[:16]}", (), (), *kernels,  # notebooks, cells: read later
                                imports=test_imports(source, (a,)))
    return templates


def generated(template: Template) -> bool:
    """Whether ``template``'s folder holds it, whole (its cells are written last, before the folder is named)."""
    return template.cells_record.exists()


def prepare_templates(course: Course, cache: Path, pool: Pool, only: set[str] | None = None) -> dict[str, Template]:
    """Generate (or reuse from ``cache``) the template of every assignment of ``course`` (of those in ``only``,
    when given)."""
    return generate_templates(course.source, keyed_templates(course, cache, only), pool)


def generate_templates(source: Path, templates: Mapping[str, Template], pool: Pool) -> dict[str, Template]:
    """``templates`` (`keyed_templates`) read, each generated first by ``pool``'s workers unless it is cached."""
    missing = [a for a, template in templates.items() if not generated(template)]
    jobs = []
    for assignment in missing:
        shutil.rmtree(templates[assignment].folder, ignore_errors=True)
        partial = templates[assignment].folder.with_name(f"{templates[assignment].folder.name}.partial")
        jobs.append(GenerateJob(replace(templates[assignment], folder=partial), str(source.parent), source.name))
    failures = []

    def done(index: int, result: Result) -> None:
        partial = jobs[index].template
        if result.status is Status.DONE:
            partial.folder.rename(templates[missing[index]].folder)
        else:
            shutil.rmtree(partial.folder, ignore_errors=True)
            failures.append(result.reason)

    pool.run(jobs, 600, done)
    if failures:
        raise RuntimeError("\n".join(failures))
    return {a: read_template(template) for a, template in templates.items()}
