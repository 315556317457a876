"""The sandbox's end of the channel: answers the trusted harness's requests about the notebook's names.

Runs inside the student's kernel (or, for the test suite, in a plain subprocess:
``python -m autograder.channel.served SOCKET``). Nothing here is trusted: student code can replace any of
it, and the trusted side (`autograder.channel.session`) believes only the plain data it receives. It never
receives a test's source, only the arguments of each call.

Requests (each a frame whose header has an ``op``) and their answers (``{"ok": value}`` or
``{"error": exception}``):

- ``lookup`` names -> the value of each name in the notebook (an object as a reference);
- ``call`` target, method, args, kwargs -> the result, with ``after`` (the arguments' arrays and
  tensors that the call changed, by position or keyword: the trusted side reads them only when a test
  asks, never writes them into its own) and ``token`` (when the result has a
  gradient graph back to arguments that required grad);
- ``getattr``, ``setattr``, ``repr``, ``list``, ``bool``, ``isinstance`` on an object;
- ``backward`` token, grads -> the gradients of the call's arguments;
- ``release`` ids; ``exec`` source and ``reset`` (the test suite's subprocess only); ``done``.

While a call runs, the student's code may call an object of the trusted side (a test's recording
model, a hook): `Trusted` sends ``callback`` or ``attr`` requests the other way and waits.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import itertools
import os
import socket
import sys
import traceback
import warnings
from typing import Any

import numpy as np

from autograder.channel.wire import Codec, Frame, RemoteException, Ref, recv_frame, send_frame

BUILTIN_ERRORS = {name: value for name, value in vars(builtins).items()
                  if isinstance(value, type) and issubclass(value, BaseException)}


def _qualified(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def describe_error(error: BaseException) -> RemoteException:
    """An exception as data: its type's name, its message and its bases' qualified names."""
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a student's __str__ may raise
        message = "(the exception's message could not be read)"
    return RemoteException(type(error).__name__, message[:20_000], tuple(_qualified(k) for k in type(error).__mro__[1:8]))


def as_exception(error: RemoteException) -> BaseException:
    """An exception received as data, raised here as the builtin type it is or derives from."""
    names = [error.type_name] + [base.rsplit(".", 1)[-1] for base in error.bases if base.startswith("builtins.")]
    for name in names:
        kind = BUILTIN_ERRORS.get(name)
        if kind is not None and issubclass(kind, Exception):
            return kind(error.message) if name == error.type_name else kind(f"{error.type_name}: {error.message}")
    return RuntimeError(f"{error.type_name}: {error.message}")


class Trusted:
    """An object of the trusted side (a test's model, cache or hook), called from student code."""

    def __init__(self, server: "Server", ref: Ref) -> None:
        object.__setattr__(self, "_server", server)
        object.__setattr__(self, "_ref", ref)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._server.ask({"op": "callback", "target": self._ref.id, "method": None}, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._server.ask({"op": "attr", "target": self._ref.id, "name": name}, (), {})

    def __getitem__(self, key: Any) -> Any:
        return self._server.ask({"op": "callback", "target": self._ref.id, "method": "__getitem__"}, (key,), {})

    def __len__(self) -> int:
        return self._server.ask({"op": "callback", "target": self._ref.id, "method": "__len__"}, (), {})

    def __bool__(self) -> bool:
        return self._server.ask({"op": "callback", "target": self._ref.id, "method": "__bool__"}, (), {}) is True

    def __iter__(self):
        return iter(self._server.ask({"op": "callback", "target": self._ref.id, "method": "__iter__"}, (), {}))

    def __repr__(self) -> str:
        return f"<{self._ref.type_name} of the grader>"


class Server:
    """The objects handed to the trusted side, by number, and the request loop."""

    def __init__(self, namespace: dict, capture: bool = False) -> None:
        self.namespace = namespace
        self.capture = capture
        self.fd_file = None
        if capture:  # the test suite's stand-in: keep what C code writes to stderr too
            import tempfile

            self.fd_file = tempfile.TemporaryFile()
            os.dup2(self.fd_file.fileno(), 2)
        self.output = {"stdout": io.StringIO(), "stderr": io.StringIO()}
        self.counter = itertools.count(1)
        self.objects: dict[int, Any] = {}
        self.numbers: dict[int, int] = {}
        self.graphs: dict[int, tuple[list, list]] = {}
        self.sock: socket.socket | None = None
        self.storages = None
        self.codec = Codec(self._make_ref, self._resolve, *self._tensor_hooks())

    # -- values ------------------------------------------------------------------------------------
    def _tensor_hooks(self) -> tuple:
        if "torch" not in sys.modules:
            return (None, None)
        from autograder.channel.tensors import SandboxStorages, decode_plain

        self.storages = SandboxStorages()
        return (self.storages.encode, decode_plain)

    def _make_ref(self, value: Any) -> Ref:
        if type(value) is Trusted:
            return object.__getattribute__(value, "_ref")
        key = id(value)
        if key not in self.numbers:
            self.numbers[key] = next(self.counter)
            self.objects[self.numbers[key]] = value
        kind = type(value)
        bases = tuple(_qualified(k) for k in kind.__mro__[1:12])
        return Ref("sandbox", self.numbers[key], _qualified(kind), bases, callable(value))

    def _resolve(self, ref: Ref) -> Any:
        if ref.side == "trusted":
            return Trusted(self, ref)
        if ref.id not in self.objects:
            raise LookupError(f"no object number {ref.id}")
        return self.objects[ref.id]

    def encode(self, value: Any) -> Frame:
        buffers: list[bytes] = []
        return Frame(self.codec.encode(value, buffers), buffers)

    # -- the loop ----------------------------------------------------------------------------------
    def serve(self, path: str) -> None:
        """Answer requests on the Unix socket at ``path`` until the trusted side says ``done``."""
        if self.codec.encode_tensor is None and "torch" in sys.modules:
            self.codec = Codec(self._make_ref, self._resolve, *self._tensor_hooks())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            self.sock = sock
            try:
                while True:
                    frame = recv_frame(sock)
                    if type(frame.header) is dict and frame.header.get("op") == "done":
                        send_frame(sock, Frame({"ok": None}))
                        return
                    send_frame(sock, self.answer(frame))
            finally:
                self.sock = None

    def ask(self, request: dict, args: tuple, kwargs: dict) -> Any:
        """Send a request to the trusted side (from inside a call) and wait for its answer."""
        if self.sock is None:
            raise RuntimeError("the grader's object can only be used while the grader calls your code")
        frame = self.encode((args, kwargs))
        request = dict(request, payload=frame.header)
        send_frame(self.sock, Frame(request, frame.buffers))
        while True:
            reply = recv_frame(self.sock)
            header = reply.header
            if type(header) is dict and "op" in header:
                send_frame(self.sock, self.answer(reply))
                continue
            if type(header) is not dict:
                raise RuntimeError("the grader sent a malformed answer")
            if "error" in header:
                raise as_exception(self.codec.decode(header["error"], reply.buffers))
            return self.codec.decode(header.get("ok"), reply.buffers)

    def answer(self, frame: Frame) -> Frame:
        """The answer to one request, never an exception."""
        if not self.capture:
            return self._answer(frame)
        with warnings.catch_warnings(), contextlib.redirect_stdout(self.output["stdout"]), \
                contextlib.redirect_stderr(self.output["stderr"]):
            warnings.simplefilter("always")
            return self._answer(frame)

    def _answer(self, frame: Frame) -> Frame:
        try:
            request = frame.header
            value, extra = self.handle(request, self.codec.decode(request.get("payload"), frame.buffers))
            buffers: list[bytes] = []
            header = {"ok": self.codec.encode(value, buffers)}
            for key, item in extra.items():
                header[key] = self.codec.encode(item, buffers)
            return Frame(header, buffers)
        except BaseException as error:  # noqa: BLE001 - student code may raise anything, SystemExit included
            if isinstance(error, KeyboardInterrupt):
                raise
            buffers = []
            return Frame({"error": self.codec.encode(describe_error(error), buffers)}, buffers)

    def handle(self, request: dict, payload: Any) -> tuple[Any, dict]:
        """Do what ``request`` asks; returns the value and any extra answer fields."""
        op = request.get("op")
        if op == "lookup":  # a test cell begins
            if self.storages is not None:
                self.storages.reset()
            return [self._lookup(name) for name in payload], {}
        if op == "call":
            return self._call(request, payload)
        if op == "backward":
            return self._backward(*payload), {}
        if op == "release":
            for number in payload:
                value = self.objects.pop(number, None)
                self.numbers.pop(id(value), None)
            return None, {}
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
            printed = {name: stream.getvalue()[:100_000] for name, stream in self.output.items()}
            self.output = {"stdout": io.StringIO(), "stderr": io.StringIO()}
            if self.fd_file is not None:  # what C code wrote to file descriptor 2 (torch's profiler, say)
                self.fd_file.seek(0)
                printed["stderr"] += self.fd_file.read().decode(errors="replace")[:100_000]
                self.fd_file.seek(0)
                self.fd_file.truncate()
            return printed, {}
        target = self._resolve(Ref("sandbox", request.get("target")))
        if op == "getattr":
            return getattr(target, payload), {}
        if op == "setattr":
            setattr(target, payload[0], payload[1])
            return None, {}
        if op == "repr":
            return repr(target)[:10_000], {}
        if op == "list":
            return list(target), {}
        if op == "bool":
            return bool(target), {}
        if op == "isinstance":
            return isinstance(payload, target), {}
        raise ValueError(f"unknown request {op!r}")

    def _lookup(self, name: str) -> Any:
        if name in self.namespace:
            return self.namespace[name]
        return RemoteException("NameError", f"name {name!r} is not defined in the notebook", ("builtins.Exception",))

    def _call(self, request: dict, payload: Any) -> tuple[Any, dict]:
        target = self._resolve(Ref("sandbox", request.get("target")))
        method = request.get("method")
        args, kwargs = payload
        function = getattr(target, method) if method else target
        before = [_snapshot(value) for value in (*args, *kwargs.values())]
        leaves = _leaves(args, kwargs)
        extra: dict = {}
        with warnings.catch_warnings(record=True) as caught:  # sent back, to be warned again in the test
            warnings.simplefilter("always")
            result = function(*args, **kwargs)
        if caught:
            extra["warnings"] = [(w.category.__name__, str(w.message)[:2000]) for w in caught[:20]]
        changed = {}
        for index, (value, old) in enumerate(zip((*args, *kwargs.values()), before)):
            if old is not None and _snapshot(value) != old:
                changed[index] = value
        if changed:
            extra["after"] = changed
        if leaves:
            outputs = [t for t in _tensors(result) if t.grad_fn is not None]
            if outputs:
                token = next(self.counter)
                self.graphs[token] = (leaves, outputs)
                extra["token"] = (token, [t.grad_fn is not None for t in _tensors(result)])
        return result, extra

    def _backward(self, token: int, grads: list) -> list:
        import torch

        leaves, outputs = self.graphs[token]
        pairs = [(out, grad) for out, grad in zip(outputs, grads) if grad is not None]
        found = torch.autograd.grad([p[0] for p in pairs], leaves, [p[1] for p in pairs], allow_unused=True,
                                    retain_graph=True)
        return list(found)

    def _exec(self, source: str) -> dict:
        out, err = io.StringIO(), io.StringIO()
        error = None
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                exec(compile(source, "<cell>", "exec"), self.namespace)  # noqa: S102 - the sandbox runs the notebook
            except BaseException as raised:  # noqa: BLE001 - reported as the cell's error
                if isinstance(raised, KeyboardInterrupt):
                    raise
                error = "".join(traceback.format_exception_only(type(raised), raised)).strip()
        return {"stdout": out.getvalue()[:100_000], "stderr": err.getvalue()[:100_000], "error": error}


def _snapshot(value: Any) -> bytes | None:
    if type(value) is np.ndarray:
        return value.tobytes()
    if "torch" in sys.modules:
        import torch

        from autograder.channel.tensors import bytes_of

        if type(value) in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided:
            return bytes_of(value)
    return None


def _tensors(value: Any) -> list:
    """`autograder.channel.tensors.tensors_in`, where the notebook has torch (the walk both sides share)."""
    if "torch" not in sys.modules:
        return []
    from autograder.channel.tensors import tensors_in

    return tensors_in(value)


def _leaves(args: tuple, kwargs: dict) -> list:
    return [t for t in _tensors([*args, *kwargs.values()]) if t.requires_grad]


SERVER: Server | None = None


def serve(path: str, namespace: dict) -> None:
    """Serve the notebook's ``namespace`` on ``path`` (called by the harness in the student's kernel)."""
    global SERVER
    if SERVER is None or SERVER.namespace is not namespace:
        SERVER = Server(namespace)
    SERVER.serve(path)


if __name__ == "__main__":
    # The test suite's stand-in for a kernel: runs cells on request (``exec``) and keeps what they print.
    import torch  # noqa: F401 - it speaks tensors too

    Server({"__name__": "__main__"}, capture=True).serve(sys.argv[1])
