"""Chapter 2 answers: causal_mask, scaled_dot_product_attention."""

from tests.bank import Answer, mutant

ASSIGNMENT = "02_scaled_attention"

_SOFTMAX_ROWS = """
    peak = scores.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    e = np.exp(scores - peak)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ V, weights
"""

WRONG = [
    Answer("causal_mask", "upper-left alignment (np.tril without offset)", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))
""", message="upper-left alignment"),
    Answer("causal_mask", "inverted: True marks the future", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] > np.arange(n_q)[:, None] + (n_k - n_q)
""", message="inverted"),
    Answer("causal_mask", "off by one: a query cannot see itself", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] < np.arange(n_q)[:, None] + (n_k - n_q)
""", message="its own position"),
    Answer("causal_mask", "np.tril with the offset's sign flipped (k = n_q - n_k)", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)
"""),
    Answer("causal_mask", "returns 0/1 floats instead of booleans", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)
"""),
    Answer("causal_mask", "ignores n_k and always returns a square mask", """
def causal_mask(n_q, n_k=None):
    return np.tril(np.ones((n_q, n_q), dtype=bool))
"""),
    Answer("scaled_dot_product_attention", "no 1/sqrt(d_k) scaling", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
""" + _SOFTMAX_ROWS, message="no 1/sqrt(d_k)"),
    Answer("scaled_dot_product_attention", "divides by d_k instead of sqrt(d_k)", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
""" + _SOFTMAX_ROWS, message="dividing by d_k instead of sqrt(d_k)"),
    Answer("scaled_dot_product_attention", "subtracts the maximum of all scores, not of each row", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    peak = scores.max()
    if not np.isfinite(peak):
        peak = 0.0
    e = np.exp(scores - peak)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ V, weights
""", message="very large scores"),
    Answer("scaled_dot_product_attention", "scales by sqrt(d_v)", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(V.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
""" + _SOFTMAX_ROWS, message="sqrt(d_v)"),
    Answer("scaled_dot_product_attention", "softmax over the queries (axis -2)", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e30)
    e = np.exp(scores - scores.max(axis=-2, keepdims=True))
    weights = e / e.sum(axis=-2, keepdims=True)
    return weights @ V, weights
""", message="wrong axis"),
    Answer("scaled_dot_product_attention", "inverted mask", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
""" + _SOFTMAX_ROWS),
    Answer("scaled_dot_product_attention", "mask ignored", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
""" + _SOFTMAX_ROWS),
    Answer("scaled_dot_product_attention", "masks with -1e9: fully masked rows get uniform weights", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
""" + _SOFTMAX_ROWS, message="uniform weights"),
    Answer("scaled_dot_product_attention", "multiplies scores by the mask instead of setting -inf", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores * mask
""" + _SOFTMAX_ROWS),
    Answer("scaled_dot_product_attention", "fully masked rows come out as nan", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    with np.errstate(all="ignore"):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V, weights
"""),
    Answer("scaled_dot_product_attention", "no max subtraction: overflow on large scores", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    with np.errstate(all="ignore"):
        e = np.exp(scores)
        total = e.sum(axis=-1, keepdims=True)
        weights = np.where(total > 0, e / total, 0.0)
    return weights @ V, weights
"""),
    Answer("scaled_dot_product_attention", "returns (weights, output)", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    peak = scores.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    e = np.exp(scores - peak)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights, weights @ V
"""),
    Answer("scaled_dot_product_attention", "K.T instead of swapping the last two axes", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
""" + _SOFTMAX_ROWS, message="K.T reverses"),
]

