"""The sandbox's end of the channel: answers the trusted harness's requests about the notebook's names.

Runs inside the student's kernel (the test suite's stand-in kernel, `tests.stand_in_kernel`, serves with a
subclass of `Server`). Nothing here is trusted: student code can replace any of
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
- ``done``.

A request may also carry ``release``: the numbers of objects whose handles died on the trusted side, dropped before
it is answered.

While a call runs, the student's code may call an object of the trusted side (a test's recording
model, a hook): `Trusted` sends ``callback`` or ``attr`` requests the other way and waits.
"""

from __future__ import annotations

import itertools
import socket
import sys
import warnings
from typing import Any

import numpy as np

from autograder.channel.codec import Codec
from autograder.channel.kernel_errors import as_exception, describe_error, qualified
from autograder.channel.wire import Frame, RemoteException, Ref, recv_frame, send_frame

# The notebook's name for its `Server`: one per kernel, so that its objects stay numbered from one test cell to the next.
SERVER_NAME = "__autograder_server__"


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

    def __init__(self, namespace: dict) -> None:
        self.namespace = namespace
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
        bases = tuple(qualified(k) for k in kind.__mro__[1:12])
        return Ref("sandbox", self.numbers[key], qualified(kind), bases, callable(value))

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
        for number in request.get("release", ()):  # objects whose handles died on the trusted side (no name kept)
            self.numbers.pop(id(self.objects.pop(number, None)), None)
        op = request.get("op")
        if op == "lookup":  # a test cell begins
            if self.storages is not None:
                self.storages.reset()
            return [self._lookup(name) for name in payload], {}
        if op == "call":
            return self._call(request, payload)
        if op == "backward":
            return self._backward(*payload), {}
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


def serve(path: str, namespace: dict) -> None:
    """Serve the notebook's ``namespace`` on ``path`` (called by the harness in the student's kernel), with the
    `Server` the namespace holds (`SERVER_NAME`), made at its first test cell."""
    server = namespace.get(SERVER_NAME)
    if type(server) is not Server or server.namespace is not namespace:
        server = namespace[SERVER_NAME] = Server(namespace)
    server.serve(path)
