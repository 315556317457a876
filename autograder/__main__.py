"""Command line: `python -m autograder release`, `python -m autograder grade` and `python -m autograder export`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autograder import export
from autograder.release import release
from autograder.similarity import DEFAULT_THRESHOLD
from course import ROOT


def _grade_parser(commands) -> None:
    grade = commands.add_parser(
        "grade", help="grade a class: grades.csv, feedback/ and report.html in --out",
        description="Grade every submission with nbgrader, in parallel, in sandboxed kernels. SUBMISSIONS is a "
                    "folder SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb, a zip of that layout, or a "
                    "Canvas submissions zip. Re-running grades only what changed.")
    grade.add_argument("submissions", type=Path, help="folder or zip of submissions")
    grade.add_argument("--out", type=Path, required=True, help="folder for grades.csv, feedback/, report.html")
    grade.add_argument("--jobs", type=int, default=None,
                       help="parallel graders (default: the number of cores; not with --scheduler)")
    grade.add_argument("--scheduler", default="", metavar="ADDRESS",
                       help="grade on the Dask cluster of this scheduler (e.g. tcp://10.0.0.5:8786) instead of "
                            "local processes; its workers set the parallelism")
    grade.add_argument("--db", default="", help="gradebook SQLAlchemy URL (default: sqlite in --out)")
    grade.add_argument("--source", type=Path, default=ROOT / "solutions",
                       help="folder of nbgrader source assignments (default: solutions/)")
    grade.add_argument("--cell-timeout", type=int, default=60, help="seconds one cell may run (default 60)")
    grade.add_argument("--timeout", type=int, default=600,
                       help="seconds of wall and CPU time for one submission (default 600)")
    grade.add_argument("--memory", type=float, default=3.0, help="GiB of address space per kernel (default 3)")
    grade.add_argument("--no-isolate", action="store_true",
                       help="run kernels without the bubblewrap sandbox, as this user (resource limits still apply; "
                            "a warning says so)")
    grade.add_argument("--similarity-threshold", type=_fraction, default=DEFAULT_THRESHOLD, metavar="S",
                       help="list pairs of students whose solution code is at least this similar (0 to 1) in "
                            f"similarity.csv and the report, for the instructor only (default {DEFAULT_THRESHOLD})")
    grade.add_argument("--no-similarity", action="store_true", help="no similarity report (no similarity.csv)")
    grade.add_argument("--quiet", action="store_true", help="no progress bar")


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a similarity is between 0 and 1, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="regenerate exercises/ from solutions/ with nbgrader")
    _grade_parser(commands)
    export.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "export":
        return export.run(args)
    if args.command == "release":
        for folder in release():
            print(f"released {folder}")
        return 0
    from autograder.grade import Options, grade

    if not args.submissions.exists():
        parser.error(f"no such folder or zip: {args.submissions}")
    if args.scheduler and args.jobs is not None:
        parser.error("--jobs has no meaning with --scheduler: each thread of each Dask worker grades one "
                     "submission at a time (start workers with `dask worker --nworkers N --nthreads 1`)")
    jobs = 1 if args.scheduler else len(os.sched_getaffinity(0)) if args.jobs is None else args.jobs
    return grade(Options(submissions=args.submissions, out=args.out.resolve(), jobs=max(1, jobs), db_url=args.db,
                         source=args.source.resolve(), cell_timeout=args.cell_timeout,
                         submission_timeout=args.timeout, memory_bytes=int(args.memory * 2**30),
                         isolate=not args.no_isolate, progress=not args.quiet, scheduler=args.scheduler,
                         similarity_threshold=None if args.no_similarity else args.similarity_threshold))


if __name__ == "__main__":
    sys.exit(main())
