"""The wire between the trusted harness and the sandboxed kernel: frames, and the records both sides share.

A frame (`Frame`, `send_frame`, `recv_frame`) is ``u32 header length | JSON header | u32 buffer count | (u64 length
| bytes) * count``. The header is JSON with tagged objects for what JSON lacks; arrays and tensors travel as raw
buffers that the header names by index. Which values a header may carry, and how they are checked on receipt, is
`autograder.channel.codec`; `ChannelLimits` bounds both. A `Ref` is an object that stays on the other side, a
`RemoteException` an exception raised there; `ChannelError` is what a broken channel raises.
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass, field
from typing import Any


class ChannelError(Exception):
    """The other side broke the channel: hung, closed it, or sent what the protocol does not allow."""


@dataclass(frozen=True)
class ChannelLimits:
    """Size limits checked on receipt: of a frame (`recv_frame`) and of the values its header carries
    (`autograder.channel.codec.Codec`)."""

    header_bytes: int = 16 << 20
    buffer_bytes: int = 256 << 20
    buffers: int = 100_000
    depth: int = 40
    items: int = 2_000_000
    string_chars: int = 4 << 20
    int_bits: int = 4096


@dataclass(frozen=True)
class Ref:
    """An object that stays on the side named by ``side`` ("sandbox" or "trusted"), by its number there.

    ``type_name`` and ``bases`` (qualified names of its class and of the classes it derives from) are
    what the owner says; ``callable`` whether it can be called.
    """

    side: str
    id: int
    type_name: str = "object"
    bases: tuple[str, ...] = ()
    callable: bool = False


@dataclass(frozen=True)
class RemoteException:
    """An exception raised on the other side: its type's name, message and the names of its bases."""

    type_name: str
    message: str
    bases: tuple[str, ...] = ()


@dataclass
class Frame:
    """One message: a JSON-able header and the raw buffers it refers to by index."""

    header: Any
    buffers: list[bytes] = field(default_factory=list)


def send_frame(sock: socket.socket, frame: Frame) -> None:
    """Write one frame to ``sock``."""
    header = json.dumps(frame.header, allow_nan=True, separators=(",", ":")).encode()
    parts = [struct.pack("<I", len(header)), header, struct.pack("<I", len(frame.buffers))]
    for buffer in frame.buffers:
        parts += [struct.pack("<Q", len(buffer)), buffer]
    sock.sendall(b"".join(parts))


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ChannelError("the other side closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket, limits: ChannelLimits = ChannelLimits()) -> Frame:
    """Read one frame from ``sock``, refusing one past ``limits``; socket timeouts propagate."""
    (header_length,) = struct.unpack("<I", _read_exactly(sock, 4))
    if header_length > limits.header_bytes:
        raise ChannelError(f"a header of {header_length} bytes (the limit is {limits.header_bytes})")
    try:
        header = json.loads(_read_exactly(sock, header_length))
    except ValueError as error:
        raise ChannelError(f"a header that is not JSON: {error}") from None
    (count,) = struct.unpack("<I", _read_exactly(sock, 4))
    if count > limits.buffers:
        raise ChannelError(f"{count} buffers (the limit is {limits.buffers})")
    buffers, total = [], 0
    for _ in range(count):
        (length,) = struct.unpack("<Q", _read_exactly(sock, 8))
        total += length
        if total > limits.buffer_bytes:
            raise ChannelError(f"buffers of more than {limits.buffer_bytes} bytes")
        buffers.append(_read_exactly(sock, length))
    return Frame(header, buffers)
