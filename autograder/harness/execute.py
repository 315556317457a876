"""nbgrader's Execute, with every test cell run by the trusted harness instead of the student's kernel.

`TrustedExecute` replaces nbgrader's `Execute` in Autograde's preprocessors (`autograder.harness.notebook`, one
instance per job), with `autograder.harness.kernel_manager.SandboxKernelManager` as its ``kernel_manager_class``. It
is given the assignment's cells as the gradebook holds them (`read_plan`, once per worker: the course's sources, never
the student's copy):

- a test cell (visible or hidden) runs here, in `autograder.harness.graded_cells.TrustedCells`. Meanwhile the
  kernel runs one line, ``autograder.channel.served.serve(...)``, which connects to this process's Unix socket
  and answers requests about the notebook's names until the test cell ends. The socket is bound in the
  job's channel folder (`autograder.sandbox.bwrap.Channel`: the grader's alone, read-only in the kernel) with
  its mode set as it is made (a umask): this process never acts by path on what the kernel can change.
  The cell's outputs are what the test printed, then what the student's code printed while it was
  called; its error, if any, is the test's;
- a given cell (locked code) runs in the kernel and here, from the gradebook's source;
- every other cell (the student's) runs in the kernel only. When the chapter has rules (``forbid``:
  `autograder.sandbox.rules`), its source is read first: a graded definition that names a forbidden call costs
  every graded name of its cell the tests that start ``test_<name>``, each of which then fails, without
  running, with a `autograder.sandbox.rules.RULE_ERROR` that names the rule and the line.

The cell's outputs then go through nbgrader as before, which scores the cell from them. While a test
cell runs, `autograder.measure.TARGET` is the kernel's process (set for the cell, then reset), so ``peak_memory``
measures it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient.exceptions import DeadKernelError
from nbclient.util import run_sync
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute
from traitlets import Bool, Dict, Instance, List, Unicode

from autograder import measure

from autograder.sandbox import rules
from autograder.sandbox.limits import Limits
from autograder.channel.session import Session
from autograder.harness.hidden_seed import HIDDEN_KEY
from autograder.harness.graded_cells import CellKind, CellRun, TrustedCells, answer_names, cell_kind
from autograder.harness.kernel_manager import SandboxKernelManager
from autograder.sandbox.home import KernelHome
from autograder.sandbox.zygote_client import WarmLaunch

DIED = "DeadKernelError"
SERVE = "__import__('autograder.channel.served').channel.served.serve({path!r}, globals())"
SOCKET_UMASK = 0o111  # the channel's socket is made 0666: the kernel, another user when the grader is root, connects


@dataclass
class Spent:
    """Seconds the notebooks of one job spent in test cells (here) and in every other code cell (in the kernel),
    and when the job's first kernel was launched (`autograder.harness.kernel_manager.SandboxKernelManager`)."""

    tests: float = 0.0
    cells: float = 0.0
    launched: float | None = None


@dataclass(frozen=True)
class Plan:
    """The assignment's code cells by grade_id, from the gradebook."""

    tests: dict[str, str]
    given: dict[str, str]
    names: tuple[str, ...]


def read_plan(gradebook: Gradebook, notebook: str, assignment: str) -> Plan:
    """Which cells are tests and which are given, with the course's sources, and the answers' names, as
    ``gradebook`` holds them."""
    found = gradebook.find_notebook(notebook, assignment)
    solutions = {cell.name for cell in found.solution_cells}
    graded = {cell.name for cell in found.grade_cells}
    kinds = {cell.name: (cell_kind(graded=cell.name in graded, solution=cell.name in solutions, locked=cell.locked),
                         cell.source) for cell in found.source_cells if cell.cell_type == "code"}
    tests = {name: source for name, (kind, source) in kinds.items() if kind is CellKind.TEST}
    given = {name: source for name, (kind, source) in kinds.items() if kind is CellKind.GIVEN}
    names = answer_names([source for name, (_, source) in kinds.items() if name in solutions])
    return Plan(tests, given, names)


def _outputs(run: CellRun) -> list:
    outputs = []
    if run.stdout:
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text=run.stdout))
    if run.stderr:
        outputs.append(nbformat.v4.new_output("stream", name="stderr", text=run.stderr))
    if run.error is not None:
        outputs.append(nbformat.v4.new_output("error", ename=run.error.ename, evalue=run.error.evalue,
                                              traceback=list(run.error.traceback)))
    return outputs


