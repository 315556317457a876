"""A kernel's home: a tmpfs of its own, as large as the disk limit, so that a write past the limit fails at once.

Inside the sandbox, before any student code runs, the home's folder (which the grader filled: the connection
file, the working folder with the assignment's released files) is covered by a new tmpfs of ``size=`` the
disk limit and ``nr_inodes=`` one for each `BLOCK` of it (`tmpfs_options`), holding a copy of what was there
(`mount_home`): a file, a link, a folder, an empty file, each costs the limit, and a write past it fails with
ENOSPC. A warm kernel's init mounts it (`autograder.sandbox.zygote`); a cold kernel mounts it itself (`own_home`,
in a mount namespace of its own, with the `CAPABILITIES` bubblewrap gave it for this, which it then drops).

The grader's side, `KernelHome`: once the kernel's home is its tmpfs, the worker opens it through
``/proc/PID/root`` (before any student code runs) and from then on acts through that descriptor only: the
short link its sockets are reached by (`autograder.sandbox.bwrap.socket_link`) leads there, the kernel's timings
file is opened below it without following a link, and after the run `is_full` says whether the notebook
left its home full (`not graded: too large`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from autograder.sandbox import namespaces as ns
from autograder.sandbox.limits import Limits

BLOCK = 4096  # bytes of the limit one inode stands for (a page of tmpfs)
OWN_HOME = "AUTOGRADER_OWN_HOME"  # set in a cold kernel's environment: it mounts its home itself (`own_home`)
CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SETPCAP")  # what a cold kernel holds until `own_home` drops them
ATTACH_POLL = 0.02  # seconds between two looks for a starting kernel's home


def inode_count(limits: Limits) -> int:
    """Inodes of a home: one for each `BLOCK` of the disk limit."""
    return max(limits.disk_bytes // BLOCK, 1)


def tmpfs_options(limits: Limits) -> str:
    """The mount options of a kernel's home (the one source of its size and inodes)."""
    return f"size={limits.disk_bytes},nr_inodes={inode_count(limits)},mode=0700"


def mount_home(home: str, limits: Limits) -> None:
    """Cover ``home`` with a new tmpfs (`tmpfs_options`) that holds a copy of what was there. Needs
    CAP_SYS_ADMIN over this process's mount namespace; runs before any student code."""
    seed = os.open(home, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        ns.mount("tmpfs", home, "tmpfs", ns.MS_NOSUID | ns.MS_NODEV, tmpfs_options(limits))
        shutil.copytree(f"/proc/self/fd/{seed}", home, symlinks=True, dirs_exist_ok=True)
    finally:
        os.close(seed)


def own_home(limits: Limits) -> None:
    """A cold kernel's first step (``OWN_HOME`` set): in a new mount namespace, `mount_home` at ``$HOME``, stay in
    the same working folder (now on the tmpfs), then give up every capability for good."""
    ns.unshare(ns.CLONE_NEWNS)
    mount_home(os.environ["HOME"], limits)
    os.chdir(os.getcwd())
    ns.drop_privileges()


def is_full(usage: os.statvfs_result) -> bool:
    """Whether a home has no block or no inode left: a write past the limit failed, or the next one will."""
    return usage.f_bavail == 0 or usage.f_favail == 0


class KernelHome:
    """The grader's view of one kernel's home (module docstring): ``home`` is its path (the same inside the
    sandbox and here, where it holds what the grader put there), ``link`` the grader's short link to it."""

    def __init__(self, home: Path, link: Path):
        self.home, self.link = home, link
        self.seed = os.stat(home).st_dev
        self.descriptor: int | None = None
        self.usage: os.statvfs_result | None = None

    def attach(self, pid: int) -> bool:
        """Open the home as the process ``pid`` sees it, if it is the kernel's own filesystem by now, and lead
        ``link`` there; False while it is not (or the process is gone)."""
        try:
            descriptor = os.open(f"/proc/{pid}/root{self.home}",
                                 os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        if os.fstat(descriptor).st_dev == self.seed:
            os.close(descriptor)
            return False
        self.descriptor = descriptor
        fresh = self.link.with_name(self.link.name + ".new")
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(f"/proc/{os.getpid()}/fd/{descriptor}")
        os.replace(fresh, self.link)
        return True

    async def wait(self, find_pid: Callable[[], int | None], poll: Callable[[], int | None], timeout: float) -> None:
        """`attach` to the process ``find_pid`` names, once it has mounted its home; RuntimeError when what the
        kernel manager launched ended first (``poll``: its exit status, None while it runs) or after ``timeout``
        seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and poll() is None:
            pid = find_pid()
            if pid is not None and self.attach(pid):
                return
            await asyncio.sleep(ATTACH_POLL)
        raise RuntimeError(f"the kernel ended or did not make its home within {timeout:.0f} s")

    def note_usage(self) -> None:
        """Note how full the home is as the kernel ends, before jupyter_client removes its sockets and connection
        file from it (which frees a few inodes and a page)."""
        if self.descriptor is not None and self.usage is None:
            self.usage = os.fstatvfs(self.descriptor)

    def full(self) -> bool:
        """Whether the notebook left its home full, as `note_usage` saw it (or now, if it was never called);
        False when the kernel never made its home."""
        if self.descriptor is None:
            return False
        return is_full(self.usage or os.fstatvfs(self.descriptor))

    def close(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None
