"""The records the grader passes around: assignment templates, tasks, the jobs sent to workers, the results
they send back (with their `Status`) and the rows of ``grades.csv`` (`GradeRow`).

They live here, apart from the modules that make and use them (`autograder.grading.run`,
`autograder.grading.templates`, `autograder.reports`, `autograder.lms`), so that no two of those import each
other. Each is written and read back in one place: `Job.to_json` and `read_job`, `Result.to_dict` and
`Result.from_dict`, `GradeRow.csv_fields` and `GradeRow.from_csv`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any
from pathlib import Path

from autograder.sandbox.limits import Limits

NOT_GRADED = "not graded:"  # how grades.csv's reason starts when the submission was not graded
NO_SUBMISSION = "no submission"  # how the reason of a row with nothing handed in starts (`autograder.grading.tasks`)
PENDING = "manual grading pending:"  # the note of grades.csv's reason naming the cells that wait for their points
PENDING_NOTE = re.compile(re.escape(PENDING) + r" [^;()]* points \((?P<cells>[^;()]*)\)$")  # always the reason's end
GRADES_COLUMNS = ("student_id", "assignment", "score", "max_score", "reason", "lms_user_id", "late")


def tensors_cross(packages: tuple[str, ...] | None, isolate: bool) -> bool:
    """Whether torch tensors can cross the channel of a kernel that sees ``packages`` (None: every one): torch is one
    of them, or the kernel runs outside the sandbox (``isolate`` off), where it sees every installed package. Where
    none can, the trusted side decodes none (`autograder.channel.session.Session`) and needs no torch."""
    return not isolate or packages is None or "torch" in packages


class Status(StrEnum):
    """What came of a job (`Result.status`), and whether a row of grades.csv was graded (`GradeRow.status`).
    A str: JSON and CSV hold its text."""

    GRADED = "graded"  # a submission graded: its cells have their points
    FAILED = "failed"  # a submission not graded (no submission, a kernel that died...): the reason says why
    DONE = "done"  # a template generated

@dataclass(frozen=True)
class Template:
    """An assignment generated into its own folder (``gradebook.db`` and ``release/<assignment>/``):
    what every grading job starts from."""

    assignment: str
    key: str
    folder: Path
    notebooks: tuple[str, ...]  # the notebook names of the assignment, without .ipynb
    cells: tuple[tuple[str, str, float], ...]  # (notebook, grade_id, max points), notebook order
    preload: tuple[str, ...] = ()  # modules the kernel imports before student code (`course.chapters.Chapter`)
    packages: tuple[str, ...] | None = None  # the only installed packages the kernel sees (None: every one)
    forbid: tuple[str, ...] = ()  # the chapter's rules (`autograder.sandbox.rules`): calls its kernel cannot make
    imports: tuple[str, ...] = ()  # what its test cells import (`autograder.grading.templates.test_imports`)

    @property
    def gradebook(self) -> Path:
        return self.folder / "gradebook.db"

    @property
    def released(self) -> Path:
        return self.folder / "release" / self.assignment

    @property
    def cells_record(self) -> Path:
        """Its notebooks and graded cells, read from its gradebook once, when it is made."""
        return self.folder / "cells.json"

    @property
    def feedback_record(self) -> Path:
        """The HTML of its instructor's cells on a feedback page, rendered once, when it is made."""
        return self.folder / "feedback-cells.json"

    @property
    def max_score(self) -> float:
        return sum(points for _, _, points in self.cells)


@dataclass
class Task:
    """One student's one assignment: what to grade (notebook name -> file) or why it cannot be."""

    student: str
    assignment: str
    notebooks: dict[str, str | None] = field(default_factory=dict)
    note: str = ""
    problem: str = ""
    key: str = ""
    lms_user_id: str = ""  # the Canvas user id a Canvas zip's file names carried ("" otherwise)
    late: bool = False  # Canvas marked the submission that counts as late
    lms_name: str = ""  # the student's name as the LMS's zip gave it ('' when it gave none), for the report
    missing: bool = False  # nothing handed in for this assignment: not graded, and not a failure of the run


