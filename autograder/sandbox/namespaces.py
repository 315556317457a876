"""Linux namespaces, mounts and privileges through libc, for the warm kernels (`autograder.sandbox.zygote`).

bubblewrap makes a cold kernel's sandbox from a command line; a warm kernel is forked from a process
that has already imported torch, so it makes its own in-process, with these calls: `unshare`, `mount`,
`map_own_ids`, `drop_privileges`, `loopback_up`, `set_parent_death_signal`, `set_name`. Each raises
`OSError` with the call that failed.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import socket
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
ALL = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NAME = 1, 4, 15
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


@functools.cache
def _libc() -> ctypes.CDLL:
    """This process's C library, loaded once, with the argument types of the calls that need them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def _check(result: int, call: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{call}: {os.strerror(number)}")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def unshare(flags: int) -> None:
    """Move this process into new namespaces (``CLONE_*`` flags); a new pid namespace is its next child's."""
    _check(_libc().unshare(flags), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    _check(_libc().mount(_bytes(source), _bytes(target), _bytes(fstype), flags, _bytes(data)),
           f"mount {source} on {target} ({fstype or 'bind/remount'})")


def prctl(option: int, value: int = 0) -> None:
    _check(_libc().prctl(option, value, 0, 0, 0), f"prctl({option}, {value})")


def map_own_ids(uid: int, gid: int) -> None:
    """In a new user namespace: be ``uid``/``gid`` there, as outside (the one mapping an unprivileged process may
    write), with setgroups denied."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"), ("gid_map", f"{gid} {gid} 1\n")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


def set_parent_death_signal(signal_number: int) -> None:
    prctl(_PR_SET_PDEATHSIG, signal_number)


def set_dumpable(dumpable: bool) -> None:
    """A process that is not dumpable cannot be traced, nor its /proc files read, by another of its user."""
    prctl(_PR_SET_DUMPABLE, int(dumpable))


def set_name(name: str) -> None:
    """This thread's name in /proc/PID/comm (15 bytes at most)."""
    _check(_libc().prctl(_PR_SET_NAME, ctypes.cast(ctypes.c_char_p(name.encode()[:15]), ctypes.c_void_p).value, 0, 0, 0),
           "prctl(PR_SET_NAME)")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges() -> None:
    """Give up every capability for good: the bounding and ambient sets emptied, the others zero, and no
    execve can gain any again (no_new_privs), as bubblewrap leaves its sandboxed program."""
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for capability in range(last + 1):
        prctl(_PR_CAPBSET_DROP, capability)
    _check(_libc().prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    data = (_CapData * 2)()
    _check(_libc().capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), data), "capset")
    prctl(_PR_SET_NO_NEW_PRIVS, 1)


def loopback_up() -> None:
    """Bring up ``lo`` in this (new) network namespace, as bubblewrap does: it then holds loopback only."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
