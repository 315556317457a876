"""Chapter 7 answers: merge_partials, tiled_attention."""

from tests.bank import Answer, mutant

ASSIGNMENT = "07_flash_attention"

_MERGE_SIGNATURE = "def merge_partials(m1, l1, o1, m2, l2, o2):\n"

# A correct tiled_attention written without merge_partials, with {tile} and {finish} left open for
# wrong answers that change one step.
_TILED = """
def tiled_attention(Q, K, V, block_q=64, block_k=64, causal=False):
    n_q, n_k = Q.shape[-2], K.shape[-2]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    shift = n_k - n_q
    outs, lses = [], []
    for q0 in range(0, n_q, block_q):
        q1 = min(q0 + block_q, n_q)
        q = Q[..., q0:q1, :] / np.sqrt(Q.shape[-1])
        m = np.full(batch + (q1 - q0,), -np.inf)
        l = np.zeros(batch + (q1 - q0,))
        o = np.zeros(batch + (q1 - q0, V.shape[-1]))
        for k0 in range(0, n_k, block_k):
            k1 = min(k0 + block_k, n_k)
            s = q @ np.swapaxes(K[..., k0:k1, :], -1, -2)
            if causal:
                {mask}
            new = np.maximum(m, s.max(axis=-1))
            safe = np.where(np.isneginf(new), 0.0, new)
            {update}
            m = new
        {finish}
    return np.concatenate(outs, axis=-2), np.concatenate(lses, axis=-1)
"""
_MASK = "s = np.where(np.arange(k0, k1)[None, :] <= np.arange(q0, q1)[:, None] + shift, s, -np.inf)"
_UPDATE = """alpha = np.exp(m - safe)
            p = np.exp(s - safe[..., None])
            l = alpha * l + p.sum(axis=-1)
            o = alpha[..., None] * o + p @ V[..., k0:k1, :]"""
_FINISH = """seen = l > 0
        outs.append(np.divide(o, l[..., None], out=np.zeros_like(o), where=seen[..., None]))
        lses.append(np.where(seen, m + np.log(np.where(seen, l, 1.0)), -np.inf))"""


def _tiled(mask: str = _MASK, update: str = _UPDATE, finish: str = _FINISH) -> str:
    return _TILED.format(mask=mask, update=update, finish=finish)


WRONG = [
    Answer("merge_partials", "no rescaling: adds l and o as they are", _MERGE_SIGNATURE + """
    return np.maximum(m1, m2), l1 + l2, o1 + o2
""", message="no rescaling"),
    Answer("merge_partials", "rescales o but not l", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)
    a1, a2 = np.exp(m1 - safe), np.exp(m2 - safe)
    return m, l1 + l2, a1[..., None] * o1 + a2[..., None] * o2
""", message="no rescaling: l1 + l2"),
    Answer("merge_partials", "rescales l but not o", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)
    a1, a2 = np.exp(m1 - safe), np.exp(m2 - safe)
    return m, a1 * l1 + a2 * l2, o1 + o2
""", message="no rescaling: o1 + o2"),
    Answer("merge_partials", "nan on empty states: exp(m1 - m) with m = -inf", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    a1, a2 = np.exp(m1 - m), np.exp(m2 - m)
    return m, a1 * l1 + a2 * l2, a1[..., None] * o1 + a2[..., None] * o2
""", message="exp(-inf - (-inf))"),
    Answer("merge_partials", "nan on empty states, warnings silenced", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    with np.errstate(invalid="ignore"):
        a1, a2 = np.exp(m1 - m), np.exp(m2 - m)
    return m, a1 * l1 + a2 * l2, a1[..., None] * o1 + a2[..., None] * o2
""", message="nan"),
    Answer("merge_partials", "rescaling factor upside down: exp(m - m_i)", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)
    a1 = np.exp(safe - np.where(np.isneginf(m1), safe, m1))
    a2 = np.exp(safe - np.where(np.isneginf(m2), safe, m2))
    return m, a1 * l1 + a2 * l2, a1[..., None] * o1 + a2[..., None] * o2
""", message="exp(m - m_i)"),
    Answer("merge_partials", "returns the normalised output o / l", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)
    a1, a2 = np.exp(m1 - safe), np.exp(m2 - safe)
    l = a1 * l1 + a2 * l2
    o = a1[..., None] * o1 + a2[..., None] * o2
    return m, l, np.divide(o, l[..., None], out=np.zeros_like(o), where=l[..., None] > 0)
""", message="normalised"),
    Answer("merge_partials", "rescales in place, changing the caller's arrays", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)
    a1, a2 = np.exp(m1 - safe), np.exp(m2 - safe)
    l1 *= a1
    l1 += a2 * l2
    o1 *= a1[..., None]
    o1 += a2[..., None] * o2
    return m, l1, o1
