"""Guards of the grading processes: each dies with the process that started it, and a job's folder stays
under its disk quota.

- `die_with_parent` (called first thing in a worker and a kernel) asks Linux to SIGKILL this process
  when its parent dies (``PR_SET_PDEATHSIG``), and `watch_parent` checks once more every
  `PARENT_POLL` seconds (the signal follows the parent *thread* that started the process, the check
  the parent process). With bwrap's ``--die-with-parent`` and its pid namespace, a grader killed with
  ``kill -9`` takes its workers, sandboxes and kernels with it within a second.
- `DiskQuota` measures the kernel's writable folder every `DISK_POLL` seconds while a notebook runs
  (`folder_bytes`: every entry's blocks, and at least a block for each, walked by descriptors) and kills
  the kernel once the folder holds more than the quota (each file is also capped by ``RLIMIT_FSIZE``, so a
  kernel gets at most one poll's worth of writing past it).
- `read_kernel_file` reads a file the kernel wrote without following a link or blocking on a FIFO.
- `kill_group` SIGKILLs a process started in a session of its own (a worker, a kernel, a Dask
  process) with everything it started.
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1
PARENT_POLL = 0.2
DISK_POLL = 0.2
INODE_BYTES = 4096  # the least an entry costs the disk quota (a block of ext4's, an inode)
MAX_DEPTH = 256  # folders the disk quota's walk holds open at once


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
    """What the entries below ``folder`` cost its disk: each one's blocks, and at least `INODE_BYTES` for each
    (files, folders, links, sockets: an inode costs the disk however little it holds). Walked through
    descriptors (``openat`` with O_NOFOLLOW), never by a path the kernel could swap for a link meanwhile; what
    vanishes meanwhile is not counted. A folder nested deeper than `MAX_DEPTH` counts as over any quota."""
    try:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0
    total = 0
    stack = [(top, os.scandir(top))]
    try:
        while stack:
            descriptor, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                entries.close()
                os.close(descriptor)
                continue
            try:
                total += max(entry.stat(follow_symlinks=False).st_blocks * 512, INODE_BYTES)
                if entry.is_dir(follow_symlinks=False):
                    if len(stack) >= MAX_DEPTH:
                        return sys.maxsize
                    child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=descriptor)
                    stack.append((child, os.scandir(child)))
            except OSError:
                continue
    finally:
        for descriptor, entries in stack:
            entries.close()
            os.close(descriptor)
    return total


def read_kernel_file(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``, a file in a folder the kernel writes: opened without following a
    link or waiting on a FIFO, read only when it is a regular file; OSError otherwise."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(descriptor, limit)
    finally:
        os.close(descriptor)


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
