"""What a zygote serves (`PreloadSet`, one per listening socket) and the messages between a worker
(`autograder.sandbox.zygote_client.ZygoteClient`) and the zygote (`autograder.sandbox.zygote`), one JSON line each,
``{"<tag>": {<the record's fields>}}``, written by `encode` and read by `Lines`:

- the zygote to each worker that connects: `Ready` (it has imported its modules);
- the worker: `KernelRequest` (fork a kernel), `Kill` (kill that kernel and everything it started);
- the zygote: `Spawned` (the kernel is forked), then `Exited` (its exit status).

One sandbox serves every preload set of the kernels that see the same installed packages: it imports what the
sets share once, then forks a zygote per set that imports the rest (`autograder.sandbox.zygote`); each listens on
its own socket, named on the command line by `PreloadSet.to_arg`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple


class PreloadSet(NamedTuple):
    """What one zygote's kernels import before student code (``preload``) and the rules taken out of them
    (``forbid``, `autograder.sandbox.rules`)."""

    preload: tuple[str, ...]
    forbid: tuple[str, ...] = ()

    def to_arg(self, descriptor: int) -> str:
        """The zygote's command-line argument for this set, served on the listening socket ``descriptor``."""
        return f"{descriptor}:{','.join(self.preload)}:{','.join(self.forbid)}"

    @classmethod
    def from_arg(cls, arg: str) -> tuple[int, PreloadSet]:
        """The descriptor and set `to_arg` wrote."""
        descriptor, preload, forbid = arg.split(":")
        return int(descriptor), cls(tuple(filter(None, preload.split(","))), tuple(filter(None, forbid.split(","))))

    def shared(self, others: tuple[PreloadSet, ...]) -> tuple[str, ...]:
        """The modules of ``preload`` that every one of ``others`` preloads too, in this set's order."""
        return tuple(module for module in self.preload if all(module in other.preload for other in others))


@dataclass(frozen=True)
class Ready:
    """The zygote is ready: its process id, its folder of kernels' homes (``jobs``) and of the jobs' channel
    folders (``channels``), how long its imports took and how many threads it has (one: a fork is safe)."""

    pid: int
    jobs: str
    channels: str
    seconds: float
    threads: int


@dataclass(frozen=True)
class KernelRequest:
    """One kernel to fork: its home (its only writable folder, under JOBS) and working folder, the short link
    to its home, its connection file, limits and whole environment, and the name it takes (``token``);
    ``channel``, its channel folder (under CHANNELS), seen read-only at ``channel_link``.
    ``probe``: Python code to run instead of ipykernel (the start-up check and the tests)."""

    id: int
    token: str
    home: str
    work: str
    link: str
    connection_file: str
    limits: str  # `autograder.sandbox.limits.Limits.to_json`
    env: dict[str, str]
    channel: str = ""
    channel_link: str = ""
    probe: str = ""


@dataclass(frozen=True)
class Kill:
    """Kill the asking worker's kernel ``id`` and everything it started."""

    id: int


@dataclass(frozen=True)
class Spawned:
    """Kernel ``id`` is forked."""

    id: int


@dataclass(frozen=True)
class Exited:
    """Kernel ``id`` exited with ``status`` (128 + n: killed by signal n)."""

    id: int
    status: int


Message = Ready | KernelRequest | Kill | Spawned | Exited
TAGS: Mapping[str, type] = MappingProxyType({"ready": Ready, "spawn": KernelRequest, "kill": Kill, "spawned": Spawned,
                                            "exited": Exited})
NAMES: Mapping[type, str] = MappingProxyType({kind: tag for tag, kind in TAGS.items()})


def encode(message: Message) -> bytes:
    """``message`` as one line of the protocol."""
    return (json.dumps({NAMES[type(message)]: asdict(message)}) + "\n").encode()


def decode(line: bytes) -> Message:
    """One line of the protocol as its record; ValueError when it is not one."""
    given = json.loads(line)
    if not isinstance(given, dict) or len(given) != 1 or next(iter(given)) not in TAGS:
        raise ValueError(f"not a message of the zygote's protocol: {line[:200]!r}")
    [(tag, body)] = given.items()
    kind = TAGS[tag]
    if not isinstance(body, dict) or set(body) - {field.name for field in fields(kind)}:
        raise ValueError(f"not a {kind.__name__}: {line[:200]!r}")
    return kind(**body)


class Lines:
    """What one side has received on a connection, read as whole messages (`feed`)."""

    def __init__(self) -> None:
        self.pending = b""

    def feed(self, data: bytes) -> list[Message]:
        """The messages ``data`` completes, in order; a part of a line is kept for the next call."""
        *lines, self.pending = (self.pending + data).split(b"\n")
        return [decode(line) for line in lines]
