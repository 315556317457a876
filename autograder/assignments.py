"""Assignment templates: each assignment of the course generated once (nbgrader's generate_assignment,
run by a worker) into its own folder, cached under ``DIR/.cache`` by a hash of its source folder,
the nbgrader config and `autograder.checks` (which the hidden tests import)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from autograder import NBGRADER_CONFIG
from autograder.pool import Pool
from autograder.records import Template
from course import ROOT

FORMAT_VERSION = 2


def hash_folder(folder: Path) -> str:
    """sha256 of every file below ``folder`` (by relative path and content), caches and checkpoints left out."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and ".ipynb_checkpoints" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def read_template(assignment: str, key: str, folder: Path, source: Path) -> Template:
    """The template generated in ``folder`` from the source assignment folder ``source``."""
    from nbgrader.api import Gradebook

    from autograder.nbgrader_course import course_id

    released = folder / "release" / assignment
    notebooks = tuple(sorted(p.stem for p in released.glob("*.ipynb")))
    cells = []
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}", course_id()) as gradebook:
        for name in notebooks:
            order = [c["metadata"].get("nbgrader", {}).get("grade_id")
                     for c in json.loads((released / f"{name}.ipynb").read_text())["cells"]]
            grade_cells = gradebook.find_notebook(name, assignment).grade_cells
            for cell in sorted(grade_cells, key=lambda c: order.index(c.name) if c.name in order else len(order)):
                cells.append((name, cell.name, float(cell.max_score)))
    # Hidden tests count too: torch must be imported before student code whenever any cell uses it.
    text = "".join(path.read_text() for path in sorted(source.glob("*.ipynb")))
    return Template(assignment, key, folder, notebooks, tuple(cells), "import torch" in text or "from torch" in text)


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
    keys = {a: hashlib.sha256(f"{FORMAT_VERSION}:{a}:{hash_folder(source / a)}:{shared.hexdigest()}".encode())
            .hexdigest() for a in assignments}
    folders = {a: cache / f"{a}-{keys[a][:16]}" for a in assignments}
    missing = [a for a in assignments if not (folders[a] / "gradebook.db").exists()]
    jobs = []
    for assignment in missing:
        shutil.rmtree(folders[assignment], ignore_errors=True)
        jobs.append({"kind": "generate", "assignment": assignment, "root": str(source.parent),
                     "source_directory": source.name, "folder": str(folders[assignment]) + ".partial"})
    failures = []

    def done(index: int, result: dict) -> None:
        partial = Path(jobs[index]["folder"])
        if result["status"] == "done":
            partial.rename(folders[missing[index]])
        else:
            shutil.rmtree(partial, ignore_errors=True)
            failures.append(result["reason"])

    pool.run(jobs, 600, done)
    if failures:
        raise RuntimeError("\n".join(failures))
    return {a: read_template(a, keys[a], folders[a], source / a) for a in assignments}
