"""The local worker pool: ``--jobs`` `autograder.workers.worker` processes, each grading one job at a time.

A worker that dies or overruns its job's time limit is killed (its sandboxed kernel dies with it:
bwrap runs with ``--die-with-parent``) and replaced; only that job fails. A job whose worker died is
marked ``transient`` (not the student's failure: it is not stored, so the next run grades it again);
a job past its time limit is the student's own failure. Workers die with the grader
(`autograder.sandbox.guards`); they are started from the thread that calls `Pool.run`, since the kernel's
parent-death signal follows the thread that started a process. A worker that cannot
start, or dies before it says it is ready, ends the whole run with `WorkerStartError`, which names
the cause: every later worker would fail the same way.
"""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from autograder.nbgrader_course import nbgrader_environment
from autograder.records import GenerateJob, Job, RecordJob, Result, Status
from autograder.sandbox.bwrap import describe_isolation, describe_start
from autograder.sandbox.guards import kill_group
from autograder.sandbox.limits import START_SECONDS
from autograder.sandbox.probe import check_isolation
from autograder.sandbox.warm import WarmStartUnavailable, Zygote, check_warm_start
from autograder.sandbox.zygote_protocol import PreloadSet
from autograder.workers.dispatch import Isolation, KernelSet
from autograder.workers.forks import FIRST_JOB, ForkedWorker, WorkerForks, covers, grading_imports, log_tail
from course import ROOT

THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")


class WorkerStartError(RuntimeError):
    """A grading worker could not start: the message says why."""


def isolation_line(isolate: bool, warm: bool, zygote: Zygote | None = None) -> Isolation:
    """Start one sandbox (unless ``isolate`` is off) and say how kernels will run; `SandboxUnavailable` if
    no sandbox can be made. Then, unless ``warm`` is off, fork one warm probe (`autograder.sandbox.warm.check_warm_start`)
    from ``zygote`` (None: from one started for it): the lines, and whether kernels are forked warm (False, and why,
    where a warm one cannot be made)."""
    if not isolate:
        return Isolation(describe_isolation(isolate) + "\nkernels start cold: a warm start needs the sandbox", False)
    check_isolation(imports_checks=not warm)  # warm, the probe kernel imports the checks
    if not warm:
        return Isolation(describe_isolation(isolate) + "\n" + describe_start(False), False)
    try:
        check_warm_start(zygote)
    except WarmStartUnavailable as error:
        check_isolation()  # the kernels start cold: their sandbox must import the checks
        return Isolation(f"{describe_isolation(isolate)}\nwarm start unavailable: {error}; each submission gets a "
                         "cold kernel instead (as with --cold)", False)
    return Isolation(describe_isolation(isolate) + "\n" + describe_start(True), True)


def needs_of(job: Job | GenerateJob) -> tuple[str, ...]:
    """What a worker imports before it takes ``job`` (`autograder.workers.forks`): what a first job imports (a
    template's maker too); to grade, what grading the job's template needs (`autograder.workers.forks.grading_imports`,
    the channel's torch where tensors can cross it: `Job.tensors`). Nothing else of the run: a numpy assignment is
    graded while torch imports, one on torch while transformers' oracles import (waiting for them kept chapter 3's
    jobs waiting on chapter 6's Llama, a core idle), and chapter 6's on a fork made after."""
    if isinstance(job, GenerateJob):
        return FIRST_JOB
    return tuple(dict.fromkeys((*FIRST_JOB, *grading_imports(job.template, job.tensors))))


