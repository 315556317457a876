"""Grade one submission with nbgrader in a sandboxed kernel: `grade_submission` (and `generate`, a template).

`grade_submission(job, notebooks)` is the one entry point that grades a job (`autograder.records.Job`:
the assignment's template folder, the limits, the modules to preload); it takes the notebooks' bytes
and returns an `autograder.records.Result` (scores, reasons, timings and the feedback HTML), writing
nothing outside its own temporary folders. It runs only in a worker process of `autograder.workers.pool`: the
local run's workers, or on a cluster the single worker of each Dask worker thread
(`autograder.workers.dask_worker`), so that a hostile notebook takes down no more than its own worker.

No nbgrader course is built per job: the worker keeps each assignment's state (`Kept`, its
`autograder.harness.autograde.Assignments`: the template's test plans, nbgrader's preprocessors configured once and
one open gradebook whose writes each job rolls back), and `autograder.harness.autograde.autograde` runs nbgrader's
Autograde preprocessors on the submitted notebooks in memory, restoring locked cells and hidden tests from the
gradebook.
Its Execute is a sandboxed kernel whose only writable folder is the kernel's
home (a tmpfs as large as the disk limit, which the worker reaches by a descriptor: `autograder.sandbox.home`):
forked warm by the zygote of the job's preload set (`autograder.sandbox.zygote_client`, `autograder.sandbox.zygote`;
its home under the zygote's folder of homes), or cold, inside bubblewrap (`autograder.sandbox.bwrap`; its home the job's
``kernel/``). Its test cells run elsewhere: `autograder.harness.execute.TrustedExecute` (in place
of nbgrader's Execute) runs them here, in this worker, where no student code ever runs, reaching the
notebook's names through the channel (`autograder.channel.session`). The scores are read back from the gradebook,
hidden test code is removed, outputs shortened, and the worker renders the feedback pages from the notebooks in
memory and the scores (`autograder.harness.feedback_page`: nbgrader's GenerateFeedback page, compiled once a worker).

The worker process around it is `autograder.workers.worker`. nbgrader is configured, not patched: our
`TrustedExecute` takes the place of nbgrader's Execute among Autograde's preprocessors, one instance per job
(it keeps the job's `autograder.harness.execute.Spent`), and its ``kernel_manager_class``,
`autograder.harness.kernel_manager.SandboxKernelManager`, forks or launches the kernel and records when.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.harness.autograde import STUDENT, Assignment, Assignments, autograde, preprocessor_config, \
    read_scores
from autograder.harness.cell_metadata import COMPILED_STEPS
from autograder.harness.execute import TrustedExecute
from autograder.harness.feedback import MESSAGE_LIMIT, incidents, sanitize_for_feedback, shorten
from autograder.harness.feedback_page import CompiledTemplates, feedback_pages, record_instructor_cells
from autograder.harness.timings import JobClock, job_timings, read_kernel_times
from autograder.nbgrader_course import course_id, generate_template, job_log, logged
from autograder.records import GenerateJob, Job, Result, Status, Template
from autograder.sandbox.bwrap import (KERNEL_NAME, Channel, environment, kernel_argv, new_channel,
                                      prepare_home, socket_link, write_kernelspec)
from autograder.sandbox.home import KernelHome, inode_count
from autograder.sandbox.limits import START_SECONDS
from autograder.sandbox.zygote_client import WarmLaunch, WarmStartUnavailable, ZygoteClient, ZygoteClients

# The kernelspec of a warm job, whose kernel the zygote forks (`SandboxKernelManager` never runs a warm job's
# kernelspec command): a command that refuses to start a kernel outside the sandbox, should anything run it.
FORKED_ONLY = (sys.executable, "-I", "-S", "-c",
               "raise SystemExit(\"a warm job's kernel is forked by its zygote, never started from its kernelspec\")")


def grading_config(db_url: str, cell_timeout: int, home: Path, sockets: Path, channel: Channel,
                   hidden_key: str = "", forbid: tuple[str, ...] = ()):
    """nbgrader's config for one job's Execute: the sandbox kernel, its connection file in ``home``, reached over Unix
    sockets in ``sockets`` (a short link to ``home``: `autograder.sandbox.bwrap.socket_link`); the trusted harness's
    sockets in ``channel``, the hand-in's key and the chapter's rules."""
    config = preprocessor_config(db_url)
    config.Execute.timeout = cell_timeout
    config.Execute.kernel_name = KERNEL_NAME
    config.Execute.interrupt_on_timeout = True
    config.Execute.startup_timeout = START_SECONDS
    config.Execute.iopub_timeout = 10
    config.Execute.raise_on_iopub_timeout = False
    config.Execute.shutdown_kernel = "immediate"  # every output is in by then: no goodbye round trip to wait for
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = str(sockets / "k")
    config.KernelManager.connection_file = str(home / "connection.json")
    config.TrustedExecute.channel_folder = str(channel.link)
    config.TrustedExecute.hidden_key = hidden_key
    config.TrustedExecute.forbid = list(forbid)
    return config


def generate(job: GenerateJob, templates: CompiledTemplates | None = None) -> Result:
    """The template of one assignment in ``job.template.folder``: its released files and its gradebook, made by
    nbgrader's GenerateAssignment with its cell check compiled once (`COMPILED_STEPS`; the gradebook holds the
    submission every job of the assignment is graded as, `autograder.harness.autograde.STUDENT`), the HTML of its
    instructor's cells on a feedback page (rendered through ``templates``, the worker's: `record_instructor_cells`)
    and its graded cells (`record_cells`), written last."""
    template = job.template
    template.folder.mkdir(parents=True, exist_ok=True)
    error_log = generate_template(template.assignment, Path(job.root), job.source_directory,
                                  template.released.parent, template.gradebook, STUDENT, COMPILED_STEPS)
    if error_log:
        return Result(Status.FAILED, f"nbgrader generate_assignment {template.assignment} failed: "
                                     f"{_failure_reason(error_log)}")
    record_instructor_cells(template, templates or CompiledTemplates())
    record_cells(template)
    return Result(Status.DONE)


def record_cells(template: Template) -> None:
    """Write ``template``'s notebooks and graded cells (nbgrader's gradebook, in notebook order) beside it
    (`Template.cells_record`, which `autograder.grading.templates.read_template` reads), once it is generated."""
    from nbgrader.api import Gradebook

    notebooks = sorted(p.stem for p in template.released.glob("*.ipynb"))
    cells = []
    with Gradebook(f"sqlite:///{template.gradebook}", course_id()) as gradebook:
        for name in notebooks:
            order = [c["metadata"].get("nbgrader", {}).get("grade_id")
                     for c in json.loads((template.released / f"{name}.ipynb").read_text())["cells"]]
            notebook = gradebook.find_notebook(name, template.assignment)
            grade_cells = [*notebook.grade_cells, *notebook.task_cells]  # a task is graded by hand
            for cell in sorted(grade_cells, key=lambda c: order.index(c.name) if c.name in order else len(order)):
                cells.append((name, cell.name, float(cell.max_score)))
    template.cells_record.write_text(json.dumps({"notebooks": notebooks, "cells": cells}))


def _failure_reason(log_text: str) -> str:
    """The one line of nbgrader's error log that says why (a dead kernel, a timeout, bad JSON...)."""
    patterns = [
        (r"DeadKernelError|Kernel died", "the kernel died while running the notebook (memory or CPU time limit, "
                                         "or the notebook ended its own process)"),
        (r"UnresponsiveKernelError|became unresponsive", "the kernel stopped responding (an infinite loop that "
                                                         "ignores interrupts?)"),
        (r"NotJSONError|JSONDecodeError|Notebook does not appear to be JSON", "the notebook file is not valid JSON"),
        (r"ValidationError|not valid", "the notebook file is not a valid notebook"),
        (r"RuntimeError: Kernel didn't respond|Kernel didn't respond", "the kernel did not start in time"),
    ]
    for pattern, reason in patterns:
        if re.search(pattern, log_text):
            return reason
    lines = [line for line in log_text.strip().splitlines() if line.strip()]
    return shorten(lines[-1] if lines else "nbgrader could not grade the notebook", MESSAGE_LIMIT)