""", message="in place"),
    Answer("merge_partials", "exponentiates the maxima themselves: overflow on huge scores", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    with np.errstate(all="ignore"):
        w1, w2, w = np.exp(m1), np.exp(m2), np.exp(np.where(np.isneginf(m), 0.0, m))
        l = (w1 * l1 + w2 * l2) / w
        o = (w1[..., None] * o1 + w2[..., None] * o2) / w[..., None]
    return m, l, o
""", message="huge scores"),
    Answer("tiled_attention", "no rescale: the running l and o are not rescaled when the max grows", _tiled(
        update="""p = np.exp(s - safe[..., None])
            l = l + p.sum(axis=-1)
            o = o + p @ V[..., k0:k1, :]"""), message="are not rescaled when a later key block raises the max"),
    Answer("tiled_attention", "l not rescaled (o is)", _tiled(
        update="""alpha = np.exp(m - safe)
            p = np.exp(s - safe[..., None])
            l = l + p.sum(axis=-1)
            o = alpha[..., None] * o + p @ V[..., k0:k1, :]"""), message="the running l is not rescaled"),
    Answer("tiled_attention", "lse without the max: log(l) alone", _tiled(
        finish="""seen = l > 0
        outs.append(np.divide(o, l[..., None], out=np.zeros_like(o), where=seen[..., None]))
        lses.append(np.where(seen, np.log(np.where(seen, l, 1.0)), -np.inf))"""), message="lse without the max"),
    Answer("tiled_attention", "upper-left causal alignment", _tiled(
        mask="s = np.where(np.arange(k0, k1)[None, :] <= np.arange(q0, q1)[:, None], s, -np.inf)"),
        message="upper-left causal alignment"),
    Answer("tiled_attention", "no 1/sqrt(d) scaling", _tiled().replace(
        "q = Q[..., q0:q1, :] / np.sqrt(Q.shape[-1])", "q = Q[..., q0:q1, :]"), message="no 1/sqrt(d) scaling"),
    Answer("tiled_attention", "nan for a query that sees no key (divides by l = 0)", _tiled(
        finish="""with np.errstate(all="ignore"):
            outs.append(o / l[..., None])
            lses.append(m + np.log(l))"""), message="sees no key"),
    Answer("tiled_attention", "drops the last, shorter block when the block size does not divide n", _tiled().replace(
        "for k0 in range(0, n_k, block_k):", "for k0 in range(0, n_k - block_k + 1, block_k):"),
        message="the last, shorter key block is dropped"),
    Answer("tiled_attention", "materialises the whole score matrix (one pass, not tiled)", """
def tiled_attention(Q, K, V, block_q=64, block_k=64, causal=False):
    n_q, n_k = Q.shape[-2], K.shape[-2]
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if causal:
        s = np.where(np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + n_k - n_q, s, -np.inf)
    m = s.max(axis=-1)
    safe = np.where(np.isneginf(m), 0.0, m)
    p = np.exp(s - safe[..., None])
    l = p.sum(axis=-1)
    seen = l > 0
    out = np.divide(p @ V, l[..., None], out=np.zeros(p.shape[:-1] + (V.shape[-1],)), where=seen[..., None])
    return out, np.where(seen, safe + np.log(np.where(seen, l, 1.0)), -np.inf)
""", message="Never materialise more than one tile of scores"),
    Answer("tiled_attention", "query blocks against every key at once (no key tiles)", _tiled(
        ).replace("for k0 in range(0, n_k, block_k):", "for k0 in (0,):").replace(
        "k1 = min(k0 + block_k, n_k)", "k1 = n_k"), message="(allowed: 12 MiB)"),
    Answer("tiled_attention", "builds the whole (n_q, n_k) causal mask, then slices tiles from it", _tiled(
        mask="s = np.where(full[q0:q1, k0:k1], s, -np.inf)").replace(
        "    shift = n_k - n_q\n", "    shift = n_k - n_q\n    full = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + shift\n"),
        message="(allowed: 12 MiB)"),
    Answer("tiled_attention", "ignores block_q and block_k: always tiles of 64 x 64", _tiled().replace(
        "    n_q, n_k = Q.shape[-2], K.shape[-2]\n", "    n_q, n_k = Q.shape[-2], K.shape[-2]\n    block_q = block_k = 64\n"),
        message="seems to ignore block_q and block_k"),
]