@dataclass(frozen=True)
class Job:
    """One submission to grade, as the grader hands it to a worker: a line of the local workers' protocol
    (`to_json`, `read_job`), or an argument of a cluster's task (`autograder.workers.dask_pool`)."""

    template: Template  # the assignment's template: its folder, and the modules its kernels preload
    notebooks: dict[str, str | None]  # notebook name -> the submitted file's path (None: not handed in)
    limits: Limits
    isolate: bool  # False: the kernel runs without the sandbox (resource limits only)
    scratch: str = ""  # the folder of the job's temporary folders ('' for the system's)
    warm: bool = True  # fork the kernel from a zygote of its preload set (`autograder.sandbox.warm`); False: start it cold
    zygote: str = ""  # the address of that zygote, which the pool running the job started ('' : start it cold)
    hidden_key: str = ""  # the hand-in's key, hidden tests' seeds derive from it (`autograder.grading.secret`); '': fixed

    @property
    def assignment(self) -> str:
        return self.template.assignment

    @property
    def tensors(self) -> bool:
        """Whether tensors can cross its kernel's channel (`tensors_cross`)."""
        return tensors_cross(self.template.packages, self.isolate)

    def to_json(self) -> str:
        return json.dumps({"kind": "grade", **asdict(self)}, default=str)

    def moved(self, notebooks: dict[str, str | None], template: Path, scratch: Path) -> Job:
        """The same job with its files somewhere else (on a cluster's worker)."""
        return replace(self, notebooks=notebooks, template=replace(self.template, folder=template),
                       scratch=str(scratch))


@dataclass(frozen=True)
class GenerateJob:
    """Generate an assignment's template (nbgrader's generate_assignment) into ``template.folder`` from
    ``root/source_directory/<assignment>``."""

    template: Template
    root: str
    source_directory: str

    def to_json(self) -> str:
        return json.dumps({"kind": "generate", **asdict(self)}, default=str)


@dataclass(frozen=True)
class RecordJob:
    """Results to write into the class gradebook (``db_url``), sent to the worker that keeps it open
    (`autograder.workers.recorder`): each (task, result) as the grader stored it (the result's cells only);
    ``close``: commit what is recorded and close the gradebook after."""

    db_url: str
    templates: dict[str, Template]  # the assignments of ``entries``
    entries: tuple[tuple[Task, Result], ...] = ()
    close: bool = False

    def to_json(self) -> str:
        return json.dumps({"kind": "record", "db_url": self.db_url, "close": self.close,
                           "templates": {name: asdict(template) for name, template in self.templates.items()},
                           "entries": [[asdict(task), result.to_dict(stored=True)] for task, result in self.entries]},
                          default=str)


def _template(given: dict) -> Template:
    return Template(given["assignment"], given["key"], Path(given["folder"]), tuple(given["notebooks"]),
                    tuple(tuple(cell) for cell in given["cells"]), tuple(given["preload"]),
                    None if given.get("packages") is None else tuple(given["packages"]), tuple(given.get("forbid", ())),
                    tuple(given.get("imports", ())))


def read_job(line: str) -> Job | GenerateJob | RecordJob:
    """The job a line of `Job.to_json`, `GenerateJob.to_json` or `RecordJob.to_json` describes."""
    fields = json.loads(line)
    if fields["kind"] == "record":
        return RecordJob(fields["db_url"], {name: _template(t) for name, t in fields["templates"].items()},
                         tuple((Task(**task), Result.from_dict(result)) for task, result in fields["entries"]),
                         fields["close"])
    fields["template"] = _template(fields["template"])
    if fields.pop("kind") == "generate":
        return GenerateJob(**fields)
    return Job(**{**fields, "limits": Limits(**fields["limits"])})


@dataclass(frozen=True)
class CellResult:
    """One graded test cell of a submission: its points of ``max_points``, and what its output said."""

    notebook: str  # the notebook's name, without .ipynb
    grade_id: str
    points: float
    max_points: float
    passed: bool  # points >= max_points
    message: str  # the failure's message ('' when it passed), as `autograder.harness.feedback.cell_message` reads it
    manual: bool = False  # a manually graded answer or task: its points are given by hand, in the gradebook