def _read_submission(notebooks: dict[str, bytes | None]) -> tuple[dict[str, nbformat.NotebookNode | None], list[str]]:
    """Each readable notebook (None: not handed in), and the problems of the others."""
    problems, read = [], {}
    for name, data in notebooks.items():
        if data is None:
            read[name] = None
            continue
        try:
            notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
            nbformat.validate(notebook)
        except Exception as error:  # noqa: BLE001 - any unreadable notebook is the student's problem
            problems.append(f"{name}.ipynb is not a readable notebook ({type(error).__name__}: "
                            f"{shorten(str(error).splitlines()[0] if str(error) else '', 200)})")
            continue
        read[name] = notebook
    return read, problems


@dataclass(frozen=True)
class Kept:
    """What a worker keeps from job to job: its connections to the zygotes, its compiled feedback templates and each
    assignment's nbgrader state (`autograder.harness.autograde.Assignments`)."""

    zygotes: ZygoteClients = field(default_factory=ZygoteClients)
    templates: CompiledTemplates = field(default_factory=CompiledTemplates)
    assignments: Assignments = field(default_factory=Assignments)


def grade_submission(job: Job, notebooks: dict[str, bytes | None], kept: Kept | None = None) -> Result:
    """Grade one student's submission of one assignment in a sandboxed kernel.

    ``notebooks`` maps each notebook name of the assignment to its submitted bytes (None: not handed in);
    ``job`` names the assignment's template folder (``gradebook.db`` and ``release/<assignment>/``), the
    limits, the modules to preload and whether to sandbox the kernel (``isolate`` False: resource limits
    only); ``kept``: what the worker keeps from job to job (`Kept`; None: nothing kept).
    Returns the `Result`: ``graded`` (its cells, timings and feedback pages) or ``failed``.
    One job at a time per process (nbgrader's error log, `autograder.nbgrader_course.job_log`, and the
    kept gradebooks are the process's).
    """
    workdir = Path(tempfile.mkdtemp(prefix="job-", dir=job.scratch or None))
    kept = kept or Kept()
    zygote = _zygote(job, kept.zygotes)
    home = zygote.new_home() if zygote else workdir / "kernel"
    home.mkdir(exist_ok=True)
    sockets = socket_link(home)
    channel = zygote.new_channel() if zygote else new_channel(workdir)
    view = KernelHome(home, sockets) if job.isolate else None
    try:
        assignment = kept.assignments.get(job.template, job.scratch)
        kept.templates.load(job.template.feedback_record)
        with assignment.gradebook.job():  # its rows gone when it ends
            return _grade(job, notebooks, workdir, home, view, sockets, zygote, channel, kept.templates, assignment)
    finally:
        if view is not None:
            view.close()
        sockets.unlink(missing_ok=True)
        channel.link.unlink(missing_ok=True)
        shutil.rmtree(channel.folder, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


def _zygote(job: Job, zygotes: ZygoteClients) -> ZygoteClient | None:
    """This worker's connection to the zygote of the job's preload set, or None for a cold kernel (``--cold``,
    no sandbox, or the warm process could not start: the log says why)."""
    if not job.zygote:
        return None
    try:
        return zygotes.get(job.zygote)
    except WarmStartUnavailable as error:
        print(f"warm start unavailable, grading with a cold kernel: {error}", file=sys.stderr)
        return None


def _grade(job: Job, notebooks: dict[str, bytes | None], workdir: Path, home: Path, view: KernelHome | None,
           sockets: Path, zygote: ZygoteClient | None, channel: Channel, templates: CompiledTemplates,
           assignment: Assignment) -> Result:
    """``view``: how the worker reaches ``home`` once the sandboxed kernel made it its tmpfs (None: no sandbox);
    ``templates``: the worker's compiled feedback templates; ``assignment``: the worker's state of the job's."""
    template, limits = job.template, job.limits
    submitted, problems = _read_submission(notebooks)
    if problems:
        return Result(Status.FAILED, "; ".join(problems))
    shutil.copytree(template.released, home / "work", ignore=shutil.ignore_patterns("*.ipynb"))
    prepare_home(home)
    if zygote is None:
        argv, env = kernel_argv(home, home / "work", limits, template.preload, job.isolate, sockets, channel,
                                template.packages, template.forbid)
    else:  # forked by the zygote: its sandbox's view of the packages is the zygote's, not made again per job
        argv, env = list(FORKED_ONLY), {}
    kernelspecs = write_kernelspec(workdir / "jupyter", argv, env) / "kernels"
    warm = None if zygote is None else WarmLaunch(zygote, home, home / "work", sockets, limits,
                                                  environment(home, limits, template.preload, template.forbid), channel)
    started = time.time()
    config = grading_config(assignment.db_url, limits.cell_seconds, home, sockets, channel, job.hidden_key,
                            template.forbid)
    config.SandboxKernelManager.kernelspecs = str(kernelspecs)
    executor = TrustedExecute(config=config, warm=warm, home=view, tensors=job.tensors)  # this job's: it keeps its `Spent`
    log = job_log()
    try:
        autograded = autograde(assignment, submitted, executor, log, workdir)
    except Exception:  # noqa: BLE001 - nbgrader reports failures as exceptions and log lines
        autograded, error_log = {}, f"{logged(log)}\n{traceback.format_exc()}"
    else:
        error_log = ""
    if zygote is not None and not zygote.alive:  # no submission can reach the zygote: the grader's failure
        return Result(Status.FAILED, "the warm process of this assignment died while grading it (it is graded again "
                                     "on the next run)", transient=True)
    if view is not None and view.full():
        return Result(Status.FAILED, f"too large: the notebook filled its home, the {limits.disk_bytes / 2**20:.0f} "
                                     f"MiB and {inode_count(limits)} files, folders and links a submission may write "
                                     "(its disk limit); a write past it fails with ENOSPC")
    if error_log:
        return Result(Status.FAILED, _failure_reason(error_log))
    cells = read_scores(assignment, list(notebooks), autograded)
    clock = JobClock(started, time.time())
    notes = []
    for notebook in autograded.values():
        notes += incidents(notebook, limits.cell_seconds)
        sanitize_for_feedback(notebook)
    # The feedback step: the sanitised autograded notebooks and their cells' results -> one HTML page each.
    feedback = feedback_pages(autograded, cells, templates)
    if len(feedback) < len(autograded):
        notes.append("feedback could not be written")
    kernel = read_kernel_times(home, view.descriptor if view is not None else None)
    # What nbgrader's formgrader opens in the output folder (sanitised as the feedback is).
    return Result(Status.GRADED, "; ".join(notes), cells, job_timings(kernel, executor.spent, clock), feedback,
                  autograded={name: nbformat.writes(notebook) for name, notebook in sorted(autograded.items())})

