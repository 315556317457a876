"""A handed-in notebook whose nbgrader cell metadata is gone (a Colab copy, cells pasted into a fresh notebook), or
that lost a locked cell (a deleted visible test), made gradable again from the assignment's released notebook.

nbgrader finds each cell by its ``nbgrader.grade_id``; without it, it grades nothing and scores 0. Here:

1. each answer cell of the released notebook that the student's notebook lacks is matched to the student's
   code cell (without nbgrader metadata) that defines the same functions and classes, the last such cell (the
   definition a run of the notebook keeps), and that cell gets the released cell's metadata;
2. every released code cell still missing (tests, setup, answers no cell defines) is inserted from the released
   notebook after the cell that precedes it there; nbgrader then restores the tests' sources as usual;
3. what was done is a note on the row; a notebook none of whose cells defines any answer is not graded.

`restore` returns None for a notebook that has every cell, and never changes the file it reads.
"""

from __future__ import annotations

import ast
import copy
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Restored:
    """The notebook to grade (None: not gradable), the row's notes, or the reason it cannot be graded."""

    notebook: dict | None
    notes: list[str] = field(default_factory=list)
    problem: str = ""


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader") or {}


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def defined_names(source: str) -> set[str]:
    """The functions and classes a cell defines at its top level (IPython magics and shell lines left out)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return set()
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def restore(student: dict, released: dict) -> Restored | None:
    """``student`` made gradable against ``released`` (both nbformat dicts), or None when nothing is missing."""
    wanted = [c for c in released["cells"] if c.get("cell_type") == "code" and _meta(c).get("grade_id")]
    cells = copy.deepcopy(student.get("cells", []))
    present = {_meta(c).get("grade_id") for c in cells}
    missing = [c for c in wanted if _meta(c)["grade_id"] not in present]
    if not missing:
        return None
    notes: list[str] = []
    answers = [c for c in missing if _meta(c).get("solution")]
    matched = _match(cells, answers)
    _match_copies(cells, [c for c in missing if not _meta(c).get("solution")])
    if answers and not matched and not present & {_meta(c)["grade_id"] for c in wanted}:
        names = sorted({n for c in answers for n in defined_names(_source(c))})
        return Restored(None, problem=(
            "the notebook has lost its nbgrader cell metadata (a Colab copy, or cells pasted into a new notebook?) "
            f"and none of its cells defines {', '.join(names) or 'an answer'}: hand in the released notebook"))
    if matched:
        notes.append(f"nbgrader cell metadata missing (a Colab copy or pasted cells?): graded the cells that define "
                     f"{', '.join(sorted(matched))} as those answers")
    unmatched = [_meta(c)["grade_id"] for c in answers if _meta(c)["grade_id"] not in matched]
    if unmatched:
        notes.append(f"no cell defines the answer of {', '.join(unmatched)}: graded as not attempted")
    deleted = [_meta(c)["grade_id"] for c in missing if _meta(c).get("grade") and not _meta(c).get("solution")
               and "hidden" not in _meta(c)["grade_id"]]
    if deleted and not matched:
        notes.append(f"visible test cell{'s' if len(deleted) > 1 else ''} {', '.join(deleted)} deleted: restored from "
                     "the assignment")
    _insert_missing(cells, released["cells"], student)
    notebook = {**student, "cells": cells}
    return Restored(notebook, notes)


def _match(cells: list[dict], answers: list[dict]) -> dict[str, str]:
    """Give each answer's metadata to the last unmarked student code cell defining its functions and classes;
    returns the answers' names -> grade_id."""
    matched: dict[str, str] = {}
    free = [i for i, c in enumerate(cells) if c.get("cell_type") == "code" and not _meta(c)]
    defined = {i: defined_names(_source(cells[i])) for i in free}
    for answer in answers:
        names = defined_names(_source(answer))
        candidates = [i for i in free if names and names <= defined[i]]
        if not candidates:
            continue
        chosen = candidates[-1]
        free.remove(chosen)
        cells[chosen].setdefault("metadata", {})["nbgrader"] = copy.deepcopy(_meta(answer))
        matched[", ".join(sorted(names))] = _meta(answer)["grade_id"]
    return matched


def _match_copies(cells: list[dict], locked: list[dict]) -> None:
    """Give a released test or setup cell's metadata to the unmarked student cell that holds its very source (a
    Colab copy keeps the cells, not their metadata), so that it is not inserted twice."""
    for cell in locked:
        source = _source(cell).strip()
        same = [c for c in cells if c.get("cell_type") == "code" and not _meta(c) and _source(c).strip() == source]
        if source and same:
            same[0].setdefault("metadata", {})["nbgrader"] = copy.deepcopy(_meta(cell))


def _insert_missing(cells: list[dict], released: list[dict], student: dict) -> None:
    """Insert every released code cell with a grade_id that ``cells`` lacks, after the cell before it there."""
    with_ids = student.get("nbformat", 4) > 4 or student.get("nbformat_minor", 0) >= 5
    ids = {c.get("id") for c in cells}
    previous = -1  # where the last released cell found sits in ``cells``
    for cell in released:
        grade_id = _meta(cell).get("grade_id")
        at = next((i for i, c in enumerate(cells) if grade_id and _meta(c).get("grade_id") == grade_id), None)
        if at is not None:
            previous = at
            continue
        if cell.get("cell_type") != "code" or not grade_id:
            continue
        inserted = {k: copy.deepcopy(v) for k, v in cell.items() if k != "id"}
        inserted.update(outputs=[], execution_count=None)
        if with_ids:
            inserted["id"] = cell["id"] if cell.get("id") and cell["id"] not in ids else uuid.uuid4().hex[:8]
            ids.add(inserted["id"])
        previous += 1
        cells.insert(previous, inserted)


def restore_file(path: Path, released: Path, target: Path) -> tuple[Path, list[str], str]:
    """(the notebook to grade, notes, problem): ``path`` itself when nothing is missing or it cannot be read as
    JSON (nbgrader then says why), else the restored copy written to ``target`` (a file of the grader's own)."""
    try:
        student = json.loads(path.read_bytes())
        reference = json.loads(released.read_bytes())
    except (OSError, ValueError):
        return path, [], ""
    if not isinstance(student, dict) or not isinstance(student.get("cells"), list):
        return path, [], ""
    restored = restore(student, reference)
    if restored is None:
        return path, [], ""
    if restored.notebook is None:
        return path, [], restored.problem
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(restored.notebook, indent=1, ensure_ascii=False))
    return target, restored.notes, ""