RIGHT = [
    Answer("merge_partials", "merges through normalised outputs, then converts back to the unnormalised o",
           _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)
    w1, w2 = np.exp(m1 - safe) * l1, np.exp(m2 - safe) * l2   # each state's share of the total
    l = w1 + w2
    with np.errstate(invalid="ignore", divide="ignore"):
        n1 = np.where(l1[..., None] > 0, o1 / l1[..., None], 0.0)   # normalised partial outputs
        n2 = np.where(l2[..., None] > 0, o2 / l2[..., None], 0.0)
    return m, l, w1[..., None] * n1 + w2[..., None] * n2
"""),
    Answer("merge_partials", "one loop over the two states with np.subtract(where=)", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    l = np.zeros(np.shape(l1))
    o = np.zeros(np.broadcast_shapes(np.shape(o1), np.shape(o2)))
    for mi, li, oi in ((m1, l1, o1), (m2, l2, o2)):
        gap = np.subtract(mi, m, out=np.full(np.shape(m), -np.inf), where=np.isfinite(m))
        scale = np.exp(gap)
        l = l + scale * li
        o = o + scale[..., None] * oi
    return m, l, o
"""),
    Answer("tiled_attention", "keys-outer loop order, without merge_partials", """
def tiled_attention(Q, K, V, block_q=64, block_k=64, causal=False):
    n_q, n_k = Q.shape[-2], K.shape[-2]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    m = np.full(batch + (n_q,), -np.inf)
    l = np.zeros(batch + (n_q,))
    o = np.zeros(batch + (n_q, V.shape[-1]))
    for k0 in range(0, n_k, block_k):
        k1 = min(k0 + block_k, n_k)
        kt = np.swapaxes(K[..., k0:k1, :], -1, -2)
        for q0 in range(0, n_q, block_q):
            q1 = min(q0 + block_q, n_q)
            if causal and k0 > q1 - 1 + n_k - n_q:
                continue
            s = Q[..., q0:q1, :] @ kt / np.sqrt(Q.shape[-1])
            if causal:
                s = np.where(np.arange(k0, k1) <= np.arange(q0, q1)[:, None] + n_k - n_q, s, -np.inf)
            new = np.maximum(m[..., q0:q1], s.max(axis=-1))
            safe = np.where(np.isneginf(new), 0.0, new)
            alpha = np.exp(m[..., q0:q1] - safe)
            p = np.exp(s - safe[..., None])
            l[..., q0:q1] = alpha * l[..., q0:q1] + p.sum(axis=-1)
            o[..., q0:q1, :] = alpha[..., None] * o[..., q0:q1, :] + p @ V[..., k0:k1, :]
            m[..., q0:q1] = new
    seen = l > 0
    out = np.divide(o, l[..., None], out=np.zeros_like(o), where=seen[..., None])
    lse = np.full_like(l, -np.inf)
    np.add(m, np.log(l, out=np.zeros_like(l), where=seen), out=lse, where=seen)
    return out, lse
"""),
    Answer("tiled_attention", "a normalised running output, converted with the final l", _tiled(
        update="""alpha = np.exp(m - safe)
            p = np.exp(s - safe[..., None])
            l_new = alpha * l + p.sum(axis=-1)
            share = np.divide(alpha * l, l_new, out=np.zeros_like(l), where=l_new > 0)
            o = share[..., None] * o + np.divide(p @ V[..., k0:k1, :], l_new[..., None],
                                                 out=np.zeros_like(o), where=l_new[..., None] > 0)
            l = l_new""",
        finish="""seen = l > 0
        outs.append(o)   # already normalised
        lses.append(np.where(seen, m + np.log(np.where(seen, l, 1.0)), -np.inf))""")),
    Answer("tiled_attention", "query blocks collected in lists and concatenated, without merge_partials", _tiled()),
]

WRONG += [
    mutant(ASSIGNMENT, "tiled_attention", "np.log(l) on every row: right values, but a divide-by-zero warning",
           ("np.add(m, np.log(l, out=np.full_like(l, -np.inf), where=seen), out=lse[..., q0:q1], where=seen)",
            "lse[..., q0:q1] = np.where(seen, m + np.log(l), -np.inf)"), message="divide by zero encountered in log"),
]

WRONG += [
    mutant(ASSIGNMENT, "tiled_attention", "the tile's max taken before the causal mask: masked keys with huge scores "
           "underflow the visible ones", ("tile_max = tile.max(axis=-1)", "tile_max = (q_tile @ np.swapaxes(K[..., k0:k1, :], -1, -2)).max(axis=-1)"),
           message="max taken before the causal mask"),
]