class TrustedExecute(Execute):
    """Execute whose test cells run outside the student's kernel (module docstring)."""

    channel_folder = Unicode("", help="The job's channel folder, by the path both this process and the sandboxed "
                                      "kernel reach it (`autograder.sandbox.bwrap.Channel.link`): the channel's sockets "
                                      "go there. Only this process can write it.").tag(config=True)
    forbid = List(Unicode(), help="The chapter's rules (`autograder.sandbox.rules.RULES`)").tag(config=True)
    hidden_key = Unicode("", help="The hand-in's key (`autograder.grading.secret`), bound in the test cells' namespace "
                                  "for `autograder.checks.hidden_seed`; '' keeps the hidden tests' fixed "
                                  "seeds.").tag(config=True)
    tensors = Bool(True, help="Whether torch tensors can cross the channel (`autograder.records.Job.tensors`): False "
                              "for a kernel that cannot import torch")
    warm = Instance(WarmLaunch, allow_none=True, help="The job's warm start (None: a cold kernel), handed to its "
                                                      "kernel manager")
    home = Instance(KernelHome, allow_none=True, help="How this worker reaches the sandboxed kernel's home (None: no "
                                                      "sandbox), handed to its kernel manager")
    plans = Dict(help="The assignment's `Plan` of each notebook it knows, read once by the worker "
                      "(`autograder.harness.autograde.Assignment`): only those notebooks are executed")

    def __init__(self, **kwargs: object) -> None:
        """The kernel manager class is `SandboxKernelManager` unless one is given (nbgrader's Execute passes its own
        as a keyword, which a configured value would not override)."""
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(**kwargs)
        self.spent = Spent()  # the whole job's: one instance runs each of its notebooks

    def create_kernel_manager(self) -> SandboxKernelManager:
        """nbclient's kernel manager, given the job's warm start and kernel home."""
        km = super().create_kernel_manager()
        km.warm, km.home = self.warm, self.home
        return km

    def preprocess(self, nb, resources, km=None):  # noqa: ANN001, ANN201 - nbconvert's signature
        info = resources["nbgrader"]
        self.plan = self.plans[info["notebook"]]
        self.trusted = TrustedCells(self.plan.names, float(self.timeout or Limits().cell_seconds),
                                    {"__name__": "__main__", HIDDEN_KEY: self.hidden_key})
        self.session = Session(float(self.timeout or Limits().cell_seconds), self.tensors)
        self.serves = 0
        self.kernel_pid: int | None = None
        self.looked_for_kernel = False
        self.died = ""
        self.broken: dict[str, list[str]] = {}  # graded name -> the uses of forbidden calls in its cell
        try:
            return super().preprocess(nb, resources, km)
        finally:
            self.session.end()

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):  # noqa: ANN001, ANN201
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if not self.looked_for_kernel:  # before the first cell: no student code has run yet
            self.looked_for_kernel = True
            self.kernel_pid = self.km.kernel_pid()
            if self.spent.launched is None:
                self.spent.launched = self.km.launched
        if cell.cell_type != "code":
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        if grade_id in self.plan.tests:
            cell.source = self.plan.tests[grade_id]
        elif grade_id in self.plan.given:
            cell.source = self.plan.given[grade_id]
        if self.died:  # nothing runs after the kernel died; the tests that needed it fail with the reason
            cell.outputs = [nbformat.v4.new_output("error", ename=DIED, evalue=self.died, traceback=[self.died])]
            return cell
        began = time.perf_counter()
        try:
            if grade_id in self.plan.tests:
                await self._run_test(cell, cell_index, grade_id)
                self.spent.tests += time.perf_counter() - began
                return cell
            if grade_id in self.plan.given:
                self.trusted.run_given(cell.source, grade_id)
            else:
                self._read_rules(cell.source)
            executed = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            self.spent.cells += time.perf_counter() - began
            return executed
        except DeadKernelError:
            self.died = (f"the kernel died in cell '{grade_id or cell_index}' (a memory or CPU time limit, or the "
                         "notebook ended it): the cells after it did not run")
            cell.outputs = [nbformat.v4.new_output("error", ename=DIED, evalue=self.died, traceback=[self.died])]
            self.nb["cells"][cell_index] = cell
            return cell

    execute_cell = run_sync(async_execute_cell)  # nbclient binds its own coroutine here, not an override

    def _read_rules(self, source: str) -> None:
        """Note which graded names of a student's cell break the chapter's rules (module docstring)."""
        found = rules.broken(source, rules.parse(",".join(self.forbid)), self.plan.names)
        uses = [use for lines in found.values() for use in lines]
        for name in rules.defined(source, self.plan.names) if uses else ():
            self.broken[name] = uses

    def _rule_broken(self, grade_id: str) -> str:
        """The message of a test of a name that broke a rule ("" when it broke none)."""
        tested = [name for name in self.broken if grade_id.startswith(f"test_{name}")]
        if not tested:
            return ""
        name = max(tested, key=len)
        return (f"{name} breaks this chapter's rules, so this test gives it no points: "
                + "; ".join(self.broken[name]))

    async def _run_test(self, cell, cell_index: int, grade_id: str) -> None:  # noqa: ANN001
        broken = self._rule_broken(grade_id)
        if broken:
            cell.outputs = [nbformat.v4.new_output("error", ename=rules.RULE_ERROR, evalue=broken, traceback=[broken])]
            cell.execution_count = None
            self.nb["cells"][cell_index] = cell
            return
        self.serves += 1
        path = str(Path(self.channel_folder) / f"channel-{self.serves}.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(SOCKET_UMASK)
        try:
            listener.bind(path)
        finally:
            os.umask(previous)
        listener.listen(1)
        listener.setblocking(False)
        serve_cell = nbformat.v4.new_code_cell(SERVE.format(path=path))
        serving = asyncio.ensure_future(super().async_execute_cell(serve_cell, cell_index, None, False))
        accepting = asyncio.ensure_future(asyncio.get_running_loop().sock_accept(listener))
        try:
            await asyncio.wait([serving, accepting], timeout=float(self.timeout or Limits().cell_seconds),
                               return_when=asyncio.FIRST_COMPLETED)
            session = None
            if accepting.done() and not accepting.cancelled() and accepting.exception() is None:
                connection, _ = accepting.result()
                connection.setblocking(True)
                self.session.attach(connection)
                session = self.session
            else:
                accepting.cancel()
            target = measure.TARGET.set(self.kernel_pid or measure.UNKNOWN)  # what ``peak_memory`` measures
            try:
                run = self.trusted.run_test(cell.source, grade_id, session)
            finally:
                measure.TARGET.reset(target)
            self.session.end()
            if not serving.done():
                await serving
        finally:
            listener.close()
            Path(path).unlink(missing_ok=True)
        cell.outputs = _outputs(run) + [output for output in serve_cell.outputs
                                        if output.output_type == "stream" or output.output_type == "error"]
        cell.execution_count = None
        self.nb["cells"][cell_index] = cell  # nbclient put the serving cell there
