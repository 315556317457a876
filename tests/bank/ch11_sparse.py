"""Chapter 11 answers: attention_with_sinks, SinkKVCache, block_mask, block_sparse_attention, index_scores,
topk_sparse_attention.

Most wrong answers are one-line mutations of the reference (`mutant` checks that the line it changes is there exactly
once), so each differs from a right answer by exactly the mistake it names; the right answers are written apart.
"""

from tests.bank import Answer, mutant

ASSIGNMENT = "11_sparse"


def _wrong(cell: str, mistake: str, *edits: tuple[str, str], message: str) -> Answer:
    return mutant(ASSIGNMENT, cell, mistake, *edits, message=message)


_SINK_CAT = "torch.cat([scores, sink], dim=-1)"
_SINK_READ = '''        k_vis = torch.cat([self.sink_k[:, :, sinks], self.ring_k[:, :, recent % w], k], dim=2)  # (B, H, n_vis, Dh)
        v_vis = torch.cat([self.sink_v[:, :, sinks], self.ring_v[:, :, recent % w], v], dim=2)
'''
_GROWING_SINK_CACHE = '''
class SinkKVCache:
    def __init__(self, batch_size, num_heads, head_dim, num_sink, window, dtype=torch.float32):
        self.k = torch.zeros(batch_size, num_heads, 0, head_dim, dtype=dtype)
        self.v = torch.zeros(batch_size, num_heads, 0, head_dim, dtype=dtype)
        self.num_sink, self.window = num_sink, window

    @property
    def seq_len(self):
        return self.k.shape[2]

    def reset(self):
        self.k, self.v = self.k[:, :, :0], self.v[:, :, :0]

    def update(self, k, v):
        s = self.seq_len
        self.k, self.v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        first = max(self.num_sink, s - self.window + 1)
        positions = torch.cat([torch.arange(min(s, self.num_sink)), torch.arange(first, max(first, s)),
                               torch.arange(s, s + k.shape[2])])
        return self.k[:, :, positions], self.v[:, :, positions], positions
'''
_ROW = "        allowed = torch.as_tensor(mask_mod(rows, keys)).to(torch.bool).expand(rows.shape[0], n_k)  # (rows, n_k)\n"
_TILE_LOOP = "        for c in torch.nonzero(tiles[r]).flatten().tolist():\n"
_PARTIAL = "            if tiles[r, c] == 1:\n"
_CAUSAL_HIDDEN = ("        hidden = torch.arange(n_k)[None, :] > torch.arange(n_q)[:, None] + (n_k - n_q)  "
                  "# (n_q, n_k)\n")
_TOPK = "    best, index = scores.topk(min(top_k, k.shape[-2]), dim=-1)  # (B, n_q, kk)\n"

# Breaks the chapter's rule `fused_attention` (`tests/sandbox/test_rules.py` grades it through the real CLI, where
# SDPA raises): the bank's stand-in kernel keeps SDPA, so here the hidden tests' bit-for-bit comparison with their
# oracle catches it.
SDPA_TOPK = '''
def topk_sparse_attention(q, k, v, scores, top_k):
    kk = min(top_k, scores.shape[-1])
    chosen = torch.zeros(scores.shape, dtype=torch.bool).scatter(-1, scores.topk(kk, dim=-1).indices, True)
    allowed = (chosen & torch.isfinite(scores))[:, None]  # (B, 1, n_q, n_k)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return torch.where(allowed.any(-1, keepdim=True), out, torch.zeros(()))
'''

