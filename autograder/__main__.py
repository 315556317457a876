"""Command line: `python -m autograder release [ASSIGNMENT ...]`, `python -m autograder grade SUBMISSIONS --out DIR`,
`python -m autograder collect DIR`, `python -m autograder export DIR --lms canvas|moodle ...` and
`python -m autograder feedback-zip DIR ...`.

Exit status: 0 when everything handed in was graded, 1 when some submissions could not be (each with its
reason in grades.csv), 2 for a usage error, an unreadable SUBMISSIONS or when nothing could be graded.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from dataclasses import replace
from importlib import metadata
from pathlib import Path

from autograder.grading import collect
from autograder.grading.options import SOURCE, Options
from autograder.grading.release import release
from autograder.lms import canvas_feedback, export
from autograder.reports.similarity import DEFAULT_THRESHOLD
from autograder.sandbox.limits import Limits
from autograder.submissions import student_tree
from autograder.submissions.find import STAGING_BYTES
from course import EXERCISES, ROOT, SOLUTIONS
from course.chapters import slugs

USAGE_ERROR = 2
DEFAULT = Limits()  # the defaults of every limit option below
GiB, MiB = 2**30, 2**20


def _version() -> str:
    try:
        return f"%(prog)s {metadata.version('attention-by-hand')}"
    except metadata.PackageNotFoundError:  # a checkout that was never installed (`pip install -e .`)
        return "%(prog)s (not installed)"


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _grade_parser(commands) -> None:
    grade = commands.add_parser(
        "grade", help="grade a class: grades.csv, feedback/ and report.html in --out",
        description="Grade every submission with nbgrader, in parallel, in sandboxed kernels. SUBMISSIONS is a "
                    "folder SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb, a zip of that layout, or a "
                    "Canvas submissions zip. Re-running grades only what changed. Exit status: 0 when everything "
                    "handed in was graded, 1 when some submissions could not be (grades.csv says why), 2 for a "
                    "usage error, an unreadable SUBMISSIONS or when nothing could be graded.")
    grade.add_argument("submissions", type=Path, metavar="SUBMISSIONS", help="folder or zip of submissions")
    grade.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help=f"folder for grades.csv, feedback/, report.html (not inside {SOLUTIONS}/, {EXERCISES}/ or "
                            "--source)")
    grade.add_argument("--assignment", action="append", default=[], metavar="A",
                       help="grade only this assignment (repeatable; default: every assignment handed in)")
    grade.add_argument("--student", action="append", default=[], metavar="S",
                       help="grade only this student id (repeatable; default: every student found)")
    grade.add_argument("--force", action="store_true", help="grade again what an earlier run stored")
    grade.add_argument("--jobs", type=_at_least_one, default=None, metavar="N",
                       help="parallel graders, at least 1 (default: the number of cores; not with --scheduler)")
    grade.add_argument("--scheduler", default="", metavar="ADDRESS",
                       help="grade on the Dask cluster of this scheduler (e.g. tcp://10.0.0.5:8786) instead of "
                            "local processes; its workers set the parallelism")
    grade.add_argument("--db", default="", metavar="URL",
                       help="gradebook SQLAlchemy URL (default: sqlite:///DIR/gradebook.db)")
    grade.add_argument("--source", type=Path, default=SOURCE, metavar="DIR",
                       help=f"folder of nbgrader source assignments (default: {SOLUTIONS}/)")
    grade.add_argument("--cell-timeout", type=_at_least_one, default=DEFAULT.cell_seconds, metavar="S",
                       help=f"seconds one cell may run (default {DEFAULT.cell_seconds})")
    grade.add_argument("--timeout", type=_at_least_one, default=DEFAULT.cpu_seconds, metavar="S",
                       help=f"seconds of wall and CPU time for one submission (default {DEFAULT.cpu_seconds})")
    grade.add_argument("--memory", type=float, default=DEFAULT.memory_bytes / GiB, metavar="GiB",
                       help=f"GiB of address space per kernel (default {DEFAULT.memory_bytes / GiB:g})")
    grade.add_argument("--disk", type=_at_least_one, default=DEFAULT.disk_bytes // MiB, metavar="MiB",
                       help=f"MiB of a kernel's home, a tmpfs with an inode per 4 KiB (default "
                            f"{DEFAULT.disk_bytes // MiB}); a write past it fails, and a notebook that leaves it full "
                            "is not graded: too large")
    grade.add_argument("--max-unpacked", type=float, default=STAGING_BYTES / GiB, metavar="GiB",
                       help=f"GiB a zip of submissions may unpack in all (default {STAGING_BYTES / GiB:g}); the "
                            "students past it are not graded: too large")
    grade.add_argument("--no-isolate", action="store_true",
                       help="run kernels without the bubblewrap sandbox, as this user (resource limits still apply; "
                            "a warning says so)")
    grade.add_argument("--cold", action="store_true",
                       help="start one fresh kernel process per submission (the fallback) instead of forking each "
                            "from a warm process per assignment that has imported numpy, torch and the checks")
    grade.add_argument("--similarity-threshold", type=_fraction, default=DEFAULT_THRESHOLD, metavar="S",
                       help="list pairs of students whose solution code is at least this similar (0 to 1) in "
                            f"similarity.csv and the report, for the instructor only (default {DEFAULT_THRESHOLD})")
    grade.add_argument("--no-similarity", action="store_true", help="no similarity report (no similarity.csv)")
    grade.add_argument("--secret-file", type=Path, default=None, metavar="FILE",
                       help="the secret hidden tests draw their inputs from (created with mode 0600 when missing): "
                            "name the same file to share it between output folders (default: DIR/.hidden-inputs."
                            "secret, made by the first run)")
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    grade.add_argument("--version", action="version", version=_version())


def _usage_problem(args: argparse.Namespace) -> str:
    """Why these grade arguments cannot run ('' when they can): each a line that names the argument."""
    source, out = args.source.resolve(), args.out.resolve()
    if not args.submissions.exists():
        return f"SUBMISSIONS: no such folder or zip: {args.submissions}"
    if not source.is_dir():
        return f"--source: no such folder: {args.source}"
    for folder, name in ((ROOT / SOLUTIONS, f"{SOLUTIONS}/"), (ROOT / EXERCISES, f"{EXERCISES}/"),
                         (source, "--source"), (args.submissions.resolve(), "SUBMISSIONS")):
        if out == folder or out.is_relative_to(folder):
            return (f"--out {args.out} is inside {name} ({folder}): grades, feedback and the gradebook would be "
                    "released with the course or read by the notebooks graded; choose a folder outside it")
        if args.secret_file and args.secret_file.resolve().is_relative_to(folder):
            return (f"--secret-file {args.secret_file} is inside {name} ({folder}): it would be released with the "
                    "course or read by the notebooks graded; keep it outside")
    from autograder.grading.templates import course_notebooks

    course = sorted(set(course_notebooks(source).values()))
    unknown = [a for a in args.assignment if a not in course]
    if unknown:
        return f"--assignment {unknown[0]}: not an assignment of {args.source} ({', '.join(course)})"
    if args.scheduler and args.jobs is not None:
        return ("--jobs has no meaning with --scheduler: each thread of each Dask worker grades one submission at "
                "a time (start workers with `dask worker --nworkers N --nthreads 1`)")
    return ""


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a similarity is between 0 and 1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m autograder` and its subcommands, the one place their options are declared, each
    default read from the module that defines it; tests/test_defaults.py holds README.md's and
    docs/instructor-cli.md's option tables to it."""
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser("release", help="regenerate exercises/ from solutions/ with nbgrader")
    release_parser.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                                help="the assignments to regenerate (default: every chapter)")
    student_tree.add_arguments(release_parser)
    _grade_parser(commands)
    collect.add_parser(commands, DEFAULT_THRESHOLD, _fraction)
    export.add_parser(commands)
    canvas_feedback.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "collect":
        return collect.run(args)
    if args.command == "export":
        return export.run(args)
    if args.command == "feedback-zip":
        return canvas_feedback.run(args)
    if args.command == "release":
        unknown = [a for a in args.assignments if a not in slugs()]
        if unknown:
            print(f"error: {unknown[0]} is not an assignment of this course ({', '.join(slugs())})", file=sys.stderr)
            return USAGE_ERROR
        if problem := student_tree.options_problem(args):
            print(f"error: {problem}", file=sys.stderr)
            return USAGE_ERROR
        for folder in release(assignments=tuple(args.assignments) or None):
            print(f"released {folder}")
        try:
            if args.student_tree:
                print(student_tree.run(args))
        except student_tree.StudentTreeError as error:
            print(f"error: {error}", file=sys.stderr)
            return USAGE_ERROR
        return 0
    problem = _usage_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return USAGE_ERROR
    from autograder.grading.run import grade

    return grade(options_from(args))


