"""A worker's side of the warm start: its connections to the zygotes (`ZygoteClients`, a `ZygoteClient` each) and
the warm kernels they fork.

A worker connects once to the zygote of a job's preload set (`autograder.sandbox.warm.Zygote`, started by the
grader's pool; its address is in the job) and waits until the zygote has imported its modules.
`ZygoteClient.spawn` asks for a kernel and returns a `WarmKernel`, the process handle jupyter_client's
provisioner holds in place of a ``Popen``; `WarmLaunch` is what the worker's kernel manager needs to ask for
one (`autograder.harness.kernel_manager`). What they say to each other is `autograder.sandbox.zygote_protocol`.
"""

from __future__ import annotations

import os
import secrets
import select
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.sandbox.bwrap import SANDBOX_UID, Channel, new_channel
from autograder.sandbox.limits import START_SECONDS, Limits
from autograder.sandbox.zygote_protocol import Exited, Kill, KernelRequest, Lines, Message, Ready, Spawned, encode



class WarmStartUnavailable(RuntimeError):
    """No warm kernel can be made here, or it would be less isolated than a cold one: the message says why."""


class WarmKernel:
    """A kernel forked by a zygote, as jupyter_client's provisioner uses a process: ``poll``, ``wait``,
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
                self.zygote.send(Kill(self.request.id))
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


class ZygoteClient:
    """A worker's connection to a zygote (at ``address``): `spawn` forks a kernel; its kernels die with the
    connection. Raises `WarmStartUnavailable` when the zygote does not answer ready within `START_SECONDS`."""

    def __init__(self, address: str):
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.control.connect(address)
        except OSError as error:
            self.control.close()
            raise WarmStartUnavailable(f"cannot reach the warm process ({error})") from None
        self.received = Lines()
        self.exits: dict[int, int] = {}  # request id -> exit status
        self.spawned: set[int] = set()
        self.count = 0
        self.ready: Ready | None = None
        deadline = time.monotonic() + START_SECONDS
        while self.ready is None and self.alive and time.monotonic() < deadline:
            self.read(deadline - time.monotonic())
        if self.ready is None:
            self.control.close()
            raise WarmStartUnavailable("the warm process did not get ready: its sandbox could not be made, or an "
                                       "import failed (the worker's log says why)")
        self.jobs = Path(self.ready.jobs)
        self.channels = Path(self.ready.channels)

    @property
    def alive(self) -> bool:
        return self.control.fileno() >= 0

    def send(self, message: Message) -> None:
        self.control.sendall(encode(message))

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
        for message in self.received.feed(data):
            if isinstance(message, Ready):
                self.ready = message
            elif isinstance(message, Spawned):
                self.spawned.add(message.id)
            elif isinstance(message, Exited):
                self.exits[message.id] = message.status

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
            self.send(request)
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


class ZygoteClients:
    """A worker's connections to zygotes, by address: each made on first use, and again if it broke."""

    def __init__(self) -> None:
        self.by_address: dict[str, ZygoteClient] = {}

    def get(self, address: str) -> ZygoteClient:
        """The connection to the zygote at ``address``; `WarmStartUnavailable` when none can be made."""
        found = self.by_address.get(address)
        if found is None or not found.alive:
            found = self.by_address[address] = ZygoteClient(address)
        return found


@dataclass(frozen=True)
class WarmLaunch:
    """What one job's warm kernel needs besides its connection file: the worker's kernel manager calls `spawn`
    where it would start the kernelspec's command (`autograder.harness.kernel_manager`)."""

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
