"""Load the reference implementations from the nbgrader source notebooks.

Book pages use this to plot with the course's own code without ever showing it: the solution
cells stay in solutions/, and the page only says `load_solution("04_kv_cache")`.
"""

from __future__ import annotations

import json
from functools import cache
from types import SimpleNamespace

from autograder import ROOT


@cache
def load_solution(assignment: str) -> SimpleNamespace:
    """Execute an assignment's setup and solution cells (never its tests); returns their names."""
    (path,) = sorted((ROOT / "solutions" / assignment).glob("*.ipynb"))
    namespace: dict = {"__name__": f"solutions_{assignment}"}
    for cell in json.loads(path.read_text())["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and not meta.get("grade"):
            exec(compile("".join(cell["source"]), f"{path.name}:{meta.get('grade_id')}", "exec"), namespace)  # noqa: S102
    return SimpleNamespace(**{k: v for k, v in namespace.items() if not k.startswith("__")})
