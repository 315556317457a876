"""A real Dask cluster on this machine, for the tests and the benchmark: a `dask scheduler` and `dask worker`
processes started with this Python's `dask` command, each in its own folder, on 127.0.0.1.

    with LocalCluster(folder, workers=2) as cluster:
        grade(... --scheduler cluster.address)
        cluster.kill_worker(0)      # SIGKILL a worker and its nanny, as a lost machine

Each worker has one process and one thread (one submission at a time), the course checkout on its
PYTHONPATH and no view of the client's folders beyond what any process has. Everything started is
killed on the way out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from autograder.sandbox.guards import kill_group
from course import ROOT

DASK = str(Path(sys.executable).parent / "dask")


class LocalCluster:
    """A scheduler and ``workers`` workers as separate processes; ``address`` is the scheduler's."""

    def __init__(self, folder: Path, workers: int = 2, allowed_failures: int = 1, pythonpath: Path = ROOT):
        self.folder = folder
        self.count = workers
        self.pythonpath = pythonpath
        self.env = {**os.environ, "PYTHONPATH": str(pythonpath),
                    "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(allowed_failures)}
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = []
        self.address = ""

    def _start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        folder = self.folder / name
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "log.txt", "ab") as log:
            return subprocess.Popen(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                                    env=env or self.env, start_new_session=True)

    def start(self, timeout: float = 60) -> LocalCluster:
        """Start the scheduler on a free port, then the workers; return once every worker has joined."""
        scheduler_file = self.folder / "scheduler" / "scheduler.json"
        self.scheduler = self._start("scheduler", [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                                   "--no-dashboard", "--scheduler-file", str(scheduler_file)])
        deadline = time.monotonic() + timeout
        while not (address := _address(scheduler_file)):  # the file may be there before its contents are
            if time.monotonic() > deadline or self.scheduler.poll() is not None:
                self.stop()
                raise RuntimeError(f"the scheduler did not start: see {self.folder / 'scheduler' / 'log.txt'}")
            time.sleep(0.1)
        self.address = address
        for _ in range(self.count):
            self.add_worker()
        self.wait_for_workers(self.count, deadline - time.monotonic())
        return self

    def add_worker(self, env: dict[str, str] | None = None) -> int:
        """Start one more worker (with ``env`` instead of this cluster's environment); returns its index."""
        index = len(self.workers)
        self.workers.append(self._start(f"worker-{index}", [
            DASK, "worker", self.address, "--host", "127.0.0.1", "--nworkers", "1", "--nthreads", "1",
            "--no-dashboard", "--local-directory", str(self.folder / f"worker-{index}")], env))
        return index

    def wait_for_workers(self, count: int, timeout: float = 60) -> None:
        from distributed import Client

        with Client(self.address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(count, timeout=max(1.0, timeout))

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` with its nanny and everything it started in its process group."""
        process = self.workers[index]
        if process is not None:
            _kill(process)
            self.workers[index] = None

    def stop(self) -> None:
        for index in range(len(self.workers)):
            self.kill_worker(index)
        if self.scheduler is not None:
            _kill(self.scheduler)
            self.scheduler = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _address(scheduler_file: Path) -> str:
    """The scheduler's address from its scheduler file; "" while the file is missing or not yet whole."""
    try:
        return str(json.loads(scheduler_file.read_text())["address"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _kill(process: subprocess.Popen) -> None:
    kill_group(process.pid)
    process.wait()
