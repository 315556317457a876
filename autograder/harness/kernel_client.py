"""`ReadyKernelClient`: the kernel client of the worker's kernels, ready as soon as the kernel is.

jupyter_client's `wait_for_ready` asks for ``kernel_info`` until the kernel answers on the shell channel
and shows it is connected on IOPub, then drains IOPub until it has been quiet for 0.2 s: a fifth of a
second per submission spent waiting for nothing, once a warm kernel starts in a tenth. This client takes
what IOPub already holds and waits for nothing more (20 ms of quiet before: each job's kernel and worker both
idle for them, about 3% of a class of one assignment). A message still on its way is harmless: nbclient reads
only the IOPub messages whose parent is the request it sent.

Its sockets also retry their connection every `RECONNECT_MS` milliseconds instead of ZeroMQ's 100. The worker
connects as soon as the kernel has made its home (`autograder.sandbox.home.KernelHome.wait`), sometimes before
ipykernel has bound its sockets there; ZeroMQ then retries after its interval, and the first ``kernel_info`` waited
for it, with both the kernel and its worker idle (1 job in 6 of a class of one assignment, 40-160 ms each).
"""

from __future__ import annotations

import time
from queue import Empty

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from traitlets import default

RECONNECT_MS = 5  # how often a socket of the client retries its connection to the kernel (ZeroMQ's default: 100)


class ReadyKernelClient(AsyncKernelClient):
    """An `AsyncKernelClient` whose `wait_for_ready` waits for no silence on IOPub and whose sockets retry their
    connection every `RECONNECT_MS` (module docstring)."""

    @default("context")
    def _context_default(self) -> zmq.asyncio.Context:
        """jupyter_client's own context (one per client, terminated with it), its sockets made to retry every
        `RECONNECT_MS`."""
        self._created_context = True
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
        return context

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """Return once the kernel answered ``kernel_info`` and IOPub is connected, what IOPub holds taken;
        RuntimeError when the kernel dies first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
                if reply["msg_type"] == "kernel_info_reply":
                    await self.iopub_channel.get_msg(timeout=1)  # the kernel's status: IOPub is connected
                    self._handle_kernel_info_reply(reply)
                    break
            except Empty:
                pass
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")
        while True:
            try:
                await self.iopub_channel.get_msg(timeout=0)
            except Empty:
                return
