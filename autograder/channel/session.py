"""The trusted end of the channel: the notebook's names as remote handles, for test cells run outside the sandbox.

A `Session` talks to `autograder.channel.served` in the student's kernel over one Unix socket. Test code
sees `RemoteObject` handles: calling one sends the arguments as data (`autograder.channel.wire`) and
rebuilds the result from data, so every value a test checks is a genuine float, array or tensor
made here, whatever the student's code did. Objects that are not data (a `MultiHeadAttention`, a
cache, a bound method) come back as further handles. The other way, objects of the test that the
student's code receives (a recording model, a hook) stay here and are called back (`Trusted` there).

Nothing the kernel sends changes the grader's state:
- every argument crosses as a copy, and nothing is written back into the test's arrays and tensors: a
  test that checks what a call did to its arguments asks for them (`Session.call` with
  ``inputs=True``, `autograder.checks.call_with_inputs`) and gets the kernel's copies as new values;
- no random state travels: the grader's generator is the grader's alone (a test that needs the
  student's layer initialised like its own loads its own weights with ``load_state_dict``);
- a handle is never a tensor, a Parameter or an array (`autograder.channel.handles`): those cross by value.

Semantics kept across the boundary:
- a tensor that depends on arguments that require grad gets a gradient function here whose backward
  asks the sandbox for the gradients (`_RemoteGrad`), so ``out.backward()`` and ``gradcheck`` work;
- tensors that share memory there share it here (`autograder.channel.tensors`);
- an exception there is raised here as the builtin type it is or derives from, with its message.

A session that times out or receives what the protocol forbids is broken: that call and every
later one raise `ChannelError`, so only the tests that need the kernel lose their points.
"""

from __future__ import annotations

import builtins
import itertools
import socket
import time
import warnings
import weakref
from typing import Any

from autograder.channel.classes import StudentClasses
from autograder.channel.codec import Codec
from autograder.channel.handles import RemoteObject
from autograder.channel.lent import answer_callback
from autograder.channel.wire import ChannelError, Frame, Ref, RemoteException, recv_frame, send_frame