class Worker:
    """One job slot: a persistent `autograder.workers.worker` process, replaced when it dies or overruns."""

    def __init__(self, slot: int, env: dict[str, str], log: Path, python: str = sys.executable):
        self.slot, self.env, self.log, self.python = slot, env, log, python
        self.process: subprocess.Popen | ForkedWorker | None = None
        self.forks: WorkerForks | None = None  # where to fork the process from (`autograder.workers.forks`)
        self.ready = False

    def spawn(self, needs: tuple[str, ...] = ()) -> None:
        """Start the worker's process unless it is running with ``needs`` imported (`needs_of`); `WorkerStartError`
        if it cannot."""
        if self.process is not None and self.process.poll() is None:
            missing = getattr(self.process, "missing", frozenset())
            if not any(covers(needs, module) for module in missing):
                return
            self.stop()  # forked before the modules this job needs were imported: a newer fork has them
        self.ready = False
        if self.forks is not None:
            try:
                self.process = self.forks.fork(self.log, needs)
            except OSError as error:
                raise WorkerStartError(f"a grading worker could not start: {error}") from error
            return
        try:
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen([self.python, "-m", "autograder.workers.worker"], stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=log, env=self.env, cwd=ROOT,
                                                start_new_session=True)
        except OSError as error:
            raise WorkerStartError(f"could not start a grading worker ({self.python} -m autograder.workers.worker): "
                                   f"{error}") from error

    def start(self, needs: tuple[str, ...] = ()) -> None:
        """Start the worker unless it is running (with ``needs``) and wait until it is ready; `WorkerStartError` if
        it cannot."""
        self.spawn(needs)
        if self.ready:
            return
        line = self._read_line(time.monotonic() + START_SECONDS)
        if not line or "ready" not in json.loads(line):
            self.stop()
            cause = (f"it did not get ready within {START_SECONDS} s" if line is None
                     else f"it exited at start; the end of its log ({self.log}):\n{log_tail(self.log)}")
            raise WorkerStartError(f"a grading worker could not start: {cause}")
        self.ready = True

    def run(self, job: Job | GenerateJob | RecordJob, timeout: float, needs: tuple[str, ...] = ()) -> Result:
        """Send a job, once the worker has ``needs`` imported (`needs_of`); its result, or a failure when the worker
        died or took longer than ``timeout``."""
        self.start(needs)
        try:
            self.process.stdin.write((job.to_json() + "\n").encode())
            self.process.stdin.flush()
            line = self._read_line(time.monotonic() + timeout)
        except OSError:
            line = b""
        if line:
            return Result.from_json(line)
        self.stop()
        if line is None:
            return Result(Status.FAILED, f"grading took longer than {timeout:.0f} s and was stopped")
        return Result(Status.FAILED, "the grading process was killed while grading it (it is graded again on the next "
                                     "run)", transient=True)

    def _read_line(self, deadline: float) -> bytes | None:
        """The worker's next line; b"" when it closed its output (it died), None when ``deadline`` passed."""
        buffer = b""
        fd = self.process.stdout.fileno()
        while not buffer.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            buffer += chunk
        return buffer

    def stop(self) -> None:
        if self.process is not None:
            kill_group(self.process.pid)
            self.process.wait()
            self.process = None


