"""Chapter 1 answers: dot, cosine_similarity, similarity_matrix, softmax."""

from tests.bank import Answer, mutant

ASSIGNMENT = "01_similarity"

WRONG = [
    Answer("dot", "sum(a) * sum(b)", """
def dot(a, b):
    return float(np.sum(a) * np.sum(b))
""", message="sum(a) * sum(b)"),
    Answer("dot", "widens to int16 so the products fit, and sums in int16 too", """
def dot(a, b):
    return float(np.asarray(a).astype(np.int16) @ np.asarray(b).astype(np.int16)) if np.asarray(a).dtype.kind == "i" \
        else float(np.dot(a, b))
""", message="their sum overflows int16"),
    Answer("dot", "returns the elementwise product, not its sum", """
def dot(a, b):
    return a * b
"""),
    Answer("dot", "adds instead of multiplying", """
def dot(a, b):
    return float(np.sum(a + b))
""", message="adding instead of multiplying"),
    Answer("dot", "truncates to an int", """
def dot(a, b):
    return int(a @ b)
"""),
    Answer("cosine_similarity", "the textbook formula: tiny vectors (1e-200) underflow to a zero norm", """
def cosine_similarity(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not a.any() or not b.any():
        raise ValueError("zero vector")
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
""", message="underflow"),
    Answer("cosine_similarity", "divides by |a|^2", """
def cosine_similarity(a, b):
    if not np.any(a) or not np.any(b):
        raise ValueError("zero vector")
    return float(a @ b / np.linalg.norm(a) ** 2)
""", message="|a|^2"),
    Answer("cosine_similarity", "divides by |a| + |b|", """
def cosine_similarity(a, b):
    if not np.any(a) or not np.any(b):
        raise ValueError("zero vector")
    return float(a @ b / (np.linalg.norm(a) + np.linalg.norm(b)))
""", message="|a| + |b|"),
    Answer("cosine_similarity", "returns nan for a zero vector instead of raising", """
def cosine_similarity(a, b):
    with np.errstate(all="ignore"):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
""", message="should raise ValueError"),
    Answer("cosine_similarity", "checks only the first vector for zero", """
def cosine_similarity(a, b):
    if not np.any(a):
        raise ValueError("zero vector")
    with np.errstate(all="ignore"):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
"""),
    Answer("cosine_similarity", "returns the angle instead of its cosine", """
def cosine_similarity(a, b):
    if not np.any(a) or not np.any(b):
        raise ValueError("zero vector")
    return float(np.arccos(np.clip(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), -1, 1)))
""", message="arccos"),
    Answer("similarity_matrix", "K @ Q.T: the result is transposed", """
def similarity_matrix(Q, K):
    return K @ np.swapaxes(Q, -1, -2)
""", message="transposed"),
    Answer("similarity_matrix", "K.T reverses every axis of a batched K", """
def similarity_matrix(Q, K):
    return Q @ K.T
""", message="K.T reverses every axis"),
    Answer("similarity_matrix", "cosine similarities instead of dot products", """
def similarity_matrix(Q, K):
    Qn = Q / np.linalg.norm(Q, axis=-1, keepdims=True)
    Kn = K / np.linalg.norm(K, axis=-1, keepdims=True)
    return Qn @ np.swapaxes(Kn, -1, -2)
"""),
    Answer("similarity_matrix", "returns a nested list", """
def similarity_matrix(Q, K):
    return (Q @ np.swapaxes(K, -1, -2)).tolist()
"""),
    Answer("softmax", "no max subtraction: exp overflows for large scores", """
def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)
"""),
    Answer("softmax", "always normalises over axis 0", """
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)
""", message="wrong axis"),
    Answer("softmax", "normalises over the whole array", """
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum()
"""),
    Answer("softmax", "max subtraction gives nan on a fully masked row", """
def softmax(x, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
""", message="fully masked"),
    Answer("softmax", "forgets keepdims, so the subtraction broadcasts along the wrong axis", """
def softmax(x, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=axis))
        return e / e.sum(axis=axis)
"""),
    Answer("softmax", "subtracts the maximum of the whole array, not of each row", """
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    peak = np.max(x)
    if not np.isfinite(peak):
        peak = 0.0
    e = np.exp(x - peak)
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
""", message="each slice's own maximum"),
    Answer("softmax", "subtracts the maximum in place: the caller's scores are overwritten", """
def softmax(x, axis=-1):
    peak = x.max(axis=axis, keepdims=True)
    peak[~np.isfinite(peak)] = 0.0
    x -= peak
    e = np.exp(x)
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
""", message="must not change its argument"),
    Answer("softmax", "replaces nan by 1/n in fully masked rows", """
def softmax(x, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        out = e / e.sum(axis=axis, keepdims=True)
    n = x.shape[axis]
    return np.where(np.isnan(out), 1.0 / n, out)
"""),
]

