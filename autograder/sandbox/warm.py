"""Warm kernels: one `autograder.sandbox.zygote` per set of preloaded modules, asked by the workers for a kernel per
submission.

The grader's pool starts a `Zygote` per preload set (the warm process in its sandbox,
`autograder.sandbox.bwrap.command` with ``zygote``) and hands its address to the workers in each `Job`. A
worker connects once (`client_for`: a `ZygoteClient`, which waits until the zygote has imported its
modules); `ZygoteClient.spawn` asks for a kernel and returns a `WarmKernel`, the process handle
jupyter_client's provisioner holds in place of a ``Popen`` (`autograder.harness.notebook`). `check` forks one
probe at the start of a run and raises `WarmStartUnavailable`, with the reason, when a warm kernel would
be less isolated than a cold one (the run then grades with cold kernels).
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from autograder.sandbox.limits import START_SECONDS, Limits
from autograder.sandbox.bwrap import SANDBOX_UID, Channel, command, environment, new_channel, prepare_home, socket_link
from autograder.sandbox.zygote import KernelRequest

PROBE_FILE = "probe.txt"  # where `check`'s probe says what it found


class WarmStartUnavailable(RuntimeError):
    """No warm kernel can be made here, or it would be less isolated than a cold one: the message says why."""


class WarmKernel:
    """A kernel forked by a `Zygote`, as jupyter_client's provisioner uses a process: ``poll``, ``wait``,
    ``kill``, ``terminate``, ``send_signal``. ``kernel_pid`` finds its process as this machine numbers it."""

    stdin = stdout = stderr = None
    pid = None  # the zygote's child has no number here; `kernel_pid` finds the kernel's

    def __init__(self, zygote: ZygoteClient, request: KernelRequest):
        self.zygote, self.request = zygote, request
        self.returncode: int | None = None
        self._pid: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.zygote.read(0)
            self.returncode = self.zygote.exits.get(self.request.id)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired("warm kernel", timeout)
            self.zygote.read(remaining)
        return self.returncode

    def kill(self) -> None:
        """Kill the kernel and everything it started (its pid namespace ends with it)."""
        if self.returncode is None:
            try:
                self.zygote.send({"kill": self.request.id})
            except OSError:
                pass  # the zygote is gone, and the kernel with it

    terminate = kill

    def send_signal(self, signum: int) -> None:  # noqa: ARG002 - interrupts are messages; every signal ends it
        """jupyter_client's kill: `kill`, then wait (a second at most) until the zygote says the kernel exited,
        so that its first `poll` finds it gone instead of sleeping a tenth of a second to ask again."""
        self.kill()
        try:
            self.wait(1.0)
        except subprocess.TimeoutExpired:
            pass

    def kernel_pid(self) -> int | None:
        """The kernel's process id here, found by its one-time name (call it before any student code runs)."""
        if self._pid is None:
            for entry in os.scandir("/proc"):
                try:
                    if entry.name.isdigit() and Path(entry.path, "comm").read_text().strip() == self.request.token:
                        self._pid = int(entry.name)
                        break
                except OSError:
                    continue
        return self._pid


