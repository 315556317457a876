"""Words for what a measurement did, computed from the numbers, for a page to glue into its prose.

A book page never types "flat", "linear", "quadratic" or "faster" about something this machine
measured (tests/course/test_claims.py): it computes the word here and glues it (myst_nb.glue), so a build
on another machine says what that machine measured.

    >>> growth([256, 4096], [1.90, 4.29])
    'grew like n^0.29, far slower than linearly'
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def exponent(sizes: Sequence[float], values: Sequence[float]) -> float:
    """The least-squares slope of log(value) against log(size): a value that grows like n^k gives k."""
    xs = [math.log(size) for size in sizes]
    ys = [math.log(value) for value in values]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        raise ValueError(f"need at least two different sizes, got {list(sizes)}")
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


# (upper bound of the exponent, what a value growing like n^exponent did), in order.
_GROWTH = ((0.1, "stayed flat"), (0.6, "far slower than linearly"), (0.85, "somewhat slower than linearly"),
           (1.2, "about linearly"), (1.8, "between linearly and quadratically"), (2.2, "about quadratically"),
           (math.inf, "faster than quadratically"))


def growth(sizes: Sequence[float], values: Sequence[float], name: str = "n") -> str:
    """How values grew with sizes, in words that match the fitted exponent: 'stayed flat' only when
    the exponent is under 0.1, 'about quadratically' only between 1.8 and 2.2."""
    k = exponent(sizes, values)
    word = next(text for bound, text in _GROWTH if abs(k) < bound or bound == math.inf)
    if k < -0.1:
        return f"shrank like {name}^{k:.2f}"
    return word if word == "stayed flat" else f"grew like {name}^{k:.2f}, {word}"


def faster(seconds: float, other_seconds: float, tolerance: float = 0.05) -> str:
    """'faster', 'slower' or 'as fast' (within tolerance, relative) for a time against another."""
    if abs(seconds - other_seconds) <= tolerance * other_seconds:
        return "as fast"
    return "faster" if seconds < other_seconds else "slower"
