"""The worker process's main: ``python -m autograder.workers.worker``, one job at a time.

`autograder.workers.pool` starts these processes, or forks them warm (`autograder.workers.forks`, which calls
`run`): each says it is ready once nbgrader is imported, then reads one job per line (JSON: a
`autograder.records.Job`, a `autograder.records.GenerateJob` or a `autograder.records.RecordJob`) on stdin and
answers one result per line (`autograder.records.Result.to_json`) on what was its stdout; what it prints goes to
its log (stderr). A job is graded by `autograder.harness.notebook.grade_submission`, in this process, so that a
hostile notebook takes down no more than its own worker. The worker keeps its connections to the zygotes and its
compiled feedback templates (`Kept`) from job to job; the worker that records the class gradebook, that gradebook
(`autograder.workers.recording.Recording`).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

from autograder.milestones import milestone
from autograder.harness.notebook import Kept, generate, grade_submission
from autograder.records import GenerateJob, RecordJob, Result, Status, read_job
from autograder.sandbox.guards import die_with_parent, watch_parent
from autograder.sandbox.limits import WORKER_HEADROOM
from autograder.workers.recording import Recording

FIRST_JOBS = 3  # the jobs of each worker whose start and end are milestones (`autograder.milestones`)


def run_job(line: str, kept: Kept, recording: Recording) -> Result:
    """One line of the worker protocol: a `GenerateJob` (a template), a `RecordJob` (results into the class
    gradebook, `autograder.workers.recording`) or a `Job` (notebooks read from their paths)."""
    job = read_job(line)
    if isinstance(job, GenerateJob):
        return generate(job, kept.templates)
    if isinstance(job, RecordJob):
        return recording.apply(job)
    # Outputs pile up in this process while a notebook prints: a flood ends this worker, not the machine.
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (job.limits.memory_bytes + WORKER_HEADROOM, hard))
    return grade_submission(job, {name: Path(path).read_bytes() if path else None
                                  for name, path in job.notebooks.items()}, kept)


def prepare() -> None:
    """Import what every job needs (once, before the first job): nbgrader's converters, the database layer (with
    SQLAlchemy's SQLite dialect, which its first engine imports otherwise); and configure the gradebook's SQLAlchemy
    mappers, which SQLAlchemy does on a process's first query otherwise (19 ms of a core): once in the process the
    workers are forked from (`autograder.workers.forks`), not in each worker."""
    import nbgrader.converters  # noqa: F401
    import alembic.script  # noqa: F401
    import sqlalchemy.dialects.sqlite  # noqa: F401
    from sqlalchemy.orm import configure_mappers

    configure_mappers()


def run(kept: Kept | None = None) -> None:
    """Say ready once nbgrader is imported, then serve jobs from stdin until it closes (or the process that
    started this one dies): a worker started alone or forked warm (`autograder.workers.forks`, which may hand it
    ``kept``, its feedback page compiled)."""
    die_with_parent()
    watch_parent()
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    prepare()
    who = f"worker {os.getpid()}"
    milestone(who, "ready")
    answers.write(json.dumps({"ready": os.getpid()}) + "\n")
    answers.flush()
    kept = kept if kept is not None else Kept()
    recording = Recording()
    for number, line in enumerate(sys.stdin):
        if number < FIRST_JOBS:
            milestone(who, f"job {number + 1} taken")
        try:
            result = run_job(line, kept, recording)
        except Exception as error:  # noqa: BLE001 - a failure of one submission is reported, not fatal
            # The grader's own failure, not the student's: not stored, graded again on the next run.
            result = Result(Status.FAILED, f"grading failed: {type(error).__name__}: {error}", transient=True)
        if number < FIRST_JOBS:
            milestone(who, f"job {number + 1} done: {result.status} "
                           f"({', '.join(f'{k} {v:.2f} s' for k, v in (result.timings or {}).items())})")
        answers.write(result.to_json() + "\n")
        answers.flush()


if __name__ == "__main__":
    run()
