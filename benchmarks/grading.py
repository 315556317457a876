"""Grade synthetic classes with plain sequential nbgrader, then with `python -m autograder grade` warm (kernels
forked from a sandboxed process per assignment) and `--cold` (one fresh sandboxed kernel per submission), all in
the same run; or (``--compare``) print two earlier runs' figures side by side.

    python -m benchmarks.grading [--classes small large] [--students 6] [--assignments 01_similarity 03_multi_head
                                 06_rope] [--class-size 120] [--class-assignment 01_similarity] [--modes warm cold]
                                 [--large-cold] [--no-plain] [--jobs 2] [--checkout DIR] [--json PATH]
    python -m benchmarks.grading --checkout ../main --json old.json; python -m benchmarks.grading --json new.json
    python -m benchmarks.grading --compare old.json new.json
    python -m benchmarks.grading --classes large --class-size 300 --modes warm --no-plain   # 300 students, warm

Two classes; in each, every student hands in every assignment, half with the reference solution and half with
the blank exercise notebook:
- small: --students (6) x --assignments (chapters 1, 3 and 6: 18 notebooks), graded by plain nbgrader and by the
  autograder in each of --modes;
- large: --class-size (120) students of --class-assignment (chapter 1), graded by plain nbgrader and by the
  autograder warm (and --cold too with --large-cold, when cold is in --modes).
Every run does the same work from a cold start: plain nbgrader generates each assignment (nbgrader's
GenerateAssignment, as `release` does: `autograder.nbgrader_course.generate_assignment`, in this process, its
gradebook on disk; the autograder's templates run it in memory with the cell check compiled,
`autograder.nbgrader_course.generate_template`), then runs `nbgrader autograde` and
`nbgrader generate_feedback` per assignment, one after another, on a course folder made for it; the autograder
runs per mode on an empty output folder (it generates its templates too) with --jobs workers. Each grading runs
twice (`benchmarks.grading_runs.measured`): first sampled for its peak memory, then timed with nothing sampling it
(the sampler's reads of every process's pages would take the cores' time from the run). --no-plain
skips plain nbgrader (no ratios, no score comparison). --checkout DIR times the autograder of another copy of
this repository (DIR/.venv/bin/python -m autograder, run in DIR; main's, say), so that the code before a change
and after it are timed by the same benchmark; plain nbgrader always runs from this checkout.

Printed for each class, as Markdown: a table of its runs (wall time, per submission, ratio to plain nbgrader,
the peak memory of the sampled run's whole process tree from `benchmarks.memory`: the sums of PSS and of USS,
which count the pages that forks share once, and of RSS, which does not; this process, where plain nbgrader's
assignments are generated, is not counted; the 1-minute load average from /proc/loadavg before and after the
timed run, which comes right after the sampled one; how many cores the whole machine kept busy on average while
the timed run ran, from /proc/stat's busy CPU-seconds over its wall time: near the core count, the run is bound
by the cores' time, and only less work makes it faster); for each mode
the mean seconds per submission of each phase, by assignment, from the autograder's stored results (each
worker's own clock), and their sum after nbgrader's set-up (from the kernel's fork or launch to the verdict);
whether warm and cold wrote the same grades.csv (the rows that differ, if any); and whether each autograder run
gave each student plain nbgrader's score and maximum (nbgrader's gradebook), where both graded the submission.
Last, each class's ratios with the load average, the cores busy and the core count beside them, and the goals: the
small class warm at most 0.10 of plain nbgrader on 2 idle cores, peak PSS of a --jobs 2 run under 1 GiB, 300
students of chapter 1 warm in under 120 s. --json PATH writes every figure (`benchmarks.grading_figures`);
--compare OLD NEW grades nothing and prints two such files side by side, each figure as before → after: the runs
of each class both graded, then its mean seconds per phase per submission.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from benchmarks.grade_agreement import same_rows, same_scores
from benchmarks.grading_figures import Agreement, ClassFigures, Figures
from benchmarks.grading_runs import autograder, describe_code, grade_rows, interpreter, make_class, phase_means, \
    plain_nbgrader, plain_scores
from benchmarks.grading_tables import agreement_text, compare_text, describe_class, grades_lines, phase_table, \
    ratio_lines, run_table
from course import ROOT
from course.machine import describe_machine


def grade_class(root: Path, name: str, students: int, assignments: list[str], modes: list[str], plain: bool,
                jobs: int, checkout: Path = ROOT) -> ClassFigures:
    """Make the class under ``root``, grade it with plain nbgrader (when ``plain``) and ``checkout``'s autograder
    in each mode, and read back the phases and the grades of every run."""
    submissions = root / "submissions"
    make_class(submissions, students, assignments)
    runs = [plain_nbgrader(submissions, root / "course", assignments)] if plain else []
    runs += [autograder(submissions, root / mode, jobs, mode, checkout) for mode in modes]
    rows = {mode: grade_rows(root / mode) for mode in modes}
    agreements: list[Agreement] = []
    if "warm" in rows and "cold" in rows:
        agreements.append(same_rows("warm", rows["warm"], "cold", rows["cold"]))
    if plain:
        scores = plain_scores(root / "course")
        agreements += [same_scores(mode, rows[mode], scores) for mode in modes]
    return ClassFigures(name, students, tuple(assignments), tuple(runs),
                        {mode: phase_means(root / mode, assignments) for mode in modes}, tuple(agreements))


def class_text(figures: ClassFigures, jobs: int, cores: int) -> str:
    """A class's tables and grade comparisons, as printed."""
    parts = [describe_class(figures), run_table(figures, jobs, cores)]
    parts += [phase_table(mode, means, figures.assignments) for mode, means in figures.phases.items()]
    parts += [agreement_text(agreement) for agreement in figures.agreements]
    return "\n\n".join(parts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", nargs="+", choices=["small", "large"], default=["small", "large"])
    parser.add_argument("--students", type=int, default=6, help="students of the small class")
    parser.add_argument("--assignments", nargs="+", default=["01_similarity", "03_multi_head", "06_rope"],
                        help="assignments of the small class")
    parser.add_argument("--class-size", type=int, default=120, help="students of the large class")
    parser.add_argument("--class-assignment", default="01_similarity", help="the large class's one assignment")
    parser.add_argument("--modes", nargs="+", choices=["warm", "cold"], default=["warm", "cold"],
                        help="the autograder runs to time (default: both; the large class: warm only)")
    parser.add_argument("--large-cold", action="store_true", help="time the large class --cold too")
    parser.add_argument("--no-plain", action="store_true", help="skip plain nbgrader")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--checkout", type=Path, default=ROOT,
                        help="time the autograder of this copy of the repository, with its .venv (default: this one)")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"),
                        help="grade nothing: print the figures two --json files hold, before → after")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if not Path(interpreter(args.checkout)).is_file():
        parser.error(f"--checkout {args.checkout}: no {interpreter(args.checkout)} to run its autograder with")
    if args.compare:
        old, new = (Figures.from_json(path.read_text()) for path in args.compare)
        print(compare_text(old, new))
        return
    machine, cores, code = describe_machine(), os.cpu_count() or 1, describe_code(args.checkout)
    print(machine)
    print(f"autograder timed: {code}")
    classes = {"small": (args.students, args.assignments, args.modes),
               "large": (args.class_size, [args.class_assignment],
                         [mode for mode in args.modes if mode == "warm" or args.large_cold])}
    graded = []
    with tempfile.TemporaryDirectory(prefix="grading-benchmark-") as scratch:
        for name in args.classes:
            students, assignments, modes = classes[name]
            figures = grade_class(Path(scratch) / name, name, students, assignments, modes, not args.no_plain,
                                  args.jobs, args.checkout)
            print()
            print(class_text(figures, args.jobs, cores), flush=True)
            graded.append(figures)
    everything = Figures(machine, cores, args.jobs, tuple(graded), code)
    print()
    print("\n".join(text for text in (ratio_lines(everything), grades_lines(everything)) if text))
    if args.json:
        args.json.write_text(everything.to_json())
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