@dataclass(frozen=True)
class Result:
    """What grading one job gave: a submission ``graded`` (its cells, timings and feedback pages) or
    ``failed`` (``reason`` says why), or a template generated (``done``). ``transient``: the grader's own
    failure (a killed worker, a lost cluster worker), not the student's: never stored, graded again on
    the next run."""

    status: Status  # given as its text (a worker's JSON line, an older stored result), it is read as the Status
    reason: str = ""  # why it failed; for a graded submission, the notes ('' when none)
    cells: tuple[CellResult, ...] = ()  # one per graded test cell, in notebook order
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds (`autograder.harness.notebook`)
    feedback: dict[str, str] = field(default_factory=dict)  # feedback page's file name -> its HTML
    transient: bool = False
    autograded: dict[str, str] = field(default_factory=dict)  # notebook name -> the autograded notebook (JSON)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # ValueError for a status that is none of them

    @property
    def graded(self) -> bool:
        return self.status is Status.GRADED

    @property
    def score(self) -> float:
        return sum(cell.points for cell in self.cells)

    def to_dict(self, stored: bool = False) -> dict[str, Any]:
        """The result as JSON data: a line of the workers' protocol, or (``stored``) the result kept under
        ``DIR/.state``, without the feedback pages (they are in ``DIR/feedback``), the autograded notebooks (in
        ``DIR/autograded``) and ``transient`` (such a result is never stored)."""
        given = {"status": self.status, "reason": self.reason, "cells": [asdict(cell) for cell in self.cells],
                 "timings": self.timings}
        return given if stored else {**given, "feedback": self.feedback, "transient": self.transient,
                                     "autograded": self.autograded}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, given: dict[str, Any]) -> Result:
        """The result `to_dict` wrote (or a result stored before ``timings`` was always written)."""
        return cls(given["status"], given.get("reason", ""),
                   tuple(CellResult(**cell) for cell in given.get("cells", [])), given.get("timings") or {},
                   given.get("feedback") or {}, bool(given.get("transient", False)), given.get("autograded") or {})

    @classmethod
    def from_json(cls, line: str | bytes) -> Result:
        return cls.from_dict(json.loads(line))


@dataclass(frozen=True)
class GradeRow:
    """One row of ``DIR/grades.csv``: a student's result on one assignment, as
    `autograder.reports.class_record.class_rows` makes it for grades.csv and the report, and as `from_csv` reads
    it back (`autograder.lms` export)."""

    student_id: str
    assignment: str
    score: float
    max_score: float
    status: Status = Status.GRADED  # GRADED, or FAILED (no submission, or it could not be graded)
    reason: str = ""  # the notes of a graded row, or why it was not graded; ends with the `PENDING` note when pending
    lms_user_id: str = ""  # the Canvas user id the submission's file name carried; "" for a folder of submissions
    late: bool = False  # Canvas marked the submission that counted as late
    pending: tuple[str, ...] = ()  # the manually graded cells still waiting for their points: ``score`` is not final
    lms_name: str = ""  # the student's name as the LMS gave it (not in grades.csv: the report's)
    cells: tuple[CellResult, ...] = ()  # its graded cells (not in grades.csv: the report's; () when read back)

    @property
    def graded(self) -> bool:
        return self.status is Status.GRADED

    @property
    def no_submission(self) -> bool:
        """Nothing was handed in (an LMS keeps its cell as it is)."""
        return not self.graded and self.reason.startswith(NO_SUBMISSION)

    @property
    def csv_reason(self) -> str:
        """The reason as grades.csv writes it: after ``not graded: `` when it was not graded."""
        return self.reason if self.graded else f"{NOT_GRADED} {self.reason}"

    def csv_fields(self) -> list[str]:
        """The row's fields in `GRADES_COLUMNS` order, as text (``late``: 1 or 0)."""
        return [self.student_id, self.assignment, f"{self.score:g}", f"{self.max_score:g}", self.csv_reason,
                self.lms_user_id, "1" if self.late else "0"]

    @classmethod
    def from_csv(cls, fields: dict[str, str]) -> GradeRow:
        """The row `csv_fields` wrote, from its column names (``reason``, ``lms_user_id`` and ``late`` may be
        absent: a grades.csv an earlier version wrote). KeyError or ValueError when it is not such a row."""
        text = fields.get("reason") or ""
        graded = not text.startswith(NOT_GRADED)
        reason = text if graded else text[len(NOT_GRADED):].removeprefix(" ")
        pending = PENDING_NOTE.search(reason) if graded else None
        return cls(fields["student_id"], fields["assignment"], float(fields["score"]), float(fields["max_score"]),
                   Status.GRADED if graded else Status.FAILED, reason, fields.get("lms_user_id") or "",
                   fields.get("late") == "1", tuple(pending["cells"].split(", ")) if pending else ())
