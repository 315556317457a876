"""`python -m autograder grade`: grade a class in parallel with nbgrader, in sandboxed kernels, resumably.

1. SUBMISSIONS is read (`autograder.submissions.find`): every student found, with what each handed in or why
   it cannot be graded; the run prints a line for each problem of the input. An unreadable SUBMISSIONS
   ends the run here (exit status 2). ``--student`` and ``--assignment`` keep what they name.
2. A real sandbox is started once (`autograder.sandbox.probe.check_isolation`) while the template of each assignment
   handed in is generated or reused (`autograder.grading.templates`). When no sandbox can be made the
   command stops with the reason and the line that enables it, unless ``--no-isolate`` was asked for.
3. Each (student, assignment) becomes a task keyed by a hash of the submitted notebook(s), the
   template and the grading settings (`autograder.grading.tasks`). A task whose key matches a stored result in
   ``DIR/.state`` (`autograder.reports.state`) is not graded again (unless ``--force``), so re-running is
   idempotent and an interrupted run resumes; a result that is not the student's own failure (a
   killed worker) is never stored. Every path under DIR comes from `autograder.reports.layout.OutputFolder`.
4. ``--jobs`` worker processes (`autograder.workers.pool`), or a Dask cluster's (`autograder.workers.dask_pool`), grade
   the others: each task becomes a `autograder.records.Job`, graded by
   `autograder.harness.notebook.grade_submission` in a kernel of its own sandbox, which returns a
   `autograder.records.Result`.
5. This process writes each result's feedback and autograded notebooks, stores its row, merges it into
   the class gradebook (``--db``, any SQLAlchemy URL; manual scores given there are kept), then writes
   ``grades.csv``, ``similarity.csv`` (`autograder.reports.similarity`, for the instructor only) and
   ``report.html`` from every row stored in DIR, with the manual points given so far
   (`autograder.reports.class_record`): DIR is the class's record for the term, locked while a run writes to
   it, private to the instructor, and a 'no submission' never replaces what it stores. The exit status
   is 0 when everything handed in was graded, 1 when some of it could not be, 2 when nothing was.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from autograder.grading.templates import (UNREGISTERED_PRELOAD, course_notebooks, kernel_packages, kernel_rules,
                                    preloads, prepare_templates, test_imports)
from autograder.workers.pool import Pool, WorkerStartError
from autograder.reports.layout import OutputFolder
from autograder.grading.options import Options
from autograder.records import Job, Result, Task, Template
from autograder.grading.secret import SecretUnusable, hand_in_key, load_secret
from autograder.harness.nbgrader_course import nbgrader_environment
from autograder.reports.grades_csv import write_grades
from autograder.grading.progress import Progress
from autograder.reports.state import Stored, load_state, save_state, stored_rows
from autograder.reports.class_record import (OutputUnavailable, changes, class_rows, keep_submitted, kept_instead,
                                     open_output, row, submitted_tasks, write_nbgrader_config)
from autograder.grading.tasks import make_tasks
from autograder.sandbox.bwrap import describe_isolation, describe_start, remove_scratch
from autograder.sandbox.probe import SandboxUnavailable, check_isolation
from autograder.sandbox.warm import WarmStartUnavailable, check as warm_check
from autograder.reports.similarity import class_similarity, write_similarity
from autograder.submissions.find import SubmissionsUnreadable, find, normal_id, select, valid_student_id

def isolation_line(isolate: bool, warm: bool) -> tuple[str, bool]:
    """Start one sandbox (unless ``isolate`` is off) and say how kernels will run; `SandboxUnavailable` if
    no sandbox can be made. Then, unless ``warm`` is off, fork one warm probe (`autograder.sandbox.warm.check`):
    returns the lines and whether kernels are forked warm (False, and why, where a warm one cannot be made)."""
    if not isolate:
        return describe_isolation(isolate) + "\nkernels start cold: a warm start needs the sandbox", False
    check_isolation()
    if not warm:
        return describe_isolation(isolate) + "\n" + describe_start(False), False
    try:
        warm_check()
    except WarmStartUnavailable as error:
        return (f"{describe_isolation(isolate)}\nwarm start unavailable: {error}; each submission gets a cold "
                "kernel instead (as with --cold)"), False
    return describe_isolation(isolate) + "\n" + describe_start(True), True


def grade(options: Options) -> int:
    """Grade every submission; returns the exit status: 0 when everything handed in was graded, 1 when some of
    it could not be (the reasons are in grades.csv), 2 when SUBMISSIONS cannot be read or nothing was graded,
    or when the output folder cannot be made or another run is writing to it."""
    out = OutputFolder(options.out)
    try:
        held = open_output(out)
    except OutputUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        return _grade(options, out)
    finally:
        held.close()


def _grade(options: Options, out: OutputFolder) -> int:
    os.environ["PATH"] = nbgrader_environment()["PATH"]
    # A terminated run stops its workers and kernels on the way out; what finished is kept for the next run.
    signal.signal(signal.SIGTERM, _terminate)
    scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
    pool = Pool(options.jobs, out.logs)
    cluster = None
    try:
        earlier = stored_rows(out)
        known = {e.lms_user_id: s for (s, _), e in sorted(earlier.items()) if e.lms_user_id}
        found, said = find(options.submissions, course_notebooks(options.source), scratch / "submissions",
                           options.unpacked_bytes, known)
        found = select(found, options.students, options.assignments)
        for line in said:
            print(line, file=sys.stderr)
        for student in sorted(set(map(normal_id, options.students)) - set(found)):
            print(f"--student {student}: nothing of this student in {options.submissions}", file=sys.stderr)
        if not found:
            print(f"error: no submissions found in {options.submissions}", file=sys.stderr)
            return 2
        load_secret(options.secret_file or out.secret)  # made, or refused, before any template is made
        _warm_up(pool, found, options, scratch)
        if options.scheduler:  # first: an unreachable or unfit cluster stops the run within seconds
            from autograder.workers.dask_pool import ClusterPool

            cluster = ClusterPool(options.scheduler, options.isolate)
        with ThreadPoolExecutor(1) as background:
            isolation_check = None if cluster else background.submit(isolation_line, options.isolate, options.warm)
            # nbgrader's API (a second of imports), which reading the templates needs, while the workers make them.
            background.submit(importlib.import_module, "nbgrader.api")
            templates = prepare_templates(options.source, out.cache, pool, _needed(found, options, earlier))
            isolation, warm = cluster.isolation(options.warm) if cluster else isolation_check.result()
            options = replace(options, warm=warm)
        tasks = make_tasks(found, templates, options.grading_key, scratch / "restored")
        where = cluster.describe() if cluster else f"with {options.jobs} jobs"
        print(f"grading {len(tasks)} submissions of {len(found)} students {where}\n{isolation}", file=sys.stderr)
        return _grade_tasks(options, tasks, templates, cluster or pool, scratch)
    except SubmissionsUnreadable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SandboxUnavailable as error:
        print(f"error: {error}\nTo grade without a sandbox anyway (student code then runs as you, with resource "
              "limits only), pass --no-isolate.", file=sys.stderr)
        return 2
    except (WorkerStartError, SecretUnusable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        pool.close()
        if cluster:
            cluster.close()
        remove_scratch(scratch)


def _warm_up(pool: Pool, found: dict, options: Options, scratch: Path) -> None:
    """Before the templates are made: tell the pool what its workers import (the kernels' preloads and the test
    cells' imports of the assignments handed in), and start the zygotes of those preload sets (a warm local
    run), which import while the templates are made."""
    registered, packages = preloads(options.source), kernel_packages(options.source)
    rules = kernel_rules(options.source)
    handed_in = _handed_in(found, options) or set(registered)
    needed = {registered.get(a, UNREGISTERED_PRELOAD) for a in handed_in}
    pool.import_once(tuple(sorted(set().union(*needed, test_imports(options.source, handed_in)))))
    if options.warm and options.isolate and not options.scheduler:
        for preload, shown, forbid in sorted({(registered.get(a, UNREGISTERED_PRELOAD), packages.get(a),
                                                rules.get(a, ())) for a in handed_in}, key=repr):
            pool.start_zygote(preload, str(scratch), shown, forbid)


def _handed_in(found: dict, options: Options) -> set[str] | None:
    """The assignments whose template is needed: those handed in, else those asked for (None: every one)."""
    given = {a for entry in found.values() for part in (entry.files, entry.others, entry.problems) for a in part if a}
    course = set(course_notebooks(options.source).values())
    return (given & course) or set(options.assignments) or None


def _needed(found: dict, options: Options, earlier: dict) -> set[str] | None:
    """The assignments whose template is needed: those handed in or asked for, and those stored in the folder
    (which the class files cover)."""
    handed_in = _handed_in(found, options)
    course = set(course_notebooks(options.source).values())
    return None if handed_in is None else handed_in | ({a for _, a in earlier} & course)


def _replace_folder(folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` (name -> text: a graded result's feedback pages or autograded notebooks) into ``folder``,
    in place of what it held."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / Path(name).name).write_text(text)


def _grade_tasks(options: Options, tasks: list[Task], templates: dict[str, Template], pool,
                 scratch: Path) -> int:
    from autograder.reports.gradebook import ClassGradebook
    from autograder.reports.report import write_report

    out = OutputFolder(options.out)
    out.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # made by `open_output` in a run of `grade`
    secret = load_secret(options.secret_file or out.secret)  # before anything is written: SecretUnusable
    earlier = stored_rows(out)
    gradebook = ClassGradebook(options.db_url or out.gradebook_url, templates)
    progress = Progress(tasks, options.progress)
    now: dict[tuple[str, str], Stored] = {}  # this run's rows (those that replace a stored one)

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
        gradebook.record(task, result)
        now[where] = this

    to_grade, reused = [], 0
    for task in tasks:
        if task.problem:
            finish(task, Result("failed", task.problem), fresh=False)
        elif not options.force and (stored := load_state(out, task)) is not None:
            finish(task, stored, fresh=False)
            reused += 1
        else:
            to_grade.append(task)
    jobs = [Job(templates[t.assignment], t.notebooks, options.limits, options.isolate, str(scratch),
            options.warm, hidden_key=hand_in_key(secret, t.student, t.assignment, t.notebooks)) for t in to_grade]
    compared = submitted_tasks(out, earlier, tasks)
    # The similarity of the class's code needs only the submitted files: it is computed while they are graded.
    with ThreadPoolExecutor(1) as background:
        similar = background.submit(class_similarity, compared, templates, options.similarity_threshold,
                                    options.source)
        try:
            pool.run(jobs, options.limits.wall_seconds, lambda index, result: finish(to_grade[index], result, True))
            given = gradebook.manual_scores({**earlier, **now})
        finally:
            gradebook.close()
        similarity = similar.result()
    rows = class_rows({**earlier, **now}, templates, given)
    write_grades(out.grades, rows)
    write_similarity(out.similarity, similarity)
    write_report(out.report, rows, templates, similarity)
    write_nbgrader_config(out, options.source, options.db_url or out.gradebook_url)
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
