"""The worker side of `--scheduler`: what a Dask worker runs to grade one submission from bytes.

A job arrives with everything it needs (no shared filesystem): the client's `autograder.records.Job`
(its limits), the notebook bytes, the client's environment fingerprint and the assignment's template archive
(`pack_template`: the released files and the template gradebook), which Dask moves to each worker
once per assignment and run. The worker unpacks it once into its own folder, writes the notebooks
there and grades them exactly as a local run does: a single-slot `autograder.workers.pool.Pool` runs the
job (`autograder.harness.notebook.grade_submission`) in a separate process whose kernel is sandboxed
(`autograder.sandbox.bwrap`), killed with its kernel when it overruns. A hostile notebook therefore fails
alone and never takes the Dask worker down with it. The result (scores, reasons and the feedback
HTML) goes back to the client, which alone writes DIR.

What a Dask worker keeps from task to task (its sandbox checks, its folders, each thread's grading process) is
held by its `GradingPlugin`, a Dask worker plugin the client registers (`autograder.workers.dask_pool.connect`).
"""

from __future__ import annotations

import atexit
import gzip
import hashlib
import io
import os
import platform
import shutil
import tarfile
import tempfile
import threading
import uuid
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from distributed import WorkerPlugin

from autograder.records import Job, Result
from autograder.workers.digests import hash_folder
from course import ROOT

PACKAGES = ("nbgrader", "torch", "numpy", "distributed")
PLUGIN = "autograder"  # the name of the `GradingPlugin` on every worker
CODE = ("autograder", "course")


class EnvironmentMismatch(RuntimeError):
    """This worker's environment differs from the client's: grading here could give other grades."""


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _code_hash() -> str:
    """sha256 of every file of the course's code (``autograder/`` and ``course/``), by relative path."""
    together = "".join(f"{package}:{hash_folder(ROOT / package)}\n" for package in CODE)
    return hashlib.sha256(together.encode()).hexdigest()[:16]


def fingerprint() -> dict[str, str]:
    """What must be equal on the client and every worker: Python, nbgrader, torch, numpy, distributed, and
    the course version (a hash of ``autograder/`` and ``course/``; the template travels with the jobs).
    Read from disk at each call, as the grading processes that a worker starts will find them."""
    return {"python": platform.python_version(), "course": _code_hash(),
            **{name: _package_version(name) for name in PACKAGES}}


def differences(theirs: dict[str, str], ours: dict[str, str]) -> str:
    """'torch 2.12.0 there, 2.13.0 here; ...' for every entry that differs ('' when none does)."""
    names = {"course": "course version (autograder/ and course/)"}
    return "; ".join(f"{names.get(k, k)} {theirs.get(k, 'unknown')} there, {ours.get(k, 'unknown')} here"
                     for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k))


