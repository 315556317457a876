"""Student notebooks under a real kernel: completed with the reference code and copied alone into
an empty folder, every cell runs, every visible test passes, and nothing reaches stderr."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from course.chapters import chapter, slugs
from course.notebooks import solution_sources, student_notebook

pytestmark = pytest.mark.slow


def _completed_exercise(assignment: str) -> nbformat.NotebookNode:
    """The student notebook with each solution cell replaced by the reference solution's cell."""
    found = chapter(assignment)
    return nbformat.reads(json.dumps(student_notebook(found.exercise, solution_sources(found.solution))), as_version=4)


@pytest.mark.parametrize("assignment", slugs())
def test_completed_exercise_runs_alone_and_silently(assignment: str, tmp_path: Path) -> None:
    notebook = _completed_exercise(assignment)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute(cwd=str(tmp_path))
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            assert output.output_type != "error", f"{cell.metadata['nbgrader']['grade_id']}: {output.get('evalue')}"
            assert output.get("name") != "stderr", (
                f"{cell.metadata['nbgrader']['grade_id']} writes to stderr (nbgrader would score it zero): {output.text[:300]}")
        if cell.metadata["nbgrader"].get("grade") and cell.source.startswith("# Visible test"):
            printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            assert "passed" in printed, f"{cell.metadata['nbgrader']['grade_id']} did not report success"
