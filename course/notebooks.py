"""Reading and rewriting nbgrader notebooks as JSON: cells, their metadata, solution sources."""

from __future__ import annotations

import json
from pathlib import Path


def read_notebook(path: Path) -> dict:
    """The notebook as a JSON dict."""
    return json.loads(path.read_text())


def nbgrader_meta(cell: dict) -> dict:
    """A cell's nbgrader metadata ({} when it has none)."""
    return cell.get("metadata", {}).get("nbgrader", {})


def source_of(cell: dict) -> str:
    """A cell's source as one string (notebooks store it as a string or a list of lines)."""
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def code_cells(path: Path) -> list[tuple[dict, str]]:
    """(nbgrader metadata, source) of each code cell, in order."""
    return [(nbgrader_meta(cell), source_of(cell)) for cell in read_notebook(path)["cells"]
            if cell["cell_type"] == "code"]


def solution_sources(path: Path) -> dict[str, str]:
    """grade_id -> source of each solution cell (the reference answers, or a student's)."""
    return {meta["grade_id"]: source for meta, source in code_cells(path) if meta.get("solution")}


def student_notebook(released: Path, answers: dict[str, str]) -> dict:
    """The released notebook with some cells' sources replaced (by grade_id), as a student hands it in."""
    notebook = read_notebook(released)
    for cell in notebook["cells"]:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    return notebook


def only_notebook(folder: Path) -> Path:
    """The one notebook of a folder; ValueError when there is none or more than one."""
    found = sorted(folder.glob("*.ipynb"))
    if len(found) != 1:
        raise ValueError(f"{folder} should hold exactly one notebook, found {[p.name for p in found]}")
    return found[0]
