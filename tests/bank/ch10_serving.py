"""Chapter 10 answers: sliding_window_mask, RollingKVCache, LatentCache, MultiHeadLatentAttention, mla_cache_bytes,
PagedKVCache.

Most wrong answers are one-line mutations of a correct answer written as a student would (`_swap` checks that the
line it changes is there exactly once), so each differs from a right answer by exactly the mistake it names.
"""

from tests.bank import Answer, edit

ASSIGNMENT = "10_serving"


def _swap(source: str, old: str, new: str) -> str:
    """A wrong answer: the bank's base answer ``source`` with its one ``old`` replaced by ``new``."""
    return edit(source, (old, new))


_MASK = '''
def sliding_window_mask(n_q, n_k, window):
    if window < 1:
        raise ValueError("the window must be at least 1")
    p = torch.arange(n_q)[:, None] + (n_k - n_q)
    j = torch.arange(n_k)[None, :]
    return (j <= p) & (j > p - window)
'''

_ROLLING = '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.k = torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype)
        self.v = torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype)
        self.window = window
        self.n = 0

    @property
    def seq_len(self):
        return self.n

    def reset(self):
        self.n = 0

    def update(self, k, v):
        t = k.shape[2]
        prev = torch.arange(max(0, self.n - (self.window - 1)), self.n) % self.window
        k_vis = torch.cat([self.k[:, :, prev], k], dim=2)
        v_vis = torch.cat([self.v[:, :, prev], v], dim=2)
        keep = min(t, self.window)
        slots = torch.arange(self.n + t - keep, self.n + t) % self.window
        self.k[:, :, slots] = k[:, :, t - keep:]
        self.v[:, :, slots] = v[:, :, t - keep:]
        self.n += t
        return k_vis, v_vis
'''

_READ = '''        prev = torch.arange(max(0, self.n - (self.window - 1)), self.n) % self.window
        k_vis = torch.cat([self.k[:, :, prev], k], dim=2)
        v_vis = torch.cat([self.v[:, :, prev], v], dim=2)
'''
_WRITE = '''        self.k[:, :, slots] = k[:, :, t - keep:]
        self.v[:, :, slots] = v[:, :, t - keep:]
'''

_LATENT = '''
class LatentCache:
    def __init__(self, batch_size, max_seq_len, latent_dim, dtype=torch.float32):
        self.buf = torch.zeros(batch_size, max_seq_len, latent_dim, dtype=dtype)
        self.n = 0

    @property
    def seq_len(self):
        return self.n

    def update(self, c):
        end = self.n + c.shape[1]
        if end > self.buf.shape[1]:
            raise ValueError("the latent cache is full")
        self.buf[:, self.n:end] = c
        self.n = end
        return self.buf[:, :end]
'''

_MLA = '''
class MultiHeadLatentAttention(nn.Module):
    def __init__(self, d_model, num_heads, head_dim, kv_latent_dim):
        super().__init__()
        self.h, self.dh, self.dc = num_heads, head_dim, kv_latent_dim
        self.q_proj = nn.Linear(d_model, num_heads * head_dim, bias=False)
        self.kv_down = nn.Linear(d_model, kv_latent_dim, bias=False)
        self.k_up = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.v_up = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, d_model, bias=False)

    def forward(self, x, cache=None, absorb=False):
        B, T, _ = x.shape
        H, Dh, dc = self.h, self.dh, self.dc
        q = self.q_proj(x).view(B, T, H, Dh).transpose(1, 2)
        c = self.kv_down(x)
        if cache is not None:
            c = cache.update(c)
        n_k = c.shape[1]
        mask = torch.ones(T, n_k, dtype=torch.bool).tril(diagonal=n_k - T)
        if absorb:
            w_k = self.k_up.weight.view(H, Dh, dc)
            w_v = self.v_up.weight.view(H, Dh, dc)
            q_lat = torch.einsum("bhtd,hdc->bhtc", q, w_k)
            lat = c[:, None]
            mixed = F.scaled_dot_product_attention(q_lat, lat, lat, attn_mask=mask, scale=1 / math.sqrt(Dh))
            y = torch.einsum("bhtc,hdc->bhtd", mixed, w_v)
        else:
            k = self.k_up(c).view(B, n_k, H, Dh).transpose(1, 2)
            v = self.v_up(c).view(B, n_k, H, Dh).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, H * Dh))
