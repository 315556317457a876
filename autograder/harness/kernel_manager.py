"""`SandboxKernelManager`: the kernel manager of the worker's kernels, set as nbclient's ``kernel_manager_class``.

`autograder.harness.execute.TrustedExecute` makes one per notebook (nbclient's `create_kernel_manager`) and hands
it the job's sandbox: ``warm``, the job's warm start (`autograder.sandbox.zygote_client.WarmLaunch`: the kernel is
forked by the zygote instead of launched from the kernelspec's command), and ``home``, how the worker reaches a
sandboxed kernel's home (`autograder.sandbox.home.KernelHome`: nothing connects to the kernel's sockets before
its home is its own tmpfs; how full it was left is noted before its sockets are removed). Its immediate shutdown
kills the kernel with no interrupt first and no wait after (`SandboxKernelManager._async_shutdown_kernel`). The
manager keeps when it launched the kernel (``launched``) and finds the kernel's process (`kernel_pid`). Its
kernelspec is looked up in the job's own folder (``kernelspecs``, configured), not through the process's
environment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from traitlets import Instance, Type, Unicode, default

from autograder.harness.kernel_client import ReadyKernelClient
from autograder.sandbox.home import KernelHome
from autograder.sandbox.limits import START_SECONDS
from autograder.sandbox.zygote_client import WarmLaunch

STOP_POLL_SECONDS = 0.005  # how often the killed kernel is polled until it has ended (jupyter_client's: 0.1 s)


def kernel_pid(root: int, module: str = "autograder.sandbox.kernel") -> int | None:
    """The kernel's process among ``root`` (bwrap, or the kernel itself) and its descendants, as this machine
    numbers it: the one started as ``python -m autograder.sandbox.kernel`` (bwrap's own command line names the module
    too, further on). Called before any student code has run."""
    pending = [root]
    while pending:
        pid = pending.pop()
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", module.encode()]:
                return pid
            for task in Path(f"/proc/{pid}/task").glob("*"):
                pending += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return None


class SandboxKernelManager(AsyncKernelManager):
    """An `AsyncKernelManager` that forks a warm kernel or launches a cold one, waits for a sandboxed kernel's home,
    and records when it launched (module docstring)."""

    client_factory = Type(ReadyKernelClient, klass=AsyncKernelClient)
    warm = Instance(WarmLaunch, allow_none=True, help="The job's warm start; None: launch the kernelspec's command")
    home = Instance(KernelHome, allow_none=True, help="The sandboxed kernel's home; None: no sandbox")
    kernelspecs = Unicode("", help="The folder of the job's kernelspecs (`autograder.sandbox.bwrap.write_kernelspec`'s "
                                   "``kernels``), the only one searched; '': Jupyter's usual folders").tag(config=True)

    launched: float | None = None  # when the kernel was launched (time.time())
    _find_pid: Callable[[], int | None] | None = None

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self) -> KernelSpecManager:
        if not self.kernelspecs:
            return super()._kernel_spec_manager_default()
        return KernelSpecManager(data_dir=self.data_dir, kernel_dirs=[self.kernelspecs])

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: object) -> None:
        self.launched = time.time()
        if self.warm is None:
            await super()._async_launch_kernel(kernel_cmd, **kw)
            process = self.provisioner.process
            self._find_pid = lambda: kernel_pid(process.pid)  # bwrap's, then the kernel's
        else:  # forked by the zygote, held by the provisioner as its process (`zygote_client.WarmKernel`)
            process = self.warm.spawn(self.connection_file)
            self.provisioner.process, self.provisioner.pid, self.provisioner.pgid = process, None, None
            self._reconcile_connection_info(self.provisioner.connection_info)
            self._find_pid = process.kernel_pid
        if self.home is not None:  # nothing connects to its sockets before its home is its own tmpfs
            await self.home.wait(self._find_pid, process.poll, START_SECONDS)

    _launch_kernel = _async_launch_kernel

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        """Kill the kernel at once (nbclient's ``shutdown_kernel = "immediate"``) and clean up: jupyter_client's
        immediate shutdown without the interrupt it sends the kernel first (to a kernel about to be killed) and the
        10 ms its ``in_pending_state`` sleeps after it "to ensure tests can capture the state before done". Any
        other shutdown is jupyter_client's."""
        if not now or restart or not self.owns_kernel:
            await super()._async_shutdown_kernel(now=now, restart=restart)
            return
        self.shutting_down = True
        await self._async_kill_kernel()
        await self._async_cleanup_resources()

    shutdown_kernel = _async_shutdown_kernel

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        if self.home is not None:  # the kernel is stopped: how full it left its home, before its sockets are removed
            self.home.note_usage()
        await super()._async_cleanup_resources(restart)

    cleanup_resources = _async_cleanup_resources

    async def _async_wait(self, pollinterval: float = STOP_POLL_SECONDS) -> None:
        """jupyter_client's wait for the killed kernel to end (nbclient's ``shutdown_kernel = "immediate"``), polled
        every `STOP_POLL_SECONDS`: a killed kernel is gone within milliseconds, and polling every 0.1 s (its
        default) made every notebook wait about 0.1 s for it."""
        await super()._async_wait(pollinterval)

    def kernel_pid(self) -> int | None:
        """The kernel's process id here (call it before any student code runs); None before its launch."""
        return self._find_pid() if self._find_pid is not None else None
