"""Assertions for hidden tests and the test suite: strict, hard to fool, and teaching.

Every check compares a student's value with an oracle computed independently
(a closed form, a loop, or PyTorch's own implementation) and fails with a
message that says what was expected, what came back and, where the wrong value
matches a known mistake, names that mistake.

The checks cannot be fooled by objects whose ``__eq__`` always returns True,
by ndarray/Tensor subclasses, or by solution code that replaces numpy's or
torch's comparison functions: values are read out with the C-level ``tolist``
methods (immutable types) and compared in plain Python, and the library
functions a student might patch are checked against references captured when
they were first seen (`autograder.harness.check_values`, where values are read and
compared). Shapes and dtypes are compared before any value is read, and a check
reads at most `MAX_VALUES` values of one array, so what one check costs is bounded
by the expected value, never by what the student sent.

This module's path and names are what every source notebook imports; its workings are in
`autograder.harness.check_values`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as _np

from autograder.harness.check_values import (GUARDED_NUMPY, GUARDED_NUMPY_TESTING, MAX_VALUES, NDARRAY, describe_type,
                                             format_value, is_mistake, is_tensor, matches, torch_refs, torch_seen)

__all__ = ("MAX_VALUES", "CheckFailed", "call", "call_with_inputs", "describe", "describe_call", "expect_close",
           "expect_equal", "expect_float", "expect_ndarray", "expect_raises", "expect_tensor", "hidden_seed",
           "verify_untampered")


class CheckFailed(AssertionError):
    """A check failed; the message is written for the student."""


def _fail(message: str, hint: str = "") -> None:
    if hint:
        message = f"{message}\nHint: {hint}"
    raise CheckFailed(message)


def verify_untampered() -> None:
    """Fail if graded code replaced numpy's or torch's comparison functions."""
    for name, original in GUARDED_NUMPY.items():
        if getattr(_np, name) is not original:
            _fail(f"numpy.{name} was replaced by code in the notebook; graded code must not patch library functions.")
    for name, original in GUARDED_NUMPY_TESTING.items():
        if getattr(_np.testing, name) is not original:
            _fail(f"numpy.testing.{name} was replaced by code in the notebook; graded code must not patch library functions.")
    if torch_seen():
        refs = torch_refs()
        for name, original in refs.guarded.items():
            if getattr(refs.module, name) is not original:
                _fail(f"torch.{name} was replaced by code in the notebook; graded code must not patch library functions.")
        if refs.module.testing.assert_close is not refs.testing_close:
            _fail("torch.testing.assert_close was replaced by code in the notebook; graded code must not patch library functions.")


def expect_ndarray(value: Any, name: str, *, kinds: str = "f", ndim: int | None = None) -> None:
    """Fail unless ``value`` is exactly a numpy.ndarray with a dtype kind in ``kinds`` ('f' float, 'b' bool, 'i' int)."""
    verify_untampered()
    if type(value) is not NDARRAY:
        _fail(f"{name} should be a numpy.ndarray, but it is a {describe_type(value)}.",
              "Return a real array (np.asarray(...)), not a list, a scalar or a custom object.")
    if value.dtype.kind not in kinds:
        wanted = {"f": "floating-point", "b": "boolean", "i": "integer", "u": "unsigned integer"}
        _fail(f"{name} should have a {' or '.join(wanted[k] for k in kinds)} dtype, but its dtype is {value.dtype}.")
    if ndim is not None and value.ndim != ndim:
        _fail(f"{name} should have {ndim} dimensions, but it has shape {value.shape}.")


def expect_tensor(value: Any, name: str, *, dtype: Any = None) -> None:
    """Fail unless ``value`` is a torch.Tensor (optionally of ``dtype``)."""
    verify_untampered()
    if not isinstance(value, torch_refs().tensor_base):
        _fail(f"{name} should be a torch.Tensor, but it is a {describe_type(value)}.")
    if dtype is not None and value.dtype != dtype:
        _fail(f"{name} should have dtype {dtype}, but its dtype is {value.dtype}.")


def expect_float(value: Any, name: str) -> None:
    """Fail unless ``value`` is a real number (Python float or a numpy floating scalar)."""
    verify_untampered()
    if type(value) is float or (isinstance(value, _np.floating) and type(value).__module__ == "numpy"):
        return
    _fail(f"{name} should be a float, but it is a {describe_type(value)}.",
          "Convert with float(...) before returning.")


def expect_close(actual: Any, expected: Any, name: str, *, rtol: float = 1e-5, atol: float = 1e-6,
                 mistakes: Mapping[str, Any] | None = None, hint: str = "") -> None:
    """Fail unless ``actual`` matches ``expected`` elementwise (same shape).

    ``mistakes`` maps a misconception ("softmax over the wrong axis") to the value
    that mistake would produce; when ``actual`` matches one of them the message
    names it.
    """
    verify_untampered()
    ok, where = matches(actual, expected, rtol, atol)
    if ok:
        return
    lines = [f"{name} is not right: {where}.", f"Expected: {format_value(expected)}"]
    try:
        lines.append(f"Got:      {format_value(actual)}")
    except TypeError:
        pass
    named = [mistake for mistake, wrong_value in (mistakes or {}).items()
             if is_mistake(actual, expected, wrong_value, rtol, atol)]
    if named:  # several only when the case cannot tell them apart
        lines.append(f"This is what you get with this mistake: {'; or '.join(named)}.")
    _fail("\n".join(lines), hint)


def describe(value: Any) -> str:
    """A short description of an argument for messages: arrays and tensors by shape and dtype."""
    if type(value) is NDARRAY:
        return f"ndarray of shape {tuple(value.shape)}, {value.dtype}"
    if is_tensor(value):
        return f"tensor of shape {tuple(value.shape)}, {str(value.dtype).replace('torch.', '')}"
    if value is None or type(value) in (bool, int, float, str):
        return repr(value)
    if type(value) in (tuple, list) and len(value) <= 6:
        inner = ", ".join(describe(item) for item in value)
        return f"({inner})" if type(value) is tuple else f"[{inner}]"
    return f"a {type(value).__qualname__}"


def describe_call(function: Any, args: tuple = (), kwargs: Mapping[str, Any] | None = None) -> str:
    """``name(arg, ..., key=arg)`` with each argument described by :func:`describe`."""
    name = getattr(function, "__qualname__", None) or function.__class__.__qualname__  # a handle: the student's class
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"


def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call graded code and return its result; if it raises, fail with a message that names the call
    and the shapes of its arguments before the error."""
    verify_untampered()
    try:
        return function(*args, **kwargs)
    except Exception as raised:  # noqa: BLE001 - reported to the student
        _fail(f"{describe_call(function, args, kwargs)} raised {type(raised).__name__}: {raised}")
    raise AssertionError("unreachable")