'''

_BYTES = '''
def mla_cache_bytes(num_layers, kv_latent_dim, rope_dim, seq_len, batch_size=1, bytes_per_element=2):
    return num_layers * (kv_latent_dim + rope_dim) * seq_len * batch_size * bytes_per_element
'''

_PAGED = '''
class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_heads, head_dim, dtype=torch.float32):
        self.kb = torch.zeros(num_blocks, num_heads, block_size, head_dim, dtype=dtype)
        self.vb = torch.zeros(num_blocks, num_heads, block_size, head_dim, dtype=dtype)
        self.size = block_size
        self.free_list = list(range(num_blocks))
        self.users = [0] * num_blocks
        self.tables, self.lengths = {}, {}

    @property
    def num_free_blocks(self):
        return len(self.free_list)

    def block_table(self, seq_id):
        return list(self.tables[seq_id])

    def append(self, seq_id, k, v):
        table = list(self.tables.get(seq_id, []))
        length, t, size = self.lengths.get(seq_id, 0), k.shape[1], self.size
        new_blocks = -(-(length + t) // size) - len(table)
        shared_tail = length % size != 0 and self.users[table[-1]] > 1
        if new_blocks + shared_tail > len(self.free_list):
            raise RuntimeError("out of blocks")
        if shared_tail:
            copy = self.free_list.pop()
            self.kb[copy], self.vb[copy] = self.kb[table[-1]], self.vb[table[-1]]
            self.users[table[-1]] -= 1
            self.users[copy] = 1
            table[-1] = copy
        for _ in range(new_blocks):
            block = self.free_list.pop()
            self.users[block] = 1
            table.append(block)
        pos = torch.arange(length, length + t)
        blocks = torch.tensor(table)[pos // size]
        self.kb[blocks, :, pos % size] = k.transpose(0, 1)
        self.vb[blocks, :, pos % size] = v.transpose(0, 1)
        self.tables[seq_id], self.lengths[seq_id] = table, length + t

    def gather(self, seq_id):
        table, length = self.tables[seq_id], self.lengths[seq_id]
        H, Dh = self.kb.shape[1], self.kb.shape[3]
        k = self.kb[table].transpose(0, 1).reshape(H, -1, Dh)[:, :length]
        v = self.vb[table].transpose(0, 1).reshape(H, -1, Dh)[:, :length]
        return k, v

    def fork(self, src, dst):
        self.tables[dst], self.lengths[dst] = list(self.tables[src]), self.lengths[src]
        for block in self.tables[dst]:
            self.users[block] += 1

    def free(self, seq_id):
        for block in self.tables.pop(seq_id):
            self.users[block] -= 1
            if self.users[block] == 0:
                self.free_list.append(block)
        del self.lengths[seq_id]
'''

WRONG = [
    # sliding_window_mask
    Answer("sliding_window_mask", "window one too wide (>= instead of >)",
           _swap(_MASK, "(j > p - window)", "(j >= p - window)"), message="one too wide"),
    Answer("sliding_window_mask", "window one too narrow",
           _swap(_MASK, "(j > p - window)", "(j > p - window + 1)"), message="one too narrow"),
    Answer("sliding_window_mask", "queries aligned to the upper left",
           _swap(_MASK, "torch.arange(n_q)[:, None] + (n_k - n_q)", "torch.arange(n_q)[:, None]"),
           message="upper left"),
    Answer("sliding_window_mask", "no causal limit: only the lower edge of the window",
           _swap(_MASK, "return (j <= p) & (j > p - window)", "return j > p - window"), message="no causal limit"),
    Answer("sliding_window_mask", "n_q > n_k: the first query placed at position 0 instead of before the first key",
           _swap(_MASK, "torch.arange(n_q)[:, None] + (n_k - n_q)", "torch.arange(n_q)[:, None] + max(n_k - n_q, 0)"),
           message="before the first key"),
    Answer("sliding_window_mask", "no ValueError for a window below 1",
           _swap(_MASK, '        raise ValueError("the window must be at least 1")\n', "        window = 1\n"),
           message="should raise ValueError"),
    Answer("sliding_window_mask", "returns 0/1 integers instead of booleans",
           _swap(_MASK, "return (j <= p) & (j > p - window)", "return ((j <= p) & (j > p - window)).long()"),
           message="torch.bool"),
    # RollingKVCache
    Answer("RollingKVCache", "returns the previous window in slot order instead of position order",
           _swap(_ROLLING, "self.n) % self.window", "self.n) % self.window\n        prev = prev.sort().values"),
           message="slot order"),
    Answer("RollingKVCache", "a chunk loses the previous window (only single tokens read it)",
           _swap(_ROLLING, "max(0, self.n - (self.window - 1))", "max(0, self.n - (self.window - 1)) if t == 1 else self.n"),
           message="a chunk loses the previous window"),
    Answer("RollingKVCache", "writes the chunk into the ring before reading the previous window",
           _swap(_swap(_ROLLING, _READ, ""), _WRITE, _WRITE + _READ), message="before reading the previous window"),
    Answer("RollingKVCache", "returns window earlier positions instead of window - 1",
           _swap(_ROLLING, "self.n - (self.window - 1)", "self.n - self.window"),
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
    Answer("RollingKVCache", "a ring of twice the window", _ROLLING.replace(
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
        _ROLLING, "        self.n = 0\n\n    @property\n    def seq_len(self):\n        return self.n\n",
        "        self.seq_len = 0\n"), "        self.n = 0\n", "        self.seq_len = 0\n"),
        "        self.n += t\n", "        self.seq_len += t\n"),
        "prev = torch.arange(max(0, self.n - (self.window - 1)), self.n) % self.window",
        "prev = torch.arange(max(0, self.seq_len - (self.window - 1)), self.seq_len) % self.window").replace(
        "torch.arange(self.n + t - keep, self.n + t)", "torch.arange(self.seq_len + t - keep, self.seq_len + t)"),
           message="read-only property"),
    Answer("RollingKVCache", "seq_len stops at the window", _swap(_ROLLING, "        return self.n\n",
                                                                   "        return min(self.n, self.window)\n"),
           message="seq_len"),
    # LatentCache
    Answer("LatentCache", "returns only this call's latents",
           _swap(_LATENT, "return self.buf[:, :end]", "return c"), message="only this call's latents"),
    Answer("LatentCache", "returns the whole buffer, unwritten positions included",
           _swap(_LATENT, "return self.buf[:, :end]", "return self.buf"), message="the whole buffer"),
    Answer("LatentCache", "advances the counter before checking for overflow",
           _swap(_LATENT, '''        end = self.n + c.shape[1]
        if end > self.buf.shape[1]:''', '''        end = self.n + c.shape[1]
        start, self.n = self.n, end
        if end > self.buf.shape[1]:''').replace("self.buf[:, self.n:end] = c", "self.buf[:, start:end] = c"),
           message="cache must be unchanged"),
    Answer("LatentCache", "returns a copy (.clone()) instead of a view of the buffer",
           _swap(_LATENT, "return self.buf[:, :end]", "return self.buf[:, :end].clone()"), message="a view"),
    Answer("LatentCache", "no overflow check: torch's shape error instead of a ValueError",
           _swap(_LATENT, '''        if end > self.buf.shape[1]:
            raise ValueError("the latent cache is full")
''', ""), message="should raise ValueError"),
    # MultiHeadLatentAttention
    Answer("MultiHeadLatentAttention", "caches keys and values instead of the latent (and so cannot absorb)",
           _MLA[:_MLA.index("        if cache is not None:")] + '''        kv = torch.cat([self.k_up(c), self.v_up(c)], dim=-1)
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
           _swap(_MLA, "w_k = self.k_up.weight.view(H, Dh, dc)", "w_k = self.k_up.weight.T.reshape(H, Dh, dc)"),
           message="absorbing k_up's weight transposed"),
    Answer("MultiHeadLatentAttention", "absorbs v_up's weight transposed",
           _swap(_MLA, "w_v = self.v_up.weight.view(H, Dh, dc)", "w_v = self.v_up.weight.T.reshape(H, Dh, dc)")),
    Answer("MultiHeadLatentAttention", "absorbed scores scaled by 1/sqrt(kv_latent_dim)",
           _swap(_MLA, "scale=1 / math.sqrt(Dh)", "scale=1 / math.sqrt(dc)"), message="1/sqrt(kv_latent_dim)"),
    Answer("MultiHeadLatentAttention", "upper-left causal mask with a cache",
           _swap(_MLA, ".tril(diagonal=n_k - T)", ".tril()"), message="upper-left causal mask"),
    Answer("MultiHeadLatentAttention", "ignores what cache.update returns: attends only to this call's latents",
           _swap(_MLA, "            c = cache.update(c)\n", "            cache.update(c)\n"),
           message="what cache.update returns (every cached latent) is ignored"),
    Answer("MultiHeadLatentAttention", "heads merged without the transpose",
           _swap(_MLA, "return self.o_proj(y.transpose(1, 2).reshape(B, T, H * Dh))", "return self.o_proj(y.reshape(B, T, H * Dh))"),
           message="heads merged without the transpose"),
    Answer("MultiHeadLatentAttention", "absorb=True absorbs k_up but still up-projects the values with v_up",
           _swap(_MLA, "            y = torch.einsum(\"bhtc,hdc->bhtd\", mixed, w_v)\n", '''            v = self.v_up(c).view(B, n_k, H, Dh).transpose(1, 2)
            y = F.scaled_dot_product_attention(q_lat, lat, v, attn_mask=mask, scale=1 / math.sqrt(Dh))
'''), message="never form per-head keys or values"),
    # mla_cache_bytes
    Answer("mla_cache_bytes", "a factor 2 for keys and values",
           _swap(_BYTES, "return num_layers", "return 2 * num_layers"), message="a factor 2 for keys and values"),
    Answer("mla_cache_bytes", "leaves out the decoupled RoPE key",
           _swap(_BYTES, "(kv_latent_dim + rope_dim)", "kv_latent_dim"), message="decoupled RoPE key"),
    Answer("mla_cache_bytes", "ignores batch_size", _swap(_BYTES, " * batch_size", ""), message="ignoring batch_size"),
    Answer("mla_cache_bytes", "counts bits", _swap(_BYTES, "* bytes_per_element", "* bytes_per_element * 8"),
           message="counting bits instead of bytes"),
    # PagedKVCache
    Answer("PagedKVCache", "frees a block while another sequence still uses it",
           _swap(_PAGED, '''            if self.users[block] == 0:
                self.free_list.append(block)''', '''            self.free_list.append(block)'''),
           message="last user frees it"),
    Answer("PagedKVCache", "no copy-on-write: appends write into a shared block",
           _swap(_PAGED, "shared_tail = length % size != 0 and self.users[table[-1]] > 1", "shared_tail = False"),
           message="copy-on-write"),
    Answer("PagedKVCache", "copy-on-write decided too late, from the length after the append",
           _swap(_PAGED, "shared_tail = length % size != 0 and", "shared_tail = bool(table) and (length + t) % size != 0 and"),
           message="copy-on-write"),
    Answer("PagedKVCache", "block table off by one at a block edge (one block too many when full)",
           _swap(_PAGED, "new_blocks = -(-(length + t) // size) - len(table)",
                 "new_blocks = (length + t) // size + 1 - len(table)"), message="block edges"),
    Answer("PagedKVCache", "allocates block by block and runs out half way, leaving blocks taken", _swap(_swap(
        _PAGED, "table = list(self.tables.get(seq_id, []))", "table = self.tables.setdefault(seq_id, [])"), '''
        for _ in range(new_blocks):
            block''', '''
        for _ in range(new_blocks):
            if not self.free_list:
                raise RuntimeError("out of blocks")
            block''').replace("if new_blocks + shared_tail > len(self.free_list):", "if shared_tail > len(self.free_list):"),
           message="must raise before changing anything"),
    Answer("PagedKVCache", "forgets the copy-on-write block when counting what an append needs",
           _swap(_PAGED, "if new_blocks + shared_tail > len(self.free_list):", "if new_blocks > len(self.free_list):"),
           message="Count the copy-on-write block"),
    Answer("PagedKVCache", "free never returns blocks to the pool",
           _swap(_PAGED, "                self.free_list.append(block)", "                pass"),
           message="num_free_blocks"),
    Answer("PagedKVCache", "fork copies the source's positions into new blocks",
           _swap(_PAGED, '''        self.tables[dst], self.lengths[dst] = list(self.tables[src]), self.lengths[src]
        for block in self.tables[dst]:
            self.users[block] += 1''', '''        self.append(dst, *self.gather(src))'''), message="without copying"),
    Answer("PagedKVCache", "gather returns whole blocks, unwritten slots included",
           _swap(_PAGED, "reshape(H, -1, Dh)[:, :length]\n        v", "reshape(H, -1, Dh)\n        v")
           .replace("reshape(H, -1, Dh)[:, :length]", "reshape(H, -1, Dh)"), message="partly filled"),
]

