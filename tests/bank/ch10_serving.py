"""Chapter 10 answers: sliding_window_mask, RollingKVCache, LatentCache, MultiHeadLatentAttention, mla_cache_bytes,
PagedKVCache.

Most wrong answers are one-line mutations of a correct answer written as a student would (`_swap` checks that the
line it changes is there exactly once), so each differs from a right answer by exactly the mistake it names.
"""

from tests.bank import Answer, edit
from tests.bank.serving_bases import BYTES, LATENT, MASK, MLA, PAGED, READ, ROLLING, WRITE
from tests.bank.serving_right_caches import RIGHT as _RIGHT_CACHES
from tests.bank.serving_right_layers import RIGHT as _RIGHT_LAYERS

ASSIGNMENT = "10_serving"


def _swap(source: str, old: str, new: str) -> str:
    """A wrong answer: the bank's base answer ``source`` with its one ``old`` replaced by ``new``."""
    return edit(source, (old, new))


WRONG = [
    # sliding_window_mask
    Answer("sliding_window_mask", "window one too wide (>= instead of >)",
           _swap(MASK, "(j > p - window)", "(j >= p - window)"), message="one too wide"),
    Answer("sliding_window_mask", "window one too narrow",
           _swap(MASK, "(j > p - window)", "(j > p - window + 1)"), message="one too narrow"),
    Answer("sliding_window_mask", "queries aligned to the upper left",
           _swap(MASK, "torch.arange(n_q)[:, None] + (n_k - n_q)", "torch.arange(n_q)[:, None]"),
           message="upper left"),
    Answer("sliding_window_mask", "no causal limit: only the lower edge of the window",
           _swap(MASK, "return (j <= p) & (j > p - window)", "return j > p - window"), message="no causal limit"),
    Answer("sliding_window_mask", "n_q > n_k: the first query placed at position 0 instead of before the first key",
           _swap(MASK, "torch.arange(n_q)[:, None] + (n_k - n_q)", "torch.arange(n_q)[:, None] + max(n_k - n_q, 0)"),
           message="before the first key"),
    Answer("sliding_window_mask", "no ValueError for a window below 1",
           _swap(MASK, '        raise ValueError("the window must be at least 1")\n', "        window = 1\n"),
           message="should raise ValueError"),
    Answer("sliding_window_mask", "returns 0/1 integers instead of booleans",
           _swap(MASK, "return (j <= p) & (j > p - window)", "return ((j <= p) & (j > p - window)).long()"),
           message="torch.bool"),
    Answer("sliding_window_mask", "each query misses its own key (j < p instead of j <= p)",
           _swap(MASK, "return (j <= p) & (j > p - window)", "return (j < p) & (j >= p - window)"),
           message="misses its own key"),
    Answer("sliding_window_mask", "returns the mask transposed, (n_k, n_q)",
           _swap(MASK, "return (j <= p) & (j > p - window)", "return ((j <= p) & (j > p - window)).T"),
           message="mask transposed"),
    # RollingKVCache
    Answer("RollingKVCache", "returns the previous window in slot order instead of position order",
           _swap(ROLLING, "self.n) % self.window", "self.n) % self.window\n        prev = prev.sort().values"),
           message="slot order"),
    Answer("RollingKVCache", "a chunk loses the previous window (only single tokens read it)",
           _swap(ROLLING, "max(0, self.n - (self.window - 1))", "max(0, self.n - (self.window - 1)) if t == 1 else self.n"),
           message="a chunk loses the previous window"),
    Answer("RollingKVCache", "writes the chunk into the ring before reading the previous window",
           _swap(_swap(ROLLING, READ, ""), WRITE, WRITE + READ), message="before reading the previous window"),
    Answer("RollingKVCache", "returns window earlier positions instead of window - 1",
           _swap(ROLLING, "self.n - (self.window - 1)", "self.n - self.window"),
           message="window earlier positions instead of window - 1"),
    Answer("RollingKVCache", "keeps every position (a cache that grows with torch.cat)", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.k = torch.zeros(batch_size, num_heads, 0, head_dim, dtype=dtype)
        self.v = torch.zeros(batch_size, num_heads, 0, head_dim, dtype=dtype)
        self.window = window

    @property
    def seq_len(self):
        return self.k.shape[2]

    def reset(self):
        self.k, self.v = self.k[:, :, :0], self.v[:, :, :0]

    def update(self, k, v):
        lo = max(0, self.seq_len - (self.window - 1))
        self.k, self.v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        return self.k[:, :, lo:], self.v[:, :, lo:]
''', message="copies its whole history"),
    Answer("RollingKVCache", "keeps every chunk in a list and concatenates the list at each update", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.ks, self.vs, self.window, self.n = [], [], window, 0

    @property
    def seq_len(self):
        return self.n

    def reset(self):
        self.ks, self.vs, self.n = [], [], 0

    def update(self, k, v):
        self.ks.append(k)
        self.vs.append(v)
        lo = max(0, self.n - (self.window - 1))
        self.n += k.shape[2]
        return torch.cat(self.ks, dim=2)[:, :, lo:], torch.cat(self.vs, dim=2)[:, :, lo:]
''', message="copies its whole history"),
    Answer("RollingKVCache", "a ring of twice the window", ROLLING.replace(
        "window, head_dim, dtype=dtype)", "2 * window, head_dim, dtype=dtype)").replace(
        ") % self.window", ") % (2 * self.window)").replace("keep = min(t, self.window)", "keep = min(t, 2 * self.window)"),
           message="a buffer of twice the window"),
    Answer("RollingKVCache", "keeps every chunk in a list, reading back only the last window - 1 positions", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.ks, self.vs, self.window, self.n = [], [], window, 0

    @property
    def seq_len(self):
        return self.n

    def reset(self):
        self.ks, self.vs, self.n = [], [], 0

    def update(self, k, v):
        need, tail_k, tail_v = self.window - 1, [], []
        for ck, cv in zip(reversed(self.ks), reversed(self.vs)):
            if need <= 0:
                break
            tail_k.insert(0, ck[:, :, -need:])
            tail_v.insert(0, cv[:, :, -need:])
            need -= ck.shape[2]
        self.ks.append(k)
        self.vs.append(v)
        self.n += k.shape[2]
        return torch.cat(tail_k + [k], dim=2), torch.cat(tail_v + [v], dim=2)
''', message="a list of every chunk"),
    Answer("RollingKVCache", "seq_len a plain attribute, which a caller can overwrite", _swap(_swap(_swap(_swap(
        ROLLING, "        self.n = 0\n\n    @property\n    def seq_len(self):\n        return self.n\n",
        "        self.seq_len = 0\n"), "        self.n = 0\n", "        self.seq_len = 0\n"),
        "        self.n += t\n", "        self.seq_len += t\n"),
        "prev = torch.arange(max(0, self.n - (self.window - 1)), self.n) % self.window",
        "prev = torch.arange(max(0, self.seq_len - (self.window - 1)), self.seq_len) % self.window").replace(
        "torch.arange(self.n + t - keep, self.n + t)", "torch.arange(self.seq_len + t - keep, self.seq_len + t)"),
           message="read-only property"),
    Answer("RollingKVCache", "seq_len stops at the window", _swap(ROLLING, "        return self.n\n",
                                                                   "        return min(self.n, self.window)\n"),
           message="seq_len"),
    # LatentCache
    Answer("LatentCache", "returns only this call's latents",
           _swap(LATENT, "return self.buf[:, :end]", "return c"), message="only this call's latents"),
    Answer("LatentCache", "returns the whole buffer, unwritten positions included",
           _swap(LATENT, "return self.buf[:, :end]", "return self.buf"), message="the whole buffer"),
    Answer("LatentCache", "advances the counter before checking for overflow",
           _swap(LATENT, '''        end = self.n + c.shape[1]
        if end > self.buf.shape[1]:''', '''        end = self.n + c.shape[1]
        start, self.n = self.n, end
        if end > self.buf.shape[1]:''').replace("self.buf[:, self.n:end] = c", "self.buf[:, start:end] = c"),
           message="cache must be unchanged"),
    Answer("LatentCache", "returns a copy (.clone()) instead of a view of the buffer",
           _swap(LATENT, "return self.buf[:, :end]", "return self.buf[:, :end].clone()"), message="a view"),
    Answer("LatentCache", "no overflow check: torch's shape error instead of a ValueError",
           _swap(LATENT, '''        if end > self.buf.shape[1]:
            raise ValueError("the latent cache is full")
''', ""), message="should raise ValueError"),
    Answer("LatentCache", "seq_len a plain attribute, which a caller can overwrite", '''
class LatentCache:
    def __init__(self, batch_size, max_seq_len, latent_dim, dtype=torch.float32):
        self.buf = torch.zeros(batch_size, max_seq_len, latent_dim, dtype=dtype)
        self.seq_len = 0

    def update(self, c):
        end = self.seq_len + c.shape[1]
        if end > self.buf.shape[1]:
            raise ValueError("the latent cache is full")
        self.buf[:, self.seq_len:end] = c
        self.seq_len = end
        return self.buf[:, :end]
''', message="read-only property"),
    Answer("LatentCache", "the counter kept as a 0-d tensor, so seq_len is not a Python int",
           LATENT.replace("self.n = 0", "self.n = torch.tensor(0)"), message="(a int)"),
    Answer("LatentCache", "grows with torch.cat instead of writing into a preallocated buffer", '''
class LatentCache:
    def __init__(self, batch_size, max_seq_len, latent_dim, dtype=torch.float32):
        self.c = torch.zeros(batch_size, 0, latent_dim, dtype=dtype)
        self.max_seq_len = max_seq_len

    @property
    def seq_len(self):
        return self.c.shape[1]

    def update(self, c):
        if self.seq_len + c.shape[1] > self.max_seq_len:
            raise ValueError("the latent cache is full")
        self.c = torch.cat([self.c, c], dim=1)
        return self.c
''', message="stored in different memory"),
    Answer("LatentCache", "the buffer allocated without the dtype (always float32)",
           _swap(LATENT, "torch.zeros(batch_size, max_seq_len, latent_dim, dtype=dtype)",
                 "torch.zeros(batch_size, max_seq_len, latent_dim)"), message="should have dtype torch.float64"),
    Answer("LatentCache", "overflow check off by one: refuses to fill the last position",
           _swap(LATENT, "if end > self.buf.shape[1]:", "if end >= self.buf.shape[1]:"),
           message="raised ValueError"),
    # MultiHeadLatentAttention
    Answer("MultiHeadLatentAttention", "caches keys and values instead of the latent (and so cannot absorb)",
           MLA[:MLA.index("        if cache is not None:")] + '''        kv = torch.cat([self.k_up(c), self.v_up(c)], dim=-1)
        if cache is not None:
            kv = cache.update(kv)
        n_k = kv.shape[1]
        mask = torch.ones(T, n_k, dtype=torch.bool).tril(diagonal=n_k - T)
        k = kv[..., :H * Dh].reshape(B, n_k, H, Dh).transpose(1, 2)
        v = kv[..., H * Dh:].reshape(B, n_k, H, Dh).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, H * Dh))
