"""How `autograder.checks` reads a value without trusting it, and compares two values.

A value's shape and dtype are read before any of its values, and its values with the C-level ``tolist`` of
numpy's and torch's own types (immutable results, compared in plain Python, or for many floats in one pass of
numpy over new arrays of them, `_differing`), at most `MAX_VALUES` of one array: what one comparison costs is
bounded by the expected value, never by what the student sent. The library functions a student might patch are
captured when this module is first imported (`GUARDED_NUMPY`, `GUARDED_NUMPY_TESTING`, and `COMPARING`, what
`_differing` calls) or when torch is first seen (`torch_refs`), each a read-only record, so that
`autograder.checks.verify_untampered` can tell a replaced one of the first two and a replaced one of `COMPARING`
changes no verdict.

Runs in the worker (test cells under trusted scoring) and in a student's own kernel (the visible tests).
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any

import numpy as np

NDARRAY = np.ndarray
ARRAY_TOLIST = np.ndarray.tolist
GUARDED_NUMPY = MappingProxyType({name: getattr(np, name) for name in
                                  ("allclose", "isclose", "array_equal", "asarray", "array", "all", "any", "abs")})
GUARDED_NUMPY_TESTING = MappingProxyType({name: getattr(np.testing, name)
                                          for name in ("assert_allclose", "assert_array_equal")})
# The most values one check reads out of one array or tensor (what one check may cost): a larger value fails.
MAX_VALUES = 1 << 22
FEW = 64  # values fewer than this are compared one by one in Python, quicker than a pass of numpy
COMPARING = MappingProxyType({name: getattr(np, name) for name in ("isnan", "isinf", "where", "abs", "flatnonzero",
                                                                   "errstate")})


@dataclass(frozen=True)
class TorchRefs:
    """torch's types and comparison functions as they were when first captured."""

    module: ModuleType
    tensor_base: type
    tolist: Callable[..., Any]
    guarded: Mapping[str, Callable[..., Any]]
    testing_close: Callable[..., Any]


@functools.cache
def torch_refs() -> TorchRefs:
    """References to torch's types and comparison functions, captured once (this imports torch)."""
    import torch

    return TorchRefs(module=torch, tensor_base=torch._C.TensorBase, tolist=torch._C.TensorBase.tolist,
                     guarded=MappingProxyType({name: getattr(torch, name) for name in ("allclose", "isclose", "equal")}),
                     testing_close=torch.testing.assert_close)


def torch_seen() -> bool:
    """Whether torch is imported in this process (the checks never import it for a value that cannot be a tensor)."""
    return "torch" in sys.modules


if torch_seen():
    torch_refs()


