"""`python -m autograder grade ... --scheduler tcp://HOST:PORT`: the same grading on Dask distributed workers.

`ClusterPool` is a `autograder.workers.dispatch.Dispatcher`, as the local pool is, so the orchestrator
(`autograder.grading.run`) keeps its templates, resume state, progress bar, gradebook, CSV and report as they
are, and only hands its grading jobs to the cluster instead of local processes:

- connecting fails within ``CONNECT_TIMEOUT`` seconds, with one clear line, when the scheduler cannot
  be reached, and when no worker joins it within ``WORKER_WAIT`` seconds;
- every worker's environment (`autograder.workers.dask_worker.fingerprint`: Python, nbgrader, torch, numpy,
  distributed and the course version) is compared with the client's before anything runs; a worker
  that differs stops the run with one line per worker saying how. A worker that joins later and
  differs refuses its jobs (`EnvironmentMismatch`), and they are reported, never graded there;
- nothing on the workers' disks is assumed: each job carries its notebooks' bytes, and each
  assignment's template archive is one task's result, which each worker fetches once (a lost copy is
  made again);
- a worker that dies mid-job: the scheduler reruns the job on another worker (up to its
  ``allowed-failures``); when that runs out the job is reported with the reason, not stored, so that
  the next run grades it again. ``retries=1`` also reruns a job once after an error of the worker;
- the client alone writes DIR: the feedback HTML comes back in the result, as from a local worker;
- Ctrl-C (or SIGTERM) cancels every outstanding future; what finished is already stored.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from autograder.workers.dask_worker import (EnvironmentMismatch, check_worker, differences, fingerprint, grade_remote,
                                       GradingPlugin, pack_template, template_archive)
from autograder.workers.dispatch import Isolation, KernelSet
from autograder.workers.pool import WorkerStartError
from autograder.records import Job, Result, Status
from autograder.sandbox.bwrap import describe_isolation, describe_start

CONNECT_TIMEOUT = 10
WORKER_WAIT = 30


class ClusterError(WorkerStartError):
    """The cluster cannot be used: unreachable scheduler, no workers, or workers unlike this client (or
    unable to make the sandbox). A `WorkerStartError`: the run stops with this message."""


def connect(address: str, isolate: bool = True, timeout: float = CONNECT_TIMEOUT,
            worker_wait: float = WORKER_WAIT) -> tuple:
    """A `distributed.Client` on ``address`` whose workers all match this client's environment (and, with
    ``isolate``, can all make the grading sandbox), and why some cannot fork warm kernels (`check_workers`)."""
    from distributed import Client

    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, ValueError, TypeError) as error:
        raise ClusterError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({error}); "
                           "is `dask scheduler` running there, and is the address tcp://HOST:PORT?") from None
    try:
        client.register_plugin(GradingPlugin())  # each worker's grading state, on workers that join later too
        client.wait_for_workers(1, timeout=worker_wait)
        cold_reasons = check_workers(client, isolate)
    except TimeoutError:
        client.close()
        raise ClusterError(f"the Dask scheduler at {address} has no workers (waited {worker_wait:g} s): start "
                           "some with `dask worker " + address + "`") from None
    except BaseException:
        client.close()
        raise
    return client, cold_reasons


def check_workers(client, isolate: bool) -> list[str]:
    """Raise `ClusterError` naming, one line each, every worker whose environment differs from this
    client's, that cannot import the course's code, or (with ``isolate``) that cannot make the sandbox.
    Returns why workers cannot fork warm kernels, one line each (`autograder.sandbox.warm.check_warm_start`; [] when all can)."""
    ours = fingerprint()
    try:
        theirs = client.run(check_worker, isolate, on_error="return")
    except OSError as error:
        raise ClusterError(f"cannot ask the workers for their environment: {error}") from None
    problems = []
    for worker, found in sorted(theirs.items()):
        if isinstance(found, BaseException):
            problems.append(f"worker {worker} cannot run the grader ({type(found).__name__}: {found}); start it "
                            "from the course checkout with PYTHONPATH=<checkout>")
        elif differences(found["fingerprint"], ours):
            problems.append(f"worker {worker} differs from this client: {differences(found['fingerprint'], ours)}")
        elif found["sandbox"]:
            problems.append(f"worker {worker}: {found['sandbox']}")
    if problems:
        raise ClusterError("\n".join(problems))
    return [f"worker {worker}: {found['warm']}" for worker, found in sorted(theirs.items()) if found["warm"]]


class ClusterPool:
    """Grading jobs of `autograder.grading.run` run on a Dask cluster (a `autograder.workers.dispatch.Dispatcher`)."""

    def __init__(self, address: str, isolate: bool = True, timeout: float = CONNECT_TIMEOUT,
                 worker_wait: float = WORKER_WAIT):
        self.client, self.cold_reasons = connect(address, isolate, timeout, worker_wait)
        self.address = address

    def prepare(self, imports: tuple[str, ...], kernels: Sequence[KernelSet], scratch: str,
                warm: bool) -> dict[KernelSet, str]:
        """Nothing to start here: each worker starts its own warm processes (`autograder.workers.dask_worker`)."""
        return {}

    def isolation(self, isolate: bool, warm: bool) -> Isolation:
        """The lines a run prints about how kernels run on the workers, and whether they start warm (not where
        ``warm`` is off, the sandbox is, or a worker cannot: the lines say which). The workers were checked for the
        sandbox when they were connected to (`connect`)."""
        line = describe_isolation(isolate, cluster=True)
        reasons = self.cold_reasons
        if not (warm and isolate and not reasons):
            why = ("; ".join(reasons) if reasons and warm and isolate
                   else "a warm start needs the sandbox" if warm else "--cold")
            return Isolation(f"{line}\nkernels start cold ({why})", False)
        return Isolation(f"{line}\n{describe_start(True)}", True)

    def describe(self) -> str:
        """'on the Dask cluster at ADDRESS: N workers, M threads' (each thread grades one submission at a time)."""
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        threads = sum(w.get("nthreads", 1) for w in workers.values())
        return f"on the Dask cluster at {self.address}: {len(workers)} workers, {threads} threads"

    def run(self, jobs: Sequence[Job], timeout: float, on_result: Callable[[int, Result], None]) -> None:
        """Grade every job (`autograder.grading.run`'s: notebooks by path, the template folder, limits) on the
        cluster; calls ``on_result(index, result)`` here as each one finishes, its feedback pages in the
        result as a local run returns them. Interrupted (Ctrl-C, SIGTERM): cancels what is left."""
        from distributed import as_completed

        ours = fingerprint()
        templates: dict[Path, object] = {}
        futures = {}
        warned: set[str] = set()  # each once, not once per job
        try:
            for index, job in enumerate(jobs):
                folder = job.template.folder
                if folder not in templates:
                    # A task, not scattered data: when the worker that holds it dies, the scheduler remakes it.
                    archive = pack_template(folder)
                    templates[folder] = self.client.submit(
                        template_archive, archive, key=f"autograder-template-{hashlib.sha256(archive).hexdigest()}")
                notebooks = {name: Path(path).read_bytes() if path else None for name, path in job.notebooks.items()}
                future = self.client.submit(grade_remote, job, notebooks, timeout, ours, templates[folder], retries=1,
                                            pure=False, key=f"autograder-{job.assignment}-{uuid.uuid4().hex}")
                futures[future] = index
            for future in as_completed(list(futures), loop=self.client.loop):
                index = futures.pop(future)
                result, warning = _outcome(future)
                if warning and warning not in warned:
                    warned.add(warning)
                    print(f"warning: {warning}", file=sys.stderr)
                on_result(index, result)
        except BaseException:
            self.client.cancel(list(futures))
            raise

    def close(self) -> None:
        self.client.close()


def _outcome(future) -> tuple[Result, str]:
    """The result of a finished future, and a line for the instructor ('' when none); a failure of the cluster
    is reported with ``transient`` set (not stored: the next run grades it again)."""
    from distributed import KilledWorker

    try:
        result = future.result()
    except KilledWorker:
        return Result(Status.FAILED, "the Dask workers grading it died each time it was tried (a worker lost, or a "
                                     "notebook that brings its worker down); a new run tries it again",
                      transient=True), ""
    except EnvironmentMismatch as error:
        line = f"a Dask worker that joined during the run differs from this client: {error}"
        return Result(Status.FAILED, line, transient=True), line
    except Exception as error:  # noqa: BLE001 - any failure of the cluster is one job's reason
        return Result(Status.FAILED, f"the cluster could not grade it ({type(error).__name__}: {error})",
                      transient=True), ""
    return result, ""
