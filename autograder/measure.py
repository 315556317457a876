"""Peak memory of the student's code, measured by the kernel of the operating system, not by Python.

``with peak_memory() as peak: ...`` resets the high-water mark of the process that runs the student's
code (``/proc/PID/clear_refs``), and afterwards ``peak.bytes`` is how far its resident memory rose
above what it held when the block began (``VmHWM`` minus ``VmRSS``, from ``/proc/PID/status``), and
``peak.retained`` how much more it still held when the block ended (what an object built in the block keeps).
Under trusted scoring that process is the sandboxed kernel and the block runs in the harness
(`autograder.harness.execute` sets `TARGET` while a test cell runs), so no student code can change the figure.
Run in the kernel itself (plain ``nbgrader autograde``, the student's own notebook) it measures itself.

The kernel's allocator returns large blocks to the system at once (``MALLOC_MMAP_THRESHOLD_``, set by
`autograder.sandbox.bwrap`), so memory freed before the block does not hide memory used in it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

UNKNOWN = -1
# The process whose memory is measured, in the running context (set, then reset, by whoever runs the test): None
# means this one; `UNKNOWN` that the grader could not find the kernel's process (then `peak_memory` raises
# rather than measure the wrong one).
TARGET: ContextVar[int | None] = ContextVar("autograder.measure.TARGET", default=None)


@dataclass
class Peak:
    """Filled in when the block ends: how many bytes the resident memory rose at most (``bytes``), and how many
    it still held above the start when the block ended (``retained``, negative when the block freed memory)."""

    bytes: int = 0
    retained: int = 0


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/{pid}/status has no {field}")


@contextmanager
def peak_memory() -> Iterator[Peak]:
    """Measure how far the student's process's resident memory rises during the block."""
    target = TARGET.get()
    if target == UNKNOWN:
        raise RuntimeError("the grader could not find the kernel's process, so it cannot measure its memory")
    pid = target or os.getpid()
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    start = _status_kib(pid, "VmRSS")
    peak = Peak()
    yield peak
    end = _status_kib(pid, "VmRSS")
    peak.bytes = max(0, _status_kib(pid, "VmHWM") - start) * 1024
    peak.retained = (end - start) * 1024
