"""`autograder.harness.check_values.matches`: where either side holds floats, the pairs are compared in one pass of
numpy (`_differing`); its verdict and its sentence must be those of comparing each pair in Python (`_close`), on
the values that make float comparison hard: NaN, infinities of both signs, overflow, subnormals, ints beyond
2**53 beside floats, float32 and bfloat16 tensors, and mismatches whose largest gap ties or is NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from autograder.harness.check_values import FEW, _close, matches, read

EDGES = [0.0, -0.0, 1.0, -1.0, 1e-12, 5e-324, 1e308, -1e308, math.inf, -math.inf, math.nan, 2.0 ** 53 + 1, 1.0 + 1e-9]


def _one_by_one(actual, expected, rtol: float, atol: float) -> tuple[bool, str]:
    """`matches` as it was, every pair compared in Python: the reference."""
    shape, flat_a, _ = read(actual)
    flat_e = read(expected)[1]
    worst, where = 0.0, None
    for index, (a, e) in enumerate(zip(flat_a, flat_e)):
        if not _close(a, e, rtol, atol):
            gap = math.inf if (math.isnan(a) or math.isinf(a) or math.isinf(e)) else abs(a - e)
            if where is None or gap > worst:
                worst, where = gap, index
    if where is None:
        return True, ""
    position = tuple(int(i) for i in np.unravel_index(where, shape)) if shape else ()
    at = f" at index {position}" if position else ""
    return False, f"the largest difference is {worst:.3g}{at} (expected {flat_e[where]!r}, got {flat_a[where]!r})"


def _pairs():
    rng = np.random.default_rng(7)
    edges = np.array(EDGES)
    every = np.array(np.meshgrid(edges, edges)).reshape(2, -1)  # each edge value against each
    yield every[0], every[1]
    for a, e in every.T:  # and alone among equal values, so that no larger gap elsewhere hides a pair's verdict
        yield np.concatenate([[a], np.ones(FEW)]), np.concatenate([[e], np.ones(FEW)])
        yield np.array([a]), np.array([e])  # and as few values as are compared one by one
    for _ in range(40):
        e = rng.normal(size=(8, 9)) * 10.0 ** rng.integers(-8, 8)
        a = e + rng.normal(size=e.shape) * 10.0 ** rng.integers(-12, 0) * rng.integers(0, 2, size=e.shape)
        a.flat[rng.integers(0, a.size, 3)] = rng.choice(edges, 3)
        yield a, e
    e = np.arange(12.0).reshape(3, 4)
    yield e + np.array([0, 1, 0, 1] * 3).reshape(3, 4), e  # mismatches of equal gaps: the first is named
    yield np.full(5, math.nan), np.arange(5.0)  # every gap NaN
    yield np.arange(5.0), np.array([0, 1, math.nan, 3, 4.0])  # the expected value NaN
    ints = np.array([2 ** 53 + 1, -(2 ** 62), 3, 0], dtype=np.int64)
    yield ints, ints.astype(np.float64)  # ints beside floats: float64 arithmetic in both
    yield ints.astype(np.float64), ints
    yield np.float32(0.1), 0.1  # a float32 scalar against a Python float
    yield 3, 3.0000001
    yield 1e308, -1e308  # the gap overflows


@pytest.mark.parametrize("rtol, atol", [(1e-5, 1e-8), (0.0, 0.0), (1e-2, 0.0), (0.0, 1e-3)])
def test_numpys_pass_says_what_comparing_each_pair_in_python_says(rtol: float, atol: float) -> None:
    for actual, expected in _pairs():
        assert matches(actual, expected, rtol, atol) == _one_by_one(actual, expected, rtol, atol), (actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_tensors_of_every_float_dtype_compare_as_in_python(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    expected = torch.randn(4, 5, 6).to(dtype)
    for actual in (expected.clone(), expected + 1e-3, expected * (1 + 1e-6), torch.where(expected > 1, math.nan, expected)):
        actual = actual.to(dtype)
        for rtol, atol in ((1e-5, 1e-8), (1e-2, 1e-3)):
            assert matches(actual, expected, rtol, atol) == _one_by_one(actual, expected, rtol, atol)


def test_integers_alone_are_compared_exactly() -> None:
    # 2**62 + 1 and 2**62 are one float64 apart from nothing: compared as floats they would be equal.
    big = np.array([2 ** 62 + 1], dtype=np.int64)
    ok, said = matches(big, np.array([2 ** 62], dtype=np.int64), 0.0, 0.0)
    assert not ok and "expected 4611686018427387904, got 4611686018427387905" in said, said


@pytest.mark.parametrize("shape", [(), (1,), (3,), (0,), (2, 0), (0, 2), (2, 3), (2, 1, 4), (2, 4, 16, 64)])
def test_an_arrays_values_are_read_in_order_whatever_its_dimensions(shape: tuple[int, ...]) -> None:
    values = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    for value in (values, torch.from_numpy(values.copy()), values.astype(np.int64)):
        got_shape, flat, _ = read(value)
        assert got_shape == shape and flat == values.reshape(-1).tolist(), (type(value), shape, flat[:8])


def test_numpy_functions_replaced_after_import_change_no_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    # The checks also run in a student's own kernel (the visible tests), where code may replace numpy's functions:
    # the pass over many floats calls those captured when the checks were imported (`COMPARING`).
    expected = np.arange(FEW * 2, dtype=np.float64)
    wrong = expected + 1.0
    for name in ("isnan", "isinf"):
        monkeypatch.setattr(np, name, lambda x: np.ones(np.shape(x), dtype=bool))
    monkeypatch.setattr(np, "where", lambda condition, *_: np.ones(np.shape(condition), dtype=bool))
    monkeypatch.setattr(np, "flatnonzero", lambda x: np.array([], dtype=np.int64))
    ok, said = matches(wrong, expected, 1e-5, 1e-8)
    assert not ok and "the largest difference is 1" in said, said
