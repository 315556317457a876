"""The class gradebook written by a worker of its own while the class is graded, so that the grader imports no
nbgrader (a second of a core, and its SQLAlchemy work on every row, beside the workers on the same cores).

Runs in the grader. ``record`` queues a result as the grader has stored it; a thread sends what is queued,
one `autograder.records.RecordJob` at a time, to a worker of the local pool's that grades nothing
(`autograder.workers.pool.Pool.recording_worker`: forked where the pool's workers are, with nbgrader imported
already); `Recorder.close` sends the rest, waits until the gradebook is committed and closed, stops the worker and
raises `GradebookUnwritable` when a batch could not be written (every result is stored before it is recorded, so
the next run records it again: `autograder.grading.run`).

The worker's side is `autograder.workers.recording`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from autograder.records import RecordJob, Result, Status, Task, Template

if TYPE_CHECKING:
    from autograder.workers.pool import Pool

RECORD_SECONDS = 600.0  # the longest one batch may take: a large class's first rows, on a busy machine


class GradebookUnwritable(RuntimeError):
    """The class gradebook could not be written: the message says why."""


class Recorder:
    """The results of a run, recorded in the gradebook ``db_url`` by a worker of
    ``pool``'s (`Pool.recording_worker`)."""

    def __init__(self, pool: Pool, db_url: str, templates: Mapping[str, Template]):
        self.worker, self.db_url, self.templates = pool.recording_worker(), db_url, templates
        self.waiting: queue.Queue[tuple[Task, Result] | None] = queue.Queue()  # None: the last
        self.failure = ""  # why a batch could not be written ('' while none failed)
        # Started here and ended by `close`: a worker it starts dies with it (its parent-death signal).
        self.thread = threading.Thread(target=self._send, name="recorder", daemon=True)
        self.thread.start()

    def record(self, task: Task, result: Result) -> None:
        """Record ``result``'s scores (its cells; not its pages) for ``task``, soon."""
        self.waiting.put((task, replace(result, feedback={}, autograded={})))

    def _send(self) -> None:
        last = False
        while not last:
            entries = [self.waiting.get()]
            while not self.waiting.empty():
                entries.append(self.waiting.get_nowait())
            last = entries[-1] is None
            batch = tuple(entry for entry in entries if entry is not None)
            if self.failure:
                continue
            job = RecordJob(self.db_url, {task.assignment: self.templates[task.assignment] for task, _ in batch},
                            batch, close=last)
            try:
                answer = self.worker.run(job, RECORD_SECONDS)
            except Exception as error:  # noqa: BLE001 - a worker that cannot start: `close` raises it
                answer = Result(Status.FAILED, str(error))
            if answer.status is not Status.DONE:
                self.failure = answer.reason

    def close(self) -> None:
        """Record what is queued, commit and close the gradebook, stop its worker; `GradebookUnwritable` when a
        batch could not be written."""
        self.waiting.put(None)
        self.thread.join()
        self.worker.stop()
        if self.failure:
            raise GradebookUnwritable(f"the class gradebook {self.db_url} could not be written: {self.failure}; "
                                      "the grades are stored, and the next run records them again")
