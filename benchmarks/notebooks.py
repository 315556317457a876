"""Time every solution notebook top to bottom under a real kernel (the spec's budget: 20 s on 2 cores).

    python -m benchmarks.notebooks
"""

from __future__ import annotations

import time

import nbformat
from nbclient import NotebookClient

from course.chapters import chapter, chapters
from course.machine import describe_machine

BUDGET_SECONDS = 20.0


def run_seconds(assignment: str) -> float:
    """Wall time to start a kernel and run the assignment's solution notebook, hidden tests included."""
    path = chapter(assignment).solution
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(notebook, timeout=600, kernel_name="python3").execute(cwd=str(path.parent))
    return time.perf_counter() - start


def main() -> None:
    print(describe_machine())
    for found in chapters():
        seconds = run_seconds(found.slug)
        verdict = "ok" if seconds < BUDGET_SECONDS else f"OVER the {BUDGET_SECONDS:.0f} s budget"
        print(f"{found.slug:22s} {seconds:6.1f} s  {verdict}")


if __name__ == "__main__":
    main()
