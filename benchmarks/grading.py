"""Grade one synthetic class with plain sequential nbgrader, then with `python -m autograder grade` warm (kernels
forked from a sandboxed process per assignment) and `--cold` (one fresh sandboxed kernel per submission).

    python -m benchmarks.grading [--students 6] [--jobs 2] [--assignments 01_similarity 03_multi_head 06_rope]
                                 [--modes warm cold]

The class: each student hands in every assignment, half with the reference solution and half with the blank
exercise notebook. Every run does the same work from a cold start: plain nbgrader generates each assignment
(nbgrader's GenerateAssignment, as `release` and the autograder's templates do:
`autograder.harness.nbgrader_course.generate_assignment`, in this process), then runs `nbgrader autograde` and
`nbgrader generate_feedback` per assignment, one after another, on a course folder made for it; the autograder
runs once per mode on an empty output folder (it generates its templates too) with `--jobs` workers.

Printed, as Markdown tables: each run's wall time and its ratio to plain nbgrader (goal for warm: at most 0.25
on 2 cores, stretch 0.10); the peak memory of each run's whole process tree (`benchmarks.memory`: the sum of
PSS and of USS, which count the pages that forks share once, and of RSS, which does not; this process, where
plain nbgrader's assignments are generated, is not counted); then for each mode the mean seconds per submission
of each phase, by assignment, from the autograder's stored results (each worker's own clock), and their sum
after nbgrader's set-up: from the kernel's fork (or launch) to the verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from autograder import NBGRADER_CONFIG
from autograder.reports.output_folder import OutputFolder
from autograder.harness.nbgrader_course import generate_assignment, nbgrader_environment
from autograder.reports.state import stored_results
from benchmarks.memory import MiB, Memory, PeakMemory
from course import ROOT, SOLUTIONS
from course.chapters import chapter
from course.machine import describe_machine
from course.notebooks import solution_sources, student_notebook

GOAL, STRETCH = 0.25, 0.10  # warm autograder / plain nbgrader, on 2 cores
SETUP = "nbgrader_setup"
PHASES = {  # the keys of a stored result's timings, in order, and what each measures
    SETUP: "nbgrader's set-up, before the kernel",
    "fork": "fork from the assignment's warm process",
    "sandbox": "sandbox (namespaces, filesystem)",
    "sandbox_start": "sandbox start (bwrap to the kernel's first line)",
    "kernel_preload": "imports in the kernel",
    "ipykernel_start": "ipykernel start",
    "cells": "solution and given cells, in the kernel",
    "tests": "test cells, in the worker",
    "nbgrader_rest": "nbgrader's bookkeeping, kernel shutdown",
    "feedback": "feedback (tests hidden, HTML)",
}


@dataclass(frozen=True)
class Run:
    """One grading run of the whole class: its wall time and its process tree's peak memory."""

    mode: str  # plain (nbgrader), warm or cold (the autograder)
    seconds: float
    memory: Memory


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
            path = folder / f"student{i:02d}" / assignment / exercise.name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(answers[i % 2 == 0])


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run ``command``; a failure raises with its output's end."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")


def plain_nbgrader(submissions: Path, course: Path, assignments: list[str]) -> Run:
    """Generate each assignment, then `nbgrader autograde` and `generate_feedback`, one assignment after another."""
    shutil.copytree(ROOT / SOLUTIONS, course / SOLUTIONS, dirs_exist_ok=True)
    shutil.copytree(submissions, course / "submitted")
    db = f"sqlite:///{course / 'gradebook.db'}"
    with PeakMemory() as peak:
        start = time.perf_counter()
        for assignment in assignments:
            error_log = generate_assignment(assignment, course, SOLUTIONS, course / "release", db)
            if error_log:
                raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{error_log}")
        for assignment in assignments:
            for command in ("autograde", "generate_feedback"):
                _run([sys.executable, "-m", "nbgrader", command, assignment, "--force", "--log-level=ERROR",
                      f"--JupyterApp.config_file={NBGRADER_CONFIG}", f"--CourseDirectory.root={course}",
                      f"--CourseDirectory.db_url={db}"], course, nbgrader_environment())
        seconds = time.perf_counter() - start
    return Run("plain", seconds, peak.measured)


