"""The run's timeline (`autograder.grading.timeline`) merges the milestones the worker forks and the workers wrote
in their logs (`autograder.milestones`) into run.log, in order, and only this run's."""

from __future__ import annotations

import time
from pathlib import Path

from autograder.grading.timeline import Timeline
from autograder.milestones import MILESTONE


def test_milestones_of_this_run_are_merged_in_order(tmp_path: Path) -> None:
    worker_log = tmp_path / "worker-0.log"
    worker_log.write_text(f"{MILESTONE} {time.monotonic() - 3600:.3f} worker 1: ready\n")  # an earlier run's
    timeline = Timeline(tmp_path / "run.log")
    now = time.monotonic()
    worker_log.write_text(worker_log.read_text() + f"{MILESTONE} {now + 0.2:.3f} worker 2: job 1 taken\n"
                          "a traceback line the worker printed\n"
                          f"{MILESTONE} not-a-number worker 2: broken\n")
    (tmp_path / "workers.log").write_text(f"{MILESTONE} {now + 0.1:.3f} worker forks: imported torch\n")
    timeline.close((tmp_path / "workers.log", worker_log, tmp_path / "absent.log"))
    lines = (tmp_path / "run.log").read_text().splitlines()
    steps = [line.split(" s  ", 1)[1] for line in lines[1:]]
    assert steps[1:] == ["worker forks: imported torch", "worker 2: job 1 taken"], (
        f"expected this run's milestones after the grader's own line, in time order; run.log holds {lines}")