RIGHT = [
    Answer("causal_mask", "np.tril with the lower-right offset", """
def causal_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)
"""),
    Answer("scaled_dot_product_attention", "einsum and a -inf-safe softmax", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(np.broadcast_to(mask, scores.shape), scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    row_max[np.isneginf(row_max)] = 0.0
    z = np.exp(scores - row_max)
    s = z.sum(axis=-1, keepdims=True)
    weights = z / np.where(s == 0, 1.0, s)
    return np.einsum("...qk,...kv->...qv", weights, V), weights
"""),
    Answer("scaled_dot_product_attention", "an additive 0/-inf mask and a loop-free nan guard", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(K.shape[-1])
    if mask is not None:
        scores = scores + np.where(mask, 0.0, -np.inf)
    peak = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(peak), 0.0, peak))
    total = np.sum(e, axis=-1, keepdims=True)
    weights = np.where(total > 0, e / np.maximum(total, np.finfo(e.dtype).tiny), 0.0)
    return weights @ V, weights
"""),
]


def _mutant(cell: str, mistake: str, old: str, new: str, message: str = "") -> Answer:
    return mutant(ASSIGNMENT, cell, mistake, (old, new), message=message)


_SDPA = "scaled_dot_product_attention"
_RENORMALISE = """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    if mask is not None:
        weights = weights * mask
        total = weights.sum(axis=-1, keepdims=True)
        weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
    return weights @ V, weights
"""

WRONG += [
    Answer(_SDPA, "softmax over all keys, then masked weights zeroed and renormalised", _RENORMALISE,
           message="the softmax runs over all keys"),
    _mutant(_SDPA, "subtracts a row maximum that includes the masked keys",
            "    peak = scores.max(axis=-1, keepdims=True)\n",
            "    peak = (Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])).max(axis=-1, keepdims=True)\n",
            message="underflow to 0"),
    _mutant(_SDPA, "computes in float32 whatever the inputs' dtype (float32 weights for float64 inputs)",
            "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n",
            "    Q, K, V = (np.asarray(a, dtype=np.float32) for a in (Q, K, V))\n"
            "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n", message="for float64 inputs"),
    _mutant(_SDPA, "scales Q in place: the caller's Q changes",
            "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n",
            "    Q /= np.sqrt(Q.shape[-1])\n    scores = Q @ np.swapaxes(K, -1, -2)\n", message="Leave the inputs unchanged"),
    _mutant(_SDPA, "scales by sqrt(Q.shape[1]), which is d_k only for 2-D inputs",
            "np.sqrt(Q.shape[-1])", "np.sqrt(Q.shape[1])"),
    # The warning is raised in the student's kernel, where the test cell's warnings.catch_warnings does not reach
    # under trusted scoring: the cell loses its points for writing to stderr, and the feedback is that line.
    _mutant(_SDPA, "np.log(mask) added to the scores: right values, but a divide-by-zero warning",
            "        scores = np.where(mask, scores, -np.inf)\n",
            "        scores = scores + np.log(mask)\n",
            message="RuntimeWarning: divide by zero encountered in log"),
    _mutant(_SDPA, "np.divide(where=) without out=: right values, but a warning",
            "weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)",
            "weights = np.where(total > 0, np.divide(weights, total, where=total > 0), 0.0)",
            message="UserWarning: 'where' used without 'out'"),
]

RIGHT += [
    Answer(_SDPA, "softmax over all keys with the masked scores at -inf, then renormalised: right", """
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    finite = np.where(np.isfinite(scores), scores, -np.inf)
    peak = np.max(finite, axis=-1, keepdims=True)
    e = np.exp(finite - np.where(np.isinf(peak), 0.0, peak))
    total = np.sum(e, axis=-1, keepdims=True)
    weights = e / np.where(total == 0, 1.0, total)
    return weights @ V, weights
"""),
    _mutant(_SDPA, "scales a copy of Q in place",
            "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n",
            "    Q = Q.copy()\n    Q /= np.sqrt(Q.shape[-1])\n    scores = Q @ np.swapaxes(K, -1, -2)\n"),
]

# Issue 34 audit: causal_mask off by one the other way, n_q > n_k clamped, a list instead of an array.
WRONG += [
    Answer("causal_mask", "off by one: each query also sees the next key", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q) + 1
""", message="one key from the future"),
    Answer("causal_mask", "n_q > n_k: every query sees at least key 0", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    last = np.maximum(np.arange(n_q) + (n_k - n_q), 0)
    return np.arange(n_k)[None, :] <= last[:, None]
""", message="see no key"),
    Answer("causal_mask", "returns a nested list of booleans", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return [[j <= n_k - n_q + i for j in range(n_k)] for i in range(n_q)]
""", message="should be a numpy.ndarray"),
]

RIGHT += [
    Answer("causal_mask", "the distance i - j against n_q - n_k, with np.subtract.outer", """
def causal_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.subtract.outer(np.arange(n_q), np.arange(n_k)) >= n_q - n_k
"""),
    Answer("causal_mask", "the complement of the strict future, with np.triu", """
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return ~np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
"""),
]
