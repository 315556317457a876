"""`autograder.harness.kernel_client.ReadyKernelClient`: a kernel is ready once it answered ``kernel_info`` and IOPub
is connected; what IOPub holds then is taken, and nothing more is waited for (jupyter_client waits for 0.2 s of quiet;
this client waited for 20 ms, in every job, with the kernel and its worker both idle); its sockets retry their
connection every few milliseconds, not ZeroMQ's 100."""

from __future__ import annotations

import asyncio
from queue import Empty

import zmq

from autograder.harness.kernel_client import RECONNECT_MS, ReadyKernelClient


class _Channel:
    """A channel that hands out ``messages`` and records the timeout of every `get_msg`."""

    def __init__(self, messages: list[dict]) -> None:
        self.messages, self.timeouts = list(messages), []

    async def get_msg(self, timeout: float | None = None) -> dict:
        self.timeouts.append(timeout)
        if not self.messages:
            raise Empty
        return self.messages.pop(0)


class _Client(ReadyKernelClient):
    """A `ReadyKernelClient` over stand-in channels: a kernel that answers ``kernel_info`` at once."""

    shell_channel = _Channel([])
    iopub_channel = _Channel([])

    def kernel_info(self) -> str:
        return "request"


def test_a_kernel_is_ready_once_it_answered_and_nothing_more_is_waited_for() -> None:
    client = _Client()
    client.shell_channel = _Channel([{"msg_type": "kernel_info_reply", "content": {"protocol_version": "5.3"}}])
    # IOPub: the kernel's status (connected), then kernel_info's own busy/idle, already there.
    client.iopub_channel = _Channel([{"msg_type": "status"}, {"msg_type": "status"}, {"msg_type": "status"}])
    asyncio.run(client.wait_for_ready(timeout=5))
    assert client.iopub_channel.messages == [], "what IOPub held when the kernel answered is taken"
    assert client.iopub_channel.timeouts == [1, 0, 0, 0], (
        f"IOPub was read with the timeouts {client.iopub_channel.timeouts}: after the first status (IOPub connected), "
        "a ready kernel's client takes what is there (timeout 0) and waits for no silence")


def test_the_clients_sockets_retry_their_connection_every_few_milliseconds(tmp_path) -> None:
    """The worker connects once the kernel has made its home, sometimes before ipykernel has bound its sockets: each
    socket then retries after its interval, ZeroMQ's 100 ms unless the client sets `RECONNECT_MS`."""
    client = ReadyKernelClient(transport="ipc", ip=str(tmp_path / "kernel"), shell_port=1, iopub_port=2,
                               stdin_port=3, hb_port=4, control_port=5)
    client.start_channels(hb=False)
    try:
        sockets = {"shell": client.shell_channel.socket, "iopub": client.iopub_channel.socket,
                   "stdin": client.stdin_channel.socket, "control": client.control_channel.socket}
        intervals = {name: socket.getsockopt(zmq.RECONNECT_IVL) for name, socket in sockets.items()}
        assert intervals == dict.fromkeys(sockets, RECONNECT_MS), (
            f"the client's sockets retry every {intervals} ms; each should retry every {RECONNECT_MS} ms, not "
            "ZeroMQ's 100: a worker that connects before the kernel has bound its sockets waits that long")
    finally:
        client.stop_channels()