WRONG = [
    # attention_with_sinks
    _wrong("attention_with_sinks", "no sink: softmax over the keys alone",
           ("    weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]",
            "    weights = torch.softmax(scores, dim=-1)"),
           message="no sink at all"),
    _wrong("attention_with_sinks", "the sink column put first, the last key dropped",
           (_SINK_CAT, "torch.cat([sink, scores], dim=-1)"), message="the sink column put first"),
    _wrong("attention_with_sinks", "no 1/sqrt(D) scale", (" / math.sqrt(q.shape[-1])", ""),
           message="no 1/sqrt(D) scale"),
    _wrong("attention_with_sinks", "the sinks of the wrong heads", ("sinks.to(scores.dtype)", "sinks.flip(0).to(scores.dtype)"),
           message="the sinks of the wrong heads"),
    _wrong("attention_with_sinks", "mask inverted", ("scores.masked_fill(~mask,", "scores.masked_fill(mask,"),
           message="the mask inverted"),
    _wrong("attention_with_sinks", "mask ignored",
           ('        scores = scores.masked_fill(~mask, float("-inf"))', "        pass"), message="the mask ignored"),
    _wrong("attention_with_sinks", "masked scores set to 0 instead of -inf",
           ('masked_fill(~mask, float("-inf"))', "masked_fill(~mask, 0.0)"), message="masked scores set to 0"),
    _wrong("attention_with_sinks", "the sink's weight put back: the kept weights renormalised",
           ("[..., :-1]  # sink's weight dropped",
            "[..., :-1]\n    weights = weights / weights.sum(-1, keepdim=True)"), message="no sink at all"),
    Answer("attention_with_sinks", "exponentials by hand without subtracting the row's maximum (overflows)", '''
def attention_with_sinks(q, k, v, sinks, mask=None):
    e = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    if mask is not None:
        e = e * mask
    denominator = e.sum(-1, keepdim=True) + torch.exp(sinks).view(1, -1, 1, 1)
    return (e / denominator) @ v
''', message="exp overflows"),
    # SinkKVCache
    _wrong("SinkKVCache", "no sinks kept: a plain rolling window", ("sinks = torch.arange(min(s, ns))", "sinks = torch.arange(0)"),
           message="positions (sinks, then the window"),
    _wrong("SinkKVCache", "window one too wide (s - window earlier positions)",
           ("first = max(ns, s - w + 1)", "first = max(ns, s - w)"), message="positions (sinks, then the window"),
    _wrong("SinkKVCache", "window one too narrow", ("first = max(ns, s - w + 1)", "first = max(ns, s - w + 2)"),
           message="positions (sinks, then the window"),
    _wrong("SinkKVCache", "the window starts at 0, so the sinks come back twice",
           ("first = max(ns, s - w + 1)", "first = max(0, s - w + 1)"), message="positions (sinks, then the window"),
    _wrong("SinkKVCache", "the chunk written into the ring before the previous window is read",
           (_SINK_READ, ""), ("        self._seen = s + t_new\n", _SINK_READ + "        self._seen = s + t_new\n"),
           message="k_vis, the keys of those positions"),
    _wrong("SinkKVCache", "the ring read in slot order instead of position order",
           ("self.ring_k[:, :, recent % w]", "self.ring_k[:, :, (recent % w).sort().values]"),
           ("self.ring_v[:, :, recent % w]", "self.ring_v[:, :, (recent % w).sort().values]"),
           message="k_vis, the keys of those positions"),
    Answer("SinkKVCache", "keeps every position (a cache that grows with torch.cat)", _GROWING_SINK_CACHE,
           message="raised the memory of its process"),
    _wrong("SinkKVCache", "seq_len stops at what is stored",
           ("        self._seen = s + t_new\n", "        self._seen = min(s + t_new, ns + w)\n"), message="seq_len"),
    _wrong("SinkKVCache", "reset() forgets nothing",
           ('"""Forget every position; the buffers stay allocated."""\n        ### BEGIN SOLUTION\n        self._seen = 0',
            '"""Forget every position; the buffers stay allocated."""\n        ### BEGIN SOLUTION\n        pass'),
           message="after reset()"),
    _wrong("SinkKVCache", "positions returned as floats", ("torch.cat([sinks, recent, new])", "torch.cat([sinks, recent, new]).float()"),
           message="int64"),
    # block_mask
    _wrong("block_mask", "full and partial swapped", ("grid[r] = some.long() + every.long()", "grid[r] = 2 * some.long() - every.long()"),
           message="full (2) and partial (1) swapped"),
    _wrong("block_mask", "the padding of a ragged edge counted as masked", ("value=True", "value=False"),
           message="the tiles of a ragged edge counted with padding as masked"),
    _wrong("block_mask", "every tile with an allowed pair marked full",
           ("grid[r] = some.long() + every.long()", "grid[r] = 2 * some.long()"),
           message="every tile that holds an allowed pair marked full"),
    _wrong("block_mask", "floor instead of ceil: the ragged tiles dropped",
           ("tiles_q, tiles_k = -(-n_q // block_size), -(-n_k // block_size)",
            "tiles_q, tiles_k = n_q // block_size, n_k // block_size"), message="shape of block_mask"),
    _wrong("block_mask", "int32 tiles", ("dtype=torch.int64", "dtype=torch.int32"), message="int64"),
    _wrong("block_mask", "the last row of tiles not clipped: mask_mod called past n_q",
           ("min((r + 1) * block_size, n_q)", "(r + 1) * block_size"), message="outside the"),
    _wrong("block_mask", "each tile starts one query late (off by one)",
           ("torch.arange(r * block_size, min(", "torch.arange(r * block_size + 1, min("),
           message="never evaluated mask_mod on"),
    Answer("block_mask", "mask_mod evaluated on the whole grid at once", '''
def block_mask(mask_mod, n_q, n_k, block_size=128):
    allowed = mask_mod(torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]).expand(n_q, n_k)
    rows, cols = -(-n_q // block_size), -(-n_k // block_size)
    grid = torch.zeros(rows, cols, dtype=torch.int64)
    for r in range(rows):
        for c in range(cols):
            tile = allowed[r * block_size:(r + 1) * block_size, c * block_size:(c + 1) * block_size]
            grid[r, c] = 2 if bool(tile.all()) else int(bool(tile.any()))
    return grid
''', message="more than a row of tiles"),
    # block_sparse_attention
    _wrong("block_sparse_attention", "partial tiles computed without the mask",
           (_PARTIAL, "            if False:\n"), message="partial tiles computed without the mask"),
    _wrong("block_sparse_attention", "no 1/sqrt(D) scale", (" / math.sqrt(q.shape[-1])", ""), message="no 1/sqrt(D) scale"),
    _wrong("block_sparse_attention", "full tiles masked too (mask_mod called again on them)",
           (_PARTIAL, "            if tiles[r, c] >= 1:\n"), message="evaluated mask_mod again on"),
    _wrong("block_sparse_attention", "empty tiles computed and masked with -inf instead of skipped",
           (_TILE_LOOP, "        for c in range(tiles.shape[1]):\n"),
           ("            scores.append(s)\n",
            '            if tiles[r, c] == 0:\n                s = torch.full_like(s, float("-inf"))\n'
            "            scores.append(s)\n"),
           message="so those tiles were computed"),
    _wrong("block_sparse_attention", "a row with no visible key gives nan",
           ("torch.nan_to_num(torch.softmax(torch.cat(scores, dim=-1), dim=-1), nan=0.0)",
            "torch.softmax(torch.cat(scores, dim=-1), dim=-1)"), message="see no key"),
    _wrong("block_sparse_attention", "mask of a partial tile inverted",
           ("s = s.masked_fill(~torch.as_tensor(allowed", "s = s.masked_fill(torch.as_tensor(allowed"),
           message="against SDPA with the boolean mask"),
    _wrong("block_sparse_attention", "the partial tile's indices not clipped at a ragged edge",
           ("ks = slice(c * block_size, min((c + 1) * block_size, n_k))", "ks = slice(c * block_size, (c + 1) * block_size)"),
           message="raised"),
    Answer("block_sparse_attention", "each tile softmaxed on its own, the tiles' outputs summed", '''
def block_sparse_attention(q, k, v, mask_mod, block_size=128):
    n_q, n_k = q.shape[-2], k.shape[-2]
    tiles = block_mask(mask_mod, n_q, n_k, block_size)
    out = torch.zeros_like(q)
    for r in range(tiles.shape[0]):
        qs = slice(r * block_size, min((r + 1) * block_size, n_q))
        for c in torch.nonzero(tiles[r]).flatten().tolist():
            ks = slice(c * block_size, min((c + 1) * block_size, n_k))
            s = q[..., qs, :] @ k[..., ks, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
            if tiles[r, c] == 1:
                allowed = mask_mod(torch.arange(qs.start, qs.stop)[:, None], torch.arange(ks.start, ks.stop)[None, :])
                s = s.masked_fill(~allowed, float("-inf"))
            out[..., qs, :] += torch.nan_to_num(torch.softmax(s, dim=-1)) @ v[..., ks, :]
    return out
''', message="against SDPA with the boolean mask"),
    # index_scores
    _wrong("index_scores", "no ReLU", ("torch.relu(dots)", "dots"), message="no ReLU on the heads' scores"),
    _wrong("index_scores", "no 1/sqrt(D_I) scale", (" / math.sqrt(q_idx.shape[-1])", ""), message="no 1/sqrt(D_I) scale"),
    _wrong("index_scores", "ReLU after the weighted sum",
           ("scores = (weights[..., None] * torch.relu(dots)).sum(dim=2)", "scores = (weights[..., None] * dots).sum(dim=2).relu()"),
           message="ReLU after the weighted sum over heads"),
    _wrong("index_scores", "causal mask aligned to the upper left", (" + (n_k - n_q)  # (n_q, n_k)", "  # (n_q, n_k)"),
           message="the causal mask aligned to the upper left"),
    _wrong("index_scores", "causal mask hides the query's own position",
           ("torch.arange(n_k)[None, :] > torch.arange(n_q)", "torch.arange(n_k)[None, :] >= torch.arange(n_q)"),
           message="the causal mask off by one"),
    _wrong("index_scores", "never masks", ("    if causal:\n", "    if False:\n"), message="no causal mask"),
    _wrong("index_scores", "always masks (causal=False ignored)", ("    if causal:\n", "    if True:\n"),
           message="causal=False"),
    _wrong("index_scores", "heads averaged instead of summed", (").sum(dim=2)  # (B, n_q, n_k)", ").mean(dim=2)  # (B, n_q, n_k)"),
           message="heads averaged instead of summed"),
    _wrong("index_scores", "hidden keys set to 0 instead of -inf", ('scores.masked_fill(hidden, float("-inf"))', "scores.masked_fill(hidden, 0.0)"),
           message="(-inf)"),
    # topk_sparse_attention
    _wrong("topk_sparse_attention", "keys selected with a score of -inf attended to",
           ('    s = s.masked_fill(~torch.isfinite(best)[:, None], float("-inf"))\n', ""),
           message="query 1 has one finite score"),
    _wrong("topk_sparse_attention", "the bottom-k keys", ("scores.topk(min(top_k, k.shape[-2]), dim=-1)",
                                                          "scores.topk(min(top_k, k.shape[-2]), dim=-1, largest=False)"),
           message="query 0 keeps keys 1 and 2"),
    _wrong("topk_sparse_attention", "no 1/sqrt(D) scale", (" / math.sqrt(D)", ""), message="no 1/sqrt(D) scale"),
    _wrong("topk_sparse_attention", "the indexer's scores used as the attention logits",
           ("    s = (q[..., None, :] * k_sel).sum(-1) / math.sqrt(D)  # (B, H, n_q, kk)\n",
            "    s = best[:, None].expand(B, H, n_q, kk).clone()\n"),
           message="the indexer scores used as the attention weights' logits"),
    _wrong("topk_sparse_attention", "a query with no finite score gives nan",
           ("torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)", "torch.softmax(s, dim=-1)"),
           message="no finite score return zeros"),
    _wrong("topk_sparse_attention", "top_k not clamped to n_k", (_TOPK, _TOPK.replace("min(top_k, k.shape[-2])", "top_k")),
           message="raised"),
    _wrong("topk_sparse_attention", "batch 0's selection used for every batch",
           ("    kk = index.shape[-1]\n", "    index, best = index[:1].expand_as(index), best[:1].expand_as(best)\n"
                                        "    kk = index.shape[-1]\n"),
           message="against SDPA masked to the same top-k keys"),
    _wrong("topk_sparse_attention", "values gathered in key order, not by the selection",
           ("    v_sel = torch.gather(v[:, :, None].expand(B, H, n_q, -1, v.shape[-1]), 3,\n"
            "                         index[:, None, :, :, None].expand(B, H, n_q, kk, v.shape[-1]))\n",
            "    v_sel = v[:, :, None, :kk].expand(B, H, n_q, kk, v.shape[-1])\n"),
           message="against SDPA masked to the same top-k keys"),
    Answer("topk_sparse_attention", "calls F.scaled_dot_product_attention with the boolean mask of the top-k keys",
           SDPA_TOPK, message="F.scaled_dot_product_attention called by topk_sparse_attention"),
]

