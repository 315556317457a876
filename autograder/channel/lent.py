"""What the student's code may do with an object a test lends it (a recording model, a cache, a hook), on the
trusted side: while a call runs, the kernel's ``callback`` and ``attr`` requests come back to the worker and are
answered here (`answer_callback`), in the grader's own grad mode, with data or with the test's exception as data.

A lent object's attributes are data, submodules, or methods that do not change it (its own class's, or
`READ_ONLY_METHODS`); anything else the kernel asks for breaks the channel (`autograder.channel.wire.ChannelError`).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from autograder.channel.codec import Codec
from autograder.channel.wire import ChannelError, Frame, Ref, RemoteException

# Methods torch gives every module that read it, or only switch dropout and the like: the student's code may call
# these on a module a test lends it, besides the methods the test's own class defines (TinyDecoder.make_caches).
READ_ONLY_METHODS = frozenset({"forward", "parameters", "named_parameters", "buffers", "named_buffers", "children",
                               "named_children", "modules", "named_modules", "state_dict", "eval", "train"})


def answer_callback(codec: Codec, resolve: Callable[[Ref], Any], request: dict, buffers: list[bytes]) -> Frame:
    """Run a call of the student's code into an object of the test (``resolve`` finds it by its number); its answer
    as a frame."""
    out: list[bytes] = []
    try:
        target = resolve(Ref("trusted", request.get("target") if type(request.get("target")) is int else -1))
        op, method = request.get("op"), request.get("method")
        if op == "attr":
            value = lent_attribute(target, request.get("name"))
        elif op == "callback" and method in (None, "__getitem__", "__len__", "__iter__", "__bool__"):
            args, kwargs = codec.decode(request.get("payload"), buffers)
            if type(args) is not tuple or type(kwargs) is not dict:
                raise ChannelError("the kernel sent malformed arguments")
            value = _run_callback(target, method, args, kwargs)
        else:
            raise ChannelError(f"the kernel sent an unknown request {str(op)[:40]!r}")
        return Frame({"ok": codec.encode(value, out)}, out)
    except ChannelError:
        raise
    except Exception as error:  # noqa: BLE001 - the test's object raised: the student's code sees it
        return Frame({"error": codec.encode(RemoteException(type(error).__name__, str(error)), out)}, out)


def _run_callback(target: Any, method: str | None, args: tuple, kwargs: dict) -> Any:
    """The test's object called by the student's code, in the grader's own grad mode: what the kernel's grad
    mode was is a fact only the kernel can observe, so nothing here depends on it."""
    if method == "__iter__":
        return list(target)
    if method == "__bool__":
        return bool(target)
    function = getattr(target, method) if method else target
    return function(*args, **kwargs)


def lent_attribute(target: Any, name: Any) -> Any:
    """An attribute of an object a test lent to the student's code: data, a submodule, or a method that does not
    change the test's object (its own class's methods, or `READ_ONLY_METHODS`)."""
    if type(name) is not str or name.startswith("_"):
        raise AttributeError(f"the grader's object has no public attribute {str(name)[:40]!r}")
    value = getattr(target, name)
    if inspect.ismethod(value) and name not in READ_ONLY_METHODS and not any(
            name in vars(kind) for kind in type(target).__mro__ if not kind.__module__.startswith(("torch", "builtins"))):
        raise AttributeError(f"{type(target).__name__}.{name} is not for the notebook to call: it would change "
                             "the grader's object")
    return value