def describe_type(value: Any) -> str:
    """The name of a value's class for a message (a remote handle names the student's class)."""
    kind = getattr(value, "__class__", type(value))
    if not isinstance(kind, type):
        kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (a subclass included)."""
    return torch_seen() and isinstance(value, torch_refs().tensor_base)


def _flat(values: Any, depth: int) -> list:
    """The values of ``tolist``'s nested lists, ``depth`` deep (the array's number of dimensions), in order."""
    if depth == 0:
        return [values]
    for _ in range(depth - 1):
        values = [x for row in values for x in row]
    return values


def _kind(dtype: str) -> str:
    """'bool' or 'number': values of different kinds are never compared."""
    return "bool" if dtype == "bool" else "number"


def meta(value: Any) -> tuple[tuple[int, ...], str]:
    """Shape and dtype name of an ndarray, Tensor or Python scalar, without reading its values."""
    if type(value) is NDARRAY:
        return tuple(value.shape), str(value.dtype)
    if is_tensor(value):
        return tuple(value.shape), str(value.dtype).replace("torch.", "")
    if type(value) in (float, int, bool):
        return (), type(value).__name__
    if np.isscalar(value) and isinstance(value, np.generic):
        return (), str(value.dtype)
    raise TypeError(f"cannot read values from {describe_type(value)}")


def read(value: Any) -> tuple[tuple[int, ...], list, str]:
    """Shape, flat Python values and dtype name of an ndarray, Tensor or Python scalar (at most `MAX_VALUES`)."""
    shape, dtype = meta(value)
    if math.prod(shape) > MAX_VALUES:
        raise TypeError(f"cannot read the {math.prod(shape)} values of an array of shape {shape}: more than {MAX_VALUES}")
    if type(value) is NDARRAY:
        return shape, _flat(ARRAY_TOLIST(value), len(shape)), dtype
    if is_tensor(value):
        return shape, _flat(torch_refs().tolist(value.detach().cpu()), len(shape)), dtype
    if type(value) in (float, int, bool):
        return shape, [value], dtype
    return shape, [value.item()], dtype


def format_value(value: Any) -> str:
    """A value as a message shows it: its values when few, else its shape."""
    if math.prod(meta(value)[0]) > 60:
        return f"an array of shape {meta(value)[0]}"
    shape, flat, _ = read(value)
    if not shape:
        return repr(flat[0])
    return np.array2string(np.array(flat).reshape(shape), precision=4, suppress_small=True, separator=", ")


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b and type(a) is type(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


def _differing(flat_a: list, flat_e: list, rtol: float, atol: float, floats: bool) -> Iterable[int]:
    """The indices where `_close` may say the values differ: every index, unless either side holds floats (and
    there are `FEW` pairs or more), where it says so of each pair as float64 arithmetic does (Python's on a float
    and an int is float64's too), in one pass of numpy over new arrays of those Python values (8192 values of a
    tensor: 4.6 ms one by one, 0.8 ms so). Integers alone are compared in Python, exactly."""
    if not floats or len(flat_e) < FEW:
        return range(len(flat_e))
    isnan, isinf, where, magnitude = (COMPARING[name] for name in ("isnan", "isinf", "where", "abs"))
    a, e = GUARDED_NUMPY["array"](flat_a, dtype=np.float64), GUARDED_NUMPY["array"](flat_e, dtype=np.float64)
    with COMPARING["errstate"](invalid="ignore", over="ignore"):
        nan_a, nan_e = isnan(a), isnan(e)
        special = nan_a | nan_e | isinf(a) | isinf(e)  # `_close`: both NaN, or equal
        close = where(special, (nan_a & nan_e) | (a == e), magnitude(a - e) <= atol + rtol * magnitude(e))
    return COMPARING["flatnonzero"](~close).tolist()


def matches(actual: Any, expected: Any, rtol: float, atol: float) -> tuple[bool, str]:
    """Whether two values agree; if not, a sentence saying where they differ. Shapes and dtypes are compared
    before any value is read, so a value's cost is bounded by the expected value's size."""
    try:
        shape_a, dtype_a = meta(actual)
    except TypeError:
        return False, f"it is a {describe_type(actual)}"
    shape_e, dtype_e = meta(expected)
    if shape_a != shape_e:
        return False, f"its shape is {shape_a} instead of {shape_e}"
    if _kind(dtype_a) != _kind(dtype_e):
        return False, f"its dtype is {dtype_a} instead of {dtype_e}"
    try:
        flat_a, flat_e = read(actual)[1], read(expected)[1]
    except TypeError as error:
        return False, str(error)
    worst, where = 0.0, None
    for index in _differing(flat_a, flat_e, rtol, atol, "float" in dtype_a or "float" in dtype_e):
        a, e = flat_a[index], flat_e[index]
        if not _close(a, e, rtol, atol):
            gap = math.inf if (math.isnan(a) or math.isinf(a) or math.isinf(e)) else abs(a - e)
            if where is None or gap > worst:
                worst, where = gap, index
    if where is None:
        return True, ""
    position = tuple(int(i) for i in np.unravel_index(where, shape_e)) if shape_e else ()
    at = f" at index {position}" if position else ""
    return False, f"the largest difference is {worst:.3g}{at} (expected {flat_e[where]!r}, got {flat_a[where]!r})"


def _scale(value: Any) -> float:
    """The largest finite magnitude among the values (0.0 if none)."""
    finite = [abs(x) for x in read(value)[1] if not isinstance(x, bool) and math.isfinite(x)]
    return max(finite, default=0.0)


def is_mistake(actual: Any, expected: Any, wrong_value: Any, rtol: float, atol: float) -> bool:
    """Whether ``actual`` is what a mistake gives: close to ``wrong_value`` relative to the values' own
    scale (so that values near 1e-12 are told apart), while ``wrong_value`` itself differs from the
    expected value (a mistake that changes nothing in this case is never named)."""
    if matches(wrong_value, expected, rtol, atol)[0]:
        return False
    scale = max(_scale(wrong_value), _scale(expected))
    return matches(actual, wrong_value, max(rtol, 1e-4), 1e-6 * scale)[0]