''', message="Cache only the latent"),
    Answer("MultiHeadLatentAttention", "absorbs k_up's weight transposed",
           _swap(MLA, "w_k = self.k_up.weight.view(H, Dh, dc)", "w_k = self.k_up.weight.T.reshape(H, Dh, dc)"),
           message="absorbing k_up's weight transposed"),
    Answer("MultiHeadLatentAttention", "absorbs v_up's weight transposed",
           _swap(MLA, "w_v = self.v_up.weight.view(H, Dh, dc)", "w_v = self.v_up.weight.T.reshape(H, Dh, dc)"),
           message="absorbing v_up's weight transposed"),
    Answer("MultiHeadLatentAttention", "absorbed scores scaled by 1/sqrt(kv_latent_dim)",
           _swap(MLA, "scale=1 / math.sqrt(Dh)", "scale=1 / math.sqrt(dc)"), message="1/sqrt(kv_latent_dim)"),
    Answer("MultiHeadLatentAttention", "upper-left causal mask with a cache",
           _swap(MLA, ".tril(diagonal=n_k - T)", ".tril()"), message="upper-left causal mask"),
    Answer("MultiHeadLatentAttention", "ignores what cache.update returns: attends only to this call's latents",
           _swap(MLA, "            c = cache.update(c)\n", "            cache.update(c)\n"),
           message="what cache.update returns (every cached latent) is ignored"),
    Answer("MultiHeadLatentAttention", "heads merged without the transpose",
           _swap(MLA, "return self.o_proj(y.transpose(1, 2).reshape(B, T, H * Dh))", "return self.o_proj(y.reshape(B, T, H * Dh))"),
           message="heads merged without the transpose"),
    Answer("MultiHeadLatentAttention", "absorb=True absorbs k_up but still up-projects the values with v_up",
           _swap(MLA, "            y = torch.einsum(\"bhtc,hdc->bhtd\", mixed, w_v)\n", '''            v = self.v_up(c).view(B, n_k, H, Dh).transpose(1, 2)
            y = F.scaled_dot_product_attention(q_lat, lat, v, attn_mask=mask, scale=1 / math.sqrt(Dh))