def call_with_inputs(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, tuple, dict]:
    """Call graded code as `call` does; return ``(result, args, kwargs)`` with the arguments as the call left them,
    for a test that checks what a call did (or must not do) to its inputs.

    Graded, the call runs in the student's kernel on copies: the arguments it changed come back as new values
    and the test's own objects never change, so an oracle computed from them stays the grader's. In one process
    (the student's own kernel) they are the test's objects themselves."""
    from autograder.channel.handles import RemoteObject, call_with_inputs as remote_call

    verify_untampered()
    try:
        if type(function) is RemoteObject:
            return remote_call(function, args, kwargs)
        return function(*args, **kwargs), args, kwargs
    except Exception as raised:  # noqa: BLE001 - reported to the student
        _fail(f"{describe_call(function, args, kwargs)} raised {type(raised).__name__}: {raised}")
    raise AssertionError("unreachable")


def expect_equal(actual: Any, expected: Any, name: str, *, hint: str = "") -> None:
    """Fail unless ``actual`` has exactly the type and the value of ``expected`` (ints, strings, tuples, shapes)."""
    verify_untampered()
    if type(actual) is not type(expected) or repr(actual) != repr(expected):
        _fail(f"{name}: expected {expected!r} (a {describe_type(expected)}), got {actual!r} (a {describe_type(actual)}).",
              hint)


def expect_raises(error: type[BaseException], call: Callable[[], Any], name: str, *, hint: str = "") -> BaseException:
    """Fail unless ``call()`` raises ``error`` (or a subclass); returns the exception."""
    verify_untampered()
    try:
        result = call()
    except error as raised:
        return raised
    except Exception as raised:  # noqa: BLE001 - reported to the student
        _fail(f"{name} should raise {error.__name__}, but it raised {type(raised).__name__}: {raised}", hint)
    _fail(f"{name} should raise {error.__name__}, but it returned {result!r}.", hint)
    raise AssertionError("unreachable")


def hidden_seed(base: int) -> int:
    """The seed a hidden test draws its inputs from, in place of its fixed ``base``.

    In a plain kernel (plain ``nbgrader autograde``, a student's own run, the tests' harness) it is ``base``.
    Under ``python -m autograder grade`` the trusted runner binds the hand-in's key in the test cells' namespace
    (`autograder.harness.hidden_seed.HIDDEN_KEY`), and the seed is derived from it and ``base``
    (`autograder.harness.hidden_seed.derived_seed`): other for every student, resubmission and instructor's secret, the same
    on a rerun of the same hand-in. Call it from the test cell's own code (or a function the cell defines):
    the key is looked up in the caller's globals."""
    from autograder.harness.hidden_seed import HIDDEN_KEY, derived_seed

    key = sys._getframe(1).f_globals.get(HIDDEN_KEY)  # noqa: SLF001 - the calling test cell's namespace
    return derived_seed(key, base) if isinstance(key, str) and key else int(base)
