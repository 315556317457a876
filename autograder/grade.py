"""`python -m autograder grade`: grade a class in parallel with nbgrader, in sandboxed kernels, resumably.

1. A real sandbox is started once (`autograder.sandbox.check`) while each assignment's template is
   generated or reused (`autograder.assignments`). When no sandbox can be made the command stops
   with the reason and the line that enables it, unless ``--no-isolate`` was asked for.
2. Each (student, assignment) becomes a task keyed by a hash of the submitted notebook(s), the
   template and the limits (`autograder.results`). A task whose key matches a stored result in
   ``DIR/.state`` is not graded again, so re-running is idempotent and an interrupted run resumes.
3. ``--jobs`` worker processes (`autograder.pool`) grade the others, each job with
   `autograder.worker.grade_submission` in a kernel of its own sandbox.
4. This process writes each result's feedback, merges every result into the class gradebook
   (``--db``, any SQLAlchemy URL), then writes ``grades.csv``, ``similarity.csv`` (`autograder.similarity`,
   for the instructor only) and ``report.html``.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autograder.assignments import prepare_templates
from autograder.pool import Pool, WorkerStartError
from autograder.records import Options, Task, Template
from autograder.release import nbgrader_environment
from autograder.results import Progress, load_state, make_tasks, save_state, write_grades
from autograder.sandbox import SandboxUnavailable, bwrap_path, check
from autograder.similarity import class_similarity, write_similarity
from autograder.submissions import find

NO_ISOLATE_WARNING = ("warning: --no-isolate: kernels run as this user without a sandbox, with resource limits "
                      "only: student code can read and write whatever this user can and reach the network")


def isolation_line(isolate: bool) -> str:
    """Start one sandbox (unless ``isolate`` is off) and say how kernels will run; `SandboxUnavailable` if
    no sandbox can be made."""
    if not isolate:
        return NO_ISOLATE_WARNING
    check()
    return (f"isolation: each kernel runs in its own bubblewrap sandbox ({bwrap_path()}): no network, no view of "
            "this user's files, the solutions, other submissions or the output; resource limits")


def grade(options: Options) -> int:
    """Grade every submission; returns the exit status (1 when nothing could be graded)."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PATH"] = nbgrader_environment()["PATH"]
    # A terminated run stops its workers and kernels on the way out; what finished is kept for the next run.
    signal.signal(signal.SIGTERM, _terminate)
    scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
    pool = Pool(options.jobs, out / ".logs", options.memory_bytes)
    cluster = None
    try:
        if options.scheduler:  # first: an unreachable or unfit cluster stops the run within seconds
            from autograder.cluster import ClusterPool

            cluster = ClusterPool(options.scheduler, options.isolate)
        with ThreadPoolExecutor(1) as background:
            isolation_check = None if cluster else background.submit(isolation_line, options.isolate)
            templates = prepare_templates(options.source, out / ".cache", pool)
            isolation = cluster.isolation if cluster else isolation_check.result()
        if not templates:
            print(f"no assignments found in {options.source}", file=sys.stderr)
            return 1
        notebooks = {f"{n}.ipynb": t.assignment for t in templates.values() for n in t.notebooks}
        found, rejected = find(options.submissions, notebooks, scratch / "submissions")
        for name in rejected:
            print(f"skipped '{name}': not a valid student id", file=sys.stderr)
        tasks = make_tasks(found, templates, f"{options.cell_timeout}:{options.limits.key}:{options.isolate}")
        if not tasks:
            print(f"no submissions found in {options.submissions}", file=sys.stderr)
            return 1
        where = cluster.describe() if cluster else f"with {options.jobs} jobs"
        print(f"grading {len(tasks)} submissions of {len(found)} students {where}\n{isolation}", file=sys.stderr)
        return _grade_tasks(options, tasks, templates, cluster or pool, scratch)
    except SandboxUnavailable as error:
        print(f"error: {error}\nTo grade without a sandbox anyway (student code then runs as you, with resource "
              "limits only), pass --no-isolate.", file=sys.stderr)
        return 1
    except WorkerStartError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        pool.close()
        if cluster:
            cluster.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _write_feedback(folder: Path, result: dict) -> dict:
    """Write the result's feedback pages into ``folder`` (or remove it when not graded); the result without them."""
    if "feedback" not in result:
        return result
    shutil.rmtree(folder, ignore_errors=True)
    pages = result.pop("feedback") or {}
    if result["status"] == "graded":
        folder.mkdir(parents=True)
        for name, html in pages.items():
            (folder / Path(name).name).write_text(html)
    return result


def _grade_tasks(options: Options, tasks: list[Task], templates: dict[str, Template], pool,
                 scratch: Path) -> int:
    from autograder.gradebook import ClassGradebook
    from autograder.report import write_report

    out = options.out
    gradebook = ClassGradebook(options.db_url or f"sqlite:///{out / 'gradebook.db'}", templates)
    progress = Progress(tasks, options.progress)
    outcomes: dict[tuple[str, str], dict] = {}

    def finish(task: Task, result: dict, fresh: bool) -> None:
        if fresh:
            result = _write_feedback(out / "feedback" / task.student / task.assignment, result)
        if task.note:
            result = {**result, "reason": "; ".join(r for r in (task.note, result.get("reason", "")) if r)}
        if fresh and task.key and not result.pop("transient", False):
            save_state(out, task, result)
        if result["status"] != "graded":
            shutil.rmtree(out / "feedback" / task.student / task.assignment, ignore_errors=True)
        outcomes[(task.student, task.assignment)] = result
        gradebook.record(task, result)
        progress.update(task, result["status"] == "graded")

    to_grade, reused = [], 0
    for task in tasks:
        if task.problem:
            finish(task, {"status": "failed", "reason": task.problem, "cells": []}, fresh=False)
        elif (stored := load_state(out, task)) is not None:
            finish(task, stored, fresh=False)
            reused += 1
        else:
            to_grade.append(task)
    jobs = [{"assignment": t.assignment, "notebooks": t.notebooks, "template": str(templates[t.assignment].folder),
             "cell_timeout": options.cell_timeout, "preload_torch": templates[t.assignment].preload_torch,
             "limits": options.limits.as_dict(), "isolate": options.isolate, "scratch": str(scratch)}
            for t in to_grade]
    try:
        pool.run(jobs, options.submission_timeout + 30, lambda index, result: finish(to_grade[index], result, True))
    finally:
        gradebook.close()
    rows = []
    for task in tasks:
        result = outcomes[(task.student, task.assignment)]
        template = templates.get(task.assignment)
        rows.append({"student_id": task.student, "assignment": task.assignment,
                     "score": sum(c["points"] for c in result.get("cells", [])),
                     "max_score": template.max_score if template else 0.0,
                     "reason": result.get("reason", "") if result["status"] == "graded"
                     else f"not graded: {result['reason']}", "result": result,
                     "lms_user_id": task.lms_user_id, "late": task.late})
    write_grades(out / "grades.csv", rows)
    similarity = class_similarity(tasks, templates, options.similarity_threshold)
    write_similarity(out / "similarity.csv", similarity)
    write_report(out / "report.html", rows, templates, similarity)
    graded = sum(r["result"]["status"] == "graded" for r in rows)
    print(f"graded {graded} of {len(rows)} submissions ({len(to_grade)} run now, {reused} kept from an earlier "
          f"run); wrote {out / 'grades.csv'}, {out / 'feedback'}, {out / 'report.html'}", file=sys.stderr)
    return 0 if graded else 1


def _terminate(signum: int, frame) -> None:
    raise SystemExit(128 + signum)
