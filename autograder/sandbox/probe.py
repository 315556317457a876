"""Whether this machine can make a tight grading sandbox: `check_isolation` starts one real sandbox before a run
(`autograder.grading.run`, and each Dask worker) that imports the checks (a warm run's probe kernel imports them
instead: `autograder.sandbox.warm`) and must see neither the course's solutions nor a network interface besides
loopback, and raises `SandboxUnavailable` with the reason and the line
that enables unprivileged user namespaces (`enable_hint`) when it cannot.

Runs in the grader and in each Dask worker.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.sandbox.bwrap import command, environment, prepare_home
from autograder.sandbox.limits import START_SECONDS, Limits

LEAKS = 3  # the probe's exit status when it sees what it must not
CHECKS = "import autograder.checks\n"  # what every test cell imports (numpy and the checks: 0.2 s of a core)
PROBE = f"""import os, socket, sys
if os.path.exists(sys.argv[1]):
    print('it sees ' + sys.argv[1], file=sys.stderr)
    sys.exit({LEAKS})
if [name for _, name in socket.if_nameindex() if name != 'lo']:
    print('it has a network interface besides loopback', file=sys.stderr)
    sys.exit({LEAKS})
"""


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here; the message says why and what enables it."""


def enable_hint() -> str:
    """The line that lets unprivileged users make namespaces on this machine."""
    settings = [("/proc/sys/kernel/unprivileged_userns_clone", "0", "sudo sysctl -w kernel.unprivileged_userns_clone=1"),
                ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
                 "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
                ("/proc/sys/user/max_user_namespaces", "0", "sudo sysctl -w user.max_user_namespaces=10000")]
    for path, blocking, fix in settings:
        try:
            if Path(path).read_text().strip() == blocking:
                return fix
        except OSError:
            continue
    return ("sudo sysctl -w kernel.unprivileged_userns_clone=1 (or, in a container, start it with "
            "--security-opt seccomp=unconfined --security-opt apparmor=unconfined)")


def check_isolation(imports_checks: bool = True) -> None:
    """Start one sandbox that imports the checks (unless ``imports_checks`` is off: a warm run's probe kernel
    imports them, in the same view of the packages) and must see neither the course's solutions nor the network;
    raise `SandboxUnavailable` (why, and the line that enables it) when that fails."""
    from course import ROOT, SOLUTIONS

    with tempfile.TemporaryDirectory(prefix="autograder-check-") as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        prepare_home(home)
        limits = Limits()
        try:
            argv = command(home, home, limits, environment(home, limits, ()),
                           [sys.executable, "-c", (CHECKS if imports_checks else "") + PROBE, str(ROOT / SOLUTIONS)])
            done = subprocess.run(argv, capture_output=True, text=True, timeout=START_SECONDS)
        except (OSError, subprocess.SubprocessError, RuntimeError) as error:
            raise SandboxUnavailable(f"cannot start bwrap: {error}") from error
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()] or [f"exit status {done.returncode}"]
    if done.returncode == LEAKS:
        raise SandboxUnavailable(f"the grading sandbox is not tight here: {lines[-1]}")
    if done.returncode != 0:
        raise SandboxUnavailable(f"cannot make the grading sandbox (bwrap: {lines[-1]}). To enable unprivileged "
                                 f"user namespaces: {enable_hint()}")
