"""Gradebooks: nbgrader's schema, for the class (any SQLAlchemy URL) and for each assignment's template.

The class gradebook is where manual grading happens (nbgrader's formgrader or its gradebook API): a manually
graded answer or task is recorded as needing a manual grade (no auto score), a manual score given there is
never overwritten by a later run, and `ClassGradebook.manual_scores` reads the points given back.

A run's results are recorded by a worker of their own (`autograder.workers.recorder`), so that the grader imports
no nbgrader; the grader reads the manual points (`read_manual_scores`) once they are all recorded.
`ClassGradebook.record` commits in batches (every `BATCH` results or `BATCH_SECONDS`, and on `close`): a run that
dies loses at most the last batch from the gradebook, never a grade, since every result is stored before it is
recorded (`autograder.reports.state.save_state`) and the next run records the stored results again. nbgrader's
``update_or_create_*`` and ``add_*`` commit on every call (an assignment was a commit per cell, each a
journal written, synced and deleted), so an assignment, its notebooks and cells, a new student and a submission are
made here as those calls make them (the same rows), without their commits.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autograder.records import Result, Task, Template
    from autograder.reports.state import Stored


ManualScores = dict[tuple[str, str, str, str], float | None]  # (student, assignment, notebook, grade_id) -> points
BATCH = 100  # results recorded per commit at most
BATCH_SECONDS = 1.0  # seconds between commits at most, while results come in


class ClassGradebook:
    """The class gradebook (nbgrader's schema): assignments, students, per-cell auto scores, manual scores."""

    def __init__(self, db_url: str, templates: dict[str, Template], batch: int = BATCH,
                 batch_seconds: float = BATCH_SECONDS):
        """``batch``, ``batch_seconds``: `record` commits every that many results or seconds (and `close`)."""
        from nbgrader.api import Gradebook as NbgraderGradebook

        from autograder.nbgrader_course import course_id, stamp_new_gradebook

        stamp_new_gradebook(db_url)
        self.gradebook = NbgraderGradebook(db_url, course_id())
        self.templates = templates
        self.ready: set[str] = set()
        self.batch, self.batch_seconds = batch, batch_seconds
        self.pending = 0  # results recorded since the last commit
        self.committed = time.monotonic()

    def _ensure_assignment(self, template: Template) -> None:
        """``template``'s assignment, its notebooks and their cells, made or updated as nbgrader's
        ``update_or_create_*`` make them (the same rows), uncommitted: they are written with the batch."""
        if template.assignment in self.ready:
            return
        from nbgrader.api import Assignment, GradeCell, Notebook, SolutionCell, SourceCell, TaskCell
        from nbgrader.api import Gradebook as NbgraderGradebook

        from autograder.nbgrader_course import course_id

        gb, name = self.gradebook, template.assignment
        assignment = _upsert(gb.db, partial(gb.find_assignment, name),
                             partial(Assignment, name=name, course_id=gb.course_id))
        with NbgraderGradebook(f"sqlite:///{template.gradebook}", course_id()) as source:
            for notebook_name in template.notebooks:
                notebook = _upsert(gb.db, partial(gb.find_notebook, notebook_name, name),
                                   partial(Notebook, name=notebook_name, assignment=assignment))
                where = (notebook_name, name)
                found = source.find_notebook(*where)
                for cell in found.grade_cells:
                    _upsert(gb.db, partial(gb.find_grade_cell, cell.name, *where),
                            partial(GradeCell, name=cell.name, notebook=notebook),
                            max_score=cell.max_score, cell_type=cell.cell_type)
                for cell in found.task_cells:
                    _upsert(gb.db, partial(gb.find_task_cell, cell.name, *where),
                            partial(TaskCell, name=cell.name, notebook=notebook),
                            max_score=cell.max_score, cell_type=cell.cell_type)
                for cell in found.solution_cells:
                    _upsert(gb.db, partial(gb.find_solution_cell, cell.name, *where),
                            partial(SolutionCell, name=cell.name, notebook=notebook))
                for cell in found.source_cells:
                    _upsert(gb.db, partial(gb.find_source_cell, cell.name, *where),
                            partial(SourceCell, name=cell.name, notebook=notebook), cell_type=cell.cell_type,
                            locked=cell.locked, source=cell.source, checksum=cell.checksum)
        self.ready.add(template.assignment)

    def record(self, task: Task, result: Result) -> None:
        """Store one student's auto scores for one assignment (zeros when it could not be graded); a manually
        graded cell keeps its manual score, and needs a manual grade until it has one."""
        with warnings.catch_warnings():
            # nbgrader's own update_or_create_submission trips SQLAlchemy's autoflush warnings.
            warnings.simplefilter("ignore")
            try:
                self._record(task, result)
            except Exception:
                self.gradebook.db.rollback()  # this batch is recorded again from the stored results by the next run
                self.pending = 0
                self.ready.clear()  # the assignments made in this batch went with it
                raise
        self.pending += 1
        if self.pending >= self.batch or time.monotonic() - self.committed >= self.batch_seconds:
            self.commit()

    def commit(self) -> None:
        """Write what `record` recorded since the last commit."""
        self.gradebook.db.commit()
        self.pending, self.committed = 0, time.monotonic()

    def _record(self, task: Task, result: Result) -> None:
        template = self.templates.get(task.assignment)
        if template is None:
            return
        self._ensure_assignment(template)
        gb = self.gradebook
        if task.missing and self._has_submission(task):
            return  # 'no submission' never zeroes what a shared gradebook holds (another folder's grades)
        self._ensure_submission(task.assignment, task.student)
        scores = {(c.notebook, c.grade_id): c.points for c in result.cells}
        manual = {(c.notebook, c.grade_id) for c in result.cells if c.manual}
        grades = {(name, grade.name): grade for name in template.notebooks  # one query per notebook, not per cell
                  for grade in gb.find_submission_notebook(name, task.assignment, task.student).grades}
        for name, grade_id, _ in template.cells:
            grade = grades[(name, grade_id)]
            if (name, grade_id) in manual:
                grade.auto_score, grade.needs_manual_grade = None, grade.manual_score is None
            else:
                grade.auto_score, grade.needs_manual_grade = scores.get((name, grade_id), 0.0), False

    def _ensure_submission(self, assignment: str, student: str) -> None:
        """The student and their submission of ``assignment``, made as nbgrader makes them where missing (uncommitted)."""
        from nbgrader.api import Comment, Grade, MissingEntry, Student, SubmittedAssignment, SubmittedNotebook

        gb = self.gradebook
        try:
            gb.find_student(student)
        except MissingEntry:
            gb.db.add(Student(id=student))
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            submission = SubmittedAssignment(assignment=gb.find_assignment(assignment), student=gb.find_student(student))
            for notebook in submission.assignment.notebooks:
                submitted = SubmittedNotebook(notebook=notebook, assignment=submission)
                for cell in notebook.grade_cells:
                    Grade(cell_id=cell.id, notebook=submitted)
                for cell in notebook.solution_cells:
                    Comment(cell_id=cell.id, notebook=submitted)
                for cell in notebook.task_cells:
                    Comment(cell_id=cell.id, notebook=submitted)
                    Grade(cell_id=cell.id, notebook=submitted)
            gb.db.add(submission)

    def _has_submission(self, task: Task) -> bool:
        from nbgrader.api import MissingEntry

        try:
            self.gradebook.find_submission(task.assignment, task.student)
        except MissingEntry:
            return False
        return True

    def manual_scores(self, stored: dict[tuple[str, str], Stored]) -> ManualScores:
        """The points given by hand to every manually graded cell of ``stored`` (`autograder.reports.state.Stored` by
        (student, assignment)): None where none is given yet."""
        from nbgrader.api import MissingEntry

        given: ManualScores = {}
        for (student, assignment), entry in stored.items():
            for cell in (c for c in entry.result.cells if c.manual):
                try:
                    score = self.gradebook.find_grade(cell.grade_id, cell.notebook, assignment, student).manual_score
                except MissingEntry:
                    score = None
                given[(student, assignment, cell.notebook, cell.grade_id)] = score
        return given

    def close(self) -> None:
        """Commit what is recorded, and close the gradebook."""
        try:
            self.commit()
        finally:
            self.gradebook.close()


def _upsert(db: Any, find: Callable[[], Any], make: Callable[..., Any], **attrs: Any) -> Any:
    """nbgrader's ``update_or_create_*`` without its commit: the row ``find`` returns with ``attrs`` set, or where it
    raises nbgrader's MissingEntry, ``make(**attrs)`` added to the session ``db``."""
    from nbgrader.api import MissingEntry

    try:
        row = find()
    except MissingEntry:
        row = make(**attrs)
        db.add(row)
        return row
    for attr, value in attrs.items():
        setattr(row, attr, value)
    return row


def read_manual_scores(db_url: str, templates: dict[str, Template],
                       stored: dict[tuple[str, str], Stored]) -> ManualScores:
    """`ClassGradebook.manual_scores` of ``stored`` in the gradebook ``db_url``, opened for it and closed after."""
    gradebook = ClassGradebook(db_url, templates)
    try:
        return gradebook.manual_scores(stored)
    finally:
        gradebook.close()
