"""`autograder.harness.kernel_manager.SandboxKernelManager`: its control socket, which carries the interrupt
jupyter_client sends a kernel just before it kills it, drops what it has not sent when it is closed (the kernel is
dead by then): with jupyter_client's linger of 100 ms, a job whose interrupt was still unsent waited that long in its
cleanup (a third of the jobs of a class of one assignment, `--jobs 1`)."""

from __future__ import annotations

import zmq

from autograder.harness.kernel_manager import SandboxKernelManager


def test_the_control_socket_drops_what_it_has_not_sent_when_it_is_closed(tmp_path) -> None:
    manager = SandboxKernelManager(transport="ipc", ip=str(tmp_path / "kernel"), control_port=1)
    manager._connect_control_socket()
    try:
        linger = manager._control_socket.getsockopt(zmq.LINGER)
        assert linger == 0, (
            f"the kernel manager's control socket lingers {linger} ms on what it has not sent; it should drop it "
            "(0): the kernel is killed before the socket is closed, and an interrupt still unsent held up the close")
    finally:
        manager._close_control_socket()
        manager.context.destroy(linger=0)
