"""Milestones of a run's helper processes: the process the workers are forked from (`autograder.workers.forks`) and
each worker (`autograder.workers.worker`) write a line to their log (stderr) at each step of their start (nbgrader,
torch, transformers imported, a worker forked, its first job taken and graded), with the system's monotonic
clock, which every process of the machine shares; the run's timeline (`autograder.grading.timeline`) reads them
back into ``DIR/.logs/run.log`` when the run ends. Only trusted processes' logs are read, never a sandboxed one's;
a worker's log also holds what it prints (an error that may quote a submission), so a forged line could add a line
to run.log, which nothing reads back: no grade, state or output depends on it.

Runs in the grader, the worker forks and the workers.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

MILESTONE = "@milestone"  # a log line: MILESTONE, the monotonic seconds, who, the step


def milestone(who: str, step: str) -> None:
    """Write ``step`` of ``who`` (a process) to this process's log (stderr)."""
    print(f"{MILESTONE} {time.monotonic():.3f} {who}: {step}", file=sys.stderr, flush=True)


def read_milestones(log: Path, since: float) -> list[tuple[float, str]]:
    """The (monotonic seconds, step) milestone lines of ``log`` written at ``since`` or later, in order."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3 or parts[0] != MILESTONE:
            continue
        try:
            seconds = float(parts[1])
        except ValueError:
            continue
        if seconds >= since:
            found.append((seconds, parts[2]))
    return sorted(found)
