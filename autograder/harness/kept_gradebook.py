"""One nbgrader gradebook per kept assignment, lent to nbgrader's preprocessors one job at a time.

nbgrader's preprocessors that read or write the gradebook (OverwriteKernelspec, OverwriteCells, SaveAutoGrades,
AssignLatePenalties) each open ``Gradebook(db_url)`` on every notebook: a fresh SQLAlchemy engine (its queries
compiled again, the tables inspected, the course checked), and SaveAutoGrades commits once per graded cell.
`KeptGradebook` is made once per kept assignment (`autograder.harness.autograde.Assignment`): one engine, one
connection, its compiled queries kept. `KeptGradebook.job` opens one transaction for a job; the steps' commits
inside it are savepoints (SQLAlchemy's ``join_transaction_mode="create_savepoint"``) that keep what the session
loaded (``expire_on_commit=False``), and the job ends by rolling the whole transaction back, so nothing reaches the
disk and no job's rows reach the next.

The ``Kept*`` steps are nbgrader's, subclassed: each takes the kept gradebook (its ``kept`` trait) where nbgrader's
opens one from ``resources['nbgrader']['db_url']``, and does what nbgrader's ``preprocess`` does with it.
`KeptOverwriteKernelspec`, `KeptOverwriteCells` and `KeptSaveAutoGrades` find the template's and the submission's
rows through what `autograder.harness.template_rows` read once per kept assignment, where nbgrader's steps query the
gradebook for each notebook or cell.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.preprocessors import (AssignLatePenalties, NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec,
                                    SaveAutoGrades)
from sqlalchemy import event
from sqlalchemy.orm import scoped_session, sessionmaker
from traitlets import Instance

from autograder.harness.template_rows import JobRows, TemplateRows


def _manual_transactions(dbapi_connection: Any, _: Any) -> None:
    """SQLAlchemy's ``connect`` event: pysqlite leaves BEGIN to SQLAlchemy (its own would break savepoints), and
    commits (savepoints' ends, the set-up's) do not wait for the disk (SQLAlchemy's pysqlite recipe)."""
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA synchronous = OFF")


def _begin(connection: Any) -> None:
    """SQLAlchemy's ``begin`` event: the BEGIN pysqlite no longer emits."""
    connection.exec_driver_sql("BEGIN")


class KeptGradebook(Gradebook):
    """nbgrader's `Gradebook` of one kept assignment, one engine and connection for every job (module docstring).
    ``close`` (which nbgrader's ``with gradebook:`` calls) keeps it open; `dispose` closes it."""

    def __init__(self, db_url: str, course_id: str) -> None:
        super().__init__(db_url, course_id)
        self.db.remove()
        event.listen(self.engine, "connect", _manual_transactions)
        event.listen(self.engine, "begin", _begin)
        self.engine.dispose()  # nbgrader's set-up connected before these events were listened to
        self.connection = self.engine.connect()
        # Nothing but this session writes the job's rows: a commit (a savepoint's end) need not expire what it
        # loaded, which nbgrader's steps would otherwise load again, row by row, after every graded cell.
        self.db = scoped_session(sessionmaker(bind=self.connection, autoflush=True, future=True,
                                              expire_on_commit=False, join_transaction_mode="create_savepoint"))

    @contextmanager
    def job(self) -> Iterator[KeptGradebook]:
        """One job's use: everything it writes is rolled back when it ends, failed or not."""
        outer = self.connection.begin()
        try:
            yield self
        finally:
            self.db.remove()
            outer.rollback()

    def close(self) -> None:
        """Kept open: nbgrader's steps close each gradebook they open."""

    def dispose(self) -> None:
        self.db.remove()
        self.connection.close()
        self.engine.dispose()


def _on_kept(step: NbGraderPreprocessor, resources: ResourcesDict, kept: KeptGradebook, student: bool = False) -> None:
    """Point one of nbgrader's per-notebook steps at this job's notebook and at the kept gradebook, as its own
    ``preprocess`` would at a gradebook it opens (with ``student``, the student too: the steps that write the
    student's rows)."""
    ids = resources["nbgrader"]
    step.notebook_id, step.assignment_id, step.db_url = ids["notebook"], ids["assignment"], ids["db_url"]
    if student:
        step.student_id = ids["student"]
    step.gradebook = kept


class KeptOverwriteKernelspec(OverwriteKernelspec):
    """nbgrader's OverwriteKernelspec on the kept gradebook: the template's kernelspec replaces the submission's, as
    the assignment's `TemplateRows` (its ``rows`` trait) read it."""

    kept = Instance(KeptGradebook)
    rows = Instance(TemplateRows)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        ids = resources["nbgrader"]
        known = ids["assignment"] == self.rows.assignment and ids["notebook"] in self.rows.kernelspecs
        kernelspec = (self.rows.kernelspecs[ids["notebook"]] if known
                      else self.kept.find_notebook(ids["notebook"], ids["assignment"]).kernelspec)
        if kernelspec is not None and (kernelspec := json.loads(kernelspec)):
            nb.metadata["kernelspec"] = kernelspec
        return nb, resources


class KeptOverwriteCells(OverwriteCells):
    """nbgrader's OverwriteCells on the kept gradebook: locked cells, points and types restored from the template,
    each cell's looked up in the assignment's `TemplateRows` (its ``rows`` trait)."""

    kept = Instance(KeptGradebook)
    rows = Instance(TemplateRows)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        _on_kept(self, resources, self.kept)
        self.gradebook = self.rows  # what OverwriteCells's preprocess_cell looks up, cell by cell
        try:
            nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)  # each cell: OverwriteCells's
        finally:
            self.gradebook = self.kept
        if self.add_missing_cells:
            nb, resources = self.add_missing_grade_cells(nb, resources)
            nb, resources = self.add_missing_task_cells(nb, resources)
        return nb, resources