class Pool:
    """Up to ``jobs`` workers, started when there is work; `run` hands out jobs and reports each result
    (a `autograder.workers.dispatch.Dispatcher`)."""

    def __init__(self, jobs: int, logs: Path, python: str = sys.executable):
        # The worker runs test cells and the kernel the student's code, each waiting on the other: OpenMP threads
        # that spin while waiting would take the cores from the one that works.
        env = {**nbgrader_environment(), "OMP_WAIT_POLICY": "PASSIVE"}
        if jobs > 1:
            env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        logs.mkdir(parents=True, exist_ok=True)
        self.workers = [Worker(i, env, logs / f"worker-{i}.log", python) for i in range(jobs)]
        self.forks: WorkerForks | None = None
        self.recorders: list[Worker] = []  # `recording_worker`
        self.modules: tuple[str, ...] = ()  # `prepare`
        self.logs = logs
        self.closing = threading.Event()
        self.zygotes: dict[KernelSet, Zygote] = {}  # each set of kernels' warm process (`autograder.sandbox.warm`)
        self.zygote_log = open(logs / "zygotes.log", "ab")  # noqa: SIM115 - open while the pool lives

    def run(self, jobs: Sequence[Job] | Sequence[GenerateJob], timeout: float,
            on_result: Callable[[int, Result], None]) -> None:
        """Run every job; calls ``on_result(index, result)`` in this thread as each one finishes.

        Raises `WorkerStartError` (after stopping the other workers) when a worker cannot start.
        """
        pending: queue.Queue[int] = queue.Queue()
        for index in range(len(jobs)):
            pending.put(index)
        results: queue.Queue[tuple[int, Result] | BaseException] = queue.Queue()

        def serve(worker: Worker) -> None:
            try:
                while not self.closing.is_set():
                    try:
                        index = pending.get_nowait()
                    except queue.Empty:
                        return
                    results.put((index, worker.run(jobs[index], timeout, needs_of(jobs[index]))))
            except BaseException as error:  # noqa: BLE001 - handed to the main thread, which raises it
                results.put(error)

        self._start_forks()
        for worker, job in zip(self.workers, jobs):
            worker.spawn(needs_of(job))  # in this thread: a worker dies with the thread that started it
        threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in self.workers[:len(jobs)]]
        for thread in threads:
            thread.start()
        for _ in jobs:
            item = results.get()
            if isinstance(item, BaseException):
                self.close()
                raise item
            on_result(*item)

    def prepare(self, imports: tuple[str, ...], kernels: Sequence[KernelSet], scratch: str,
                warm: bool) -> dict[KernelSet, str]:
        """What the run's jobs import (torch, transformers' Llama), in the order they need it: with two workers or
        more, each is forked from one process that imports these once (`autograder.workers.forks`); and, with
        ``warm``, the zygote of each of ``kernels``, in the order their jobs come. Each starts now, and imports
        while the grader makes the templates and checks the sandbox (the only worker of one ``--jobs`` too). Call it
        before the first `run`; returns the zygotes' addresses."""
        self.modules = imports
        self._start_forks()  # first: a zygote's command takes a while to make (`autograder.sandbox.site_view`)
        if self.forks is None:
            self.workers[0].spawn()  # not waited for: it imports while the templates are made and the sandbox checked
        if not warm:
            return {}
        # The zygotes in the order their jobs come (``kernels``' order): the first jobs' zygote starts first;
        # one sandbox for the sets that see the same packages: they share one torch.
        order = tuple(kernels)
        for kernels_set in order:
            self.start_zygote(kernels_set, scratch, tuple(k for k in order if k.packages == kernels_set.packages))
        return {k: self.zygotes[k].addresses[PreloadSet(k.preload, k.forbid)] for k in order}

    def _start_forks(self) -> None:
        """With two workers or more, start the process they are forked from (`autograder.workers.forks`), unless it
        runs: in the thread that runs the pool, as the workers, since it dies with that thread."""
        if len(self.workers) > 1 and self.forks is None:
            self.forks = WorkerForks(self.workers[0].env, self.logs / "workers.log", self.modules,
                                     self.workers[0].python, ROOT)
            for worker in self.workers:
                worker.forks = self.forks

    def recording_worker(self) -> Worker:
        """A worker that grades nothing, for the class gradebook (`autograder.workers.recorder`); stopped with the rest."""
        first = self.workers[0]
        self.recorders.append(Worker(len(self.workers), first.env, self.logs / "recorder.log", first.python))
        self.recorders[-1].forks = self.forks
        return self.recorders[-1]

    def logs_of_workers(self) -> tuple[Path, ...]:
        """The logs of the worker forks and the workers (`autograder.milestones`): trusted processes' only."""
        return (self.logs / "workers.log", *(worker.log for worker in (*self.workers, *self.recorders)))

    def isolation(self, isolate: bool, warm: bool) -> Isolation:
        """How this machine's kernels run (`isolation_line`): the warm probe is forked from the zygote of the run's
        first jobs, where `prepare` started zygotes (no zygote is started for it alone)."""
        first = next(iter(self.zygotes), None)  # started first, for the first jobs (`prepare`)
        return isolation_line(isolate, warm, None if first is None else self.zygotes[first])

    def describe(self) -> str:
        return f"with {len(self.workers)} jobs"

    def start_zygote(self, kernels: KernelSet, scratch: str, together: tuple[KernelSet, ...] = ()) -> Zygote:
        """The zygote of ``kernels`` (`autograder.sandbox.warm`), started here on first use and not waited for: it
        imports while the workers do other work; with it, in its sandbox, those of ``together`` (sets that see the
        same packages) not started yet. Called from the thread that runs the pool: it dies with that thread."""
        if kernels not in self.zygotes:
            threads = {key: value for key, value in self.workers[0].env.items() if key in THREADS}
            also = tuple(k for k in together if k != kernels and k not in self.zygotes)
            zygote = Zygote(kernels.preload, scratch, self.zygote_log, threads, kernels.packages, kernels.forbid,
                            tuple(PreloadSet(k.preload, k.forbid) for k in also))
            self.zygotes.update(dict.fromkeys((kernels, *also), zygote))
        return self.zygotes[kernels]

    def with_zygote(self, job: Job) -> Job:
        """A job made elsewhere (by a Dask cluster's client), with the address of this machine's zygote of its
        kernels when it is to start warm."""
        if not (job.warm and job.isolate):
            return job
        kernels = KernelSet.of(job.template)
        return replace(job, zygote=self.start_zygote(kernels, job.scratch).addresses[PreloadSet(kernels.preload,
                                                                                                 kernels.forbid)])

    def close(self) -> None:
        """Stop the workers and the zygotes (their sandboxes die with them)."""
        self.closing.set()
        for worker in (*self.workers, *self.recorders):
            worker.stop()
        if self.forks is not None:
            self.forks.close()
            self.forks = None
        for zygote in dict.fromkeys(self.zygotes.values()):  # a sandbox may serve several sets
            zygote.close()
        self.zygotes.clear()
        self.zygote_log.close()
