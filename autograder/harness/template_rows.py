"""What nbgrader's per-cell gradebook lookups find in a kept assignment, read once when a worker loads it.

nbgrader's OverwriteCells looks up each cell's template (``find_source_cell``, ``find_graded_cell``) and SaveAutoGrades
each cell's grade and comment (``find_grade``, ``find_comment``): a query of up to six joins built anew for each cell
(0.46 CPU-s between the two steps in a run of the 18-notebook class; 0.15 with these). In a kept assignment
(`autograder.harness.autograde.Assignment`) neither changes from job to job: the template's cells are the template's,
and every job grades the same submission, whose rows the template holds and each job's transaction gives back
(`autograder.harness.kept_gradebook.KeptGradebook`). `TemplateRows` reads them once, with nbgrader's own finds;
`JobRows` serves SaveAutoGrades in one job. A cell the template lacks is found (or refused with `MissingEntry`) by
nbgrader itself, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from nbgrader.api import Comment, Grade, Gradebook, MissingEntry


@dataclass(frozen=True)
class SourceCellRow:
    """What OverwriteCells reads of one of nbgrader's SourceCell rows."""

    name: str
    cell_type: str
    locked: bool
    checksum: str | None
    source: str


@dataclass(frozen=True)
class GradedCellRow:
    """What OverwriteCells reads of one of nbgrader's GradeCell or TaskCell rows."""

    max_score: float


class TemplateRows:
    """One assignment's notebooks' kernelspecs, source cells and graded cells, and the ids of ``student``'s grades
    and comments, as nbgrader's finds give them in ``gradebook`` (the template's: it holds the submission every job
    grades). It answers OverwriteCells as a gradebook would (``find_source_cell``, ``find_graded_cell``)."""

    def __init__(self, gradebook: Gradebook, assignment: str, student: str) -> None:
        self.assignment, self.student = assignment, student
        self.source: dict[tuple[str, str], SourceCellRow] = {}
        self.graded: dict[tuple[str, str], GradedCellRow] = {}
        self.grades: dict[tuple[str, str], str] = {}  # (notebook, cell) -> the Grade's id
        self.comments: dict[tuple[str, str], str] = {}  # (notebook, cell) -> the Comment's id
        self.kernelspecs: dict[str, str | None] = {}  # notebook -> its kernelspec's JSON (OverwriteKernelspec's)
        for notebook in gradebook.find_assignment(assignment).notebooks:
            nb = notebook.name
            self.kernelspecs[nb] = notebook.kernelspec
            for cell in notebook.source_cells:
                self.source[nb, cell.name] = SourceCellRow(cell.name, cell.cell_type, cell.locked, cell.checksum,
                                                           cell.source)
            for name in {cell.name for cell in (*notebook.grade_cells, *notebook.task_cells)}:
                self.graded[nb, name] = GradedCellRow(gradebook.find_graded_cell(name, nb, assignment).max_score)
                self.grades[nb, name] = gradebook.find_grade(name, nb, assignment, student).id
            for name in {cell.name for cell in (*notebook.solution_cells, *notebook.task_cells)}:
                self.comments[nb, name] = gradebook.find_comment(name, nb, assignment, student).id

    def find_source_cell(self, name: str, notebook: str, assignment: str) -> SourceCellRow:
        row = self.source.get((notebook, name)) if assignment == self.assignment else None
        if row is None:
            raise MissingEntry(f"No such source cell: {assignment}/{notebook}/{name}")
        return row

    def find_graded_cell(self, name: str, notebook: str, assignment: str) -> GradedCellRow:
        row = self.graded.get((notebook, name)) if assignment == self.assignment else None
        if row is None:
            raise MissingEntry(f"No such grade cell: {assignment}/{notebook}/{name}")
        return row


class JobRows:
    """SaveAutoGrades's gradebook in one job: the submission's grades and comments that ``rows`` knows, loaded into
    the job's session (``kept.db``) in one query each on the first find and kept by id; any other as ``kept`` finds
    it. ``db`` is the job's session, which SaveAutoGrades commits."""

    def __init__(self, kept: Gradebook, rows: TemplateRows) -> None:
        self.kept, self.rows, self.db = kept, rows, kept.db
        self.loaded: dict[tuple[type, str], Grade | Comment] | None = None

    def find_grade(self, name: str, notebook: str, assignment: str, student: str) -> Grade:
        found = self._known(Grade, self.rows.grades, name, notebook, assignment, student)
        return found if found is not None else self.kept.find_grade(name, notebook, assignment, student)

    def find_comment(self, name: str, notebook: str, assignment: str, student: str) -> Comment:
        found = self._known(Comment, self.rows.comments, name, notebook, assignment, student)
        return found if found is not None else self.kept.find_comment(name, notebook, assignment, student)

    def _known(self, model: type, ids: dict[tuple[str, str], str], name: str, notebook: str, assignment: str,
               student: str) -> Grade | Comment | None:
        if (assignment, student) != (self.rows.assignment, self.rows.student) or (notebook, name) not in ids:
            return None
        if self.loaded is None:  # the session's own objects: what a find would return, each commit's changes kept
            self.loaded = {(type(row), row.id): row for row in (
                *self.db.query(Grade).filter(Grade.id.in_(list(self.rows.grades.values()))),
                *self.db.query(Comment).filter(Comment.id.in_(list(self.rows.comments.values()))))}
        return self.loaded[model, ids[notebook, name]]