RIGHT = [
    Answer("dot", "an explicit loop", """
def dot(a, b):
    total = 0.0
    for x, y in zip(a.tolist(), b.tolist()):
        total += x * y
    return float(total)
"""),
    Answer("cosine_similarity", "normalise first, then take the dot product", """
def cosine_similarity(a, b):
    a, b = a.astype(float), b.astype(float)
    if np.abs(a).max() == 0.0 or np.abs(b).max() == 0.0:
        raise ValueError("a zero vector has no direction")
    a, b = a / np.abs(a).max(), b / np.abs(b).max()
    na, nb = np.sqrt(np.sum(a * a)), np.sqrt(np.sum(b * b))
    if na == 0.0 or nb == 0.0:
        raise ValueError("a zero vector has no direction")
    return float(np.dot(a / na, b / nb))
"""),
    Answer("similarity_matrix", "einsum", """
def similarity_matrix(Q, K):
    return np.einsum("...id,...jd->...ij", Q, K)
"""),
    Answer("softmax", "in-place edits of the row maxima and sums, then one division", """
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    z = np.exp(x - m)
    s = np.sum(z, axis=axis, keepdims=True)
    s[s == 0] = 1.0
    return z / s
"""),
    Answer("softmax", "keeps a float input's dtype (float32 stays float32) and uses np.where", """
def softmax(x, axis=-1):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    e = np.exp(x - peak)
    total = e.sum(axis=axis, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)
"""),
]


def _mutant(cell: str, mistake: str, old: str, new: str, message: str = "") -> Answer:
    return mutant(ASSIGNMENT, cell, mistake, (old, new), message=message)


WRONG += [
    _mutant("dot", "multiplies int8 vectors in int8: 100 * 100 overflows",
            "np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)", "a * b", message="int8"),
    _mutant("cosine_similarity", "treats a tiny vector (entries of 1e-9) as zero",
            "if scale_a == 0 or scale_b == 0:", "if scale_a < 1e-8 or scale_b < 1e-8:", message="tiny vector"),
    Answer("cosine_similarity", "multiplies int8 vectors in int8", """
def cosine_similarity(a, b):
    if not np.any(a) or not np.any(b):
        raise ValueError("zero vector")
    return float(np.sum(a * b) / (np.sqrt(np.sum(a * a)) * np.sqrt(np.sum(b * b))))
""", message="int8"),
    _mutant("cosine_similarity", "a ValueError whose message does not say why",
            'raise ValueError("cosine similarity is undefined for a zero vector")', "raise ValueError()",
            message="contain 'zero'"),
    _mutant("cosine_similarity", "rounds the result to 4 decimals",
            "return float(np.sum(a * b) / (norm_a * norm_b))", "return round(float(np.sum(a * b) / (norm_a * norm_b)), 4)",
            message="Do not round"),
    Answer("softmax", "keeps integer dtypes: x - max overflows in int8", """
def softmax(x, axis=-1):
    peak = x.max(axis=axis, keepdims=True)
    if x.dtype.kind == "f":
        peak = np.where(np.isfinite(peak), peak, 0.0)
    weights = np.exp(x - peak)
    total = weights.sum(axis=axis, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
""", message="int8"),
    # The warning is raised in the student's kernel, where the test cell's warnings.catch_warnings does not reach
    # under trusted scoring: the cell loses its points for writing to stderr, and the feedback is that line.
    _mutant("softmax", "np.divide(where=...) without out=: right values, but a warning (scores 0 when graded)",
            "return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)",
            "return np.where(total > 0, np.divide(weights, total, where=total > 0), 0.0)",
            message="UserWarning: 'where' used without 'out'"),
]

