"""Grade one synthetic class twice, side by side: plain sequential nbgrader, then `python -m autograder grade`.

    python -m benchmarks.grading [--students 16] [--jobs 2] [--assignments 01_similarity 03_multi_head]

The class: each student hands in every assignment, half with the reference solution and half with
the blank exercise notebook. Both do the same work from a cold start: plain nbgrader generates each
assignment (nbgrader's GenerateAssignment, as `release` and the autograder's templates do:
`autograder.nbgrader_course.generate_assignment`), then runs `nbgrader autograde` and
`nbgrader generate_feedback` per assignment, one after another, on a course folder made for it; the autograder runs once on an empty output folder
(it generates its templates too), every kernel in its own bubblewrap sandbox, with `--jobs` workers.
Both wall times, their ratio (goal on 2 cores: at most 0.6), how long each submission's sandbox took to
start and where the autograder's time went are printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean

from autograder import NBGRADER_CONFIG
from autograder.layout import OutputFolder
from autograder.nbgrader_course import generate_assignment, nbgrader_environment
from autograder.state import stored_results
from course import ROOT
from course.chapters import chapter
from course.machine import describe_machine
from course.notebooks import solution_sources, student_notebook


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


def _nbgrader(course: Path, *args: str) -> None:
    command = [sys.executable, "-m", "nbgrader", *args, "--log-level=ERROR",
               f"--JupyterApp.config_file={NBGRADER_CONFIG}", f"--CourseDirectory.root={course}",
               f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}"]
    subprocess.run(command, cwd=course, check=True, capture_output=True, env=nbgrader_environment())


def plain_nbgrader(submissions: Path, course: Path, assignments: list[str]) -> float:
    """Seconds for generating each assignment, then `nbgrader autograde` and `generate_feedback`, one assignment
    after another."""
    shutil.copytree(ROOT / "solutions", course / "solutions", dirs_exist_ok=True)
    shutil.copytree(submissions, course / "submitted")
    start = time.perf_counter()
    for assignment in assignments:
        error_log = generate_assignment(assignment, course, "solutions", course / "release",
                                        f"sqlite:///{course / 'gradebook.db'}")
        if error_log:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{error_log}")
    for assignment in assignments:
        _nbgrader(course, "autograde", assignment, "--force")
        _nbgrader(course, "generate_feedback", assignment, "--force")
    return time.perf_counter() - start


def autograder(submissions: Path, out: Path, jobs: int) -> float:
    """Seconds for `python -m autograder grade --jobs N` from a cold start (its templates generated too)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
                    "--jobs", str(jobs), "--quiet"], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def where_time_went(out: Path, assignments: list[str]) -> str:
    """Mean seconds per submission in each phase and assignment, from the autograder's stored results."""
    phases = {
        "nbgrader_setup": "nbgrader's set-up before the kernel is launched",
        "sandbox_start": "sandbox start (bwrap, up to the kernel's first line)",
        "kernel_preload": "preload in the kernel (autograder.checks, and torch where the chapter registry says)",
        "ipykernel_start": "ipykernel start",
        "run_notebook": "running the notebook (and nbgrader's bookkeeping, kernel shutdown)",
        "feedback": "hiding tests and writing the HTML feedback",
    }
    timings = {a: [result.timings for result in stored_results(OutputFolder(out), a).values()] for a in assignments}
    lines = ["  " + " ".join(f"{a:>16s}" for a in assignments)]
    for key, label in phases.items():
        means = [mean(t[key] for t in timings[a] if t) if any(timings[a]) else float("nan") for a in assignments]
        lines.append("  " + " ".join(f"{m:14.2f} s" for m in means) + f"  {label}")
    return "\n".join(lines)


def sandbox_starts(out: Path, assignments: list[str]) -> str:
    """Each submission's sandbox start (seconds from launching bwrap to the kernel's first line)."""
    lines = []
    for assignment in assignments:
        starts = {student: result.timings.get("sandbox_start")
                  for student, result in stored_results(OutputFolder(out), assignment).items()}
        values = sorted(v for v in starts.values() if v is not None)
        lines.append(f"  {assignment}: " + ", ".join(f"{student} {value:.2f}" if value is not None else f"{student} -"
                                                     for student, value in starts.items()))
        if values:
            lines.append(f"    min {values[0]:.2f} s, median {values[len(values) // 2]:.2f} s, max {values[-1]:.2f} s")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--assignments", nargs="+", default=["01_similarity", "03_multi_head"])
    args = parser.parse_args()
    print(describe_machine())
    with tempfile.TemporaryDirectory(prefix="grading-benchmark-") as scratch:
        root = Path(scratch)
        make_class(root / "submissions", args.students, args.assignments)
        count = args.students * len(args.assignments)
        print(f"class: {args.students} students x {len(args.assignments)} assignments ({', '.join(args.assignments)})"
              f" = {count} submissions, half reference, half blank")
        plain = plain_nbgrader(root / "submissions", root / "course", args.assignments)
        print(f"plain nbgrader, sequential (generate_assignment + autograde + generate_feedback): {plain:7.1f} s "
              f"({plain / count:.2f} s per submission)")
        ours = autograder(root / "submissions", root / "out", args.jobs)
        print(f"python -m autograder grade --jobs {args.jobs} (sandboxed, from a cold start):          {ours:7.1f} s "
              f"({ours / count:.2f} s per submission)")
        print(f"ratio autograder / plain nbgrader: {ours / plain:.2f} (goal: at most 0.6 with 2 jobs on 2 cores)")
        print("each submission's sandbox start, seconds (bwrap launched -> the kernel's first line):")
        print(sandbox_starts(root / "out", args.assignments))
        print("where the autograder's time went, per submission (each worker's own clock):")
        print(where_time_went(root / "out", args.assignments))


if __name__ == "__main__":
    main()