def _import_torch() -> bool:
    """Whether torch is available here (imported once per process, for the first session whose tensors may cross)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class Session:
    """The trusted side's dealings with one student's kernel, over one connection at a time
    (`attach`, `end`): the kernel's objects stay numbered from one connection to the next.
    ``timeout``: seconds each answer may take; ``tensors``: whether torch tensors may cross (False for a kernel
    that cannot import torch, `autograder.records.tensors_cross`: a tensor it sends is refused, whether or not
    this process has torch imported, and none needs importing)."""

    def __init__(self, timeout: float, tensors: bool = True) -> None:
        self.timeout = timeout
        self.deadline = float("inf")
        self.cell_seconds = float("inf")
        self.names: dict[int, str] = {}  # kernel object id -> the notebook's name for it, from the last lookup
        self.sock: socket.socket | None = None
        self.broken: str | None = "the notebook's kernel is not connected to the grader"
        self.handles: weakref.WeakValueDictionary[int, RemoteObject] = weakref.WeakValueDictionary()
        self.lent: dict[int, Any] = {}
        self.lent_numbers: dict[int, int] = {}
        self.counter = itertools.count(1)
        self.released: list[int] = []
        self.classes = StudentClasses()
        self.torch = tensors and _import_torch()
        hooks: tuple = (None, None)
        self.storages = None
        if self.torch:
            from autograder.channel.tensors import TrustedStorages, encode_plain

            self.storages = TrustedStorages()
            hooks = (encode_plain, self.storages.decode)
        self.codec = Codec(self._make_ref, self._resolve, *hooks)

    # -- references ------------------------------------------------------------------------------
    def _make_ref(self, value: Any) -> Ref:
        if type(value) is RemoteObject and object.__getattribute__(value, "_session") is self:
            return object.__getattribute__(value, "_ref")
        key = id(value)
        if key not in self.lent_numbers:
            self.lent_numbers[key] = next(self.counter)
            self.lent[self.lent_numbers[key]] = value
        kind = type(value)
        return Ref("trusted", self.lent_numbers[key], kind.__qualname__, (), callable(value))

    def _resolve(self, ref: Ref) -> Any:
        if ref.side == "trusted":
            if ref.id not in self.lent:
                raise ChannelError(f"the kernel referred to object {ref.id} of the grader, which it was never given")
            return self.lent[ref.id]
        handle = self.handles.get(ref.id)
        if handle is None:
            while ref.id in self.released:  # an earlier handle of it died, but the kernel still holds it
                self.released.remove(ref.id)
            handle = RemoteObject(self, ref)
            self.handles[ref.id] = handle
            weakref.finalize(handle, self.released.append, ref.id)
        return handle

    # -- requests --------------------------------------------------------------------------------
    def request(self, header: dict, payload: Any = None) -> tuple[Any, dict, list[bytes]]:
        """Send a request; answer the kernel's callbacks meanwhile; return (value, answer header, buffers)."""
        if self.broken or self.sock is None:
            raise ChannelError(self.broken or "the notebook's kernel is not connected to the grader")
        buffers: list[bytes] = []
        header = dict(header, payload=self.codec.encode(payload, buffers))
        if self.released:  # the kernel's objects whose handles died here: it drops them before it answers
            header["release"], self.released = self.released, []
        cell_bound = False
        try:
            send_frame(self.sock, Frame(header, buffers))
            while True:
                cell_left = self.deadline - time.monotonic()
                left, cell_bound = min(self.timeout, cell_left), cell_left < self.timeout
                if left <= 0:
                    raise TimeoutError
                self.sock.settimeout(left)
                frame = recv_frame(self.sock)
                answer = frame.header
                if type(answer) is not dict:
                    raise ChannelError("the kernel sent an answer that is not an object")
                if "op" in answer:
                    send_frame(self.sock, answer_callback(self.codec, self._resolve, answer, frame.buffers))
                    continue
                if "error" in answer:
                    error = self.codec.decode(answer["error"], frame.buffers)
                    if type(error) is not RemoteException:
                        raise ChannelError("the kernel sent a malformed error")
                    break  # the student's exception, raised below, outside what counts as the channel's failure
                return self.codec.decode(answer.get("ok"), frame.buffers), answer, frame.buffers
        except (OSError, ChannelError) as failure:
            reason = self._too_long(header, cell_bound) if isinstance(failure, TimeoutError) else str(failure)
            self.broken = f"the notebook's kernel stopped answering the grader: {reason}"
            raise ChannelError(self.broken) from None
        raise self.classes.exception(error)

    def start_cell(self, seconds: float) -> None:
        """A test cell starts: the student's code may take ``seconds`` in all until it ends."""
        self.deadline, self.cell_seconds = time.monotonic() + seconds, seconds

    def _too_long(self, header: dict, cell_bound: bool) -> str:
        """What took too long, for the row's reason: the student's function (when the notebook named it) and the
        limit it ran past."""
        name = self.names.get(header.get("target")) if header.get("op") == "call" else None
        method = header.get("method")
        what = f"{name}{'.' + method if isinstance(method, str) else ''}()" if name else "the kernel"
        limit = f"the {self.cell_seconds:g} s a test cell may take" if cell_bound else f"{self.timeout:g} s"
        return f"{what} took too long to answer: no result within {limit} (--cell-timeout); an endless loop?"

    # -- operations ------------------------------------------------------------------------------
    def lookup(self, names: list[str]) -> dict[str, Any]:
        """The notebook's values of ``names`` (a `RemoteException` for a name it does not define), at the start of a
        test cell: both sides number tensor storages afresh from here."""
        if self.storages is not None:
            self.storages.reset()
        values, _, _ = self.request({"op": "lookup"}, names)
        if type(values) is not list or len(values) != len(names):
            raise ChannelError("the kernel answered a lookup with the wrong number of values")
        self.names = {object.__getattribute__(v, "_ref").id: name for name, v in zip(names, values)
                      if type(v) is RemoteObject}
        return dict(zip(names, values))

    def simple(self, op: str, target: int, payload: Any = None) -> Any:
        """A request about one object that returns a value."""
        return self.request({"op": op, "target": target}, payload)[0]

    def call(self, target: int, method: str | None, args: tuple, kwargs: dict, *, inputs: bool = False) -> Any:
        """Call the student's object (or its ``method``) with copies of ``args`` and ``kwargs``; the result.

        ``inputs``: return ``(result, args_after, kwargs_after)`` instead, the arguments as the call left them in
        the kernel: new values for those it changed, the test's own objects for the others. Nothing is ever
        written into the test's objects."""
        value, answer, buffers = self.request({"op": "call", "target": target, "method": method}, (args, kwargs))
        changed = self.codec.decode(answer["after"], buffers) if "after" in answer else {}
        if type(changed) is not dict:
            raise ChannelError("the kernel sent malformed changed arguments")
        if "warnings" in answer:
            self._warn_again(self.codec.decode(answer["warnings"], buffers))
        if "token" in answer:
            from autograder.channel.gradients import attach

            value = attach(self, value, args, kwargs, self.codec.decode(answer["token"], buffers))
        if not inputs:
            return value
        after = _inputs_after([*args, *kwargs.values()], changed)
        return value, tuple(after[:len(args)]), dict(zip(kwargs, after[len(args):]))

    def backward(self, token: int, grads: list) -> list:
        """The gradients of a call's arguments that required grad, given its outputs' gradients."""
        found = self.request({"op": "backward"}, (token, grads))[0]
        if type(found) is not list:
            raise ChannelError("the kernel answered backward with something other than a list")
        return found

    @staticmethod
    def _warn_again(caught: Any) -> None:
        """Warn here what the student's code warned there, so that a test's ``catch_warnings`` records it."""
        if type(caught) is not list:
            raise ChannelError("the kernel sent malformed warnings")
        for item in caught[:20]:
            if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str or type(item[1]) is not str:
                raise ChannelError("the kernel sent a malformed warning")
            category = getattr(builtins, item[0], None)
            if not (isinstance(category, type) and issubclass(category, Warning)):
                category = UserWarning
            warnings.warn(item[1], category, stacklevel=3)

    def attach(self, sock: socket.socket) -> None:
        """Use a new connection from the kernel's server."""
        self.sock, self.broken = sock, None

    def end(self) -> None:
        """Tell the kernel's server to return (when the connection still works), and close it."""
        if self.sock is None:
            return
        try:
            if not self.broken:
                self.sock.settimeout(5)
                send_frame(self.sock, Frame({"op": "done"}))
                recv_frame(self.sock)
        except (OSError, ChannelError):
            pass
        finally:
            self.sock.close()
            self.sock = None
            self.broken = "the notebook's kernel is not connected to the grader"


def _inputs_after(originals: list, changed: dict) -> list:
    """The arguments after a call: what the kernel sent for each one it says it changed (data decoded here, never
    the test's object), the test's own object for the others."""
    after = list(originals)
    for index, value in changed.items():
        if type(index) is not int or not 0 <= index < len(originals):
            raise ChannelError("the kernel named an argument that does not exist")
        after[index] = value
    return after


def wait_for_connection(listener: socket.socket, deadline: float) -> socket.socket:
    """Accept the kernel's connection to ``listener`` before ``deadline`` (time.monotonic)."""
    listener.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        connection, _ = listener.accept()
    except OSError as error:
        raise ChannelError(f"the notebook's kernel did not connect to the grader: {error}") from None
    return connection