# Issue 34: numbers extreme enough, every stated rule, the message that names the mistake.
WRONG += [
    Answer("merge_partials", "the rescaling factor without a trailing axis for o: alpha * o1", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    safe = np.where(np.isneginf(m), 0.0, m)
    a1, a2 = np.exp(m1 - safe), np.exp(m2 - safe)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2
""", message="could not be broadcast"),
    mutant(ASSIGNMENT, "merge_partials", "computes the merge in float32 (float64 states lose digits)",
           ("alpha1, alpha2 = np.exp(m1 - finite_m), np.exp(m2 - finite_m)",
            "alpha1, alpha2 = np.exp(m1 - finite_m).astype(np.float32), np.exp(m2 - finite_m).astype(np.float32)"),
           ("l = alpha1 * l1 + alpha2 * l2", "l = alpha1 * l1.astype(np.float32) + alpha2 * l2.astype(np.float32)"),
           ("o = alpha1[..., None] * o1 + alpha2[..., None] * o2",
            "o = alpha1[..., None] * o1.astype(np.float32) + alpha2[..., None] * o2.astype(np.float32)"),
           message="for float64 states"),
    Answer("tiled_attention", "no max shift at all: exp of the raw scores overflows", _tiled(
        update="""p = np.exp(s)
            l = l + p.sum(axis=-1)
            o = o + p @ V[..., k0:k1, :]""",
        finish="""seen = l > 0
        outs.append(np.divide(o, l[..., None], out=np.zeros_like(o), where=seen[..., None]))
        lses.append(np.log(l, out=np.full_like(l, -np.inf), where=seen))"""), message="exp overflowed"),
    mutant(ASSIGNMENT, "tiled_attention", "a tile row that is fully masked gives exp(-inf - (-inf)) = nan",
           ("p = np.exp(tile - np.where(np.isneginf(tile_max), 0.0, tile_max)[..., None])",
            "p = np.exp(tile - tile_max[..., None])"), message="A fully masked tile row"),
    mutant(ASSIGNMENT, "tiled_attention", "keeps the running state in float32 for float64 inputs",
           ("dtype = np.result_type(Q, K, V, np.float32)", "dtype = np.float32"), message="for float64 inputs"),
    mutant(ASSIGNMENT, "tiled_attention", "causal skip decided by the block's first query: later queries lose keys",
           ("last_key = min(n_k, q1 + shift) if causal else n_k", "last_key = min(n_k, q0 + 1 + shift) if causal else n_k"),
           message="key blocks skipped too early"),
    mutant(ASSIGNMENT, "tiled_attention", "lse 0 for a query that sees no key",
           ("lse = np.full(batch + (n_q,), -np.inf, dtype=dtype)", "lse = np.zeros(batch + (n_q,), dtype=dtype)"),
           message="must be -inf"),
]

RIGHT += [
    Answer("merge_partials", "nan from two empty states replaced under np.errstate", _MERGE_SIGNATURE + """
    m = np.maximum(m1, m2)
    with np.errstate(invalid="ignore"):
        a1 = np.where(np.isneginf(m1), 0.0, np.exp(m1 - m))
        a2 = np.where(np.isneginf(m2), 0.0, np.exp(m2 - m))
    return m, a1 * l1 + a2 * l2, a1[..., None] * o1 + a2[..., None] * o2
"""),
    mutant(ASSIGNMENT, "tiled_attention", "the lse of seen rows written with np.where and a stand-in l of 1",
           ("np.add(m, np.log(l, out=np.full_like(l, -np.inf), where=seen), out=lse[..., q0:q1], where=seen)",
            "lse[..., q0:q1] = np.where(seen, m, -np.inf) + np.log(np.where(seen, l, 1.0))")),
]

WRONG += [
    mutant(ASSIGNMENT, "tiled_attention", "scales the caller's Q in place, one query tile at a time",
           ("q_tile = Q[..., q0:q1, :] / np.sqrt(Q.shape[-1])",
            "Q[..., q0:q1, :] /= np.sqrt(Q.shape[-1])\n        q_tile = Q[..., q0:q1, :]"), message="in place"),
]

WRONG += [
    Answer("tiled_attention", "query blocks against every key at once, the scores in float32",
           _tiled().replace("for k0 in range(0, n_k, block_k):", "for k0 in (0,):").replace(
               "k1 = min(k0 + block_k, n_k)", "k1 = n_k").replace(
               "q = Q[..., q0:q1, :] / np.sqrt(Q.shape[-1])",
               "q = (Q[..., q0:q1, :] / np.sqrt(Q.shape[-1])).astype(np.float32)"),
           message="float32's rounding"),
]
