"""docs/architecture.md and CONTRIBUTING's test table stay true: every module, function, class and attribute
the architecture page names exists, the page names every subpackage of autograder/ and draws each in its processes,
and the table lists every test file in every folder of tests/. Read from the source (no imports)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from course import ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"
DOTTED = re.compile(r"\b(?:autograder|course)(?:\.\w+)+")
CLASS_ATTRIBUTE = re.compile(r"`([A-Z]\w+)\.(\w+)`")
PACKAGES = ("autograder", "course")
MERMAID = re.compile(r"```mermaid\n(.*?)```", re.DOTALL)


@cache
def _tree(module: Path) -> ast.Module:
    return ast.parse(module.read_text())


def _names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """What a module or class body defines: functions, classes, assignments and annotated fields."""
    found: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            found.update({target.id: node for target in node.targets if isinstance(target, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
    return found


def _resolves(dotted: str) -> bool:
    """Whether ``autograder.x.y...`` names a module (a file of the package) and then names defined in it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ROOT.joinpath(*parts[:cut])
        path = module / "__init__.py" if module.is_dir() else module.with_suffix(".py")
        if path.exists():
            body, rest = _tree(path).body, parts[cut:]
            for name in rest:
                node = _names(body).get(name)
                if node is None:
                    return False
                body = node.body if isinstance(node, ast.ClassDef) else []
            return True
    return False


def _class_has(cls: str, attribute: str) -> bool:
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            node = _names(_tree(path).body).get(cls)
            if isinstance(node, ast.ClassDef) and attribute in _names(node.body):
                return True
    return False


def test_every_module_and_name_the_architecture_page_names_exists() -> None:
    text = ARCHITECTURE.read_text()
    named = sorted(set(DOTTED.findall(text)))
    assert len(named) >= 20, "the page names the modules a submission passes through"
    missing = [name for name in named if not _resolves(name)]
    missing += [f"{cls}.{attr}" for cls, attr in CLASS_ATTRIBUTE.findall(text) if not _class_has(cls, attr)]
    assert not missing, f"docs/architecture.md names what the code no longer has: {missing}; update the page"


def _subpackages() -> list[str]:
    return sorted(f"autograder.{init.parent.name}" for init in (ROOT / "autograder").glob("*/__init__.py"))


def test_the_architecture_page_names_and_draws_every_subpackage() -> None:
    text = ARCHITECTURE.read_text()
    packages = _subpackages()
    assert len(packages) >= 8, f"autograder/ has only the subpackages {packages}"
    drawings = MERMAID.findall(text)
    assert drawings, "docs/architecture.md draws the processes in a ```mermaid block"
    named = set(DOTTED.findall(text))
    unnamed = [p for p in packages if not any(n == p or n.startswith(f"{p}.") for n in named)]
    assert not unnamed, f"docs/architecture.md never names the subpackages {unnamed}: say which process runs each"
    drawn = set(DOTTED.findall("".join(drawings)))
    undrawn = [p for p in packages if not any(n == p or n.startswith(f"{p}.") for n in drawn)]
    assert not undrawn, f"the processes drawn in docs/architecture.md leave out {undrawn}"


@pytest.mark.parametrize("name", ["autograder.nothing", "autograder.grading.run.nothing", "autograder.records.Job.nothing"])
def test_a_name_that_is_gone_does_not_resolve(name: str) -> None:
    assert not _resolves(name)


def test_contributing_lists_every_test_file() -> None:
    table = (ROOT / "CONTRIBUTING.md").read_text().split("## Which test checks what", 1)[1].split("\n#", 1)[0]
    listed = set(re.findall(r"`(tests/(?:\w+/)*test_\w+\.py)`", table))
    present = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("test_*.py")}
    assert present <= listed, f"CONTRIBUTING's 'Which test checks what' leaves out {sorted(present - listed)}"
    assert listed <= present, f"CONTRIBUTING's 'Which test checks what' lists missing files {sorted(listed - present)}"