class KeptSaveAutoGrades(SaveAutoGrades):
    """nbgrader's SaveAutoGrades on the kept gradebook (its commit per cell a savepoint of the job's transaction),
    each cell's grade and comment found through the assignment's `TemplateRows` (its ``rows`` trait)."""

    kept = Instance(KeptGradebook)
    rows = Instance(TemplateRows)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        _on_kept(self, resources, self.kept, student=True)
        self.gradebook = JobRows(self.kept, self.rows)  # this job's: the rows loaded into this job's session
        try:
            return NbGraderPreprocessor.preprocess(self, nb, resources)  # each cell: SaveAutoGrades's
        finally:
            self.gradebook = self.kept


class KeptAssignLatePenalties(AssignLatePenalties):
    """nbgrader's AssignLatePenalties on the kept gradebook: the notebook's penalty reset, then set if late."""

    kept = Instance(KeptGradebook)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        _on_kept(self, resources, self.kept, student=True)
        self.init_plugin()
        nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
        submission = self.kept.find_submission(self.assignment_id, self.student_id)
        notebook = self.kept.find_submission_notebook(self.notebook_id, self.assignment_id, self.student_id)
        notebook.late_submission_penalty = None
        if submission.total_seconds_late > 0:
            self.log.warning(f"{submission} is {submission.total_seconds_late} seconds late")
            penalty = self.plugin_inst.late_submission_penalty(self.student_id, notebook.score,
                                                               submission.total_seconds_late)
            self.log.warning(f"Late submission penalty: {penalty}")
            if penalty is not None:
                notebook.late_submission_penalty = self._check_late_penalty(notebook, penalty)
        self.kept.db.commit()
        return nb, resources


KEPT_STEPS = MappingProxyType({OverwriteKernelspec: KeptOverwriteKernelspec, OverwriteCells: KeptOverwriteCells,
                               SaveAutoGrades: KeptSaveAutoGrades, AssignLatePenalties: KeptAssignLatePenalties})
