"""Load the course's reference code into a book page or a benchmark without showing it.

A page says ``ch4 = load_solution("04_kv_cache")``: the solution cells stay in solutions/, and the
page plots with them.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

from course.chapters import chapter
from course.notebooks import code_cells


@cache
def load_solution(slug: str) -> SimpleNamespace:
    """Execute a chapter's setup and solution cells (never its tests); returns the names they define."""
    path = chapter(slug).solution
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not in this copy of the course: a student-only tree (`python -m "
                                "autograder release --student-tree`) holds no reference solutions; read this page on "
                                "the course's site")
    namespace: dict = {"__name__": f"solutions_{slug}"}
    for meta, source in code_cells(path):
        if not meta.get("grade"):
            exec(compile(source, f"{path.name}:{meta.get('grade_id')}", "exec"), namespace)  # noqa: S102
    return SimpleNamespace(**{k: v for k, v in namespace.items() if not k.startswith("__")})
