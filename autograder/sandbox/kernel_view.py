"""A warm kernel's filesystem (`kernel_view`), made by its init (`autograder.sandbox.zygote`, step 2) in the
kernel's new mount namespace: JOBS and CHANNELS hidden under empty read-only tmpfs but for its own home (a tmpfs
as large as the disk limit, holding a copy of what the grader put there: `autograder.sandbox.home.mount_home`; a
probe's home stays the grader's folder), a fresh ``/tmp`` (with the symlink to its home that nbgrader's sockets
use, and its own channel folder, read-only, at its link's path), ``/dev/shm``, ``/dev/pts`` and ``/proc``.
"""

from __future__ import annotations

import os
import re

from autograder.sandbox import namespaces as ns
from autograder.sandbox.home import mount_home
from autograder.sandbox.limits import Limits
from autograder.sandbox.zygote_protocol import KernelRequest


def _mount_points_under(path: str) -> list[str]:
    """The outermost mount points strictly under ``path``, from /proc/self/mountinfo."""
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            # mountinfo escapes a space, tab, newline or backslash as \ooo; other characters are as they are.
            point = re.sub(r"\\([0-7]{3})", lambda found: chr(int(found.group(1), 8)), line.split()[4])
            if point.startswith(path.rstrip("/") + "/") and point not in points:
                points.append(point)
    return [p for p in points if not any(p.startswith(other + "/") for other in points)]


def _fresh_tmpfs(path: str, data: str) -> None:
    """A new tmpfs at ``path``, with the mounts that lay under it (the interpreter's folders, where the checkout
    is under /tmp) bound again at their places."""
    kept = [(point, os.open(point, os.O_PATH)) for point in _mount_points_under(path)]
    ns.mount("tmpfs", path, "tmpfs", ns.MS_NOSUID | ns.MS_NODEV, data)
    for point, descriptor in kept:
        if os.path.isdir(f"/proc/self/fd/{descriptor}"):
            os.makedirs(point, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(point), exist_ok=True)
            open(point, "a").close()
        ns.mount(f"/proc/self/fd/{descriptor}", point, flags=ns.MS_BIND | ns.MS_REC)
        os.close(descriptor)


def _hide(folder: str) -> None:
    """An empty read-only tmpfs over ``folder``."""
    ns.mount("tmpfs", folder, "tmpfs", ns.MS_NOSUID | ns.MS_NODEV | ns.MS_RDONLY, "size=4k,mode=0755")


def kernel_view(request: KernelRequest, jobs: str, channels: str, limits: Limits) -> None:
    """The kernel's view (module docstring), made in its new mount namespace by its init."""
    tmp_bytes = limits.tmp_bytes
    ns.mount(None, "/", flags=ns.MS_REC | ns.MS_PRIVATE)
    home = os.open(request.home, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    channel = os.open(request.channel, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW) if request.channel else None
    ns.mount("tmpfs", jobs, "tmpfs", ns.MS_NOSUID | ns.MS_NODEV, "size=64k,mode=0755")
    os.makedirs(request.home)
    ns.mount(f"/proc/self/fd/{home}", request.home, flags=ns.MS_BIND)  # still the zygote's /proc here
    os.close(home)
    if not request.probe:  # a kernel's home: a tmpfs as large as the disk limit, with what the grader put there
        mount_home(request.home, limits)
    ns.mount(None, jobs, flags=ns.MS_REMOUNT | ns.MS_RDONLY | ns.MS_NOSUID | ns.MS_NODEV)
    if channels:
        _hide(channels)  # every job's channel, this one's included: it is seen at its link only
    _fresh_tmpfs("/tmp", f"size={tmp_bytes},mode=1777")
    os.symlink(request.home, request.link)
    if channel is not None:
        os.mkdir(request.channel_link)
        ns.mount(f"/proc/self/fd/{channel}", request.channel_link, flags=ns.MS_BIND)
        ns.mount(None, request.channel_link,
                 flags=ns.MS_REMOUNT | ns.MS_BIND | ns.MS_RDONLY | ns.MS_NOSUID | ns.MS_NODEV | ns.MS_NOEXEC)
        os.close(channel)
    _fresh_tmpfs("/dev/shm", f"size={tmp_bytes},mode=1777")
    ns.mount("devpts", "/dev/pts", "devpts", ns.MS_NOSUID | ns.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    ns.mount("proc", "/proc", "proc", ns.MS_NOSUID | ns.MS_NODEV | ns.MS_NOEXEC)
    os.chdir("/")  # the zygote's working folder is JOBS under the tmpfs, every home in it: /proc/1/cwd would show it