def autograder(submissions: Path, out: Path, jobs: int, mode: str) -> Run:
    """`python -m autograder grade --jobs N` (with `--cold` when ``mode`` is cold) from a cold start."""
    flags = ["--cold"] if mode == "cold" else []
    with PeakMemory() as peak:
        start = time.perf_counter()
        _run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out), "--jobs", str(jobs),
              "--quiet", *flags], ROOT)
        seconds = time.perf_counter() - start
    return Run(mode, seconds, peak.measured)


def summary(runs: list[Run], jobs: int, count: int) -> str:
    """A Markdown table, one column per run: wall time, per submission, ratio to the first run, peak memory."""
    plain = runs[0].seconds

    def ratio(run: Run) -> str:
        goal = f" (goal ≤ {GOAL} on 2 cores, stretch {STRETCH:.2f})" if run.mode == "warm" else ""
        return f"{run.seconds / plain:.2f}{goal}"

    titles = {"plain": "plain nbgrader, sequential", "warm": f"autograder warm, --jobs {jobs}",
              "cold": f"autograder --cold, --jobs {jobs}"}
    rows = [("", lambda run: titles[run.mode]),
            ("wall time", lambda run: f"{run.seconds:.1f} s"),
            ("per submission", lambda run: f"{run.seconds / count:.2f} s"),
            ("ratio to plain nbgrader", ratio),
            ("peak PSS, sum over processes", lambda run: f"{run.memory.pss / MiB:.0f} MiB"),
            ("peak USS, sum", lambda run: f"{run.memory.uss / MiB:.0f} MiB"),
            ("peak RSS, sum (shared pages counted per process)", lambda run: f"{run.memory.rss / MiB:.0f} MiB"),
            ("most processes at once", lambda run: str(run.memory.processes))]
    lines = [f"| {label} | " + " | ".join(cell(run) for run in runs) + " |" for label, cell in rows]
    return "\n".join([lines[0], "|---" * (len(runs) + 1) + "|", *lines[1:]])


def phases(out: Path, assignments: list[str], mode: str) -> str:
    """A Markdown table of the mean seconds per submission in each phase (the keys that ``mode``'s results have),
    by assignment, with their sum after nbgrader's set-up."""
    timings = {a: [r.timings for r in stored_results(OutputFolder(out), a).values() if r.timings] for a in assignments}
    keys = [key for key in PHASES if any(key in t for runs in timings.values() for t in runs)]

    def means(key: str | None) -> list[float]:
        return [mean(sum(v for k, v in t.items() if k != SETUP) if key is None else t[key] for t in timings[a])
                if timings[a] else math.nan for a in assignments]

    start = "fork" if mode == "warm" else "launch"
    rows = [(PHASES[key], means(key)) for key in keys] + [(f"**{start} to verdict** (all but the set-up)", means(None))]
    header = f"| per submission, {mode} (mean s) | " + " | ".join(assignments) + " |"
    return "\n".join([header, "|---" * (len(assignments) + 1) + "|",
                      *(f"| {label} | " + " | ".join(f"{m:.3f}" for m in values) + " |" for label, values in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--assignments", nargs="+", default=["01_similarity", "03_multi_head", "06_rope"])
    parser.add_argument("--modes", nargs="+", choices=["warm", "cold"], default=["warm", "cold"],
                        help="the autograder runs to time (default: both)")
    args = parser.parse_args()
    print(describe_machine())
    count = args.students * len(args.assignments)
    print(f"class: {args.students} students x {len(args.assignments)} assignments ({', '.join(args.assignments)})"
          f" = {count} submissions, half reference, half blank")
    with tempfile.TemporaryDirectory(prefix="grading-benchmark-") as scratch:
        root = Path(scratch)
        make_class(root / "submissions", args.students, args.assignments)
        runs = [plain_nbgrader(root / "submissions", root / "course", args.assignments)]
        for mode in args.modes:
            runs.append(autograder(root / "submissions", root / mode, args.jobs, mode))
        print()
        print(summary(runs, args.jobs, count))
        for mode in args.modes:
            print()
            print(phases(root / mode, args.assignments, mode))


if __name__ == "__main__":
    main()
