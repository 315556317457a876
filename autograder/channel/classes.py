"""The classes the trusted side makes for what the kernel names: a student's exception, raised in the test as the
builtin type it derives from (`StudentClasses.exception`), and the class a handle claims
(`StudentClasses.of`: torch's own class for a torch.nn module, else a stand-in of the student's class's name).

One `StudentClasses` per `autograder.channel.session.Session` owns the classes it made: a name one kernel sends
never outlives that kernel's session, so nothing of one student's notebook reaches the next one the worker grades.
"""

from __future__ import annotations

import builtins
import sys
from types import MappingProxyType

from autograder.channel.wire import Ref, RemoteException

BUILTIN_ERRORS = MappingProxyType({name: value for name, value in vars(builtins).items()
                                   if isinstance(value, type) and issubclass(value, Exception)})


class RemoteError(Exception):
    """Marks an exception raised by the student's code whose type is not a builtin one."""


def torch_class(qualified: str) -> type | None:
    """torch's own module class of that qualified name (``torch.nn.modules.linear.Linear``), if it is one: a
    subclass of ``torch.nn.Module`` defined under ``torch.nn.``, never a tensor or array class."""
    module_name, _, name = qualified.rpartition(".")
    if not module_name.startswith("torch.nn.") or module_name not in sys.modules or "torch.nn" not in sys.modules:
        return None
    found = getattr(sys.modules[module_name], name, None)
    module = sys.modules["torch.nn"].Module
    if not (isinstance(found, type) and issubclass(found, module) and found.__module__.startswith("torch.nn.")):
        return None
    return found


class StudentClasses:
    """The classes made for one session's kernel, each made once (``isinstance`` and ``except`` see one class)."""

    def __init__(self) -> None:
        self._errors: dict[tuple[str, str], type] = {}
        self._claimed: dict[tuple[str, tuple[str, ...]], type] = {}

    def exception(self, error: RemoteException) -> Exception:
        """The student's exception as one raised here: its builtin type, or a class of its name that
        derives from the builtin type it derives from (else from `RemoteError`)."""
        if error.type_name in BUILTIN_ERRORS:
            return BUILTIN_ERRORS[error.type_name](error.message)
        base = next((BUILTIN_ERRORS[b.removeprefix("builtins.")] for b in error.bases
                     if b.removeprefix("builtins.") in BUILTIN_ERRORS and b.startswith("builtins.")), Exception)
        key = (error.type_name, base.__name__)
        if key not in self._errors:
            name = error.type_name if error.type_name.isidentifier() else "StudentError"
            bases = (RemoteError,) if base is Exception else (base, RemoteError)
            self._errors[key] = type(name, bases, {"__module__": "notebook"})
        return self._errors[key](error.message)

    def of(self, ref: Ref) -> type:
        """What ``handle.__class__`` says: torch's own class for a torch.nn object, else a stand-in class named
        after the student's that derives from the torch.nn class theirs derives from, so that
        ``isinstance(handle, nn.Module)`` and ``isinstance(handle, nn.Linear)`` hold as they would in one process."""
        key = (ref.type_name, ref.bases)
        if key not in self._claimed:
            own = torch_class(ref.type_name)
            if own is not None:
                self._claimed[key] = own
            else:
                module, _, name = ref.type_name.rpartition(".")
                base = next((found for found in map(torch_class, ref.bases) if found is not None), object)
                self._claimed[key] = type(name or "object", (base,),
                                          {"__module__": module or "notebook", "__qualname__": name})
        return self._claimed[key]