class Zygote:
    """A warm process with ``preload`` imported, in its sandbox, started by the grader's pool (not waited for:
    its workers wait when they connect). Kernels' homes go under ``jobs``, the jobs' channel folders under
    ``channels`` (the grader's alone: the zygote sees it read-only); workers connect to ``address``."""

    def __init__(self, preload: tuple[str, ...], scratch: str = "", log: IO[bytes] | None = None,
                 threads: dict[str, str] | None = None, packages: tuple[str, ...] | None = None,
                 forbid: tuple[str, ...] = ()):
        """``log``: where the zygote and its kernels print (ipykernel's banner, the traceback of a fork that failed;
        nowhere when None); ``threads``: the kernels' thread settings (OMP_NUM_THREADS...), read when torch loads;
        ``packages``: the only installed packages it and its kernels see (None: all of them); ``forbid``: the
        rules it takes out of its kernels before any fork (`autograder.sandbox.rules`)."""
        self.preload = preload
        self.folder = Path(tempfile.mkdtemp(prefix="zygote-", dir=scratch or None))  # this user's alone
        self.jobs = self.folder / "jobs"
        self.jobs.mkdir()
        prepare_home(self.jobs)
        self.channels = self.folder / "channels"
        self.channels.mkdir(mode=0o755)
        os.chmod(self.channels, 0o755)  # made just now, in a folder of this user's alone
        self.link = socket_link(self.folder)  # a socket's path must be short
        self.address = str(self.link / "zygote.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.address)
        listener.listen(64)
        limits = Limits()
        program = [sys.executable, "-m", "autograder.sandbox.zygote", str(listener.fileno()), str(self.jobs),
                   str(self.channels)]
        env = {**environment(self.jobs, limits, preload, forbid), **(threads or {})}
        argv = command(self.jobs, self.jobs, limits, env, program, zygote=True,
                       read_only=((self.channels, self.channels),), packages=packages)
        try:
            self.process = subprocess.Popen(argv, pass_fds=[listener.fileno()], stdin=subprocess.DEVNULL,
                                            stdout=log or subprocess.DEVNULL, stderr=log or subprocess.DEVNULL,
                                            start_new_session=True)
        finally:
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


class ZygoteClient:
    """A worker's connection to a `Zygote` (at ``address``): `spawn` forks a kernel; its kernels die with the
    connection. Raises `WarmStartUnavailable` when the zygote does not answer ready within `START_SECONDS`."""

    def __init__(self, address: str):
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.control.connect(address)
        except OSError as error:
            self.control.close()
            raise WarmStartUnavailable(f"cannot reach the warm process ({error})") from None
        self.buffer, self.exits, self.spawned, self.count = b"", {}, set(), 0
        self.ready: dict = {}
        deadline = time.monotonic() + START_SECONDS
        while not self.ready and self.alive and time.monotonic() < deadline:
            self.read(deadline - time.monotonic())
        if not self.ready:
            self.control.close()
            raise WarmStartUnavailable("the warm process did not get ready: its sandbox could not be made, or an "
                                       "import failed (the worker's log says why)")
        self.jobs = Path(self.ready["jobs"])
        self.channels = Path(self.ready["channels"])

    @property
    def alive(self) -> bool:
        return self.control.fileno() >= 0

    def send(self, message: dict) -> None:
        self.control.sendall((json.dumps(message) + "\n").encode())

    def read(self, timeout: float | None) -> None:
        """Read what the zygote said within ``timeout`` seconds (0: only what is there)."""
        if not self.alive or not select.select([self.control], [], [], timeout)[0]:
            return
        try:
            data = self.control.recv(1 << 16)
        except OSError:  # reset: the zygote died before it answered
            data = b""
        if not data:  # the zygote is gone, and every kernel with it
            self.exits.update({i: -9 for i in self.spawned if i not in self.exits})
            self.control.close()
            return
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if "ready" in message:
                self.ready = message
            elif "spawned" in message:
                self.spawned.add(message["spawned"])
            elif "exited" in message:
                self.exits[message["exited"]] = int(message["status"])

    def new_home(self) -> Path:
        """A new kernel home under the zygote's ``jobs`` (the kernel's only writable folder)."""
        return Path(tempfile.mkdtemp(prefix="kernel-", dir=self.jobs))

    def new_channel(self) -> Channel:
        """A new channel folder under the zygote's ``channels``, for a kernel's `spawn`."""
        return new_channel(self.channels)

    def spawn(self, home: Path, work: Path, link: Path, connection_file: Path, limits: Limits, env: dict[str, str],
              probe: str = "", channel: Channel | None = None) -> WarmKernel:
        """Fork a kernel whose home is ``home`` (from `new_home`, prepared with `prepare_home`) and whose channel
        folder is ``channel`` (from `new_channel`)."""
        if not self.alive:
            raise WarmStartUnavailable("the warm process is gone")
        self.count += 1
        request = KernelRequest(self.count, f"ag{secrets.token_hex(6)}", str(home), str(work), str(link),
                                str(connection_file), limits.to_json(), env,
                                str(channel.folder) if channel else "", str(channel.link) if channel else "", probe)
        try:
            self.send(json.loads(request.to_json()))
        except OSError as error:
            raise WarmStartUnavailable(f"the warm process is gone ({error})") from None
        deadline = time.monotonic() + START_SECONDS
        while request.id not in self.spawned and request.id not in self.exits and time.monotonic() < deadline:
            if not self.alive:
                raise WarmStartUnavailable("the warm process died")
            self.read(deadline - time.monotonic())
        return WarmKernel(self, request)

    def close(self) -> None:
        """Close the connection: the zygote kills this worker's kernels."""
        self.control.close()


_clients: dict[str, ZygoteClient] = {}


def client_for(address: str) -> ZygoteClient:
    """This worker's connection to the zygote at ``address``, made on first use (again if it broke)."""
    found = _clients.get(address)
    if found is None or not found.alive:
        found = _clients[address] = ZygoteClient(address)
    return found


@dataclass(frozen=True)
class WarmLaunch:
    """What one job's warm kernel needs besides its connection file: the worker's kernel manager calls `spawn`
    where it would start the kernelspec's command (`autograder.harness.notebook`)."""

    zygote: ZygoteClient
    home: Path
    work: Path
    link: Path
    limits: Limits
    env: dict[str, str]
    channel: Channel | None = None

    def spawn(self, connection_file: str) -> WarmKernel:
        if os.geteuid() == 0:  # the kernel, uid SANDBOX_UID, reads it
            os.chown(connection_file, SANDBOX_UID, SANDBOX_UID)
        return self.zygote.spawn(self.home, self.work, self.link, Path(connection_file), self.limits, self.env,
                                 channel=self.channel)


LEAKS = 3
PROBE = f"""import ctypes, os, socket, sys
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


def check() -> None:
    """Fork one probe from a zygote and raise `WarmStartUnavailable` (why) unless it is as isolated as a cold
    kernel: no view of the solutions, other processes or other kernels' homes, loopback only, no capabilities
    and no new user namespaces."""
    with tempfile.TemporaryDirectory(prefix="autograder-warm-check-") as scratch, \
            open(Path(scratch) / "zygote.log", "w+b") as log:
        zygote = Zygote((), scratch, log)
        try:
            status, said = _probe(ZygoteClient(zygote.address))
        except WarmStartUnavailable as error:
            status, said = None, str(error)
        finally:
            zygote.close()
        log.seek(0)
        printed = _last_line(log.read().decode(errors="replace"))
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
