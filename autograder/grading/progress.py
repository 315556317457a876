"""The progress line of a grading run: students done, failed and left."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from autograder.records import Task


class Progress:
    """Students done, failed and left, on one updating line (a line per event when not a terminal)."""

    def __init__(self, tasks: Sequence[Task], enabled: bool):
        self.left = {}
        for task in tasks:
            self.left[task.student] = self.left.get(task.student, 0) + 1
        self.failed: set[str] = set()
        self.submissions = len(tasks)
        self.finished = 0
        self.enabled = enabled
        self.tty = sys.stderr.isatty()

    def update(self, task: Task, ok: bool) -> None:
        """One task finished: ``ok`` when graded; a task with nothing handed in (``Task.missing``) is no failure."""
        self.left[task.student] -= 1
        self.finished += 1
        if not ok and not task.missing:
            self.failed.add(task.student)
        if not self.enabled:
            return
        students = len(self.left)
        done = sum(1 for s, n in self.left.items() if n == 0 and s not in self.failed)
        failed = sum(1 for s in self.failed if self.left[s] == 0)
        width = 30
        filled = int(width * self.finished / max(1, self.submissions))
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.finished}/{self.submissions} submissions | "
                f"students: {done} done, {failed} with a failure, {students - done - failed} left")
        if self.tty:
            print(f"\r{line}", end="\n" if self.finished == self.submissions else "", file=sys.stderr, flush=True)
        else:
            status = "ok" if ok else "no submission" if task.missing else "FAILED"
            print(f"{line} ({task.student}/{task.assignment}: {status})", file=sys.stderr, flush=True)
