"""`Dispatcher`: what a run of `autograder.grading.run` asks of whoever grades its jobs, the local pool
(`autograder.workers.pool.Pool`) or a Dask cluster (`autograder.workers.dask_pool.ClusterPool`), without asking
which one it has; and the two records they answer with.

Runs in the grader.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from autograder.records import Job, Result, Template


class KernelSet(NamedTuple):
    """What an assignment's kernels preload, see and may not call: the key of a warm process
    (`autograder.sandbox.warm.Zygote`) that forks them."""

    preload: tuple[str, ...]
    packages: tuple[str, ...] | None  # the only installed packages its kernels see (None: every one)
    forbid: tuple[str, ...]  # its rules (`autograder.sandbox.rules`)

    @classmethod
    def of(cls, template: Template) -> KernelSet:
        return cls(template.preload, template.packages, template.forbid)


def grading_weight(kernels: KernelSet, imports: Iterable[str]) -> tuple[int, bool]:
    """What grading an assignment imports, as an order: fewer third-party packages first (those its ``kernels``
    preload and its test cells import, ``imports``; the standard library and the autograder aside), then fewer
    packages its kernels see. A run grades the lightest assignments first, and its workers import in that order
    (`autograder.grading.plan`): a numpy assignment is graded while torch imports, one on torch while transformers
    imports."""
    packages = {name.partition(".")[0] for name in (*kernels.preload, *imports)}
    return len(packages - set(sys.stdlib_module_names) - {"autograder"}), kernels.packages is None


class Isolation(NamedTuple):
    """How a run's kernels run: the lines it prints about it, and whether they are forked warm."""

    described: str
    warm: bool


class Dispatcher(Protocol):
    """Grades a run's jobs: the local pool or a Dask cluster."""

    def prepare(self, imports: tuple[str, ...], kernels: Sequence[KernelSet], scratch: str,
                warm: bool) -> Mapping[KernelSet, str]:
        """Before the templates are made: what the jobs import (``imports``), and (``warm``: warm kernels were
        asked for) the warm processes of ``kernels`` to start while the templates are made, each in the order the
        jobs need them; returns the address of each warm process started here (none where the workers start their
        own)."""
        ...

    def isolation(self, isolate: bool, warm: bool) -> Isolation:
        """How kernels will run (``isolate``: in the sandbox; ``warm``: forked warm, where they can be);
        `autograder.sandbox.bwrap.SandboxUnavailable` where the sandbox is asked for and cannot be made."""
        ...

    def describe(self) -> str:
        """Where the run grades, as its first line says it ('with 4 jobs', 'on the Dask cluster at ...')."""
        ...

    def run(self, jobs: Sequence[Job], timeout: float, on_result: Callable[[int, Result], None]) -> None:
        """Grade every job, each within ``timeout`` seconds; calls ``on_result(index, result)`` in this thread as
        each one finishes."""
        ...

    def close(self) -> None:
        """Stop what grades (workers, warm processes, the cluster's client)."""
        ...
