"""Chapter 10's bank: differently written right answers for sliding_window_mask, MultiHeadLatentAttention and mla_cache_bytes, each written apart from
the reference (no one-token edits of it)."""

from tests.bank import Answer

RIGHT = [
    Answer("sliding_window_mask", "two shifted tril masks", '''
def sliding_window_mask(n_q, n_k, window):
    if window <= 0:
        raise ValueError(f"window = {window}: need at least 1")
    causal = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
    too_old = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q - window)
    return causal & ~too_old
'''),
    Answer("sliding_window_mask", "a distance table: 0 <= p - j < window", '''
def sliding_window_mask(n_q, n_k, window):
    if not window >= 1:
        raise ValueError("sliding_window_mask: the window must be >= 1, or a position cannot even see itself")
    distance = (torch.arange(n_q).unsqueeze(1) + n_k - n_q) - torch.arange(n_k).unsqueeze(0)
    return (distance >= 0) & (distance < window)
'''),
    Answer("sliding_window_mask", "Python loops over the queries, filling each row's slice", '''
def sliding_window_mask(n_q, n_k, window):
    if window < 1:
        raise ValueError("a window below 1 sees nothing")
    mask = torch.zeros((n_q, n_k), dtype=torch.bool)
    for i in range(n_q):
        pos = n_k - n_q + i
        if pos >= 0:
            mask[i, max(0, pos - window + 1):pos + 1] = True
    return mask
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
    Answer("MultiHeadLatentAttention", "einsum everywhere, a triu mask of the future, absorbed weights via unflatten", '''
class MultiHeadLatentAttention(nn.Module):
    def __init__(self, d_model, num_heads, head_dim, kv_latent_dim):
        super().__init__()
        self.n_heads, self.d_head, self.d_latent = num_heads, head_dim, kv_latent_dim
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(d_model, inner, bias=False)
        self.kv_down = nn.Linear(d_model, kv_latent_dim, bias=False)
        self.k_up = nn.Linear(kv_latent_dim, inner, bias=False)
        self.v_up = nn.Linear(kv_latent_dim, inner, bias=False)
        self.o_proj = nn.Linear(inner, d_model, bias=False)

    def forward(self, x, cache=None, absorb=False):
        bsz, t, _ = x.shape
        h, dh = self.n_heads, self.d_head
        q = self.q_proj(x).unflatten(-1, (h, dh))                  # (B, T, H, Dh)
        lat = self.kv_down(x)
        if cache is not None:
            lat = cache.update(lat)
        n = lat.shape[1]
        future = torch.triu(torch.ones(t, n, dtype=torch.bool), diagonal=n - t + 1)
        if absorb:
            wk = self.k_up.weight.unflatten(0, (h, dh))           # (H, Dh, d_c)
            wv = self.v_up.weight.unflatten(0, (h, dh))
            q_lat = torch.einsum("bthd,hdc->bhtc", q, wk)
            scores = torch.einsum("bhtc,bnc->bhtn", q_lat, lat)
        else:
            keys = self.k_up(lat).unflatten(-1, (h, dh))          # (B, n, H, Dh)
            scores = torch.einsum("bthd,bnhd->bhtn", q, keys)
        probs = torch.softmax(scores.masked_fill(future, float("-inf")) / math.sqrt(dh), dim=-1)
        if absorb:
            mixed = torch.einsum("bhtn,bnc->bhtc", probs, lat)
            y = torch.einsum("bhtc,hdc->bthd", mixed, wv)
        else:
            values = self.v_up(lat).unflatten(-1, (h, dh))
            y = torch.einsum("bhtn,bnhd->bthd", probs, values)
        return self.o_proj(y.flatten(-2))
'''),
    Answer("MultiHeadLatentAttention", "matmuls on (H, Dh, d_c) weights broadcast over the batch, SDPA with a "
                                       "position mask", '''
class MultiHeadLatentAttention(nn.Module):
    def __init__(self, d_model, num_heads, head_dim, kv_latent_dim):
        super().__init__()
        self.heads = num_heads
        self.q_proj = nn.Linear(d_model, num_heads * head_dim, bias=False)
        self.kv_down = nn.Linear(d_model, kv_latent_dim, bias=False)
        self.k_up = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.v_up = nn.Linear(kv_latent_dim, num_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, d_model, bias=False)

    def split(self, t):
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3)

    def forward(self, x, cache=None, absorb=False):
        b, t, _ = x.shape
        q = self.split(self.q_proj(x))                                  # (B, H, T, Dh)
        dh = q.shape[-1]
        c = self.kv_down(x) if cache is None else cache.update(self.kv_down(x))
        n = c.shape[1]
        allowed = torch.arange(n).view(1, n) <= torch.arange(t).view(t, 1) + (n - t)
        if absorb:
            w_k = self.k_up.weight.reshape(self.heads, dh, -1)         # (H, Dh, d_c)
            w_v = self.v_up.weight.reshape(self.heads, dh, -1)
            q_lat = q @ w_k                                             # (B, H, T, d_c)
            mixed = F.scaled_dot_product_attention(q_lat, c.unsqueeze(1), c.unsqueeze(1), attn_mask=allowed,
                                                   scale=dh ** -0.5)
            y = mixed @ w_v.transpose(1, 2)                             # (B, H, T, Dh)
        else:
            y = F.scaled_dot_product_attention(q, self.split(self.k_up(c)), self.split(self.v_up(c)),
                                               attn_mask=allowed)
        return self.o_proj(y.permute(0, 2, 1, 3).reshape(b, t, -1))
'''),
    Answer("mla_cache_bytes", "per-token bytes first", '''
def mla_cache_bytes(num_layers, kv_latent_dim, rope_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_token = num_layers * kv_latent_dim * bytes_per_element + num_layers * rope_dim * bytes_per_element
    return per_token * seq_len * batch_size
'''),
    Answer("mla_cache_bytes", "math.prod of the factors", '''
def mla_cache_bytes(num_layers, kv_latent_dim, rope_dim, seq_len, batch_size=1, bytes_per_element=2):
    import math
    per_position = kv_latent_dim + rope_dim        # one latent and one shared RoPE key, no factor 2
    return math.prod([num_layers, per_position, seq_len, batch_size, bytes_per_element])
'''),
    Answer("mla_cache_bytes", "summed layer by layer", '''
def mla_cache_bytes(num_layers, kv_latent_dim, rope_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_latent_dim * seq_len * batch_size * bytes_per_element
        rope_key = rope_dim * seq_len * batch_size * bytes_per_element
        total += latent + rope_key
    return total
'''),
]
