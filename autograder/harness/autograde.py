"""nbgrader's Autograde of one submission, in memory, from what the worker keeps of its assignment.

nbgrader's Autograde converter builds a course per run: the released files copied as the source, the
submission written as files, each notebook read, sanitised, written, read again, executed and written, the
gradebook opened a dozen times. Here the worker keeps, per assignment template (`Assignments`, keyed by the
template's folder and key):

- the assignment's test plans (`autograder.harness.execute.Plan`) and the template's rows nbgrader's steps look up
  (`autograder.harness.template_rows.TemplateRows`), read once, through the kept gradebook below (its one engine)
  in a transaction rolled back like a job's;
- nbgrader's preprocessors, configured once (none of them keeps a job's state between calls): Autograde's
  ``sanitize_preprocessors`` (ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells,
  CheckCellMetadata) and its ``autograde_preprocessors`` after Execute (IgnorePattern, ClearMetadata,
  LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata), those that use the gradebook as their
  `autograder.harness.kept_gradebook` subclasses, CheckCellMetadata as
  `autograder.harness.cell_metadata.CompiledCheckCellMetadata` (its schema compiled once); each job brings its own
  Execute (`autograder.harness.execute.TrustedExecute`, which keeps the job's `Spent`);
- one open gradebook (`autograder.harness.kept_gradebook.KeptGradebook`): a copy of the template's, which holds
  the submission's rows already, made with the template as Autograde's ``init_assignment`` makes them (student
  ``student``, no timestamp: never late). Each job runs in one transaction of it (`KeptGradebook.job`), rolled
  back when the job ends, so no job's rows reach the next and nothing is written to the disk.

`autograde` then does what Autograde does for one student, on the notebooks in memory: a notebook the
gradebook does not know is skipped, one not handed in scores 0 on every cell, and each notebook goes through
the sanitising preprocessors, then (with ``NBGRADER_EXECUTION=autograde``) the grading ones, each stage
normalised and validated as nbconvert's exporter does. `read_scores` reads the cells' results back.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters.exporter import ResourcesDict
from nbconvert.preprocessors import Preprocessor
from nbformat import validator

from autograder.harness.execute import Plan, TrustedExecute, read_plan
from autograder.harness.cell_metadata import COMPILED_STEPS
from autograder.harness.feedback import cell_message
from autograder.harness.kept_gradebook import KEPT_STEPS, KeptGradebook
from autograder.harness.template_rows import TemplateRows
from autograder.nbgrader_course import course_id, load_config
from autograder.records import CellResult, Template

STUDENT = "student"
MANUAL_PENDING = "Pending: this answer is graded by hand. Its score is not given yet (the 0 shown is not final)."
MAX_LINES = 200  # nbgrader's LimitOutput keeps this many lines of each output in the autograded notebook
MAX_TRACEBACK = 60


def preprocessor_config(db_url: str):
    """The course's nbgrader config for the preprocessors, pointed at the gradebook ``db_url``. LimitOutput keeps at
    most `MAX_LINES` lines of each output in the autograded notebook (what this worker holds and the messages are
    read from); `autograder.harness.feedback.sanitize_for_feedback` then cuts each remaining output to characters
    for the student's page (a line can be as long as a whole flood)."""
    config = load_config()
    config.CourseDirectory.db_url = db_url
    config.LimitOutput.max_lines = MAX_LINES
    config.LimitOutput.max_traceback = MAX_TRACEBACK
    return config


@dataclass
class Assignment:
    """What a worker keeps of one assignment's template (module docstring)."""

    name: str
    gradebook: KeptGradebook  # the worker's own copy of the template's, the submission's rows made
    notebooks: frozenset[str]  # the notebooks the gradebook knows
    plans: dict[str, Plan]
    sanitize: tuple[Preprocessor, ...]
    grading: tuple[Preprocessor, ...]  # after Execute
    db_url: str  # ``gradebook``'s


def _load(template: Template, folder: Path) -> Assignment:
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    gradebook = folder / f"{template.assignment}.db"
    shutil.copyfile(template.gradebook, gradebook)  # with STUDENT's submission (`autograder.harness.notebook.generate`)
    db_url = f"sqlite:///{gradebook}"
    kept = KeptGradebook(db_url, course_id())
    try:
        with kept.job() as gb:  # read through the one engine every job uses, and given back
            notebooks = frozenset(notebook.name for notebook in gb.find_assignment(template.assignment).notebooks)
            rows = TemplateRows(gb, template.assignment, STUDENT)
            plans = {name: read_plan(gb, name, template.assignment) for name in notebooks}
    except BaseException:  # a template that cannot be read leaves no connection open in the worker
        kept.dispose()
        raise
    config = preprocessor_config(db_url)
    traits = Autograde.class_traits()

    def made(steps: list[type]) -> tuple[Preprocessor, ...]:
        return tuple(_kept_step(KEPT_STEPS[step], config, kept, rows) if step in KEPT_STEPS
                     else COMPILED_STEPS.get(step, step)(config=config) for step in steps if step is not Execute)

    return Assignment(template.assignment, kept, notebooks, plans,
                      made(traits["sanitize_preprocessors"].default()),
                      made(traits["autograde_preprocessors"].default()), db_url)


