"""Where one job's seconds went (`autograder.records.Result.timings`), from the kernel's own record of its start
(`autograder.sandbox.kernel.KernelTimes`, a file in the kernel's home) and the job's record of its notebooks
(`autograder.harness.execute.Spent`: its first kernel's launch, its cells and its test cells)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from autograder.harness.execute import Spent
from autograder.sandbox.guards import read_kernel_file
from autograder.sandbox.kernel import KernelTimes

TIMES_FILE = "kernel.times"  # in the kernel's home (``AUTOGRADER_TIMES_FILE``: `autograder.sandbox.bwrap.environment`)
TIMES_LIMIT = 4096  # bytes read of it at most


@dataclass(frozen=True)
class JobClock:
    """When the job started nbgrader's Autograde (``started``) and when Autograde returned (``autograded``)."""

    started: float
    autograded: float


def read_kernel_times(home: Path, descriptor: int | None) -> KernelTimes | None:
    """The kernel's `KernelTimes` in its home: by name below ``descriptor`` (the kernel's tmpfs, reached by the
    worker: `autograder.sandbox.home.KernelHome`), else in the folder ``home`` of this machine (no sandbox).
    Never follows a link the kernel put there, nor waits on a FIFO. None when it left no valid record."""
    try:
        path = TIMES_FILE if descriptor is not None else home / TIMES_FILE
        return KernelTimes.from_json(read_kernel_file(path, TIMES_LIMIT, descriptor))
    except (OSError, ValueError, TypeError):
        return None


def job_timings(kernel: KernelTimes | None, spent: Spent, clock: JobClock) -> dict[str, float]:
    """Seconds spent: nbgrader's set-up before the kernel is launched; starting the kernel, cold (bwrap up to the
    kernel's first line, its imports, ipykernel) or warm (the zygote's fork, the kernel's namespaces and
    filesystem, ipykernel); the student's and given cells, the test cells, the rest of nbgrader's run (its
    bookkeeping, the kernel's shutdown); the feedback (until now). {} when the kernel left no valid record or
    no kernel was launched."""
    launched = spent.launched
    if kernel is None or launched is None or kernel.ready is None:
        return {}
    if kernel.forked is not None and kernel.sandboxed is not None:
        start = {"fork": kernel.forked - launched, "sandbox": kernel.sandboxed - kernel.forked,
                 "ipykernel_start": kernel.ready - kernel.sandboxed}
    elif kernel.started is not None and kernel.preloaded is not None:
        start = {"sandbox_start": kernel.started - launched, "kernel_preload": kernel.preloaded - kernel.started,
                 "ipykernel_start": kernel.ready - kernel.preloaded}
    else:
        return {}
    return {"nbgrader_setup": launched - clock.started, **start, "cells": spent.cells, "tests": spent.tests,
            "nbgrader_rest": clock.autograded - kernel.ready - spent.cells - spent.tests,
            "feedback": time.time() - clock.autograded}