RIGHT = [
    Answer("RollingKVCache", "a buffer kept in position order and shifted with torch.roll", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.keys = torch.zeros(batch_size, num_heads, window, head_dim, dtype=dtype)
        self.values = torch.zeros_like(self.keys)
        self.window, self._count = window, 0

    @property
    def seq_len(self):
        return self._count

    def reset(self):
        self._count = 0

    def update(self, k, v):
        t, w = k.shape[2], self.window
        held = min(self._count, w - 1)
        k_vis = torch.cat([self.keys[:, :, w - held:], k], dim=2)
        v_vis = torch.cat([self.values[:, :, w - held:], v], dim=2)
        keep = min(t, w)
        self.keys = torch.roll(self.keys, -keep, dims=2)
        self.values = torch.roll(self.values, -keep, dims=2)
        self.keys[:, :, w - keep:] = k[:, :, t - keep:]
        self.values[:, :, w - keep:] = v[:, :, t - keep:]
        self._count += t
        return k_vis, v_vis
'''),
    Answer("sliding_window_mask", "two shifted tril masks", '''
def sliding_window_mask(n_q, n_k, window):
    if window <= 0:
        raise ValueError(f"window = {window}: need at least 1")
    causal = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
    too_old = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q - window)
    return causal & ~too_old
'''),
    Answer("RollingKVCache", "keeps the last window - 1 positions with torch.cat and a slice (cloned)", '''
class RollingKVCache:
    def __init__(self, batch_size, num_heads, window, head_dim, dtype=torch.float32):
        self.window, self.seen = window, 0
        self.k = torch.empty(batch_size, num_heads, 0, head_dim, dtype=dtype)
        self.v = torch.empty(batch_size, num_heads, 0, head_dim, dtype=dtype)

    @property
    def seq_len(self):
        return self.seen

    def reset(self):
        self.k, self.v, self.seen = self.k[:, :, :0], self.v[:, :, :0], 0

    def update(self, k, v):
        k_vis, v_vis = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        keep = min(self.window - 1, k_vis.shape[2])
        self.k = k_vis[:, :, k_vis.shape[2] - keep:].clone()
        self.v = v_vis[:, :, v_vis.shape[2] - keep:].clone()
        self.seen += k.shape[2]
        return k_vis, v_vis
'''),
    Answer("LatentCache", "narrow() and copy_()", '''
class LatentCache:
    def __init__(self, batch_size, max_seq_len, latent_dim, dtype=torch.float32):
        self.store = torch.empty(batch_size, max_seq_len, latent_dim, dtype=dtype)
        self.used = 0

    @property
    def seq_len(self):
        return int(self.used)

    def update(self, c):
        if self.used + c.size(1) > self.store.size(1):
            raise ValueError(f"{self.used} + {c.size(1)} positions exceed max_seq_len = {self.store.size(1)}")
        self.store.narrow(1, self.used, c.size(1)).copy_(c)
        self.used += c.size(1)
        return self.store.narrow(1, 0, self.used)
'''),
    Answer("MultiHeadLatentAttention", "explicit softmax; absorption with matmuls on the weights", '''
class MultiHeadLatentAttention(nn.Module):
    def __init__(self, d_model, num_heads, head_dim, kv_latent_dim):
        super().__init__()
        self.shape = (num_heads, head_dim, kv_latent_dim)
        self.q_proj = nn.Linear(d_model, num_heads * head_dim, bias=False)
        self.kv_down = nn.Linear(d_model, kv_latent_dim, bias=False)
        self.k_up = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.v_up = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, d_model, bias=False)

    def forward(self, x, cache=None, absorb=False):
        H, Dh, dc = self.shape
        B, T, _ = x.shape
        q = self.q_proj(x).reshape(B, T, H, Dh).permute(0, 2, 1, 3)
        lat = self.kv_down(x)
        lat = lat if cache is None else cache.update(lat)
        n = lat.shape[1]
        future = torch.arange(n)[None, :] > torch.arange(T)[:, None] + (n - T)
        if absorb:
            q_lat = q @ self.k_up.weight.reshape(H, Dh, dc)
            scores = q_lat @ lat[:, None].transpose(-1, -2)
        else:
            k = self.k_up(lat).reshape(B, n, H, Dh).permute(0, 2, 1, 3)
            scores = q @ k.transpose(-1, -2)
        weights = (scores / Dh ** 0.5).masked_fill(future, float("-inf")).softmax(dim=-1)
        if absorb:
            out = (weights @ lat[:, None]) @ self.v_up.weight.reshape(H, Dh, dc).transpose(-1, -2)
        else:
            out = weights @ self.v_up(lat).reshape(B, n, H, Dh).permute(0, 2, 1, 3)
        return self.o_proj(out.permute(0, 2, 1, 3).reshape(B, T, H * Dh))
