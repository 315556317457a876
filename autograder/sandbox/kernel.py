"""The grading kernel, started inside the sandbox (`autograder.sandbox.bwrap`) by nbgrader:
``python -m autograder.sandbox.kernel -f CONNECTION_FILE``.

Before any student code runs it makes its home a filesystem as large as the disk limit (in the sandbox:
`autograder.sandbox.home.own_home`), sets the resource limits (address space, CPU time, file size,
processes: `autograder.sandbox.limits.Limits`, read from the one variable ``AUTOGRADER_LIMITS``) and imports
the modules named in ``AUTOGRADER_PRELOAD`` (comma-separated, such as torch; the chapter registry says
which). No check runs here: every test cell runs in the worker (`autograder.harness.execute`). It records when it started, when
the imports ended and when ipykernel was ready (``AUTOGRADER_TIMES_FILE``).

A warm kernel (`autograder.sandbox.zygote`) runs the same two halves apart: `preload` once in the zygote, then
`set_limits` and `start` in each kernel forked from it.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import sys
import time
from dataclasses import asdict, dataclass, replace

from autograder.sandbox.guards import die_with_parent, uncollected
from autograder.sandbox.home import OWN_HOME, own_home
from autograder.sandbox.limits import ENV, Limits

# IPython's input history: a thread and an SQLite file per kernel, written after each cell, which no grading reads
# (In and Out stay, in memory). Off, a kernel takes 6 ms less of a core.
NO_HISTORY = "--HistoryManager.enabled=False"


@dataclass(frozen=True)
class KernelTimes:
    """When (``time.time()``) the kernel's start reached each step, written to ``AUTOGRADER_TIMES_FILE`` by
    `start` and read back by the worker (`autograder.harness.timings`): a cold kernel's ``started`` and
    ``preloaded`` (`main`), a warm one's ``forked`` and ``sandboxed`` (`autograder.sandbox.zygote`), and
    ``ready``, when ipykernel was about to serve."""

    started: float | None = None
    preloaded: float | None = None
    forked: float | None = None
    sandboxed: float | None = None
    ready: float | None = None

    def to_json(self) -> str:
        return json.dumps({name: value for name, value in asdict(self).items() if value is not None})

    @classmethod
    def from_json(cls, text: str | bytes) -> KernelTimes:
        """The times `to_json` wrote; ValueError or TypeError for anything else (the kernel's home is the kernel's:
        the file may hold anything)."""
        given = json.loads(text)
        if not isinstance(given, dict):
            raise ValueError("the kernel's times are not an object")
        return cls(**{name: float(value) for name, value in given.items()})


def set_limits(limits: Limits) -> None:
    """Apply the resource limits to this process (and so to everything it starts); 0 leaves one as it is."""
    for limit, value in ((resource.RLIMIT_AS, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_seconds),
                         (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_NPROC, limits.processes)):
        if value > 0:
            hard = value + 5 if limit == resource.RLIMIT_CPU else value
            resource.setrlimit(limit, (value, hard))
    # A write past the file size limit then fails with OSError instead of killing the kernel.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def preload(modules: tuple[str, ...], forbid: str | None = None) -> object | None:
    """Import ``modules`` with no collection meanwhile, then move them out of the collector's reach
    (`autograder.sandbox.guards.uncollected`: no later collection walks them), then take out what the chapter's
    rules forbid (``forbid``, comma-separated; None: from ``AUTOGRADER_FORBID``; `autograder.sandbox.rules.install`).
    Returns the rules' registration, which the caller keeps for the kernel's life. No torch operation runs: a warm
    start (`autograder.sandbox.zygote`) forks kernels from the process that called this."""
    from autograder.sandbox import rules

    with uncollected():
        for module in modules:
            importlib.import_module(module)
    return rules.install(rules.parse(os.environ.get(rules.ENV, "") if forbid is None else forbid))


def start(argv: list[str], times: KernelTimes, registered: object | None) -> None:
    """Run ipykernel with ``argv`` (``-f CONNECTION_FILE``) in this preloaded process; first write ``times`` and
    when ipykernel was ready to ``AUTOGRADER_TIMES_FILE``. ``registered``: what `preload` returned, held here
    while the kernel runs."""
    if "torch" in sys.modules and "OMP_NUM_THREADS" in os.environ:
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize([*argv, NO_HISTORY])
    times_file = os.environ.get("AUTOGRADER_TIMES_FILE")
    if times_file:
        with open(times_file, "w") as handle:
            handle.write(replace(times, ready=time.time()).to_json())
    app.start()
    del registered  # the rules hold until ipykernel returns, that is for the kernel's whole life


def main(argv: list[str]) -> None:
    """Set limits, preload ``AUTOGRADER_PRELOAD``, then run ipykernel with ``argv``."""
    started = time.time()
    die_with_parent()  # a kernel outside the sandbox (--no-isolate) dies with its worker too
    limits = Limits.from_json(os.environ[ENV])
    if os.environ.get(OWN_HOME):  # a cold kernel in its sandbox: its home becomes a tmpfs as large as the disk limit
        own_home(limits)
    set_limits(limits)
    registered = preload(tuple(filter(None, os.environ.get("AUTOGRADER_PRELOAD", "").split(","))))
    start(argv, KernelTimes(started=started, preloaded=time.time()), registered)


if __name__ == "__main__":
    main(sys.argv[1:])
