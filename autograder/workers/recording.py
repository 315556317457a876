"""The worker's side of the class gradebook (`autograder.workers.recorder` is the grader's): `Recording`, kept by
the worker that grades nothing (`autograder.workers.worker`), holds the class gradebook
(`autograder.reports.gradebook.ClassGradebook`) open from one `autograder.records.RecordJob` to the next; the
gradebook commits in its own batches.

Runs in a worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autograder.records import RecordJob, Result, Status

if TYPE_CHECKING:
    from autograder.reports.gradebook import ClassGradebook


class Recording:
    """The class gradebook, open from the first `RecordJob` to the one that closes it."""

    def __init__(self) -> None:
        self.gradebook: ClassGradebook | None = None

    def apply(self, job: RecordJob) -> Result:
        """Record ``job``'s entries (and close the gradebook after, when the job says so): done, or failed with
        what the gradebook raised (the rows not committed yet rolled back)."""
        from autograder.reports.gradebook import ClassGradebook

        try:
            if self.gradebook is None:
                self.gradebook = ClassGradebook(job.db_url, {})
            self.gradebook.templates.update(job.templates)
            for task, result in job.entries:
                self.gradebook.record(task, result)
            if job.close:
                gradebook, self.gradebook = self.gradebook, None
                gradebook.close()
        except Exception as error:  # noqa: BLE001 - the grader says why and stops (`Recorder.close`)
            return Result(Status.FAILED, f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
        return Result(Status.DONE)