@dataclass
class Assignments:
    """A worker's `Assignment`s, made on first use, in a folder of its own in the job's scratch folder (removed
    when the worker ends, else with the scratch folder)."""

    kept: dict[tuple[str, str], Assignment] = field(default_factory=dict)
    folder: tempfile.TemporaryDirectory | None = None

    def get(self, template: Template, scratch: str = "") -> Assignment:
        key = (str(template.folder), template.key)
        if key not in self.kept:
            if self.folder is None:
                self.folder = tempfile.TemporaryDirectory(prefix="gradebooks-", dir=scratch or None)
            self.kept[key] = _load(template, Path(self.folder.name))
        return self.kept[key]


def _kept_step(step: type, config: Any, kept: KeptGradebook, rows: TemplateRows) -> Preprocessor:
    """One of the kept steps (`autograder.harness.kept_gradebook.KEPT_STEPS`) on ``kept``, with ``rows`` where it
    looks cells up in them."""
    return step(config=config, kept=kept, **({"rows": rows} if "rows" in step.class_trait_names() else {}))


def _stage(nb: nbformat.NotebookNode, resources: ResourcesDict, steps: tuple[Preprocessor, ...]):
    """One converter pass of nbgrader: the notebook normalised, each step applied, the result validated (nbconvert's
    exporter with ``optimistic_validation``)."""
    _, nb = validator.normalize(nb)
    for step in steps:
        nb, resources = step(nb, resources)
    nbformat.validate(nb, relax_add_props=True)
    return nb


def _resources(assignment: Assignment, name: str, cwd: Path) -> ResourcesDict:
    """What nbgrader's converter gives each preprocessor of notebook ``name`` (``cwd``: where nbclient starts the
    kernel manager)."""
    return ResourcesDict(unique_key=name, output_files_dir=f"{name}_files", output_extension=".ipynb",
                         metadata=ResourcesDict(name=name, path=str(cwd)),
                         nbgrader={"student": STUDENT, "assignment": assignment.name, "notebook": name,
                                   "db_url": assignment.db_url})


def autograde(assignment: Assignment, submitted: dict[str, nbformat.NotebookNode | None], executor: TrustedExecute,
              log: logging.Logger, cwd: Path) -> dict[str, nbformat.NotebookNode]:
    """The autograded notebooks of one submission (``submitted``: notebook name -> the notebook, None when not handed
    in), their scores in ``assignment``'s gradebook until the job's transaction ends (`KeptGradebook.job`). Raises
    what nbgrader's converter would fail on (`autograder.harness.notebook` turns it into the reason); ``log`` gets
    the preprocessors' log."""
    from nbgrader import utils

    known = {name: nb for name, nb in submitted.items() if nb is not None and name in assignment.notebooks}
    if not known:
        raise RuntimeError("No notebooks found, did you forget to run 'nbgrader generate_assignment'?")
    missing = sorted(assignment.notebooks - set(known))
    gradebook = assignment.gradebook
    for name in missing:
        for grade in gradebook.find_submission_notebook(name, assignment.name, STUDENT).grades:
            grade.auto_score, grade.needs_manual_grade = 0, False
    gradebook.db.commit()
    executor.plans = assignment.plans
    for step in (*assignment.sanitize, executor, *assignment.grading):
        step.log = log
    graded = {}
    for name in sorted(known):
        sanitised = _stage(known[name], _resources(assignment, name, cwd), assignment.sanitize)
        with utils.setenv(NBGRADER_EXECUTION="autograde"):
            graded[name] = _stage(sanitised, _resources(assignment, name, cwd), (executor, *assignment.grading))
    return graded


def _graded_rows(gradebook: KeptGradebook, submitted_notebook: str) -> list[Any]:
    """The grades of one submitted notebook (nbgrader's ``SubmittedNotebook.grades``), each with its cell (its name),
    its score and its points as the job's transaction holds them, in one query (grade by grade, each grade loaded
    them with queries of its own: 18 for a notebook of 8 test cells)."""
    from nbgrader.api import Grade
    from sqlalchemy.orm import joinedload, undefer

    return gradebook.db.query(Grade).filter(Grade.notebook_id == submitted_notebook).options(
        joinedload(Grade.cell), undefer(Grade.max_score)).populate_existing().all()


def read_scores(assignment: Assignment, names: list[str],
                autograded: dict[str, nbformat.NotebookNode]) -> tuple[CellResult, ...]:
    """Each graded cell's result, in notebook order. A manually graded answer or task (no auto score) is left
    for manual grading: flagged, its points 0 until given by hand, and its feedback says so (`MANUAL_PENDING`,
    as the cell's comment). A graded cell missing from the autograded notebook scores 0. Read in the job's
    transaction (`KeptGradebook.job`), as `autograde` wrote them."""
    cells = []
    gradebook = assignment.gradebook
    for name in names:
        notebook: Any = autograded.get(name)
        by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in notebook.cells} if notebook else {}
        order = {grade_id: i for i, grade_id in enumerate(by_id)}
        grades = _graded_rows(gradebook, gradebook.find_submission_notebook(name, assignment.name, STUDENT).id)
        for grade in sorted(grades, key=lambda g: (order.get(g.name, len(order)), g.name)):
            points = float(grade.score or 0.0)
            cell = by_id.get(grade.name)
            if grade.auto_score is None and cell is not None:
                gradebook.find_comment(grade.name, name, assignment.name, STUDENT).auto_comment = MANUAL_PENDING
                cells.append(CellResult(name, grade.name, 0.0, float(grade.max_score), False, MANUAL_PENDING,
                                        manual=True))
                continue
            message = "this test cell is missing from the submitted notebook" if cell is None else cell_message(cell)
            cells.append(CellResult(name, grade.name, points, float(grade.max_score),
                                    points >= float(grade.max_score), message))
    gradebook.db.commit()
    return tuple(cells)
