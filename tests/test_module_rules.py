"""House rules for every module of `autograder/` (issue 38): each is under 300 lines; none keeps module-level
mutable state (a value a later grading could see changed: a dict, a list, a mutable object; a cache belongs to
the object whose life it shares, or is a ``functools.cache`` of a frozen record); and none defines a function
called only ``check``, which says nothing of what it checks.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import re
import types
from pathlib import Path
from contextvars import ContextVar
from typing import Any

import numpy as np
import pytest

from course import ROOT

PACKAGE = ROOT / "autograder"
SCOPE = sorted(path for path in PACKAGE.rglob("*.py") if path.name != "nbgrader_config.py")
# A ContextVar's value lives in each context, not in the module; a type alias names types.
IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, range, Path, re.Pattern, type, types.UnionType,
             types.GenericAlias, ContextVar, types.FunctionType,
             types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType, enum.Enum,
             type(np.allclose), np.ufunc)  # numpy's functions: dispatchers of __array_function__, and ufuncs


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _assigned(tree: ast.Module) -> list[str]:
    """The names a module binds by assignment at its top level (in its ``if`` and ``try`` blocks too)."""
    names: list[str] = []
    blocks = list(tree.body)
    while blocks:
        node = blocks.pop()
        if isinstance(node, (ast.If, ast.Try)):
            blocks += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                       *(item for handler in getattr(node, "handlers", []) for item in handler.body)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)]
    return names


def immutable(value: Any) -> bool:
    """Whether ``value`` can never change: a number, string, class or function, a tuple or frozenset of such,
    a read-only mapping of such, or a frozen dataclass of such."""
    if isinstance(value, (tuple, frozenset)):
        return all(immutable(item) for item in value)
    if isinstance(value, types.MappingProxyType):
        return all(immutable(key) and immutable(item) for key, item in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return value.__dataclass_params__.frozen and all(immutable(getattr(value, field.name))
                                                        for field in dataclasses.fields(value))
    return isinstance(value, IMMUTABLE)


@pytest.mark.parametrize("path", SCOPE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_module_is_under_300_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines < 300, f"{path.relative_to(ROOT)} has {lines} lines: split it by job (issue 38)"


@pytest.mark.parametrize("path", SCOPE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_module_keeps_no_mutable_state(path: Path) -> None:
    tree = ast.parse(path.read_text())
    module = importlib.import_module(_module_name(path))
    mutable = {name: type(getattr(module, name)).__name__ for name in _assigned(tree)
               if not immutable(getattr(module, name))}
    assert not mutable, f"{module.__name__} keeps module-level mutable state: {mutable}"
    rebinds = [node.names for node in ast.walk(tree) if isinstance(node, ast.Global)]
    assert not rebinds, f"{module.__name__} rebinds module globals from a function: {rebinds}"


@pytest.mark.parametrize("path", SCOPE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_function_is_called_only_check(path: Path) -> None:
    named = [node.lineno for node in ast.parse(path.read_text()).body
             if isinstance(node, ast.FunctionDef) and node.name == "check"]
    assert not named, f"{path.relative_to(ROOT)} defines check() (line {named}): name what it checks"


@pytest.mark.parametrize("value", [{}, [], {"a": 1}, set(), bytearray(b"x"), types.SimpleNamespace(),
                                   (1, []), types.MappingProxyType({"a": []})])
def test_a_mutable_value_is_told_apart(value: Any) -> None:
    assert not immutable(value)


def test_the_rules_cover_every_module_of_the_package() -> None:
    names = {str(path.relative_to(PACKAGE)) for path in SCOPE}
    assert {"channel/served.py", "checks.py", "sandbox/zygote.py", "harness/notebook.py", "workers/worker.py",
            "grading/run.py", "reports/report.py", "lms/export.py", "submissions/find.py", "records.py"} <= names