'''),
    Answer("mla_cache_bytes", "per-token bytes first", '''
def mla_cache_bytes(num_layers, kv_latent_dim, rope_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_token = num_layers * kv_latent_dim * bytes_per_element + num_layers * rope_dim * bytes_per_element
    return per_token * seq_len * batch_size
'''),
    Answer("PagedKVCache", "a Counter of users, a deque free list, position-by-position writes, torch.cat gather", '''
import collections


class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_heads, head_dim, dtype=torch.float32):
        self.pool = torch.zeros(2, num_blocks, num_heads, block_size, head_dim, dtype=dtype)
        self.bs = block_size
        self.free_ids = collections.deque(range(num_blocks))
        self.refs = collections.Counter()
        self.seqs = {}

    @property
    def num_free_blocks(self):
        return len(self.free_ids)

    def block_table(self, seq_id):
        return [int(b) for b in self.seqs[seq_id][0]]

    def append(self, seq_id, k, v):
        blocks, n = self.seqs.get(seq_id, ([], 0))
        blocks = blocks.copy()
        cow = n % self.bs > 0 and self.refs[blocks[-1]] > 1
        grow = math.ceil((n + k.shape[1]) / self.bs) - len(blocks)
        if cow + grow > len(self.free_ids):
            raise RuntimeError(f"need {cow + grow} blocks, only {len(self.free_ids)} free")
        if cow:
            fresh = self.free_ids.popleft()
            self.pool[:, fresh] = self.pool[:, blocks[-1]]
            self.refs[blocks[-1]] -= 1
            self.refs[fresh] += 1
            blocks[-1] = fresh
        for _ in range(grow):
            fresh = self.free_ids.popleft()
            self.refs[fresh] += 1
            blocks.append(fresh)
        for t in range(k.shape[1]):
            pos = n + t
            self.pool[0, blocks[pos // self.bs], :, pos % self.bs] = k[:, t]
            self.pool[1, blocks[pos // self.bs], :, pos % self.bs] = v[:, t]
        self.seqs[seq_id] = (blocks, n + k.shape[1])

    def gather(self, seq_id):
        blocks, n = self.seqs[seq_id]
        if not blocks:
            empty = self.pool[0, 0, :, :0]
            return empty.clone(), empty.clone()
        k = torch.cat([self.pool[0, b] for b in blocks], dim=1)[:, :n]
        v = torch.cat([self.pool[1, b] for b in blocks], dim=1)[:, :n]
        return k, v

    def fork(self, src, dst):
        blocks, n = self.seqs[src]
        self.seqs[dst] = (blocks.copy(), n)
        self.refs.update(blocks)

    def free(self, seq_id):
        blocks, _ = self.seqs.pop(seq_id)
        for b in blocks:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_ids.append(b)
'''),
]
