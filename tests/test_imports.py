"""autograder/'s import rules, read from the source with ast (nothing is imported): each subpackage imports only
what its `__init__.py` docstring's `Imports:` line names, nothing the student's kernel imports reaches the
grader's side, the channel never reaches grading, and no two packages import each other, however far round.

Every import counts, at module level or inside a function, under ``TYPE_CHECKING`` or not. Each rule is also
run on a copy of autograder/ with one bad import added, to show that it fails there.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from course import ROOT

PACKAGE = ROOT / "autograder"
# Where the kernel's imports begin: the kernel's start, the zygote that forks warm kernels, the channel's kernel end.
KERNEL_ENTRIES = ("autograder.sandbox.kernel", "autograder.sandbox.zygote", "autograder.channel.served")
# The grader's and the worker's side: no module the kernel imports may import any of these (records may, as long as
# what it imports in turn stays out of them).
GRADER_SIDE = ("autograder.harness", "autograder.workers", "autograder.grading", "autograder.reports",
               "autograder.lms", "autograder.submissions", "autograder.__main__")
IMPORTS_LINE = re.compile(r"^Imports:(.*?)(?:\n\s*\n|\Z)", re.MULTILINE | re.DOTALL)
PROCESS_LINE = re.compile(r"^Process(?:es)?: ", re.MULTILINE)
DOTTED = re.compile(r"\bautograder(?:\.\w+)+")


@dataclass(frozen=True)
class Tree:
    """autograder/'s modules by dotted name, each with the autograder modules it imports."""

    files: dict[str, Path]
    imports: dict[str, frozenset[str]]

    def unit(self, module: str) -> str:
        """The package a module belongs to (``autograder.grading``), or the top-level module itself."""
        return ".".join(module.split(".")[:2])

    def subpackages(self) -> list[str]:
        return sorted(name for name, path in self.files.items() if name.count(".") == 1 and path.name == "__init__.py")


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, files: dict[str, Path]) -> set[str]:
    """The autograder modules one import statement loads: ``from a.b import c`` is ``a.b.c`` where c is a module."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
    return {f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names}


def read_tree(root: Path = PACKAGE) -> Tree:
    files = {_module_name(root, path): path for path in sorted(root.rglob("*.py"))}
    imports: dict[str, frozenset[str]] = {}
    for module, path in files.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= _imported(node, module, path.name == "__init__.py", files)
        # Importing a.b.c runs a/__init__ and a/b/__init__ first.
        loaded = {".".join(name.split(".")[:cut]) for name in found for cut in range(1, name.count(".") + 2)}
        imports[module] = frozenset(name for name in loaded if name in files and name != module)
    return Tree(files, imports)


def allowed_imports(tree: Tree, package: str) -> list[str] | None:
    """What a package's `Imports:` line names (modules or packages of autograder), or None without one."""
    docstring = ast.get_docstring(ast.parse(tree.files[package].read_text())) or ""
    line = IMPORTS_LINE.search(docstring)
    return None if line is None else DOTTED.findall(line.group(1))


def _deepest(modules: Iterable[str]) -> list[str]:
    """The modules without their packages' ``__init__`` where a module inside is listed too."""
    modules = set(modules)
    return sorted(m for m in modules if not any(other.startswith(f"{m}.") for other in modules))


def outside_imports_line(tree: Tree) -> list[str]:
    """Rule (a): every import of a package's modules that leaves the package and its `Imports:` line does not name."""
    broken = []
    for package in tree.subpackages():
        allowed = allowed_imports(tree, package) or []
        named = ", ".join(allowed) or "nothing of autograder"
        for module in (name for name in tree.imports if tree.unit(name) == package):
            for target in _deepest(tree.imports[module]):
                inside = tree.unit(target) in (package, "autograder")
                if not inside and not any(target == name or target.startswith(f"{name}.") for name in allowed):
                    broken.append(f"{module} imports {target}; {package}'s Imports: line names only {named}")
    return broken


def reached(imports: Mapping[str, Iterable[str]], entries: Iterable[str]) -> dict[str, list[str]]:
    """Every module (or package) the entries load, however far down, each with the chain of imports to it."""
    chains = {entry: [entry] for entry in entries}
    todo = list(chains)
    while todo:
        module = todo.pop()
        for target in sorted(imports.get(module, ())):
            if target not in chains:
                chains[target] = [*chains[module], target]
                todo.append(target)
    return chains


