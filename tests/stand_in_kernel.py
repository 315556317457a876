"""The test suite's stand-in for a student's kernel: a plain process that serves a namespace over the channel, as
`autograder.channel.served.Server` does in a graded kernel, and also runs cells on request, so that hundreds of
notebooks need no kernel start (`tests.harness.StandIn`). Started as ``python -m tests.stand_in_kernel SOCKET`` from
the repository's root.

Besides a graded kernel's requests it answers three of its own, which no graded kernel has (the served module ships
into every student's kernel and carries nothing test-only):

- ``exec`` source -> runs it in the namespace; what it printed and the error it raised, as a dict;
- ``reset`` -> empties the namespace and forgets every object it handed out;
- ``output`` -> what the requests since the last ``output`` printed, ``stdout`` and ``stderr`` (with what C code wrote
  to file descriptor 2: torch's profiler, say).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import traceback
import warnings
from typing import IO, Any

from autograder.channel.served import Server
from autograder.channel.wire import Frame

LIMIT = 100_000  # characters of printed output kept, per stream


class StandInServer(Server):
    """A `Server` that also runs cells (``exec``), starts over (``reset``) and keeps what each request printed
    (``output``); ``descriptor_2``: the file that file descriptor 2 was redirected to."""

    def __init__(self, namespace: dict, descriptor_2: IO[bytes]) -> None:
        super().__init__(namespace)
        self.descriptor_2 = descriptor_2
        self.printed = {"stdout": io.StringIO(), "stderr": io.StringIO()}

    def answer(self, frame: Frame) -> Frame:
        with warnings.catch_warnings(), contextlib.redirect_stdout(self.printed["stdout"]), \
                contextlib.redirect_stderr(self.printed["stderr"]):
            warnings.simplefilter("always")
            return super().answer(frame)

    def handle(self, request: dict, payload: Any) -> tuple[Any, dict]:
        op = request.get("op")
        if op == "exec":
            return self._exec(payload), {}
        if op == "reset":
            self.namespace.clear()
            self.namespace["__name__"] = "__main__"
            self.objects.clear()
            self.numbers.clear()
            self.graphs.clear()
            return None, {}
        if op == "output":
            return self._output(), {}
        return super().handle(request, payload)

    def _output(self) -> dict[str, str]:
        printed = {name: stream.getvalue()[:LIMIT] for name, stream in self.printed.items()}
        self.printed = {"stdout": io.StringIO(), "stderr": io.StringIO()}
        self.descriptor_2.seek(0)
        printed["stderr"] += self.descriptor_2.read().decode(errors="replace")[:LIMIT]
        self.descriptor_2.seek(0)
        self.descriptor_2.truncate()
        return printed

    def _exec(self, source: str) -> dict:
        out, err = io.StringIO(), io.StringIO()
        error = None
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                exec(compile(source, "<cell>", "exec"), self.namespace)  # noqa: S102 - the stand-in runs the notebook
            except BaseException as raised:  # noqa: BLE001 - reported as the cell's error
                if isinstance(raised, KeyboardInterrupt):
                    raise
                error = "".join(traceback.format_exception_only(type(raised), raised)).strip()
        return {"stdout": out.getvalue()[:LIMIT], "stderr": err.getvalue()[:LIMIT], "error": error}


def main(socket_path: str) -> None:
    """Serve a fresh namespace on ``socket_path`` until the trusted side says ``done``."""
    import torch  # noqa: F401 - imported before the server is made, so that it speaks tensors too

    with tempfile.TemporaryFile() as descriptor_2:
        os.dup2(descriptor_2.fileno(), 2)
        StandInServer({"__name__": "__main__"}, descriptor_2).serve(socket_path)


if __name__ == "__main__":
    main(sys.argv[1])
