"""The grading kernel, started inside the sandbox (`autograder.sandbox`) by nbgrader:
``python -m autograder.kernel -f CONNECTION_FILE``.

Before any student code runs it sets the resource limits (address space, CPU time, file size,
processes; from ``AUTOGRADER_*`` variables) and imports `autograder.checks` (and torch, with
``AUTOGRADER_PRELOAD_TORCH=1``), so that the checks hold genuine references to numpy's and torch's
comparison functions before any student code can replace them. It records when it started, when
the imports ended and when ipykernel was ready (``AUTOGRADER_TIMES_FILE``).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time

from autograder.guards import die_with_parent


def set_limits(memory_bytes: int, cpu_seconds: int, file_bytes: int, processes: int) -> None:
    """Apply the resource limits to this process (and so to everything it starts); 0 leaves one as it is."""
    for limit, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_CPU, cpu_seconds),
                         (resource.RLIMIT_FSIZE, file_bytes), (resource.RLIMIT_NPROC, processes)):
        if value > 0:
            hard = value + 5 if limit == resource.RLIMIT_CPU else value
            resource.setrlimit(limit, (value, hard))
    # A write past the file size limit then fails with OSError instead of killing the kernel.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _int_env(name: str) -> int:
    return int(os.environ.get(name, "0"))


def main(argv: list[str]) -> None:
    """Set limits, preload the checks, then run ipykernel with ``argv``."""
    started = time.time()
    die_with_parent()  # a kernel outside the sandbox (--no-isolate) dies with its worker too
    set_limits(_int_env("AUTOGRADER_MEMORY_BYTES"), _int_env("AUTOGRADER_CPU_SECONDS"),
               _int_env("AUTOGRADER_FILE_BYTES"), _int_env("AUTOGRADER_PROCESSES"))
    import autograder.checks  # noqa: F401 - captures numpy's functions before student code runs

    if os.environ.get("AUTOGRADER_PRELOAD_TORCH") == "1":
        import torch

        if "OMP_NUM_THREADS" in os.environ:
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        autograder.checks._capture_torch()
    preloaded = time.time()
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(argv)
    times_file = os.environ.get("AUTOGRADER_TIMES_FILE")
    if times_file:
        with open(times_file, "w") as times:
            times.write(json.dumps({"started": started, "preloaded": preloaded, "ready": time.time()}))
    app.start()


if __name__ == "__main__":
    main(sys.argv[1:])
