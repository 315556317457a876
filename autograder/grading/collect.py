"""`python -m autograder collect DIR`: bring DIR's class files up to date with the manual points given since the
last run of `grade`, without the submissions and without grading anything.

After manual grading (nbgrader's formgrader started in DIR, or its gradebook API), this rewrites ``grades.csv``,
``similarity.csv`` and ``report.html`` from every row stored in DIR (`autograder.reports.state`) and the points the class
gradebook holds now (`autograder.reports.class_record.class_rows`), as `grade` writes them at the end of a run: a cell
given its points counts them, a cell still without is pending. It holds DIR's lock while it writes (a `grade`
writing to DIR at the same time is refused, and the other way round), starts no kernel and no sandbox, and
makes an assignment's template only when DIR's cache no longer holds it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.grading.lock import under_lock
from autograder.grading.options import SOURCE
from autograder.reports.class_record import class_rows, submitted_tasks
from autograder.reports.output_folder import OutputFolder
from course import SOLUTIONS


def add_parser(commands: "argparse._SubParsersAction", threshold: float, fraction) -> None:
    """Register the ``collect`` subcommand (``threshold``: the default similarity threshold; ``fraction``: its
    argument type), with the similarity options of ``grade``."""
    collect = commands.add_parser(
        "collect", help="after manual grading: rewrite DIR's grades.csv, similarity.csv and report.html with the "
                        "points given by hand, without grading again",
        description="Rewrite grades.csv, similarity.csv and report.html of DIR from every row stored there and the "
                    "manual points its gradebook holds now (formgrader, nbgrader's gradebook API). Nothing is "
                    "graded again and no submissions are needed.")
    collect.add_argument("dir", type=Path, metavar="DIR", help="the --out folder of `python -m autograder grade`")
    collect.add_argument("--source", type=Path, default=SOURCE, metavar="DIR",
                         help=f"the nbgrader source assignments DIR was graded from (default: {SOLUTIONS}/)")
    collect.add_argument("--db", default="", metavar="URL", help="the gradebook grade was given with --db "
                                                                 "(default: DIR/gradebook.db)")
    collect.add_argument("--similarity-threshold", type=fraction, default=threshold, metavar="S",
                         help=f"as for grade (default {threshold})")
    collect.add_argument("--no-similarity", action="store_true", help="as for grade: no similarity.csv")


def run(args: argparse.Namespace) -> int:
    """The ``collect`` command: exit status 0, or 2 after one ``error:`` line."""
    out = OutputFolder(args.dir.resolve())
    if not out.states.is_dir():
        print(f"error: {args.dir} holds no grading run (no {out.states.name}/): grade into it first with "
              f"`python -m autograder grade SUBMISSIONS --out {args.dir}`", file=sys.stderr)
        return 2
    if not args.source.is_dir():
        print(f"error: --source: no such folder: {args.source}", file=sys.stderr)
        return 2
    return under_lock(out, lambda: _collect(out, args))


def _collect(out: OutputFolder, args: argparse.Namespace) -> int:
    try:
        print(collect(out, args.source.resolve(), args.db or out.gradebook_url,
                      None if args.no_similarity else args.similarity_threshold))
    except RuntimeError as error:  # a template that could not be made, a worker that could not start
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def collect(out: OutputFolder, source: Path, db_url: str, threshold: float | None) -> str:
    """Rewrite ``out``'s class files from its stored rows and the gradebook's manual points; what it did."""
    from autograder.grading.templates import prepare_templates, read_course
    from autograder.reports.grades_csv import write_grades
    from autograder.reports.gradebook import read_manual_scores
    from autograder.workers.pool import Pool
    from autograder.reports.report import write_report
    from autograder.reports.similarity import class_similarity, write_similarity
    from autograder.reports.state import stored_rows

    stored = stored_rows(out)
    pool = Pool(1, out.logs)  # only for a template DIR's cache no longer holds
    try:
        course = read_course(source)
        templates = prepare_templates(course, out.cache, pool, {a for _, a in stored} & course.assignments)
    finally:
        pool.close()
    given = read_manual_scores(db_url, templates, stored)
    similarity = class_similarity(submitted_tasks(out, stored, []), templates, threshold, source)
    rows = class_rows(stored, templates, given)
    write_grades(out.grades, rows)
    write_similarity(out.similarity, similarity)
    write_report(out.report, rows, templates, similarity)
    pending = sum(len(row.pending) for row in rows)
    return (f"collected {len(rows)} rows of {len({r.student_id for r in rows})} students; "
            f"{sum(points is not None for points in given.values())} manually graded cells have their points, "
            f"{pending} still wait for them; wrote {out.grades}, {out.similarity}, {out.report}")
