"""Warm kernels, the grader's side: one `autograder.sandbox.zygote` per set of preloaded modules, asked by the
workers for a kernel per submission.

The grader's pool starts a `Zygote` per preload set (the warm process in its sandbox,
`autograder.sandbox.bwrap.command` with ``zygote``) and hands its address to the workers in each `Job`; a
worker connects to it through `autograder.sandbox.zygote_client`. `check_warm_start` forks one probe at the start of a
run and raises `WarmStartUnavailable`, with the reason, when a warm kernel would be less isolated than a cold
one (the run then grades with cold kernels).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from autograder.sandbox.bwrap import command, environment, prepare_home, socket_link
from autograder.sandbox.limits import START_SECONDS, Limits
from autograder.sandbox.zygote_client import WarmStartUnavailable, ZygoteClient
from autograder.sandbox.zygote_protocol import PreloadSet

PROBE_FILE = "probe.txt"  # where `check_warm_start`'s probe says what it found


class Zygote:
    """A warm process with ``preload`` imported, in its sandbox, started by the grader's pool (not waited for:
    its workers wait when they connect). Kernels' homes go under ``jobs``, the jobs' channel folders under
    ``channels`` (the grader's alone: the zygote sees it read-only); workers connect to ``address``."""

    def __init__(self, preload: tuple[str, ...], scratch: str = "", log: IO[bytes] | None = None,
                 threads: dict[str, str] | None = None, packages: tuple[str, ...] | None = None,
                 forbid: tuple[str, ...] = (), also: tuple[PreloadSet, ...] = ()):
        """``log``: where the zygote and its kernels print (ipykernel's banner, the traceback of a fork that failed;
        nowhere when None); ``threads``: the kernels' thread settings (OMP_NUM_THREADS...), read when torch loads;
        ``packages``: the only installed packages it and its kernels see (None: all of them); ``forbid``: the
        rules it takes out of its kernels before any fork (`autograder.sandbox.rules`); ``also``: the other preload
        sets this sandbox serves (kernels that see the same ``packages``), each at its own `addresses` entry, so
        that the modules they share are imported once."""
        self.preload = preload
        self.folder = Path(tempfile.mkdtemp(prefix="zygote-", dir=scratch or None))  # this user's alone
        self.jobs = self.folder / "jobs"
        self.jobs.mkdir()
        prepare_home(self.jobs)
        self.channels = self.folder / "channels"
        self.channels.mkdir(mode=0o755)
        os.chmod(self.channels, 0o755)  # made just now, in a folder of this user's alone
        self.link = socket_link(self.folder)  # a socket's path must be short
        sets = tuple(dict.fromkeys((PreloadSet(preload, forbid), *also)))
        self.addresses = {kernels: str(self.link / f"zygote{i or ''}.sock") for i, kernels in enumerate(sets)}
        self.address = self.addresses[sets[0]]
        listeners = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in sets]
        for listener, address in zip(listeners, self.addresses.values()):
            listener.bind(address)
            listener.listen(64)
        limits = Limits()
        program = [sys.executable, "-m", "autograder.sandbox.zygote", str(self.jobs), str(self.channels),
                   *(kernels.to_arg(listener.fileno()) for kernels, listener in zip(sets, listeners))]
        env = {**environment(self.jobs, limits, (), ()), **(threads or {})}  # its sets are on its command line
        argv = command(self.jobs, self.jobs, limits, env, program, zygote=True,
                       read_only=((self.channels, self.channels),), packages=packages)
        try:
            self.process = subprocess.Popen(argv, pass_fds=[listener.fileno() for listener in listeners],
                                            stdin=subprocess.DEVNULL, stdout=log or subprocess.DEVNULL,
                                            stderr=log or subprocess.DEVNULL, start_new_session=True)
        finally:
            for listener in listeners:
                listener.close()

    def close(self) -> None:
        """End the zygote and every kernel it forked."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        self.process.wait()
        self.link.unlink(missing_ok=True)
        shutil.rmtree(self.folder, ignore_errors=True)


LEAKS = 3
PROBE = f"""import ctypes, os, socket, sys
import autograder.checks  # what every test cell imports, in the kernels' view of the packages
problems = []
home, solutions = os.environ['HOME'], sys.argv[1]
if os.path.exists(solutions):
    problems.append('it sees ' + solutions)
if [name for _, name in socket.if_nameindex() if name != 'lo']:
    problems.append('it has a network interface besides loopback')
if sorted(p for p in os.listdir('/proc') if p.isdigit()) != ['1', str(os.getpid())]:
    problems.append('it sees processes besides its own')
if os.listdir(os.path.dirname(home)) != [os.path.basename(home)]:
    problems.append('it sees the homes of other kernels')
if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) == 0:
    problems.append('it can make a user namespace')
status = dict(line.split(':', 1) for line in open('/proc/self/status'))
if int(status['CapEff'], 16) or int(status['CapBnd'], 16) or status['NoNewPrivs'].strip() != '1':
    problems.append('it keeps capabilities')
if problems:
    open(os.path.join(home, {PROBE_FILE!r}), 'w').write('; '.join(problems))
    sys.exit({LEAKS})
"""


def check_warm_start(zygote: Zygote | None = None) -> None:
    """Fork one probe from ``zygote`` (a run's own, which serves the run's kernels afterwards; None: one started for
    the probe alone), which imports the checks, and raise `WarmStartUnavailable` (why) unless it is as isolated as a
    cold kernel: no view of the solutions, other processes or other kernels' homes, loopback only, no capabilities
    and no new user namespaces."""
    if zygote is not None:
        _judge(*_tried(zygote), printed="its log: zygotes.log in the output folder's .logs")
        return
    with tempfile.TemporaryDirectory(prefix="autograder-warm-check-") as scratch, \
            open(Path(scratch) / "zygote.log", "w+b") as log:
        zygote = Zygote((), scratch, log)
        try:
            status, said = _tried(zygote)
        finally:
            zygote.close()
        log.seek(0)
        printed = _last_line(log.read().decode(errors="replace"))
    _judge(status, said, printed)


def _tried(zygote: Zygote) -> tuple[int | None, str]:
    """`_probe` through ``zygote``: its exit status (None when it could not be made) and what it found (or why)."""
    try:
        return _probe(ZygoteClient(zygote.address))
    except WarmStartUnavailable as error:
        return None, str(error)


def _judge(status: int | None, said: str, printed: str) -> None:
    """Raise `WarmStartUnavailable` unless the probe exited 0 (``printed``: where the zygote's own words are)."""
    if status is None:
        raise WarmStartUnavailable(f"{said} ({printed})")
    if status == LEAKS:
        raise WarmStartUnavailable(f"a warm kernel would be less isolated than a cold one here: {said}")
    if status != 0:
        raise WarmStartUnavailable(f"a warm kernel could not be made ({printed})")


def _probe(client: ZygoteClient) -> tuple[int, str]:
    """Fork `PROBE` through ``client``: its exit status and what it found."""
    from course import ROOT, SOLUTIONS

    home = client.new_home()
    prepare_home(home)
    limits = Limits()
    probe = PROBE.replace("sys.argv[1]", repr(str(ROOT / SOLUTIONS)))
    kernel = client.spawn(home, home, home / "link", home / "connection.json", limits, environment(home, limits, ()),
                          probe)
    status = kernel.wait(START_SECONDS)
    client.close()
    return status, (home / PROBE_FILE).read_text() if (home / PROBE_FILE).exists() else ""


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
