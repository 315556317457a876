"""What a test holds for an object of the student's kernel: `RemoteObject`, a handle that forwards every use of it
through its session (`autograder.channel.session.Session`) and comes back with data.

``isinstance(handle, nn.Module)`` and ``isinstance(handle.q_proj, nn.Linear)`` hold as they would in one
process: a handle's ``__class__`` is torch's own class for a torch.nn module, and for the student's own class
a stand-in of the same name deriving from the torch.nn module class theirs derives from (made by its session's
`autograder.channel.classes.StudentClasses`). Its ``type()`` stays `RemoteObject`.

Only module classes are borrowed: a handle never is, nor claims the class of, a tensor, an
``nn.Parameter`` or an ndarray (tensors and arrays reach a test by value only), so ``isinstance(handle,
torch.Tensor)`` is always False and `autograder.checks.expect_tensor` refuses every handle.
"""

from __future__ import annotations

from typing import Any

from autograder.channel.wire import Ref

DUNDER_ATTRIBUTES = frozenset({"__name__", "__qualname__"})


class RemoteObject:
    """A handle to one object in the student's kernel: call it, read and set its attributes, index it."""

    __slots__ = ("_session", "_ref", "__weakref__")

    def __init__(self, session: Any, ref: Ref) -> None:
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_ref", ref)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105 - isinstance(handle, nn.Module) holds when the student's class is one
        return self._s().classes.of(object.__getattribute__(self, "_ref"))

    def _id(self) -> int:
        return object.__getattribute__(self, "_ref").id

    def _s(self) -> Any:
        return object.__getattribute__(self, "_session")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._s().call(self._id(), None, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__") and name not in DUNDER_ATTRIBUTES:
            raise AttributeError(name)
        return self._s().simple("getattr", self._id(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._s().simple("setattr", self._id(), (name, value))

    def __getitem__(self, key: Any) -> Any:
        return self._s().call(self._id(), "__getitem__", (key,), {})

    def __setitem__(self, key: Any, value: Any) -> None:
        self._s().call(self._id(), "__setitem__", (key, value), {})

    def __len__(self) -> int:
        length = self._s().call(self._id(), "__len__", (), {})
        if type(length) is not int or length < 0:
            raise TypeError("__len__ of the notebook's object did not return a non-negative int")
        return length

    def __iter__(self):
        items = self._s().simple("list", self._id())
        if type(items) is not list:
            raise TypeError("the notebook's object did not iterate to a list")
        return iter(items)

    def __contains__(self, item: Any) -> bool:
        return self._s().call(self._id(), "__contains__", (item,), {}) is True

    def __bool__(self) -> bool:
        value = self._s().simple("bool", self._id())
        if type(value) is not bool:
            raise TypeError("bool() of the notebook's object did not return a bool")
        return value

    def __instancecheck__(self, instance: Any) -> bool:
        if type(instance) is not RemoteObject:
            return False
        return self._s().simple("isinstance", self._id(), instance) is True

    def __repr__(self) -> str:
        try:
            text = self._s().simple("repr", self._id())
        except Exception:  # noqa: BLE001 - a repr for a message must not raise
            text = None
        ref = object.__getattribute__(self, "_ref")
        return text if type(text) is str else f"<{ref.type_name} in the notebook>"

    __str__ = __repr__


def call_with_inputs(handle: RemoteObject, args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """Call the notebook's object; its result and the arguments as the call left them in the kernel (new values
    for those it changed, never written into the test's own)."""
    return handle._s().call(handle._id(), None, args, kwargs, inputs=True)

