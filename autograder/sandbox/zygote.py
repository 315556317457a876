"""The warm start: a sandboxed process that has imported what an assignment's kernels need and forks one
kernel per submission, each in namespaces of its own.

`autograder.sandbox.warm.Zygote` (in the grader's pool) starts ``python -m autograder.sandbox.zygote JOBS CHANNELS
SET...`` in a bubblewrap sandbox like a cold kernel's (`autograder.sandbox.bwrap.command` with ``zygote``: the same
read-only view, plus JOBS, the folder that holds the kernels' homes, CHANNELS, read-only, the grader's folder of the
jobs' channel folders (`autograder.sandbox.bwrap.Channel`), and without bubblewrap's ban on new user namespaces).
Each SET is a listening socket and what its kernels preload and may not call
(`autograder.sandbox.zygote_protocol.PreloadSet`): one sandbox serves every set whose kernels see the same
installed packages. It imports what every set preloads and ipykernel's modules (`autograder.sandbox.kernel.preload`:
no torch operation runs here, so no thread pool exists to break in a fork); with several sets it then forks a
zygote per set, which imports the rest of its set (one torch for them all, its pages shared). A zygote takes
its rules out, freezes what it imported (`gc.freeze`: its kernels share those pages instead of copying them when
their collector runs), then accepts the workers on its socket (`autograder.sandbox.zygote_client.ZygoteClient`),
says `Ready` to each and serves its requests (`autograder.sandbox.zygote_protocol`):

- `KernelRequest`: fork a kernel; answered `Spawned`, then `Exited` with its status;
- `Kill`: kill that kernel and everything it started.

A kernel is three processes, as bubblewrap's are:

1. the *monitor*, forked here: it closes every descriptor and enters new user, mount, pid, network, IPC,
   UTS (and cgroup) namespaces, as its own ids; it exits with the status of
2. *init*, pid 1 of the new pid namespace. It builds the kernel's filesystem (`autograder.sandbox.kernel_view`):
   JOBS and CHANNELS hidden under empty read-only tmpfs but for its own home (a tmpfs as large as the disk limit,
   holding a copy of what the grader put there: `autograder.sandbox.home.mount_home`; a probe's home stays the
   grader's folder), a fresh ``/tmp`` (with the symlink to its home that nbgrader's sockets use, and its own
   channel folder, read-only, at its link's path), ``/dev/shm``, ``/dev/pts`` and ``/proc``. It brings up loopback,
   allows no further
   user namespace (``max_user_namespaces`` 0 in the new one), drops every capability, forks 3 and reaps
   orphans until 3 exits, which ends the namespace and everything in it;
3. the *kernel*: a new session, a one-time name (its worker finds it in /proc by it), its limits and
   environment, then ipykernel (`autograder.sandbox.kernel.start`), or for a check the request's ``probe`` code.

Every ancestor dies with its parent (parent-death signals), so a kill of the worker or of the zygote
leaves nothing running.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, replace

from autograder.sandbox import namespaces as ns
from autograder.sandbox.kernel_view import kernel_view
from autograder.sandbox.kernel import KernelTimes, preload, set_limits, start
from autograder.sandbox.limits import Limits
from autograder.sandbox.zygote_protocol import (Exited, Kill, KernelRequest, Lines, Message, PreloadSet, Ready, Spawned,
                                                encode)

# What ipykernel imports while it starts (its debugger's module, without debugpy: no kernel sees it,
# `autograder.sandbox.site_view.KERNEL_HIDES`); no thread
# starts at their import, so each kernel forked from here starts with them imported, as a cold one starts. With
# them, what ipykernel's start imports besides (sqlite3 for its history, tornado's asyncio loop, faulthandler) and the
# module the harness has the kernel run at its first test cell (`autograder.channel.served`, by name: the kernel
# imports it anyway, and this package imports nothing of the channel).
KERNEL_MODULES = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.debugger", "IPython.core.debugger",
                  "IPython.core.completerlib", "IPython.core.oinspect", "IPython.extensions.storemagic", "sqlite3",
                  "tornado.platform.asyncio", "faulthandler", "autograder.channel.served")
CHANNEL_TENSORS = ("autograder.channel.tensors",)
SETUP_FAILED = 71  # the exit status of a kernel whose namespaces or filesystem could not be made


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _kernel(request: KernelRequest, limits: Limits, times: KernelTimes) -> int:
    """Step 3: become the submission's kernel; returns the exit status of a probe (ipykernel never returns)."""
    ns.set_dumpable(True)  # as any process: its own /proc files are its own (init's flag came with the fork)
    os.setsid()
    ns.set_name(request.token)
    set_limits(limits)
    os.environ.clear()
    os.environ.update(request.env)
    os.chdir(request.work)
    if not request.probe:
        start(["-f", request.connection_file], times, None)  # the zygote's `ZygoteServer.rules` holds the rules
        return 0
    try:
        exec(compile(request.probe, "<probe>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the grader's code
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 1
    return 0


def _init(request: KernelRequest, jobs: str, channels: str, times: KernelTimes) -> int:
    """Step 2, as pid 1 of the new pid namespace: returns the kernel's exit status."""
    ns.set_parent_death_signal(signal.SIGKILL)
    limits = Limits.from_json(request.limits)
    kernel_view(request, jobs, channels, limits)
    ns.loopback_up()
    with open("/proc/sys/user/max_user_namespaces", "w") as handle:
        handle.write("0")
    ns.drop_privileges()
    ns.set_dumpable(False)  # before the kernel exists: it can never trace init or read init's /proc files
    sandboxed = replace(times, sandboxed=time.time())
    kernel = os.fork()
    if kernel == 0:
        os._exit(_kernel(request, limits, sandboxed))
    while True:
        pid, status = os.wait()
        if pid == kernel:
            return _exit_code(status)


def _monitor(request: KernelRequest, jobs: str, channels: str, times: KernelTimes) -> int:
    """Step 1, in the zygote's child: returns init's exit status."""
    ns.set_parent_death_signal(signal.SIGKILL)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    uid, gid = os.getuid(), os.getgid()
    try:
        ns.unshare(ns.ALL | ns.CLONE_NEWCGROUP)
    except OSError:  # a kernel without cgroup namespaces (bubblewrap's --unshare-cgroup-try)
        ns.unshare(ns.ALL)
    ns.map_own_ids(uid, gid)
    init = os.fork()
    if init == 0:
        os._exit(_guarded(_init, request, jobs, channels, times))
    return _exit_code(os.waitpid(init, 0)[1])


def _guarded(step, *args) -> int:  # noqa: ANN001 - one of the steps above
    try:
        return step(*args)
    except BaseException:  # noqa: BLE001 - a child never returns into the zygote's loop
        traceback.print_exc()
        sys.stderr.flush()
        return SETUP_FAILED


@dataclass(frozen=True)
class Child:
    """A kernel this zygote forked: the worker's connection that asked for it and its request's id."""

    connection: socket.socket
    request: int


class ZygoteServer:
    """The serving loop (module docstring): workers connect to ``listener``; each connection's requests are
    answered on it, and its kernels are killed when it closes (its worker ended)."""

    def __init__(self, listener: socket.socket, jobs: str, channels: str, hello: Ready, rules: object | None):
        """``rules``: what `autograder.sandbox.kernel.preload` returned, held while this process and its forks live."""
        self.listener, self.jobs, self.channels, self.hello, self.rules = listener, jobs, channels, hello, rules
        self.children: dict[int, Child] = {}  # by the monitor's pid
        self.received: dict[socket.socket, Lines] = {}
        self.wake_read, self._wake_write = socket.socketpair()
        self._wake_write.setblocking(False)
        signal.set_wakeup_fd(self._wake_write.fileno())
        signal.signal(signal.SIGCHLD, lambda *_: None)

    @staticmethod
    def send(connection: socket.socket, message: Message) -> None:
        try:
            connection.sendall(encode(message))
        except OSError:  # its worker is gone; `drop` kills what it asked for
            pass

    def spawn(self, connection: socket.socket, request: KernelRequest) -> None:
        times = KernelTimes(forked=time.time())
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os._exit(_guarded(_monitor, request, self.jobs, self.channels, times))
        self.children[pid] = Child(connection, request.id)
        self.send(connection, Spawned(request.id))

    def kill(self, connection: socket.socket, request_id: int | None = None) -> None:
        """Kill that connection's kernel ``request_id`` (all of its kernels when None): init dies with its
        monitor (its parent-death signal), and the kernel's namespace with init."""
        for pid, child in self.children.items():
            if child.connection is connection and request_id in (None, child.request):
                os.kill(pid, signal.SIGKILL)

    def reap(self) -> None:
        while self.children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            if pid in self.children:
                child = self.children.pop(pid)
                self.send(child.connection, Exited(child.request, _exit_code(status)))

    def receive(self, connection: socket.socket) -> None:
        data = connection.recv(1 << 16)
        if not data:
            self.kill(connection)
            del self.received[connection]
            connection.close()
            return
        for message in self.received[connection].feed(data):
            if isinstance(message, KernelRequest):
                self.spawn(connection, message)
            elif isinstance(message, Kill):
                self.kill(connection, message.id)

    def serve(self) -> None:
        """Accept workers and serve their requests until this process is killed (with its sandbox)."""
        while True:
            ready, _, _ = select.select([self.listener, self.wake_read, *self.received], [], [])
            if self.wake_read in ready:
                self.wake_read.recv(4096)
                self.reap()
            if self.listener in ready:
                connection, _ = self.listener.accept()
                self.received[connection] = Lines()
                self.send(connection, self.hello)
            for connection in ready:
                if connection in self.received:
                    self.receive(connection)


def _freeze() -> None:
    """Collect, then move every object left out of the collector's reach (``gc.freeze``): a fork of this process
    shares its pages, and a collection in the fork would otherwise write to every page that holds an object (its
    header), copying the imports' pages into each kernel."""
    gc.collect()
    gc.freeze()


def _serve(listener: socket.socket, jobs: str, channels: str, kernels: PreloadSet, imported: tuple[str, ...],
           started: float) -> None:
    """Import what ``kernels`` preload besides ``imported``, take out its rules, freeze, then serve ``listener``."""
    rules = preload(tuple(module for module in kernels.preload if module not in imported), ",".join(kernels.forbid))
    if "torch" in sys.modules:  # the channel's tensors, which its server imports at the first test cell
        preload(CHANNEL_TENSORS, "")
    _freeze()
    hello = Ready(os.getpid(), jobs, channels, time.time() - started, len(os.listdir("/proc/self/task")))
    ZygoteServer(listener, jobs, channels, hello, rules).serve()


def main(argv: list[str]) -> None:
    """``python -m autograder.sandbox.zygote JOBS CHANNELS SET...``, each SET a listening socket's descriptor and
    what its kernels preload and may not call (`autograder.sandbox.zygote_protocol.PreloadSet.to_arg`).

    This process imports the modules every set preloads, ipykernel's and the channel's (`KERNEL_MODULES`). With
    one set it then serves it; with several it freezes what it imported (`_freeze`) and forks a zygote per set,
    which imports the rest of its set and serves its socket, so that the modules the sets share (torch) are
    imported once and their pages shared by every zygote and kernel; it then waits for them."""
    jobs, channels, *given = argv
    started = time.time()
    sets = [PreloadSet.from_arg(arg) for arg in given]
    shared = sets[0][1].shared(tuple(kernels for _, kernels in sets[1:]))
    preload(shared + KERNEL_MODULES, "")
    if len(sets) == 1:
        _serve(socket.socket(fileno=sets[0][0]), jobs, channels, sets[0][1], shared, started)
    _freeze()
    children, root = [], os.getpid()
    for descriptor, kernels in sets:
        pid = os.fork()
        if pid == 0:
            ns.set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != root:  # it died before the signal was set
                os._exit(SETUP_FAILED)
            for other, _ in sets:
                if other != descriptor:
                    os.close(other)
            os._exit(_guarded(_serve, socket.socket(fileno=descriptor), jobs, channels, kernels, shared, started))
        children.append(pid)
    for descriptor, _ in sets:
        os.close(descriptor)  # a set whose zygote ended refuses its workers
    while children:
        children.remove(os.wait()[0])


if __name__ == "__main__":
    main(sys.argv[1:])