def reaching(tree: Tree, entries: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    """Rules (b) and (c): the chains of imports from the entries into a forbidden package or module."""
    forbidden = tuple(forbidden)
    chains = reached(tree.imports, entries)
    hits = [module for module in chains if any(module == name or module.startswith(f"{name}.") for name in forbidden)]
    return [" -> ".join(chains[module]) for module in _deepest(hits)]


def package_graph(tree: Tree) -> dict[str, set[str]]:
    """Each package (a top-level module counts as a package of its own) with the other packages it imports."""
    graph: dict[str, set[str]] = {tree.unit(module): set() for module in tree.imports}
    for module, targets in tree.imports.items():
        graph[tree.unit(module)] |= {tree.unit(target) for target in targets} - {tree.unit(module)}
    return graph


def package_circle(tree: Tree) -> list[str]:
    """Rule (d): one circle of imports between packages, each importing the next, or [] where there is none."""
    try:
        TopologicalSorter(package_graph(tree)).prepare()
    except CycleError as error:
        return error.args[1][::-1]  # graphlib lists each package before the one that imports it
    return []


def in_circles(tree: Tree) -> set[str]:
    """Every package on some circle of imports: the packages that reach themselves."""
    graph = package_graph(tree)
    return {unit for unit in graph if unit in reached(graph, graph[unit])}


TREE = read_tree()


def test_every_subpackage_says_which_process_runs_it_and_what_it_imports() -> None:
    packages = TREE.subpackages()
    assert len(packages) >= 8, f"found only {packages}"
    missing = [p for p in packages if allowed_imports(TREE, p) is None
               or not PROCESS_LINE.search(ast.get_docstring(ast.parse(TREE.files[p].read_text())) or "")]
    assert not missing, f"these __init__.py docstrings lack a 'Process(es): ...' or an 'Imports: ...' line: {missing}"
    unknown = {p: [n for n in allowed_imports(TREE, p) or [] if n not in TREE.files] for p in packages}
    assert not any(unknown.values()), f"Imports: lines name modules that do not exist: {unknown}"


def test_each_package_imports_only_what_its_imports_line_names() -> None:
    broken = outside_imports_line(TREE)
    assert not broken, "imports that their package's __init__.py does not allow (change the import, or the Imports: " \
                       "line if the design changed):\n" + "\n".join(broken)


def test_nothing_the_kernel_imports_reaches_the_graders_side() -> None:
    kernel = reached(TREE.imports, KERNEL_ENTRIES)
    assert {"autograder.sandbox.limits", "autograder.channel.wire"} <= set(kernel), sorted(kernel)
    chains = reaching(TREE, KERNEL_ENTRIES, GRADER_SIDE)
    assert not chains, "the student's kernel would import the grader's side (a kernel must never hold the " \
                       "grader's code or secrets):\n" + "\n".join(chains)


def test_the_channel_never_imports_grading() -> None:
    channel = [module for module in TREE.imports if TREE.unit(module) == "autograder.channel"]
    assert len(channel) >= 6, channel
    chains = reaching(TREE, channel, ["autograder.grading"])
    assert not chains, "the channel reaches grading:\n" + "\n".join(chains)


def test_no_circle_of_imports_between_packages() -> None:
    circle = package_circle(TREE)
    assert not circle, f"these packages import each other in a circle: {' -> '.join(circle)}"


# Each rule on a copy of autograder/ with one import added (module, line): the rule must report it.
BAD_IMPORTS = {
    "imports line": ("autograder/submissions/find.py", "from autograder.records import Template"),
    "kernel": ("autograder/sandbox/limits.py", "from autograder.reports import output_folder"),
    "channel": ("autograder/channel/handles.py", "import autograder.grading.options"),
    "circle": ("autograder/records.py", "import autograder.grading.progress"),
}


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, Tree]:
    trees = {}
    for name, (module, line) in BAD_IMPORTS.items():
        root = tmp_path_factory.mktemp("bad-import") / "autograder"
        shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "templates"))
        path = root.parent / module
        path.write_text(f"{path.read_text()}\n{line}\n")
        trees[name] = read_tree(root)
    return trees


def test_each_rule_fails_on_a_bad_import(copies: dict[str, Tree]) -> None:
    assert any("autograder.submissions.find imports autograder.records" in b
               for b in outside_imports_line(copies["imports line"]))
    assert any(chain.endswith("autograder.sandbox.limits -> autograder.reports.output_folder")
               for chain in reaching(copies["kernel"], KERNEL_ENTRIES, GRADER_SIDE))
    channel = [m for m in copies["channel"].imports if copies["channel"].unit(m) == "autograder.channel"]
    assert reaching(copies["channel"], channel, ["autograder.grading"])
    assert package_circle(copies["circle"])
    assert {"autograder.records", "autograder.grading"} <= in_circles(copies["circle"])
