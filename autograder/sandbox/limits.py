"""`Limits`: the resource limits of one submission, the one place their defaults are set, and `START_SECONDS`.

The command line (`autograder.__main__`) takes its defaults from `Limits()`; a grading job carries its
`Limits` (`autograder.records.Job`) to the worker, which hands them to the kernel in one environment
variable, `ENV`, as `Limits.to_json` writes them (`autograder.sandbox.bwrap.environment`); the kernel reads
them back with `Limits.from_json` (`autograder.sandbox.kernel`). Nothing else is imported here: the kernel
imports this module before any student code runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

ENV = "AUTOGRADER_LIMITS"
# How long a process of grading may take to start and answer ready: a worker (`autograder.workers.pool`,
# `autograder.workers.forks`), a warm zygote (`autograder.sandbox.warm`), a kernel (nbgrader's startup timeout,
# `autograder.harness.notebook`) and the sandbox's probe (`autograder.sandbox.bwrap`).
START_SECONDS = 120
WORKER_HEADROOM = 3 * 2**30  # address space a worker may use beyond its kernel's (nbgrader, outputs)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's kernel: bytes of address space, seconds of CPU time (also the
    wall time of the whole submission), seconds one cell may run, bytes of any file it writes, processes
    (and threads) in its sandbox, bytes of its private /tmp, and bytes of its home, the one folder it can write
    (the disk limit: its home is a tmpfs that large, with an inode for each 4 KiB of it, `autograder.sandbox.home`)."""

    memory_bytes: int = 3 * 2**30
    cpu_seconds: int = 600
    cell_seconds: int = 60
    file_bytes: int = 64 * 2**20
    processes: int = 256
    tmp_bytes: int = 256 * 2**20
    disk_bytes: int = 512 * 2**20

    @property
    def wall_seconds(self) -> int:
        """Wall time of one whole job: its CPU time, and 30 s to start the kernel and write the feedback."""
        return self.cpu_seconds + 30

    def to_json(self) -> str:
        """The limits as the kernel's environment carries them (and as a job's cache key includes them)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Limits:
        return cls(**json.loads(text))
