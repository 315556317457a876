"""Exceptions across the channel, on the kernel's side: `describe_error` sends one as data, `as_exception` raises
one received as data (from an object of the trusted side the student's code called) as the builtin type it is or
derives from. Runs in the student's kernel, like `autograder.channel.served`; nothing here is trusted.
"""

from __future__ import annotations

import builtins
from types import MappingProxyType

from autograder.channel.wire import RemoteException

BUILTIN_ERRORS = MappingProxyType({name: value for name, value in vars(builtins).items()
                                   if isinstance(value, type) and issubclass(value, BaseException)})


def qualified(kind: type) -> str:
    """``module.QualifiedName`` of a class."""
    return f"{kind.__module__}.{kind.__qualname__}"


def describe_error(error: BaseException) -> RemoteException:
    """An exception as data: its type's name, its message and its bases' qualified names."""
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a student's __str__ may raise
        message = "(the exception's message could not be read)"
    return RemoteException(type(error).__name__, message[:20_000], tuple(qualified(k) for k in type(error).__mro__[1:8]))


def as_exception(error: RemoteException) -> BaseException:
    """An exception received as data, raised here as the builtin type it is or derives from."""
    names = [error.type_name] + [base.rsplit(".", 1)[-1] for base in error.bases if base.startswith("builtins.")]
    for name in names:
        kind = BUILTIN_ERRORS.get(name)
        if kind is not None and issubclass(kind, Exception):
            return kind(error.message) if name == error.type_name else kind(f"{error.type_name}: {error.message}")
    return RuntimeError(f"{error.type_name}: {error.message}")
