"""The timed gradings of `python -m benchmarks.grading`, and what each leaves behind read back.

`make_class` writes a synthetic class; `plain_nbgrader` and `autograder` grade it from a cold start twice
(`measured`): once sampled for its process tree's peak memory (`benchmarks.memory.PeakMemory`), once timed with
nothing sampling it, the load average read before and after and the machine's busy CPU-seconds counted while it
runs;
`plain_scores`, `grade_rows` and `phase_means` read nbgrader's gradebook, the autograder's grades.csv and the
mean seconds of each phase from the autograder's stored results.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import mean

from autograder import NBGRADER_CONFIG
from autograder.nbgrader_course import course_id, generate_assignment, nbgrader_environment
from autograder.records import GradeRow
from autograder.reports.grades_csv import read_grade_rows
from autograder.reports.output_folder import OutputFolder
from autograder.reports.state import stored_results
from benchmarks.grading_figures import Load, Run, busy_seconds, ordered_phases
from benchmarks.memory import PeakMemory
from course import ROOT, SOLUTIONS
from course.chapters import chapter
from course.notebooks import solution_sources, student_notebook

PLAIN_GRADEBOOK = "gradebook.db"  # in plain nbgrader's course folder


def _reference(assignment: str) -> dict:
    """The exercise notebook with the reference solution cells put back."""
    found = chapter(assignment)
    return student_notebook(found.exercise, solution_sources(found.solution))


def make_class(folder: Path, students: int, assignments: list[str]) -> None:
    """SUBMISSIONS/<student>/<assignment>/<notebook>.ipynb: even students reference, odd students blank."""
    for assignment in assignments:
        exercise = chapter(assignment).exercise
        answers = {True: json.dumps(_reference(assignment)), False: exercise.read_text()}
        for i in range(students):
            path = folder / f"student{i:03d}" / assignment / exercise.name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(answers[i % 2 == 0])


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run ``command``; a failure raises with its output's end."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")


def measured(mode: str, work: Callable[[Path], None], folder: Path,
             prepare: Callable[[Path], None] | None = None) -> Run:
    """``mode``'s `Run` of ``work(folder)``: first ``work`` in a sibling folder (removed after), sampled for its
    peak memory (`PeakMemory`), then ``work(folder)`` timed with nothing sampling it, with the load average read
    around it and the CPU-seconds the whole machine was busy while it ran (`busy_seconds`); ``prepare`` (copying
    the inputs in, say) runs on each folder before and is neither timed nor sampled. Reading every process's page
    counts five times a second takes a tenth of the cores or more beside a grading of many processes (1.7-2.6 CPU-s
    of the sampler's own beside a 13-s run of the small class on 2 cores, which then took 12% longer), so no run
    is timed while it is sampled; reading /proc/stat twice costs nothing."""
    scratch = folder.with_name(f"{folder.name}-memory")
    if prepare is not None:
        for made in (scratch, folder):
            prepare(made)
    with PeakMemory() as peak:
        work(scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    before, busy = Load.read(), busy_seconds()
    start = time.perf_counter()
    work(folder)
    seconds = time.perf_counter() - start
    busy = busy_seconds() - busy
    return Run(mode, seconds, peak.measured, before, Load.read(), busy)


def plain_nbgrader(submissions: Path, course: Path, assignments: list[str]) -> Run:
    """Generate each assignment, then `nbgrader autograde` and `generate_feedback`, one assignment after another,
    in the course folder ``course`` (its gradebook: `PLAIN_GRADEBOOK`), `measured`; the sources and the
    submissions are copied in before the clock starts."""
    def copy_in(folder: Path) -> None:
        shutil.copytree(ROOT / SOLUTIONS, folder / SOLUTIONS, dirs_exist_ok=True)
        shutil.copytree(submissions, folder / "submitted")

    def grade(folder: Path) -> None:
        db = f"sqlite:///{folder / PLAIN_GRADEBOOK}"
        for assignment in assignments:
            error_log = generate_assignment(assignment, folder, SOLUTIONS, folder / "release", db)
            if error_log:
                raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{error_log}")
        for assignment in assignments:
            for command in ("autograde", "generate_feedback"):
                _run([sys.executable, "-m", "nbgrader", command, assignment, "--force", "--log-level=ERROR",
                      f"--JupyterApp.config_file={NBGRADER_CONFIG}", f"--CourseDirectory.root={folder}",
                      f"--CourseDirectory.db_url={db}"], folder, nbgrader_environment())

    return measured("plain", grade, course, copy_in)


def interpreter(checkout: Path) -> str:
    """The Python that runs ``checkout``'s autograder: this one for this checkout, else the checkout's .venv."""
    return sys.executable if checkout.resolve() == ROOT.resolve() else str(checkout / ".venv" / "bin" / "python")


def describe_code(checkout: Path) -> str:
    """The checkout and its commit (with ``+changes`` when its tracked files differ from it)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "no git commit"
    changed = " +changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    return f"{checkout.resolve()} at {commit}{changed}"


def autograder(submissions: Path, out: Path, jobs: int, mode: str, checkout: Path = ROOT) -> Run:
    """`python -m autograder grade --jobs N` (with `--cold` when ``mode`` is cold) from a cold start, run from
    ``checkout`` (another copy of this repository, such as main's, to time its code) with `interpreter`,
    `measured`: ``out`` holds the timed run's output."""
    flags = ["--cold"] if mode == "cold" else []

    def grade(folder: Path) -> None:
        _run([interpreter(checkout), "-m", "autograder", "grade", str(submissions), "--out", str(folder),
              "--jobs", str(jobs), "--quiet", *flags], checkout)

    return measured(mode, grade, out)


def plain_scores(course: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """(student, assignment) -> (score, max score) of every submission in plain nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / PLAIN_GRADEBOOK}", course_id()) as gradebook:
        return {(submission.student.id, assignment.name): (submission.score, submission.max_score)
                for assignment in gradebook.assignments for submission in assignment.submissions}


def grade_rows(out: Path) -> list[GradeRow]:
    """The rows of the autograder's grades.csv in ``out``."""
    return read_grade_rows(OutputFolder(out).grades)


def phase_means(out: Path, assignments: list[str]) -> dict[str, dict[str, float]]:
    """assignment -> phase -> mean seconds per submission, from the results stored in ``out`` (each worker's own
    clock); an assignment none of whose results has timings is left out, a phase is averaged over the results
    that have it. Phases: `PHASES` in order, then any other by name."""
    means = {}
    for assignment in assignments:
        timings = [result.timings for result in stored_results(OutputFolder(out), assignment).values()
                   if result.timings]
        if timings:
            means[assignment] = {key: mean(phases[key] for phases in timings if key in phases)
                                 for key in ordered_phases(key for phases in timings for key in phases)}
    return means