def pack_template(folder: Path) -> bytes:
    """The template folder (``gradebook.db`` and ``release/``) as a gzipped tar, byte-identical for the same
    files (fixed times and owners), so that its digest names it on the workers across runs."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = tarfile.TarInfo(str(path.relative_to(folder)))
            data = path.read_bytes()
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def template_archive(archive: bytes) -> bytes:
    """The template archive itself: as the result of a task (instead of scattered data) the scheduler can
    make it again on another worker when the worker that holds it is lost."""
    return archive


def unpack_template(archive: bytes, cache: Path) -> Path:
    """The template folder for ``archive``, unpacked under ``cache`` once per archive digest: unpacked aside, then
    renamed into place, so that it is whole or absent (a thread that loses the race drops its copy)."""
    folder = cache / hashlib.sha256(archive).hexdigest()[:32]
    if not folder.exists():
        partial = Path(tempfile.mkdtemp(prefix="partial-", dir=cache))
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive))) as tar:
            tar.extractall(partial, filter="data")
        try:
            os.rename(partial, folder)
        except OSError:  # another thread's copy is in place
            shutil.rmtree(partial, ignore_errors=True)
    return folder


@dataclass(frozen=True)
class WorkerChecks:
    """Why this worker cannot make the grading sandbox, and why it cannot fork warm kernels ('' when it can)."""

    sandbox: str
    warm: str


def _checks() -> WorkerChecks:
    from autograder.sandbox.probe import SandboxUnavailable, check_isolation
    from autograder.sandbox.warm import WarmStartUnavailable, check_warm_start

    try:
        check_isolation()
        sandbox = ""
    except SandboxUnavailable as error:
        sandbox = str(error)
    try:
        check_warm_start()
        warm = ""
    except WarmStartUnavailable as error:
        warm = str(error)
    return WorkerChecks(sandbox, warm)


class _Slot:
    """One Dask worker thread's grading process (a single-slot local pool, so the same code as a local run,
    in a process of its own that a hostile notebook can only take down alone) and its folders."""

    def __init__(self, base: Path):
        from autograder.workers.pool import Pool
        from autograder.sandbox.bwrap import remove_scratch

        self.base = base
        # The jobs' folders (the kernels' sockets are reached through short links: `socket_link`).
        self.scratch = Path(tempfile.mkdtemp(prefix="autograder-"))
        atexit.register(remove_scratch, self.scratch)
        self.pool = Pool(1, base / "logs")


class GradingPlugin(WorkerPlugin):
    """What one Dask worker keeps for grading from task to task (module docstring): its `WorkerChecks`, made once
    (its machine does not change), its folder (``autograder/`` in its local directory) and each of its threads'
    `_Slot`. Sent to the workers pickled: what it holds is made in `setup`, on the worker."""

    name = PLUGIN

    def setup(self, worker) -> None:  # noqa: ANN001 - distributed's Worker
        self.base = Path(worker.local_directory) / "autograder"
        for sub in ("templates", "jobs", "logs"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        self.checking = threading.Lock()
        self.checks: WorkerChecks | None = None
        self.threads = threading.local()

    def worker_checks(self) -> WorkerChecks:
        with self.checking:
            if self.checks is None:
                self.checks = _checks()
            return self.checks

    def slot(self) -> _Slot:
        """This thread's grading process, started on its first job."""
        if getattr(self.threads, "slot", None) is None:
            self.threads.slot = _Slot(self.base)
        return self.threads.slot


def check_worker(isolate: bool, dask_worker=None) -> dict:  # noqa: ANN001 - distributed passes its Worker
    """This worker's `fingerprint`, why it cannot make the grading sandbox and why it cannot fork warm kernels
    ('' when it can, or when ``isolate`` is off); run on every worker by the client before it sends any job
    (``client.run``, which passes the worker as ``dask_worker``)."""
    checks = dask_worker.plugins[PLUGIN].worker_checks() if isolate else WorkerChecks("", "")
    return {"fingerprint": fingerprint(), "sandbox": checks.sandbox, "warm": checks.warm}


def grade_remote(job: Job, notebooks: dict[str, bytes | None], timeout: float, client: dict[str, str],
                 template: bytes) -> Result:
    """Grade one submission from bytes as a local run does (`autograder.harness.notebook.grade_submission`, in this
    thread's worker process); returns its `Result`, with the feedback pages (file name -> HTML) in ``feedback``.

    ``job``: the client's `autograder.records.Job` (its paths are the client's; the files come as bytes):
    ``notebooks`` (name -> notebook bytes or None); ``timeout``: seconds for the whole job; ``client``: the
    client's `fingerprint`; ``template``: `pack_template` of the assignment's template folder. Raises
    `EnvironmentMismatch` when this worker's environment differs from the client's.
    """
    problem = differences(fingerprint(), client)
    if problem:
        raise EnvironmentMismatch(problem)
    from distributed import get_worker

    slot = get_worker().plugins[PLUGIN].slot()
    folder = unpack_template(template, slot.base / "templates")
    here = slot.base / "jobs" / uuid.uuid4().hex
    try:
        paths: dict[str, str | None] = {}
        for name, data in notebooks.items():
            paths[name] = None
            if data is not None:
                path = here / f"{name}.ipynb"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                paths[name] = str(path)
        results: list[Result] = []
        here_job = slot.pool.with_zygote(job.moved(paths, folder, slot.scratch))
        slot.pool.run([here_job], timeout, lambda index, result: results.append(result))
        return results[0]
    finally:
        shutil.rmtree(here, ignore_errors=True)