RIGHT = [
    Answer("attention_with_sinks", "the maximum subtracted by hand, the sink in the denominator", '''
def attention_with_sinks(q, k, v, sinks, mask=None):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf")))
    sink = sinks.view(1, -1, 1, 1)
    top = torch.maximum(scores.amax(-1, keepdim=True), sink)
    e = torch.exp(scores - top)
    return (e / (e.sum(-1, keepdim=True) + torch.exp(sink - top))) @ v
'''),
    Answer("attention_with_sinks", "logsumexp over the keys and the sink", '''
def attention_with_sinks(q, k, v, sinks, mask=None):
    B, H, n_q, D = q.shape
    scores = q @ k.transpose(-1, -2) / D ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    both = torch.cat([scores, sinks[None, :, None, None].expand(B, H, n_q, 1)], -1)
    return torch.exp(scores - torch.logsumexp(both, -1, keepdim=True)) @ v
'''),
    Answer("attention_with_sinks", "gpt-oss's way: an additive mask of the dtype's minimum", '''
def attention_with_sinks(q, k, v, sinks, mask=None):
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores + torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(scores.dtype).min)
    sinks = sinks.reshape(1, -1, 1, 1).expand(scores.shape[0], -1, scores.shape[2], -1)
    logits = torch.cat([scores, sinks], dim=-1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    return torch.matmul(F.softmax(logits, dim=-1)[..., :-1], v)
'''),
    Answer("SinkKVCache", "one buffer of num_sink + window slots with the position of each slot", '''
class SinkKVCache:
    def __init__(self, batch_size, num_heads, head_dim, num_sink, window, dtype=torch.float32):
        size = num_sink + window
        self.k = torch.zeros(batch_size, num_heads, size, head_dim, dtype=dtype)
        self.v = torch.zeros(batch_size, num_heads, size, head_dim, dtype=dtype)
        self.pos = torch.full((size,), -1, dtype=torch.int64)
        self.num_sink, self.window, self.n = num_sink, window, 0

    @property
    def seq_len(self):
        return self.n

    def reset(self):
        self.n = 0
        self.pos.fill_(-1)

    def _slot(self, p):
        return p if p < self.num_sink else self.num_sink + p % self.window

    def update(self, k, v):
        s, t = self.n, k.shape[2]
        lo = s - self.window + 1
        wanted = [p for p in range(s) if p < self.num_sink or p >= lo]
        slots = torch.tensor([self._slot(p) for p in wanted], dtype=torch.int64)
        k_vis = torch.cat([self.k[:, :, slots], k], dim=2)
        v_vis = torch.cat([self.v[:, :, slots], v], dim=2)
        for i in range(t):
            p = s + i
            if p < self.num_sink or p >= s + t - self.window:
                self.k[:, :, self._slot(p)] = k[:, :, i]
                self.v[:, :, self._slot(p)] = v[:, :, i]
                self.pos[self._slot(p)] = p
        self.n = s + t
        return k_vis, v_vis, torch.tensor(wanted + list(range(s, s + t)), dtype=torch.int64)
'''),
    Answer("SinkKVCache", "a list of sink tensors and a deque of the last window positions", '''
from collections import deque


class SinkKVCache:
    def __init__(self, batch_size, num_heads, head_dim, num_sink, window, dtype=torch.float32):
        self.num_sink, self.window, self.dtype = num_sink, window, dtype
        self.shape = (batch_size, num_heads, 0, head_dim)
        self.reset()

    @property
    def seq_len(self):
        return self.count

    def reset(self):
        self.sinks = []
        self.recent = deque(maxlen=self.window)
        self.count = 0

    def update(self, k, v):
        s = self.count
        earlier = list(self.sinks) + [e for e in self.recent if e[0] > s - self.window]
        new = [(s + i, k[:, :, i:i + 1].clone(), v[:, :, i:i + 1].clone()) for i in range(k.shape[2])]
        for entry in new:
            if entry[0] < self.num_sink:
                self.sinks.append(entry)
            else:
                self.recent.append(entry)
        self.count += k.shape[2]
        empty = torch.zeros(self.shape, dtype=self.dtype)
        k_vis = torch.cat([empty] + [e[1] for e in earlier] + [k], dim=2)
        v_vis = torch.cat([empty] + [e[2] for e in earlier] + [v], dim=2)
        positions = torch.tensor([e[0] for e in earlier] + list(range(s, s + k.shape[2])), dtype=torch.int64)
        return k_vis, v_vis, positions
'''),
    Answer("SinkKVCache", "the ring written one token at a time, positions built by a list", '''
class SinkKVCache:
    def __init__(self, batch_size, num_heads, head_dim, num_sink, window, dtype=torch.float32):
        self.sk = torch.empty(batch_size, num_heads, num_sink, head_dim, dtype=dtype)
        self.sv = torch.empty_like(self.sk)
        self.rk = torch.empty(batch_size, num_heads, window, head_dim, dtype=dtype)
        self.rv = torch.empty_like(self.rk)
        self.ns, self.w, self.t = num_sink, window, 0

    @property
    def seq_len(self):
        return self.t

    def reset(self):
        self.t = 0

    def update(self, k, v):
        sinks = list(range(min(self.t, self.ns)))
        recent = [p for p in range(max(self.ns, self.t - self.w + 1), self.t)]
        k_vis = torch.cat([self.sk[:, :, sinks], self.rk[:, :, [p % self.w for p in recent]], k], dim=2)
        v_vis = torch.cat([self.sv[:, :, sinks], self.rv[:, :, [p % self.w for p in recent]], v], dim=2)
        positions = torch.tensor(sinks + recent + list(range(self.t, self.t + k.shape[2])), dtype=torch.long)
        for i in range(k.shape[2]):
            p = self.t + i
            if p < self.ns:
                self.sk[:, :, p], self.sv[:, :, p] = k[:, :, i], v[:, :, i]
            else:
                self.rk[:, :, p % self.w], self.rv[:, :, p % self.w] = k[:, :, i], v[:, :, i]
        self.t += k.shape[2]
        return k_vis, v_vis, positions
'''),
    Answer("block_mask", "one tile at a time", '''
def block_mask(mask_mod, n_q, n_k, block_size=128):
    rows, cols = math.ceil(n_q / block_size), math.ceil(n_k / block_size)
    grid = torch.empty(rows, cols, dtype=torch.long)
    for r in range(rows):
        qi = torch.arange(r * block_size, min(n_q, (r + 1) * block_size)).unsqueeze(1)
        for c in range(cols):
            ki = torch.arange(c * block_size, min(n_k, (c + 1) * block_size)).unsqueeze(0)
            tile = torch.broadcast_to(mask_mod(qi, ki), (qi.shape[0], ki.shape[1]))
            grid[r, c] = 2 if tile.all() else (1 if tile.any() else 0)
    return grid
'''),
    Answer("block_mask", "a row of tiles, counted with a sum per tile", '''
def block_mask(mask_mod, n_q, n_k, block_size=128):
    rows, cols = -(-n_q // block_size), -(-n_k // block_size)
    out = []
    for r in range(rows):
        qi = torch.arange(r * block_size, min(n_q, (r + 1) * block_size))
        allowed = mask_mod(qi.view(-1, 1), torch.arange(n_k).view(1, -1))
        allowed = (torch.zeros(len(qi), n_k, dtype=torch.int64) + allowed.long())
        row = []
        for c in range(cols):
            tile = allowed[:, c * block_size:(c + 1) * block_size]
            row.append(0 if tile.sum() == 0 else 2 if tile.sum() == tile.numel() else 1)
        out.append(row)
    return torch.tensor(out, dtype=torch.int64).reshape(rows, cols)
'''),
    Answer("block_mask", "amin and amax over tiles padded with the row's own values", '''
def block_mask(mask_mod, n_q, n_k, block_size=128):
    n_tiles = -(-n_k // block_size)
    keys = torch.arange(n_tiles * block_size).clamp(max=n_k - 1)  # padding repeats the last key
    result = []
    for start in range(0, n_q, block_size):
        qi = torch.arange(start, min(start + block_size, n_q))[:, None]
        allowed = torch.as_tensor(mask_mod(qi, keys[None, :n_k])).expand(qi.shape[0], n_k)
        allowed = allowed[:, keys].int().view(qi.shape[0], n_tiles, block_size)
        result.append(allowed.amax(dim=(0, 2)) + allowed.amin(dim=(0, 2)))
    return torch.stack(result).long()
'''),
    Answer("block_sparse_attention", "online softmax across the tiles of a row (FlashAttention)", '''
def block_sparse_attention(q, k, v, mask_mod, block_size=128):
    n_q, n_k, D = q.shape[-2], k.shape[-2], q.shape[-1]
    tiles = block_mask(mask_mod, n_q, n_k, block_size)
    out = torch.zeros_like(q)
    for r in range(tiles.shape[0]):
        q0, q1 = r * block_size, min((r + 1) * block_size, n_q)
        m = torch.full((*q.shape[:-2], q1 - q0, 1), float("-inf"))
        l = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-2], q1 - q0, v.shape[-1])
        for c in range(tiles.shape[1]):
            if tiles[r, c] == 0:
                continue
            k0, k1 = c * block_size, min((c + 1) * block_size, n_k)
            s = q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-2, -1) / D ** 0.5
            if tiles[r, c] == 1:
                keep = mask_mod(torch.arange(q0, q1)[:, None], torch.arange(k0, k1)[None, :])
                s = torch.where(keep, s, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe)
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(-1, keepdim=True)
            acc = acc * rescale + p @ v[..., k0:k1, :]
            m = m_new
        out[..., q0:q1, :] = torch.where(l > 0, acc / l.clamp_min(1e-30), torch.zeros(()))
    return out
'''),
    Answer("block_sparse_attention", "the keys of a row's tiles gathered by index, partial masks concatenated", '''
def block_sparse_attention(q, k, v, mask_mod, block_size=128):
    n_q, n_k = q.shape[-2], k.shape[-2]
    kinds = block_mask(mask_mod, n_q, n_k, block_size)
    rows_out = []
    for r, row in enumerate(kinds):
        qi = torch.arange(r * block_size, min(n_q, (r + 1) * block_size))
        keys, keep = [], []
        for c in row.nonzero().flatten().tolist():
            ki = torch.arange(c * block_size, min(n_k, (c + 1) * block_size))
            keys.append(ki)
            if row[c] == 2:
                keep.append(torch.ones(len(qi), len(ki), dtype=torch.bool))
            else:
                keep.append(torch.as_tensor(mask_mod(qi[:, None], ki[None, :])).expand(len(qi), len(ki)))
        if not keys:
            rows_out.append(torch.zeros(*q.shape[:-2], len(qi), v.shape[-1]))
            continue
        ki, keep = torch.cat(keys), torch.cat(keep, dim=1)
        s = (q[..., qi, :] @ k[..., ki, :].transpose(-2, -1)) * q.shape[-1] ** -0.5
        w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
        rows_out.append(torch.where(keep.any(-1, keepdim=True), w, torch.zeros(())) @ v[..., ki, :])
    return torch.cat(rows_out, dim=-2)
'''),
    Answer("block_sparse_attention", "exponentials by hand per tile, summed over the row", '''
def block_sparse_attention(q, k, v, mask_mod, block_size=128):
    n_q, n_k = q.shape[-2], k.shape[-2]
    tiles = block_mask(mask_mod, n_q, n_k, block_size)
    out = torch.zeros(*q.shape[:-1], v.shape[-1])
    for r in range(tiles.shape[0]):
        rows = slice(r * block_size, min(n_q, (r + 1) * block_size))
        parts = []
        for c in range(tiles.shape[1]):
            if tiles[r, c].item() == 0:
                continue
            cols = slice(c * block_size, min(n_k, (c + 1) * block_size))
            s = torch.einsum("...qd,...kd->...qk", q[..., rows, :], k[..., cols, :]) / math.sqrt(q.shape[-1])
            if tiles[r, c].item() == 1:
                ok = mask_mod(torch.arange(rows.start, rows.stop).view(-1, 1), torch.arange(cols.start, cols.stop).view(1, -1))
                s = s.masked_fill(~ok, float("-inf"))
            parts.append((s, v[..., cols, :]))
        if not parts:
            continue
        top = torch.stack([s.amax(-1) for s, _ in parts]).amax(0).unsqueeze(-1)
        top = torch.where(torch.isfinite(top), top, torch.zeros(()))
        num = sum(torch.exp(s - top) @ vv for s, vv in parts)
        den = sum(torch.exp(s - top).sum(-1, keepdim=True) for s, _ in parts)
        out[..., rows, :] = torch.where(den > 0, num / den.clamp_min(1e-30), torch.zeros(()))
    return out
'''),
    Answer("index_scores", "a loop over the indexer heads", '''
def index_scores(q_idx, k_idx, weights, causal=True):
    B, n_q, H_I, D_I = q_idx.shape
    n_k = k_idx.shape[1]
    total = torch.zeros(B, n_q, n_k)
    for h in range(H_I):
        total = total + weights[:, :, h:h + 1] * torch.relu(torch.bmm(q_idx[:, :, h], k_idx.transpose(1, 2)) / D_I ** 0.5)
    if causal:
        total = total.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1), -math.inf)
    return total
'''),
    Answer("index_scores", "heads moved next to the batch, matmul, weights summed by a matmul", '''
def index_scores(q_idx, k_idx, weights, causal=True):
    s = q_idx.permute(0, 2, 1, 3) @ k_idx.unsqueeze(1).transpose(-1, -2)  # (B, H_I, n_q, n_k)
    s = F.relu(s * q_idx.shape[-1] ** -0.5)
    out = (weights.permute(0, 2, 1).unsqueeze(-1) * s).sum(1)
    if causal:
        n_q, n_k = out.shape[-2:]
        out = torch.where(torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), out, torch.tensor(float("-inf")))
    return out
'''),
    Answer("index_scores", "einsum with the weights inside", '''
def index_scores(q_idx, k_idx, weights, causal=True):
    relu = torch.clamp(torch.einsum("bqhd,bkd->bqhk", q_idx, k_idx) / math.sqrt(k_idx.shape[-1]), min=0)
    out = torch.einsum("bqh,bqhk->bqk", weights, relu)
    if not causal:
        return out
    qpos = torch.arange(out.shape[1]) + out.shape[2] - out.shape[1]
    return out.masked_fill(torch.arange(out.shape[2]) > qpos[:, None], float("-inf"))
'''),
    Answer("topk_sparse_attention", "advanced indexing with a batch index", '''
def topk_sparse_attention(q, k, v, scores, top_k):
    B, H, n_q, D = q.shape
    vals, idx = torch.topk(scores, k=min(top_k, scores.shape[-1]), dim=-1)
    b = torch.arange(B)[:, None, None, None]
    h = torch.arange(H)[None, :, None, None]
    k_sel, v_sel = k[b, h, idx[:, None]], v[b, h, idx[:, None]]  # (B, H, n_q, kk, D)
    s = torch.einsum("bhqd,bhqkd->bhqk", q, k_sel) / math.sqrt(D)
    s = torch.where(torch.isinf(vals)[:, None], torch.tensor(float("-inf")), s)
    w = torch.softmax(s, -1)
    w = torch.where(torch.isnan(w), torch.zeros(()), w)
    return torch.einsum("bhqk,bhqkd->bhqd", w, v_sel)
'''),
    Answer("topk_sparse_attention", "a loop over batches and queries, index_select", '''
def topk_sparse_attention(q, k, v, scores, top_k):
    B, H, n_q, D = q.shape
    out = torch.zeros(B, H, n_q, v.shape[-1])
    for b in range(B):
        for t in range(n_q):
            finite = torch.isfinite(scores[b, t]).nonzero().flatten()
            if len(finite) == 0:
                continue
            best = finite[scores[b, t, finite].argsort(descending=True)[:top_k]]
            ks, vs = k[b].index_select(1, best), v[b].index_select(1, best)  # (H, kk, D)
            w = torch.softmax((ks @ q[b, :, t, :, None]).squeeze(-1) / D ** 0.5, dim=-1)  # (H, kk)
            out[b, :, t] = (w[:, None, :] @ vs).squeeze(1)
    return out
'''),
    Answer("topk_sparse_attention", "flattened gather with offsets", '''
def topk_sparse_attention(q, k, v, scores, top_k):
    B, H, n_q, D = q.shape
    n_k = k.shape[2]
    kk = min(top_k, n_k)
    best, idx = scores.topk(kk, dim=-1)  # (B, n_q, kk)
    flat = (idx + n_k * torch.arange(B).view(B, 1, 1)).reshape(-1)  # rows of k.transpose(0, 1).reshape(H, B * n_k, D)
    k_sel = k.transpose(0, 1).reshape(H, B * n_k, D)[:, flat].view(H, B, n_q, kk, D).transpose(0, 1)
    v_sel = v.transpose(0, 1).reshape(H, B * n_k, -1)[:, flat].view(H, B, n_q, kk, -1).transpose(0, 1)
    logits = (k_sel @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(D)  # (B, H, n_q, kk)
    logits = logits + torch.where(torch.isfinite(best), 0.0, float("-inf"))[:, None]
    w = torch.nan_to_num(logits.softmax(-1))
    return (w.unsqueeze(-2) @ v_sel).squeeze(-2)
'''),
]
