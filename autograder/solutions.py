"""Load the course's own code into a book page without showing it.

Book pages plot with the reference implementations (the solution cells stay in solutions/, and the
page only says `load_solution("04_kv_cache")`) and with the measuring code of benchmarks/.
"""

from __future__ import annotations

import json
import runpy
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


@cache
def load_benchmark(name: str) -> SimpleNamespace:
    """The functions of benchmarks/<name>.py, for a book page that shows what the script measures."""
    return SimpleNamespace(**runpy.run_path(str(ROOT / "benchmarks" / f"{name}.py")))
