"""`python -m autograder grade`: grade a class in parallel with nbgrader, in sandboxed kernels, resumably.

1. SUBMISSIONS is read (`autograder.submissions`): every student found, with what each handed in or why
   it cannot be graded; the run prints a line for each problem of the input. An unreadable SUBMISSIONS
   ends the run here (exit status 2). ``--student`` and ``--assignment`` keep what they name.
2. A real sandbox is started once (`autograder.sandbox.check`) while the template of each assignment
   handed in is generated or reused (`autograder.assignments`). When no sandbox can be made the
   command stops with the reason and the line that enables it, unless ``--no-isolate`` was asked for.
3. Each (student, assignment) becomes a task keyed by a hash of the submitted notebook(s), the
   template and the grading settings (`autograder.tasks`). A task whose key matches a stored result in
   ``DIR/.state`` (`autograder.state`) is not graded again (unless ``--force``), so re-running is
   idempotent and an interrupted run resumes; a result that is not the student's own failure (a
   killed worker) is never stored. Every path under DIR comes from `autograder.layout.OutputFolder`.
4. ``--jobs`` worker processes (`autograder.pool`), or a Dask cluster's (`autograder.cluster`), grade
   the others: each task becomes a `autograder.records.Job`, graded by
   `autograder.worker.grade_submission` in a kernel of its own sandbox, which returns a
   `autograder.records.Result`.
5. This process writes each result's feedback, merges every result into the class gradebook
   (``--db``, any SQLAlchemy URL), then writes ``grades.csv``, ``similarity.csv``
   (`autograder.similarity`, for the instructor only) and ``report.html``. The exit status is
   0 when everything handed in was graded, 1 when some of it could not be, 2 when nothing was.
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

from autograder.assignments import (UNREGISTERED_PRELOAD, course_notebooks, preloads, prepare_templates,
                                    test_imports)
from autograder.pool import Pool, WorkerStartError
from autograder.layout import OutputFolder
from autograder.records import Job, Options, Result, Task, Template
from autograder.secret import SecretUnusable, hand_in_key, load_secret
from autograder.nbgrader_course import nbgrader_environment
from autograder.csv_files import write_grades
from autograder.progress import Progress
from autograder.state import load_state, save_state
from autograder.tasks import make_tasks
from autograder.sandbox import SandboxUnavailable, check, describe_isolation, describe_start, remove_scratch
from autograder.warm import WarmStartUnavailable, check as warm_check
from autograder.similarity import class_similarity, write_similarity
from autograder.submissions import SubmissionsUnreadable, find, normal_id, select, valid_student_id

def isolation_line(isolate: bool, warm: bool) -> tuple[str, bool]:
    """Start one sandbox (unless ``isolate`` is off) and say how kernels will run; `SandboxUnavailable` if
    no sandbox can be made. Then, unless ``warm`` is off, fork one warm probe (`autograder.warm.check`):
    returns the lines and whether kernels are forked warm (False, and why, where a warm one cannot be made)."""
    if not isolate:
        return describe_isolation(isolate) + "\nkernels start cold: a warm start needs the sandbox", False
    check()
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
    it could not be (the reasons are in grades.csv), 2 when SUBMISSIONS cannot be read or nothing was graded."""
    out = OutputFolder(options.out)
    out.root.mkdir(parents=True, exist_ok=True)
    os.environ["PATH"] = nbgrader_environment()["PATH"]
    # A terminated run stops its workers and kernels on the way out; what finished is kept for the next run.
    signal.signal(signal.SIGTERM, _terminate)
    scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
    pool = Pool(options.jobs, out.logs)
    cluster = None
    try:
        found, said = find(options.submissions, course_notebooks(options.source), scratch / "submissions",
                           options.unpacked_bytes)
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
            from autograder.cluster import ClusterPool

            cluster = ClusterPool(options.scheduler, options.isolate)
        with ThreadPoolExecutor(1) as background:
            isolation_check = None if cluster else background.submit(isolation_line, options.isolate, options.warm)
            # nbgrader's API (a second of imports), which reading the templates needs, while the workers make them.
            background.submit(importlib.import_module, "nbgrader.api")
            templates = prepare_templates(options.source, out.cache, pool, _handed_in(found, options))
            isolation, warm = cluster.isolation(options.warm) if cluster else isolation_check.result()
            options = replace(options, warm=warm)
        tasks = make_tasks(found, templates, options.grading_key)
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
    registered = preloads(options.source)
    handed_in = _handed_in(found, options) or set(registered)
    needed = {registered.get(a, UNREGISTERED_PRELOAD) for a in handed_in}
    pool.import_once(tuple(sorted(set().union(*needed, test_imports(options.source, handed_in)))))
    if options.warm and options.isolate and not options.scheduler:
        for preload in sorted(needed):
            pool.start_zygote(preload, str(scratch))


