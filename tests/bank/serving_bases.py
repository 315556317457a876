"""Chapter 10's bank: the base answers (correct, written as a student would) that the wrong answers of
`ch10_serving` change one line of."""

MASK = '''
def sliding_window_mask(n_q, n_k, window):
    if window < 1:
        raise ValueError("the window must be at least 1")
    p = torch.arange(n_q)[:, None] + (n_k - n_q)
    j = torch.arange(n_k)[None, :]
    return (j <= p) & (j > p - window)
'''

ROLLING = '''
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

READ = '''        prev = torch.arange(max(0, self.n - (self.window - 1)), self.n) % self.window
        k_vis = torch.cat([self.k[:, :, prev], k], dim=2)
        v_vis = torch.cat([self.v[:, :, prev], v], dim=2)
'''
WRITE = '''        self.k[:, :, slots] = k[:, :, t - keep:]
        self.v[:, :, slots] = v[:, :, t - keep:]
'''

LATENT = '''
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

MLA = '''
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

BYTES = '''
def mla_cache_bytes(num_layers, kv_latent_dim, rope_dim, seq_len, batch_size=1, bytes_per_element=2):
    return num_layers * (kv_latent_dim + rope_dim) * seq_len * batch_size * bytes_per_element
'''

PAGED = '''
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
