"""The run's own log of where its start-up goes: ``DIR/.logs/run.log``, a line per step of `autograder.grading.run`
(the grader's imports, the submissions found, the workers and warm processes started, the templates, the tasks,
the first verdict, the last, the class files), each with the seconds since the grader's process started; and,
when the run ends, the milestones the worker forks and the workers wrote in their logs (nbgrader, torch,
transformers imported, each worker forked, its first job; `autograder.milestones`).

Runs in the grader.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TextIO

from autograder.milestones import read_milestones


def process_age() -> float:
    """Seconds since this process started (Linux's /proc: its start in clock ticks after boot, and the uptime)."""
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    return float(Path("/proc/uptime").read_text().split()[0]) - started


class Timeline:
    """Appends ``seconds  step`` lines to ``log``, from the grader's start; a run starts with a line of its own."""

    def __init__(self, log: Path):
        self.begun = time.monotonic()
        self.origin = self.begun - process_age()
        self.log: TextIO = open(log, "a")  # noqa: SIM115 - open while the run lives
        self.log.write(f"--- grade, pid {os.getpid()}\n")
        self.mark("the grader's Python started and imported its modules")
        self.verdicts = 0

    def mark(self, step: str) -> None:
        self.log.write(f"{time.monotonic() - self.origin:8.2f} s  {step}\n")
        self.log.flush()

    def verdict(self, total: int) -> None:
        """One result came back: the first and the last of ``total`` are marked."""
        self.verdicts += 1
        if self.verdicts == 1:
            self.mark("first verdict")
        if self.verdicts == total:
            self.mark(f"last verdict ({total} graded now)")

    def close(self, reported: tuple[Path, ...] = ()) -> None:
        """Add the milestones that the logs ``reported`` hold from this run (`autograder.milestones`), in order,
        then close."""
        found = sorted(m for log in reported for m in read_milestones(log, self.begun))
        for seconds, step in found:
            self.log.write(f"{seconds - self.origin:8.2f} s  {step}\n")
        self.log.close()
