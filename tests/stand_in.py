"""Run a graded notebook as trusted scoring does, nbgrader-style, with some solution cells replaced.

Used by the wrong-answer bank: hundreds of variants cannot each afford a kernel start. The student's
cells (answers, and the given cells too) run in a stand-in for the kernel, one long-lived
``python -m tests.stand_in_kernel`` subprocess reset between notebooks; the test cells run here, in
`autograder.harness.graded_cells.TrustedCells`, reaching the notebook's names through the channel
(`autograder.channel.session`), exactly as the grader runs them: which cell is a test, given or the student's
is the grader's own `autograder.harness.graded_cells.cell_kind`. The scoring follows nbgrader's rule for
autograded test cells: a test cell earns its points when it raises nothing and nothing (its own
output or the student code it called) writes to stderr. `tests/grading/test_grading.py` checks that this
agrees with a real `python -m autograder grade` on a sample of variants.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder import measure
from autograder.channel.session import Session, wait_for_connection
from autograder.sandbox.bwrap import MALLOC
from autograder.harness.hidden_seed import HIDDEN_KEY
from autograder.harness.graded_cells import CellKind, CellRun, TrustedCells, answer_names, cell_kind
from course import ROOT
from course.chapters import chapter
from course.notebooks import code_cells

CALL_SECONDS = 120


@dataclass(frozen=True)
class TestCell:
    """The outcome of one graded test cell."""

    grade_id: str
    points: float
    passed: bool
    message: str


class StandIn:
    """The stand-in kernel: a served subprocess and the connection to it, started again when it broke."""

    def __init__(self) -> None:
        self._start()

    def _start(self) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="ag-bank-")
        path = str(Path(self.folder.name) / "s")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        env = dict(os.environ, **MALLOC, OMP_WAIT_POLICY="PASSIVE")
        self.process = subprocess.Popen([sys.executable, "-m", "tests.stand_in_kernel", path], env=env, cwd=ROOT)
        self.sock = wait_for_connection(listener, time.monotonic() + 60)
        listener.close()
        self.last: Session | None = None

    def session(self) -> Session:
        """A fresh trusted session on the same connection, the stand-in's namespace emptied; on a new stand-in
        when the last session broke the connection or the process ended."""
        if self.process.poll() is not None or (self.last is not None and self.last.broken):
            self.close()
            self._start()
        session = Session(CALL_SECONDS)
        session.attach(self.sock)
        session.request({"op": "reset"})
        self.last = session
        return session

    def close(self) -> None:
        self.sock.close()
        self.process.kill()
        self.process.wait()
        self.folder.cleanup()


def _failure(run: CellRun) -> str | None:
    if run.error is not None:
        return f"{run.error.ename}: {run.error.evalue}"
    if run.stderr:
        return f"wrote to stderr: {run.stderr[:500]}"
    return None


def run_notebook(stand_in: StandIn, assignment: str, replacements: dict[str, str] | None = None,
                 hidden_key: str = "", until: Callable[[TestCell], bool] | None = None) -> list[TestCell]:
    """Run the solution notebook top to bottom in ``stand_in`` (the session's ``bank_kernel``, tests/conftest.py)
    with cells replaced by grade_id; score its test cells. With a ``hidden_key`` the hidden
    tests draw their inputs as `grade` does for a hand-in of that key (`autograder.grading.secret`); without one, from
    their fixed seeds, as in a plain kernel. With ``until``, the run stops after the first test cell whose result it
    holds for, once every replacement is in: what the cells after it score cannot undo that result."""
    replacements = dict(replacements or {})
    cells = code_cells(chapter(assignment).solution)
    trusted = TrustedCells(answer_names([source for meta, source in cells if meta.get("solution")]),
                           namespace={"__name__": "__main__", HIDDEN_KEY: hidden_key})
    session = stand_in.session()
    measure.TARGET.set(stand_in.process.pid)
    results = []
    for meta, source in cells:
        grade_id = meta.get("grade_id", "")
        source = replacements.pop(grade_id, source)
        kind = cell_kind(graded=bool(meta.get("grade")), solution=bool(meta.get("solution")),
                         locked=bool(meta.get("locked")))
        if kind is CellKind.TEST:
            run = trusted.run_test(source, grade_id, session)
            printed = {} if session.broken else session.request({"op": "output"})[0]
            run = CellRun(run.stdout + printed.get("stdout", ""), run.stderr + printed.get("stderr", ""), run.error)
            failure = _failure(run)
            results.append(TestCell(grade_id, float(meta.get("points", 0)), failure is None, failure or ""))
            if until is not None and not replacements and until(results[-1]):
                return results
            continue
        if kind is CellKind.GIVEN:
            trusted.run_given(source, grade_id)
        if not session.broken:
            session.request({"op": "exec"}, source)
    if replacements:
        raise KeyError(f"no such cells in {assignment}: {sorted(replacements)}")
    return results


def score(results: list[TestCell]) -> tuple[float, float]:
    """(points earned, points possible)."""
    return sum(r.points for r in results if r.passed), sum(r.points for r in results)