def options_from(args: argparse.Namespace) -> Options:
    """The `Options` of parsed ``grade`` arguments (a run without options gets `Options`' own defaults)."""
    jobs = 1 if args.scheduler else len(os.sched_getaffinity(0)) if args.jobs is None else args.jobs
    limits = replace(DEFAULT, memory_bytes=int(args.memory * GiB), cpu_seconds=args.timeout,
                     cell_seconds=args.cell_timeout, disk_bytes=args.disk * MiB)
    return Options(submissions=args.submissions, out=args.out.resolve(), jobs=jobs, db_url=args.db,
                   source=args.source.resolve(), limits=limits, unpacked_bytes=int(args.max_unpacked * GiB),
                   isolate=not args.no_isolate, warm=not args.cold, progress=not args.quiet,
                   scheduler=args.scheduler, secret_file=args.secret_file and args.secret_file.resolve(),
                   assignments=tuple(args.assignment), students=tuple(args.student), force=args.force,
                   similarity_threshold=None if args.no_similarity else args.similarity_threshold)


def _ending(status: int) -> int:
    """``status``, once every object this process made is out of the collector's reach (``gc.freeze``): the process
    ends here, its files written and closed, and the interpreter's exit need not walk them all again (over half a
    second of a core after a grading run)."""
    gc.freeze()
    return status


if __name__ == "__main__":
    sys.exit(_ending(main()))