def _handed_in(found: dict, options: Options) -> set[str] | None:
    """The assignments whose template is needed: those handed in, else those asked for (None: every one)."""
    given = {a for entry in found.values() for part in (entry.files, entry.others, entry.problems) for a in part if a}
    course = set(course_notebooks(options.source).values())
    return (given & course) or set(options.assignments) or None


def _write_feedback(folder: Path, result: Result) -> None:
    """Write a graded result's feedback pages into ``folder``, in place of what it held."""
    if result.graded:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, html in result.feedback.items():
            (folder / Path(name).name).write_text(html)


def _grade_tasks(options: Options, tasks: list[Task], templates: dict[str, Template], pool,
                 scratch: Path) -> int:
    from autograder.gradebook import ClassGradebook
    from autograder.report import write_report

    out = OutputFolder(options.out)
    out.root.mkdir(parents=True, exist_ok=True)
    secret = load_secret(options.secret_file or out.secret)  # before anything is written: SecretUnusable
    gradebook = ClassGradebook(options.db_url or out.gradebook_url, templates)
    progress = Progress(tasks, options.progress)
    outcomes: dict[tuple[str, str], Result] = {}

    def finish(task: Task, result: Result, fresh: bool) -> None:
        if fresh:
            _write_feedback(out.feedback(task.student, task.assignment), result)
        if fresh and task.key and not result.transient:
            save_state(out, task, result)  # without the task's note: a rerun adds it again
        if task.note:
            result = replace(result, reason="; ".join(r for r in (task.note, result.reason) if r))
        if not result.graded and valid_student_id(task.student):  # an invalid id names no folder
            shutil.rmtree(out.feedback(task.student, task.assignment), ignore_errors=True)
        outcomes[(task.student, task.assignment)] = result
        if valid_student_id(task.student):  # nbgrader's gradebook holds valid ids only
            gradebook.record(task, result)
        progress.update(task, result.graded)

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
    # The similarity of the class's code needs only the submitted files: it is computed while they are graded.
    with ThreadPoolExecutor(1) as background:
        similar = background.submit(class_similarity, tasks, templates, options.similarity_threshold, options.source)
        try:
            pool.run(jobs, options.limits.wall_seconds, lambda index, result: finish(to_grade[index], result, True))
        finally:
            gradebook.close()
        similarity = similar.result()
    rows = []
    for task in tasks:
        result = outcomes[(task.student, task.assignment)]
        template = templates.get(task.assignment)
        rows.append({"student_id": task.student, "assignment": task.assignment,
                     "score": result.score, "max_score": template.max_score if template else 0.0,
                     "reason": result.reason if result.graded else f"not graded: {result.reason}", "result": result,
                     "lms_user_id": task.lms_user_id, "late": task.late})
    write_grades(out.grades, rows)
    write_similarity(out.similarity, similarity)
    write_report(out.report, rows, templates, similarity)
    graded = sum(r["result"].graded for r in rows)
    failed = sum(not r["result"].graded and not task.missing for r, task in zip(rows, tasks))
    print(f"graded {graded} of {len(rows)} submissions ({len(to_grade)} run now, {reused} kept from an earlier "
          f"run); wrote {out.grades}, {out.all_feedback}, {out.report}", file=sys.stderr)
    if failed:
        print(f"{failed} submissions could not be graded: grades.csv says why", file=sys.stderr)
    return 2 if not graded else 1 if failed else 0


def _terminate(signum: int, frame) -> None:
    raise SystemExit(128 + signum)
