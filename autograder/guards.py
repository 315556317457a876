"""Guards of the grading processes: each dies with the process that started it, and a job's folder stays
under its disk quota.

- `die_with_parent` (called first thing in a worker and a kernel) asks Linux to SIGKILL this process
  when its parent dies (``PR_SET_PDEATHSIG``), and `watch_parent` checks once more every
  `PARENT_POLL` seconds (the signal follows the parent *thread* that started the process, the check
  the parent process). With bwrap's ``--die-with-parent`` and its pid namespace, a grader killed with
  ``kill -9`` takes its workers, sandboxes and kernels with it within a second.
- `DiskQuota` measures the kernel's writable folder every `DISK_POLL` seconds while a notebook runs
  and kills the kernel once the folder holds more than the quota (each file is also capped by
  ``RLIMIT_FSIZE``, so a kernel gets at most one poll's worth of writing past it).
- `kill_group` SIGKILLs a process started in a session of its own (a worker, a kernel, a Dask
  process) with everything it started.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1
PARENT_POLL = 0.2
DISK_POLL = 0.2


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


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files below ``folder`` (links not followed; what vanishes meanwhile not counted)."""
    total = 0
    stack = [str(folder)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return total


class DiskQuota:
    """While entered, call ``kill`` once ``folder`` holds more than ``limit`` bytes; `exceeded` says whether it
    did (checked every `DISK_POLL` seconds in a thread of its own)."""

    def __init__(self, folder: Path, limit: int, kill: Callable[[], None]):
        self.folder, self.limit, self.kill = folder, limit, kill
        self.exceeded = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="disk-quota", daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(DISK_POLL):
            if folder_bytes(self.folder) > self.limit:
                self.exceeded = True
                self.kill()
                return

    def __enter__(self) -> DiskQuota:
        if self.limit > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
