"""The output folder as the class's record for the whole term (`autograder.reports.output_folder.OutputFolder`).

- `open_output` makes ``DIR`` (mode 0700, set at creation; an older folder is closed to others), sets this
  process's umask so that everything the run writes there is the instructor's only (0600 files, 0700
  folders), and holds ``DIR/.lock`` (``flock``) until `HeldOutput.close`, which also gives the umask back:
  a second run into the same folder stops with `OutputUnavailable` instead of writing over the first one's.
- A run adds to what is stored (`autograder.reports.state`): `kept_instead` says when a 'no submission' must not
  replace a stored row; `class_rows` are the rows of the class files (grades.csv, report.html), every row
  stored in the folder and this run's rows; `changes` are the lines of the grades a rerun changed.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.reports.gradebook import ManualScores
from autograder.reports.output_folder import OutputFolder
from autograder.records import PENDING, GradeRow, Result, Task, Template
from autograder.reports.state import Stored

PRIVATE_UMASK = 0o077


class OutputUnavailable(RuntimeError):
    """The output folder cannot be made, or another run is writing to it: the message says which."""


@dataclass(frozen=True)
class HeldOutput:
    """An output folder held by this run: its lock's descriptor, and the umask to give back."""

    descriptor: int
    umask: int

    def close(self) -> None:
        """Release the lock and give the umask back."""
        os.close(self.descriptor)
        os.umask(self.umask)


def open_output(out: OutputFolder) -> HeldOutput:
    """Make ``out.root`` (0700), make this process's files private and lock the folder, until `HeldOutput.close`."""
    umask = os.umask(PRIVATE_UMASK)
    try:
        out.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        out.root.chmod(0o700)  # a folder an older version made readable by others
        descriptor = os.open(out.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        os.umask(umask)
        raise OutputUnavailable(f"--out {out.root} cannot be used: {error.strerror or error}") from error
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(descriptor, 32).decode(errors="replace").strip() or "another process"
        HeldOutput(descriptor, umask).close()
        raise OutputUnavailable(f"another grading run ({holder}) is writing to {out.root}; wait until it has "
                                "finished, then run again (two runs at once would overwrite each other's "
                                "grades)") from None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"pid {os.getpid()}\n".encode())
    return HeldOutput(descriptor, umask)


def kept_instead(task: Task, earlier: dict[tuple[str, str], Stored]) -> Stored | None:
    """The stored row that stays in place of ``task``'s: a 'no submission' never replaces or deletes a row
    stored for that student and assignment (a grade, or why a hand-in could not be graded)."""
    stored = earlier.get((task.student, task.assignment))
    return stored if task.missing and stored is not None and not stored.missing else None


def row(task: Task, result: Result, template: Template | None) -> Stored:
    """This run's row of ``task``."""
    return Stored(result, task.note, task.lms_user_id, task.late, template.max_score if template else 0.0,
                  task.missing, task.lms_name)


def with_manual(student: str, assignment: str, result: Result, given: ManualScores) -> tuple[Result, list[str]]:
    """``result`` with the points given by hand (`autograder.reports.gradebook.ClassGradebook.manual_scores`) in its
    manually graded cells, and the cells still waiting for them."""
    cells, pending = [], []
    for cell in result.cells:
        points = given.get((student, assignment, cell.notebook, cell.grade_id)) if cell.manual else None
        if cell.manual and points is None:
            pending.append(cell.grade_id)
        elif cell.manual:
            cell = replace(cell, points=points, passed=points >= cell.max_points, message="graded by hand")
        cells.append(cell)
    return replace(result, cells=tuple(cells)), pending


def class_rows(stored: dict[tuple[str, str], Stored], templates: dict[str, Template],
               given: ManualScores | None = None) -> list[GradeRow]:
    """The rows of grades.csv and the report, one per student and assignment stored, in that order; a manually
    graded cell counts the points ``given`` by hand, and one still waiting is named in the reason (its points
    are not in the score yet: pending, not 0)."""
    rows = []
    for (student, assignment), entry in sorted(stored.items()):
        template = templates.get(assignment)
        result, pending = with_manual(student, assignment, entry.result, given or {})
        reason = entry.reason
        if pending:
            waiting = sum(c.max_points for c in result.cells if c.grade_id in pending)
            reason = "; ".join(filter(None, [reason, f"{PENDING} {waiting:g} points ({', '.join(pending)})"]))
        rows.append(GradeRow(student, assignment, result.score, template.max_score if template else entry.max_score,
                             result.status, reason, entry.lms_user_id, entry.late, tuple(pending), entry.lms_name,
                             result.cells))
    return rows


def _grade_text(entry: Stored) -> str:
    return f"{entry.result.score:g}" if entry.result.graded else "not graded"


def changes(earlier: dict[tuple[str, str], Stored], now: dict[tuple[str, str], Stored]) -> list[str]:
    """One line per stored grade this run changed (old -> new, of the maximum), in student order."""
    lines = []
    for where, entry in sorted(now.items()):
        before = earlier.get(where)
        if before is None or before.missing or _grade_text(before) == _grade_text(entry):
            continue
        lines.append(f"  {where[0]} {where[1]}: {_grade_text(before)} -> {_grade_text(entry)} "
                     f"(of {entry.max_score:g})")
    return lines


def submitted_tasks(out: OutputFolder, stored: dict[tuple[str, str], Stored], tasks: list[Task]) -> list[Task]:
    """The hand-ins the class files compare (`autograder.reports.similarity`): this run's tasks that replace what is
    stored, and every stored hand-in (its copy in ``DIR/submitted``) that this run left in place."""
    run = {(t.student, t.assignment): t for t in tasks if kept_instead(t, stored) is None}
    kept = []
    for (student, assignment), entry in sorted(stored.items()):
        folder = out.submitted(student, assignment)
        if (student, assignment) in run or entry.missing or not folder.is_dir():
            continue
        kept.append(Task(student, assignment, {p.stem: str(p) for p in sorted(folder.glob("*.ipynb"))}))
    return list(run.values()) + kept


def keep_submitted(out: OutputFolder, task: Task) -> None:
    """Copy ``task``'s notebooks to ``DIR/submitted/<student>/<assignment>/`` (nbgrader's layout), in place of
    what that folder held: the hand-in that later runs compare and formgrader shows."""
    folder = out.submitted(task.student, task.assignment)
    for old in folder.glob("*.ipynb") if folder.is_dir() else ():
        old.unlink()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, path in task.notebooks.items():
        if path:
            (folder / f"{name}.ipynb").write_bytes(Path(path).read_bytes())


def write_nbgrader_config(out: OutputFolder, source: Path, db_url: str) -> None:
    """``DIR/nbgrader_config.py``: the course's nbgrader config pointed at this folder, so that nbgrader's
    formgrader started in DIR grades its submissions by hand (its gradebook, its autograded notebooks)."""
    from autograder import NBGRADER_CONFIG

    out.nbgrader_config.write_text(
        '"""nbgrader\'s config for manual grading of this output folder (written by `python -m autograder grade`): '
        'run `nbgrader formgrader` here."""\n'
        "c = get_config()  # noqa: F821\n"
        f"load_subconfig({str(NBGRADER_CONFIG)!r})  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(out.root)!r}\n"
        f"c.CourseDirectory.source_directory = {str(source)!r}\n"
        f"c.CourseDirectory.db_url = {db_url!r}\n")
