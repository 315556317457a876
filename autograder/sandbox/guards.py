"""Guards of the grading processes: each dies with the process that started it, and reads what a kernel wrote
without following its links.

- `die_with_parent` (called first thing in a worker and a kernel) asks Linux to SIGKILL this process
  when its parent dies (``PR_SET_PDEATHSIG``), and `watch_parent` checks once more every
  `PARENT_POLL` seconds (the signal follows the parent *thread* that started the process, the check
  the parent process). With bwrap's ``--die-with-parent`` and its pid namespace, a grader killed with
  ``kill -9`` kills its workers, sandboxes and kernels within a second (each leaves once a core runs its exit).
- `read_kernel_file` reads a file the kernel wrote without following a link or blocking on a FIFO.
- `kill_group` SIGKILLs a process started in a session of its own (a worker, a kernel, a Dask
  process) with everything it started.
- `uncollected` keeps the cyclic collector off while a process that forks others imports (the worker forks, a
  zygote, a cold kernel's preload).
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PR_SET_PDEATHSIG = 1
PARENT_POLL = 0.2


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (a process started with ``start_new_session``); a group that is
    gone already, or not ours to kill, is left alone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux; a no-op where prctl is missing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return


def watch_parent(parent: int | None = None) -> threading.Thread:
    """A daemon thread that kills this process's group and this process once its parent is gone (its parent
    id changes from ``parent``, by default the current one)."""
    expected = os.getppid() if parent is None else parent
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(PARENT_POLL):
            if os.getppid() != expected:
                try:
                    os.killpg(os.getpgid(0), signal.SIGKILL)
                finally:
                    os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="watch-parent", daemon=True)
    thread.start()
    return thread


def read_kernel_file(path: Path | str, limit: int, folder: int | None = None) -> bytes:
    """At most ``limit`` bytes of ``path``, a file in a folder the kernel writes (relative to the descriptor
    ``folder`` when given): opened without following a link or waiting on a FIFO, read only when it is a
    regular file; OSError otherwise."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(descriptor, limit)
    finally:
        os.close(descriptor)


@contextmanager
def uncollected() -> Iterator[None]:
    """No automatic collection while the block imports, then everything moved out of the collector's reach
    (``gc.freeze``) and the collector as it was: what a process that forks others imports is never freed, and the
    collections that an import's allocations set off walked objects that live as long as the process (0.3-0.4 s of
    a core over nbgrader's, torch's and transformers' imports, each frozen after it). The few cycles an import
    leaves are frozen with the rest."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
