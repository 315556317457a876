"""Test cells, run in the trusted harness: their own namespace, the notebook's names as remote handles.

`TrustedCells` holds one notebook's trusted namespace. The given cells (locked code the course
wrote: imports, helpers) run in it from the gradebook's source; each test cell, visible or hidden,
runs in it with the names the notebook's answer cells define (`answer_names`) bound to what the
student's kernel holds now (`autograder.channel.session`). A cell's verdict follows nbgrader's rule: it
fails when it raises or writes to stderr (warnings included).
"""

from __future__ import annotations

import ast
import contextlib
import enum
import io
import linecache
import sys
import traceback
import warnings
from dataclasses import dataclass, field

from autograder.channel.wire import ChannelError, RemoteException
from autograder.channel.session import Session

OUTPUT_CHARS = 100_000


@dataclass(frozen=True)
class CellError:
    """An exception a cell raised, as nbgrader records it."""

    ename: str
    evalue: str
    traceback: tuple[str, ...]


@dataclass(frozen=True)
class CellRun:
    """What one cell printed, and the exception it raised (None when it ran through)."""

    stdout: str = ""
    stderr: str = ""
    error: CellError | None = None

    @property
    def passed(self) -> bool:
        """nbgrader's rule: no exception and nothing on stderr."""
        return self.error is None and not self.stderr


class CellKind(enum.Enum):
    """What the trusted harness does with a code cell of the course's source."""

    TEST = "test"  # graded, not a solution: runs here, in `TrustedCells`
    GIVEN = "given"  # locked code the course wrote: runs here and in the kernel
    ANSWER = "answer"  # the student's (a solution cell, or one of their own): runs in the kernel only


def cell_kind(*, graded: bool, solution: bool, locked: bool) -> CellKind:
    """A code cell's kind from its nbgrader flags (the course's, never the student's copy)."""
    if solution:
        return CellKind.ANSWER
    if graded:
        return CellKind.TEST
    return CellKind.GIVEN if locked else CellKind.ANSWER


def answer_names(sources: list[str]) -> tuple[str, ...]:
    """The top-level names the answer cells' sources define (functions, classes, assignments, imports)."""
    names: list[str] = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names += [t.id for t in targets if isinstance(t, ast.Name)]
    return tuple(dict.fromkeys(names))


@dataclass
class TrustedCells:
    """One notebook's trusted namespace; ``names``: what the answer cells define; ``cell_seconds``: how long the
    student's code may take in all during one test cell (its calls and its calls back)."""

    names: tuple[str, ...]
    cell_seconds: float = float("inf")
    namespace: dict = field(default_factory=lambda: {"__name__": "__main__"})
    count: int = 0

    def run_given(self, source: str, label: str) -> CellRun:
        """Run a given cell (the course's own code) here too, so that tests find its imports and helpers."""
        return self._run(source, label)

    def run_test(self, source: str, label: str, session: Session | None) -> CellRun:
        """Run a test cell with the notebook's names bound to its kernel's objects through ``session``."""
        try:
            if session is None:
                raise ChannelError("the notebook's kernel could not be reached")
            session.start_cell(self.cell_seconds)
            values = session.lookup(list(self.names))
        except ChannelError as error:
            return CellRun(error=CellError("ChannelError", str(error), (f"ChannelError: {error}",)))
        for name, value in values.items():
            if type(value) is RemoteException:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = value
        return self._run(source, label)

    def _run(self, source: str, label: str) -> CellRun:
        self.count += 1
        filename = f"<{label} #{self.count}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        out, err = io.StringIO(), io.StringIO()
        error = None
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            warnings.showwarning = _show  # to the cell's stderr, whoever (pytest, say) replaced the default
            try:
                exec(compile(source, filename, "exec"), self.namespace)  # noqa: S102 - the course's own test code
            except BaseException as raised:  # noqa: BLE001 - a failing test is data here
                if isinstance(raised, KeyboardInterrupt):
                    raise
                error = _error(raised, filename)
        return CellRun(out.getvalue()[:OUTPUT_CHARS], err.getvalue()[:OUTPUT_CHARS], error)


def _show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001 - warnings' signature
    """Write a warning as Python does by default, to the stderr the cell runs with."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _error(raised: BaseException, filename: str) -> CellError:
    """The exception with a traceback of the cell's own frames only (the harness's are nobody's business)."""
    frames = [frame for frame in traceback.extract_tb(raised.__traceback__) if frame.filename == filename]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames),
             *traceback.format_exception_only(type(raised), raised)]
    return CellError(type(raised).__name__, str(raised), tuple(lines))
