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
this module was first imported (the grading kernel imports it before any
student code runs). Shapes and dtypes are compared before any value is read,
and a check reads at most `MAX_VALUES` values of one array, so what one check
costs is bounded by the expected value, never by what the student sent.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as _np

_NDARRAY = _np.ndarray
_ARRAY_TOLIST = _np.ndarray.tolist
_GUARDED_NUMPY = {
    name: getattr(_np, name)
    for name in ("allclose", "isclose", "array_equal", "asarray", "array", "all", "any", "abs")
}
_GUARDED_NUMPY_TESTING = {
    name: getattr(_np.testing, name) for name in ("assert_allclose", "assert_array_equal")
}
_torch_refs: dict[str, Any] = {}


def _capture_torch() -> dict[str, Any]:
    """References to torch's types and comparison functions, captured once."""
    if not _torch_refs:
        import torch

        _torch_refs.update(
            module=torch,
            tensor_base=torch._C.TensorBase,
            tolist=torch._C.TensorBase.tolist,
            guarded={name: getattr(torch, name) for name in ("allclose", "isclose", "equal")},
            testing_close=torch.testing.assert_close,
        )
    return _torch_refs


if "torch" in sys.modules:
    _capture_torch()


class CheckFailed(AssertionError):
    """A check failed; the message is written for the student."""


def _fail(message: str, hint: str = "") -> None:
    if hint:
        message = f"{message}\nHint: {hint}"
    raise CheckFailed(message)


def verify_untampered() -> None:
    """Fail if graded code replaced numpy's or torch's comparison functions."""
    for name, original in _GUARDED_NUMPY.items():
        if getattr(_np, name) is not original:
            _fail(f"numpy.{name} was replaced by code in the notebook; graded code must not patch library functions.")
    for name, original in _GUARDED_NUMPY_TESTING.items():
        if getattr(_np.testing, name) is not original:
            _fail(f"numpy.testing.{name} was replaced by code in the notebook; graded code must not patch library functions.")
    if _torch_refs:
        torch = _torch_refs["module"]
        for name, original in _torch_refs["guarded"].items():
            if getattr(torch, name) is not original:
                _fail(f"torch.{name} was replaced by code in the notebook; graded code must not patch library functions.")
        if torch.testing.assert_close is not _torch_refs["testing_close"]:
            _fail("torch.testing.assert_close was replaced by code in the notebook; graded code must not patch library functions.")


def _describe_type(value: Any) -> str:
    kind = getattr(value, "__class__", type(value))  # a remote handle names the student's class
    if not isinstance(kind, type):
        kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _is_tensor(value: Any) -> bool:
    return bool(_torch_refs) and isinstance(value, _torch_refs["tensor_base"])


def _flat(values: Any) -> list:
    if isinstance(values, list):
        return [x for item in values for x in _flat(item)]
    return [values]


# The most values one check reads out of one array or tensor (what one check may cost): a larger value fails.
MAX_VALUES = 1 << 22


def _kind(dtype: str) -> str:
    """'bool' or 'number': values of different kinds are never compared."""
    return "bool" if dtype == "bool" else "number"


def _meta(value: Any) -> tuple[tuple[int, ...], str]:
    """Shape and dtype name of an ndarray, Tensor or Python scalar, without reading its values."""
    if type(value) is _NDARRAY:
        return tuple(value.shape), str(value.dtype)
    if _is_tensor(value):
        return tuple(value.shape), str(value.dtype).replace("torch.", "")
    if type(value) in (float, int, bool):
        return (), type(value).__name__
    if _np.isscalar(value) and isinstance(value, _np.generic):
        return (), str(value.dtype)
    raise TypeError(f"cannot read values from {_describe_type(value)}")


def _read(value: Any) -> tuple[tuple[int, ...], list, str]:
    """Shape, flat Python values and dtype name of an ndarray, Tensor or Python scalar (at most `MAX_VALUES`)."""
    shape, dtype = _meta(value)
    if math.prod(shape) > MAX_VALUES:
        raise TypeError(f"cannot read the {math.prod(shape)} values of an array of shape {shape}: more than {MAX_VALUES}")
    if type(value) is _NDARRAY:
        return shape, _flat(_ARRAY_TOLIST(value)), dtype
    if _is_tensor(value):
        return shape, _flat(_torch_refs["tolist"](value.detach().cpu())), dtype
    if type(value) in (float, int, bool):
        return shape, [value], dtype
    return shape, [value.item()], dtype


def expect_ndarray(value: Any, name: str, *, kinds: str = "f", ndim: int | None = None) -> None:
    """Fail unless ``value`` is exactly a numpy.ndarray with a dtype kind in ``kinds`` ('f' float, 'b' bool, 'i' int)."""
    verify_untampered()
    if type(value) is not _NDARRAY:
        _fail(f"{name} should be a numpy.ndarray, but it is a {_describe_type(value)}.",
              "Return a real array (np.asarray(...)), not a list, a scalar or a custom object.")
    if value.dtype.kind not in kinds:
        wanted = {"f": "floating-point", "b": "boolean", "i": "integer", "u": "unsigned integer"}
        _fail(f"{name} should have a {' or '.join(wanted[k] for k in kinds)} dtype, but its dtype is {value.dtype}.")
    if ndim is not None and value.ndim != ndim:
        _fail(f"{name} should have {ndim} dimensions, but it has shape {value.shape}.")


