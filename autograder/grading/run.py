"""`python -m autograder grade`: grade a class in parallel with nbgrader, in sandboxed kernels, resumably.

1. SUBMISSIONS is read (`autograder.submissions.find`): every student found, with what each handed in or why
   it cannot be graded; the run prints a line for each problem of the input. An unreadable SUBMISSIONS
   ends the run here (exit status 2). ``--student`` and ``--assignment`` keep what they name.
2. The run is planned once (`autograder.grading.plan.RunPlan`), and every later step reads that plan: a real
   sandbox is started once (`autograder.sandbox.probe.check_isolation`) while the template of each assignment handed in
   is generated or reused (`autograder.grading.templates`). When no sandbox can be made the command stops
   with the reason and the line that enables it, unless ``--no-isolate`` was asked for.
3. Each (student, assignment) becomes a task keyed by a hash of the submitted notebook(s), the
   template and the grading settings (`autograder.grading.tasks`). A task whose key matches a stored result in
   ``DIR/.state`` (`autograder.reports.state`) is not graded again (unless ``--force``), so re-running is
   idempotent and an interrupted run resumes; a result that is not the student's own failure (a
   killed worker) is never stored. Every path under DIR comes from `autograder.reports.output_folder.OutputFolder`.
4. ``--jobs`` worker processes (`autograder.workers.pool`), or a Dask cluster's (`autograder.workers.dask_pool`),
   the same `autograder.workers.dispatch.Dispatcher` either way, grade the others: each task becomes a
   `autograder.records.Job` (`autograder.grading.plan.RunPlan.job`), graded by
   `autograder.harness.notebook.grade_submission` in a kernel of its own sandbox, which returns a
   `autograder.records.Result`.
5. This process writes each result's feedback and autograded notebooks, stores its row, has it merged into
   the class gradebook (``--db``, any SQLAlchemy URL; manual scores given there are kept) by a worker of its
   own (`autograder.workers.recorder`: this process imports nbgrader only to read manual points), then writes
   ``grades.csv``, ``similarity.csv`` (`autograder.reports.similarity`, for the instructor only) and
   ``report.html`` from every row stored in DIR, with the manual points given so far
   (`autograder.reports.class_record`): DIR is the class's record for the term, locked while a run writes to
   it, private to the instructor, and a 'no submission' never replaces what it stores. The exit status
   is 0 when everything handed in was graded, 1 when some of it could not be, 2 when nothing was.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autograder.grading.options import Options
from autograder.grading.lock import under_lock
from autograder.grading.plan import RunPlan, make_plan
from autograder.grading.templates import read_course
from autograder.grading.progress import Progress
from autograder.grading.secret import SecretUnusable
from autograder.grading.timeline import Timeline
from autograder.nbgrader_course import nbgrader_environment
from autograder.records import Result, Status, Task
from autograder.reports.class_record import (changes, class_rows, keep_submitted, kept_instead, row, submitted_tasks,
                                             write_nbgrader_config)
from autograder.reports.gradebook import read_manual_scores
from autograder.reports.grades_csv import write_grades
from autograder.reports.output_folder import OutputFolder
from autograder.reports.recorded import recorded_submissions
from autograder.reports.similarity import class_similarity, write_similarity
from autograder.reports.state import Stored, load_state, save_state, stored_rows
from autograder.sandbox.bwrap import remove_scratch
from autograder.sandbox.probe import SandboxUnavailable
from autograder.submissions.find import SubmissionsUnreadable, find, normal_id, select, valid_student_id
from autograder.workers.dispatch import Dispatcher, KernelSet, grading_weight
from autograder.workers.pool import Pool, WorkerStartError
from autograder.workers.recorder import GradebookUnwritable


def grade(options: Options) -> int:
    """Grade every submission; returns the exit status: 0 when everything handed in was graded, 1 when some of
    it could not be (the reasons are in grades.csv), 2 when SUBMISSIONS cannot be read or nothing was graded,
    when the output folder cannot be made or another run is writing to it, or when the class gradebook cannot be
    written."""
    out = OutputFolder(options.out)
    return under_lock(out, lambda: _grade(options, out))


def _grade(options: Options, out: OutputFolder) -> int:
    os.environ["PATH"] = nbgrader_environment()["PATH"]
    # A terminated run stops its workers and kernels on the way out; what finished is kept for the next run.
    signal.signal(signal.SIGTERM, _terminate)
    scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
    pool = Pool(options.jobs, out.logs)
    dispatcher: Dispatcher = pool
    timeline = Timeline(out.logs / "run.log")
    try:
        earlier = stored_rows(out)
        known = {e.lms_user_id: s for (s, _), e in sorted(earlier.items()) if e.lms_user_id}
        course = read_course(options.source)
        found, said = find(options.submissions, dict(course.notebooks), scratch / "submissions",
                           options.unpacked_bytes, known)
        found = select(found, options.students, options.assignments)
        for line in said:
            print(line, file=sys.stderr)
        for student in sorted(set(map(normal_id, options.students)) - set(found)):
            print(f"--student {student}: nothing of this student in {options.submissions}", file=sys.stderr)
        if not found:
            print(f"error: no submissions found in {options.submissions}", file=sys.stderr)
            return 2
        timeline.mark(f"submissions of {len(found)} students found")
        if options.scheduler:  # first: an unreachable or unfit cluster stops the run within seconds
            from autograder.workers.dask_pool import ClusterPool

            dispatcher = ClusterPool(options.scheduler, options.isolate)
        plan = make_plan(options, out, course, found, earlier, pool, dispatcher, scratch, timeline)
        print(f"grading {len(plan.tasks)} submissions of {len(found)} students {dispatcher.describe()}\n"
              f"{plan.isolation.described}", file=sys.stderr)
        return _grade_tasks(plan, dispatcher, pool, scratch, timeline)
    except SubmissionsUnreadable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SandboxUnavailable as error:
        print(f"error: {error}\nTo grade without a sandbox anyway (student code then runs as you, with resource "
              "limits only), pass --no-isolate.", file=sys.stderr)
        return 2
    except (WorkerStartError, SecretUnusable, GradebookUnwritable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        pool.close()
        if dispatcher is not pool:
            dispatcher.close()
        remove_scratch(scratch)
        timeline.mark("done")
        timeline.close(pool.logs_of_workers())


def _replace_folder(folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` (name -> text: a graded result's feedback pages or autograded notebooks) into ``folder``,
    in place of what it held."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / Path(name).name).write_text(text)


def _grade_tasks(plan: RunPlan, dispatcher: Dispatcher, pool: Pool, scratch: Path,
                 timeline: Timeline | None = None) -> int:
    """Grade what ``plan``'s tasks need graded on ``dispatcher``, keep the rest, record the results in the class
    gradebook from a worker of ``pool``'s, and write the class files (each step marked on ``timeline``, where
    given)."""
    from autograder.reports.report import write_report
    from autograder.workers.recorder import Recorder

    out, tasks, templates, earlier = plan.out, plan.tasks, plan.templates, plan.stored
    progress = Progress(tasks, plan.progress)
    now: dict[tuple[str, str], Stored] = {}  # this run's rows (those that replace a stored one)
    opened: Recorder | None = None  # what records the class gradebook, started when first used
    held: set[tuple[str, str]] | None = None  # the submissions it held, read (without nbgrader) when first asked

    def gradebook() -> Recorder:
        nonlocal opened
        if opened is None:
            opened = Recorder(pool, plan.db_url, templates)
        return opened

    def recorded(where: tuple[str, str], this: Stored) -> bool:
        """Whether the gradebook holds ``this``, a row an earlier run stored and recorded, already (never one with
        a cell graded by hand: recording it again says whether it still needs its points)."""
        nonlocal held
        if earlier.get(where) != this or any(cell.manual for cell in this.result.cells):
            return False
        if held is None:
            held = recorded_submissions(plan.db_url)
        return where in held

    def finish(task: Task, result: Result, fresh: bool) -> None:
        progress.update(task, result.graded)
        if kept_instead(task, earlier) is not None:
            return  # a 'no submission' leaves the stored row, its feedback and its scores as they are
        where, this = (task.student, task.assignment), row(task, result, templates.get(task.assignment))
        # An invalid id names no folder, and nbgrader's gradebook holds valid ids only.
        if not (valid_student_id(task.student) and valid_student_id(task.assignment)) or result.transient:
            now[where] = this
            return
        if fresh and result.graded:
            _replace_folder(out.feedback(*where), result.feedback)
            _replace_folder(out.autograded(*where), {f"{n}.ipynb": text for n, text in result.autograded.items()})
        if task.notebooks and not task.problem and (fresh or not out.submitted(*where).is_dir()):
            keep_submitted(out, task)
        if fresh or earlier.get(where) != this:
            save_state(out, task, result, this.max_score)  # a problem too: it has no key, so it is never reused
        if not result.graded:
            shutil.rmtree(out.feedback(*where), ignore_errors=True)
            shutil.rmtree(out.autograded(*where), ignore_errors=True)
        if task.assignment in templates and (fresh or not recorded(where, this)):
            gradebook().record(task, result)
        now[where] = this

    to_grade, reused = [], 0
    for task in tasks:
        if task.problem:
            finish(task, Result(Status.FAILED, task.problem), fresh=False)
        elif not plan.force and (stored := load_state(out, task)) is not None:
            finish(task, stored, fresh=False)
            reused += 1
        else:
            to_grade.append(task)
    # The lightest assignments first: their zygote and workers are ready seconds before torch's (`grading_weight`).
    weights = {a: grading_weight(KernelSet.of(template), template.imports) for a, template in templates.items()}
    to_grade.sort(key=lambda t: (weights[t.assignment], t.assignment))
    jobs = [plan.job(t, scratch) for t in to_grade]
    compared = submitted_tasks(out, earlier, tasks)
    # The similarity of the class's code needs only the submitted files: it is computed while they are graded.
    with ThreadPoolExecutor(1) as background:
        similar = background.submit(class_similarity, compared, templates, plan.similarity_threshold,
                                    plan.course.source)
        try:
            def graded(index: int, result: Result) -> None:
                if timeline is not None:
                    timeline.verdict(len(jobs))
                finish(to_grade[index], result, True)

            dispatcher.run(jobs, plan.limits.wall_seconds, graded)
        finally:
            if opened is not None:
                opened.close()  # every result recorded and committed before the manual points are read
        every = {**earlier, **now}
        manual = any(cell.manual for entry in every.values() for cell in entry.result.cells)
        given = read_manual_scores(plan.db_url, templates, every) if manual else {}
        similarity = similar.result()
    rows = class_rows({**earlier, **now}, templates, given)
    write_grades(out.grades, rows)
    write_similarity(out.similarity, similarity)
    write_report(out.report, rows, templates, similarity)
    write_nbgrader_config(out, plan.course.source, plan.db_url)
    if timeline is not None:
        timeline.mark("class files written")
    mine = [now[w] for w in ((t.student, t.assignment) for t in tasks) if w in now]
    graded = sum(entry.result.graded for entry in mine)
    failed = sum(not entry.result.graded and not entry.missing for entry in mine)
    kept = sum(kept_instead(t, earlier) is not None for t in tasks)
    print(f"graded {graded} of {len(tasks) - kept} submissions ({len(to_grade)} run now, {reused} kept from an "
          f"earlier run){f'; {kept} with no submission now keep the row stored earlier' if kept else ''}; "
          f"{len(rows)} rows of {len({r.student_id for r in rows})} students in the folder; wrote "
          f"{out.grades}, {out.all_feedback}, {out.report}", file=sys.stderr)
    changed = changes(earlier, now)
    if changed:
        print(f"{len(changed)} grades changed (old -> new):", *changed, sep="\n", file=sys.stderr)
    if failed:
        print(f"{failed} submissions could not be graded: grades.csv says why", file=sys.stderr)
    return 2 if not graded and not kept else 1 if failed else 0


def _terminate(signum: int, frame) -> None:
    raise SystemExit(128 + signum)
