"""`autograder.harness.kernel_manager.SandboxKernelManager`'s immediate shutdown (nbclient's ``shutdown_kernel =
"immediate"``, every notebook's end): the kernel is killed with no interrupt first. jupyter_client's sends the kernel an
interrupt (a message on its control socket, the kernelspec's ``interrupt_mode``) just before it kills it; closing the
socket then waited up to 100 ms (its linger) whenever that message was still unsent, and its shutdown sleeps 10 ms
besides: a third of the jobs of a class of one assignment waited 110 ms, `--jobs 1`."""

from __future__ import annotations

import asyncio

import zmq

from autograder.harness.kernel_manager import SandboxKernelManager
from autograder.sandbox.bwrap import KERNEL_NAME, write_kernelspec


class _Kernel:
    """A kernel's provisioner, as jupyter_client's kill, wait and cleanup use it: the kernel ends when killed."""

    def __init__(self) -> None:
        self.has_process, self.killed, self.signals = True, False, []

    async def kill(self, restart: bool = False) -> None:
        self.killed = True

    async def send_signal(self, signum: int) -> None:
        self.signals.append(signum)

    async def poll(self) -> int | None:
        return 0 if self.killed else None

    async def wait(self) -> int:
        self.has_process = False
        return 0

    async def cleanup(self, restart: bool = False) -> None:
        pass


def test_an_immediate_shutdown_kills_the_kernel_with_no_interrupt_first(tmp_path) -> None:
    kernelspecs = write_kernelspec(tmp_path / "jupyter", ["python"]) / "kernels"
    manager = SandboxKernelManager(transport="ipc", ip=str(tmp_path / "kernel"), control_port=1,
                                   kernel_name=KERNEL_NAME, kernelspecs=str(kernelspecs))
    control = zmq.Context.instance().socket(zmq.ROUTER)  # the kernel's end of the control channel
    control.bind(f"ipc://{tmp_path / 'kernel'}-1")
    kernel = manager.provisioner = _Kernel()
    manager._connect_control_socket()
    try:
        asyncio.run(manager.shutdown_kernel(now=True))
        sent = [control.recv_multipart() for _ in range(2) if control.poll(200)]
    finally:
        control.close(linger=0)
    assert kernel.killed and not kernel.has_process, "the immediate shutdown should kill the kernel and wait for it"
    assert not sent and not kernel.signals, (
        f"the immediate shutdown sent the kernel {len(sent)} messages and the signals {kernel.signals} before it killed "
        "it: an interrupt to a kernel about to be killed only holds up the close of the control socket")
    assert manager._control_socket is None, "the control socket should be closed once the kernel is killed"