def expect_tensor(value: Any, name: str, *, dtype: Any = None) -> None:
    """Fail unless ``value`` is a torch.Tensor (optionally of ``dtype``)."""
    verify_untampered()
    refs = _capture_torch()
    if not isinstance(value, refs["tensor_base"]):
        _fail(f"{name} should be a torch.Tensor, but it is a {_describe_type(value)}.")
    if dtype is not None and value.dtype != dtype:
        _fail(f"{name} should have dtype {dtype}, but its dtype is {value.dtype}.")


def expect_float(value: Any, name: str) -> None:
    """Fail unless ``value`` is a real number (Python float or a numpy floating scalar)."""
    verify_untampered()
    if type(value) is float or (isinstance(value, _np.floating) and type(value).__module__ == "numpy"):
        return
    _fail(f"{name} should be a float, but it is a {_describe_type(value)}.",
          "Convert with float(...) before returning.")


def _format(value: Any) -> str:
    if math.prod(_meta(value)[0]) > 60:
        return f"an array of shape {_meta(value)[0]}"
    shape, flat, _ = _read(value)
    if not shape:
        return repr(flat[0])
    return _np.array2string(_np.array(flat).reshape(shape), precision=4, suppress_small=True, separator=", ")


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b and type(a) is type(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


def _matches(actual: Any, expected: Any, rtol: float, atol: float) -> tuple[bool, str]:
    """Whether two values agree; if not, a sentence saying where they differ. Shapes and dtypes are compared
    before any value is read, so a value's cost is bounded by the expected value's size."""
    try:
        shape_a, dtype_a = _meta(actual)
    except TypeError:
        return False, f"it is a {_describe_type(actual)}"
    shape_e, dtype_e = _meta(expected)
    if shape_a != shape_e:
        return False, f"its shape is {shape_a} instead of {shape_e}"
    if _kind(dtype_a) != _kind(dtype_e):
        return False, f"its dtype is {dtype_a} instead of {dtype_e}"
    try:
        flat_a, flat_e = _read(actual)[1], _read(expected)[1]
    except TypeError as error:
        return False, str(error)
    worst, where = 0.0, None
    for index, (a, e) in enumerate(zip(flat_a, flat_e)):
        if not _close(a, e, rtol, atol):
            gap = math.inf if (math.isnan(a) or math.isinf(a) or math.isinf(e)) else abs(a - e)
            if where is None or gap > worst:
                worst, where = gap, index
    if where is None:
        return True, ""
    position = tuple(int(i) for i in _np.unravel_index(where, shape_e)) if shape_e else ()
    at = f" at index {position}" if position else ""
    return False, f"the largest difference is {worst:.3g}{at} (expected {flat_e[where]!r}, got {flat_a[where]!r})"


def expect_close(actual: Any, expected: Any, name: str, *, rtol: float = 1e-5, atol: float = 1e-6,
                 mistakes: Mapping[str, Any] | None = None, hint: str = "") -> None:
    """Fail unless ``actual`` matches ``expected`` elementwise (same shape).

    ``mistakes`` maps a misconception ("softmax over the wrong axis") to the value
    that mistake would produce; when ``actual`` matches one of them the message
    names it.
    """
    verify_untampered()
    ok, where = _matches(actual, expected, rtol, atol)
    if ok:
        return
    lines = [f"{name} is not right: {where}.", f"Expected: {_format(expected)}"]
    try:
        lines.append(f"Got:      {_format(actual)}")
    except TypeError:
        pass
    named = [mistake for mistake, wrong_value in (mistakes or {}).items()
             if _is_mistake(actual, expected, wrong_value, rtol, atol)]
    if named:  # several only when the case cannot tell them apart
        lines.append(f"This is what you get with this mistake: {'; or '.join(named)}.")
    _fail("\n".join(lines), hint)


def _scale(value: Any) -> float:
    """The largest finite magnitude among the values (0.0 if none)."""
    finite = [abs(x) for x in _read(value)[1] if not isinstance(x, bool) and math.isfinite(x)]
    return max(finite, default=0.0)


def _is_mistake(actual: Any, expected: Any, wrong_value: Any, rtol: float, atol: float) -> bool:
    """Whether ``actual`` is what a mistake gives: close to ``wrong_value`` relative to the values' own
    scale (so that values near 1e-12 are told apart), while ``wrong_value`` itself differs from the
    expected value (a mistake that changes nothing in this case is never named)."""
    if _matches(wrong_value, expected, rtol, atol)[0]:
        return False
    scale = max(_scale(wrong_value), _scale(expected))
    return _matches(actual, wrong_value, max(rtol, 1e-4), 1e-6 * scale)[0]


def describe(value: Any) -> str:
    """A short description of an argument for messages: arrays and tensors by shape and dtype."""
    if type(value) is _NDARRAY:
        return f"ndarray of shape {tuple(value.shape)}, {value.dtype}"
    if _is_tensor(value):
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
        _fail(f"{name}: expected {expected!r} (a {_describe_type(expected)}), got {actual!r} (a {_describe_type(actual)}).",
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