RIGHT += [
    _mutant("dot", "np.dot after astype(float)",
            "np.sum(np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64))",
            "np.dot(a.astype(float), b.astype(float))"),
    _mutant("cosine_similarity", "np.dot of float copies, norms compared with 0.0",
            "return float(np.sum(a * b) / (norm_a * norm_b))", "return float(np.dot(a, b) / norm_a / norm_b)"),
]

# Issue 34: float64 is stated; a float32 conversion keeps too few digits for the derived float64 bound.
WRONG += [
    _mutant("dot", "converts to float32 instead of float64",
            "np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)",
            "np.asarray(a, dtype=np.float32) * np.asarray(b, dtype=np.float32)", message="float64"),
    _mutant("similarity_matrix", "computes the scores in float32", "return Q @ np.swapaxes(K, -1, -2)",
            "return np.float32(Q) @ np.swapaxes(np.float32(K), -1, -2)", message="Keep float64"),
]

# Issue 34 audit (classes 2, 3, 6): similarity_matrix with batch dimensions written in ways that break them.
WRONG += [
    Answer("similarity_matrix", "an einsum without '...': only 2-D inputs", """
def similarity_matrix(Q, K):
    return np.einsum("id,jd->ij", Q, K)
""", message="einsum"),
    Answer("similarity_matrix", "np.dot with swapped K: np.dot does not broadcast batch dimensions", """
def similarity_matrix(Q, K):
    return np.dot(Q, np.swapaxes(K, -1, -2))
""", message="np.dot"),
    Answer("similarity_matrix", "transposes K as a 3-D array: K.transpose(0, 2, 1)", """
def similarity_matrix(Q, K):
    return Q @ K.transpose(0, 2, 1) if K.ndim == 3 else Q @ K.T
""", message="K.T reverses every axis"),
]

RIGHT += [
    Answer("similarity_matrix", "an einsum over the leading axes", """
def similarity_matrix(Q, K):
    return np.einsum("...id,...jd->...ij", Q, K)
"""),
    Answer("similarity_matrix", "np.matmul with K's last two axes moved", """
def similarity_matrix(Q, K):
    return np.matmul(Q, np.moveaxis(K, -1, -2))
"""),
]

# Issue 34 audit: dot, cosine_similarity and softmax to 8 wrong / 3 right.
WRONG += [
    Answer("dot", "returns |a| |b|, the product of the norms", """
def dot(a, b):
    return float(np.linalg.norm(np.asarray(a, dtype=float)) * np.linalg.norm(np.asarray(b, dtype=float)))
"""),
]

RIGHT += [
    Answer("dot", "math.fsum of the products, exactly rounded", """
import math


def dot(a, b):
    return math.fsum(float(x) * float(y) for x, y in zip(a.tolist(), b.tolist()))
"""),
    Answer("cosine_similarity", "each vector divided by its infinity norm first", """
def cosine_similarity(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    top_a, top_b = np.linalg.norm(a, ord=np.inf), np.linalg.norm(b, ord=np.inf)
    if top_a == 0.0 or top_b == 0.0:
        raise ValueError("a zero vector has no direction")
    a, b = a / top_a, b / top_b
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
"""),
    Answer("softmax", "the maximum's -inf replaced in place, the sum's zeros replaced by 1", """
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m[np.isneginf(m)] = 0.0
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(s == 0.0, 1.0, s)
"""),
]