'''), message="never form per-head keys or values"),
    # mla_cache_bytes
    Answer("mla_cache_bytes", "a factor 2 for keys and values",
           _swap(BYTES, "return num_layers", "return 2 * num_layers"), message="a factor 2 for keys and values"),
    Answer("mla_cache_bytes", "leaves out the decoupled RoPE key",
           _swap(BYTES, "(kv_latent_dim + rope_dim)", "kv_latent_dim"), message="decoupled RoPE key"),
    Answer("mla_cache_bytes", "ignores batch_size", _swap(BYTES, " * batch_size", ""), message="ignoring batch_size"),
    Answer("mla_cache_bytes", "counts bits", _swap(BYTES, "* bytes_per_element", "* bytes_per_element * 8"),
           message="counting bits instead of bytes"),
    Answer("mla_cache_bytes", "ignores bytes_per_element (counts numbers, not bytes)",
           _swap(BYTES, " * bytes_per_element", ""), message="ignoring bytes_per_element"),
    Answer("mla_cache_bytes", "bits divided by 8: returns a float", _swap(
        BYTES, "* bytes_per_element", "* (8 * bytes_per_element) / 8"), message="Return a Python int"),
    Answer("mla_cache_bytes", "the RoPE key counted twice", _swap(BYTES, "(kv_latent_dim + rope_dim)",
                                                                   "(kv_latent_dim + 2 * rope_dim)"),
           message="RoPE key counted twice"),
    Answer("mla_cache_bytes", "missing parentheses around kv_latent_dim + rope_dim",
           _swap(BYTES, "num_layers * (kv_latent_dim + rope_dim) * seq_len",
                 "num_layers * kv_latent_dim + rope_dim * seq_len"), message="missing parentheses"),
    Answer("mla_cache_bytes", "bytes_per_element defaults to 4 (fp32) instead of 2",
           _swap(BYTES, "bytes_per_element=2)", "bytes_per_element=4)"), message="with the defaults"),
    # PagedKVCache
    Answer("PagedKVCache", "frees a block while another sequence still uses it",
           _swap(PAGED, '''            if self.users[block] == 0:
                self.free_list.append(block)''', '''            self.free_list.append(block)'''),
           message="last user frees it"),
    Answer("PagedKVCache", "no copy-on-write: appends write into a shared block",
           _swap(PAGED, "shared_tail = length % size != 0 and self.users[table[-1]] > 1", "shared_tail = False"),
           message="copy-on-write"),
    Answer("PagedKVCache", "copy-on-write decided too late, from the length after the append",
           _swap(PAGED, "shared_tail = length % size != 0 and", "shared_tail = bool(table) and (length + t) % size != 0 and"),
           message="copy-on-write"),
    Answer("PagedKVCache", "block table off by one at a block edge (one block too many when full)",
           _swap(PAGED, "new_blocks = -(-(length + t) // size) - len(table)",
                 "new_blocks = (length + t) // size + 1 - len(table)"), message="block edges"),
    Answer("PagedKVCache", "allocates block by block and runs out half way, leaving blocks taken", _swap(_swap(
        PAGED, "table = list(self.tables.get(seq_id, []))", "table = self.tables.setdefault(seq_id, [])"), '''
        for _ in range(new_blocks):
            block''', '''
        for _ in range(new_blocks):
            if not self.free_list:
                raise RuntimeError("out of blocks")
            block''').replace("if new_blocks + shared_tail > len(self.free_list):", "if shared_tail > len(self.free_list):"),
           message="must raise before changing anything"),
    Answer("PagedKVCache", "forgets the copy-on-write block when counting what an append needs",
           _swap(PAGED, "if new_blocks + shared_tail > len(self.free_list):", "if new_blocks > len(self.free_list):"),
           message="Count the copy-on-write block"),
    Answer("PagedKVCache", "free never returns blocks to the pool",
           _swap(PAGED, "                self.free_list.append(block)", "                pass"),
           message="num_free_blocks"),
    Answer("PagedKVCache", "fork copies the source's positions into new blocks",
           _swap(PAGED, '''        self.tables[dst], self.lengths[dst] = list(self.tables[src]), self.lengths[src]
        for block in self.tables[dst]:
            self.users[block] += 1''', '''        self.append(dst, *self.gather(src))'''), message="without copying"),
    Answer("PagedKVCache", "gather returns whole blocks, unwritten slots included",
           _swap(PAGED, "reshape(H, -1, Dh)[:, :length]\n        v", "reshape(H, -1, Dh)\n        v")
           .replace("reshape(H, -1, Dh)[:, :length]", "reshape(H, -1, Dh)"), message="partly filled"),
]

# sliding_window_mask, MultiHeadLatentAttention, mla_cache_bytes; RollingKVCache, LatentCache, PagedKVCache
RIGHT = _RIGHT_LAYERS + _RIGHT_CACHES
