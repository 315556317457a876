"""Chapter 4 answers: KVCache, CausalSelfAttention, generate, kv_cache_bytes."""

from tests.bank import Answer

ASSIGNMENT = "04_kv_cache"

# A correct KVCache that each wrong answer below changes in one place.
_CACHE_HEAD = '''
class KVCache:
    def __init__(self, batch_size, num_heads, max_seq_len, head_dim, dtype=torch.float32, device=None):
        shape = (batch_size, num_heads, max_seq_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.max_seq_len = max_seq_len
        self.n = 0

    @property
    def seq_len(self):
        return self.n

    def reset(self):
        self.n = 0
'''

# A correct CausalSelfAttention __init__; the wrong forwards below follow it.
_ATTENTION_HEAD = '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dh = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def heads(self, x, proj):
        B, T, _ = x.shape
        return proj(x).view(B, T, self.h, self.dh).transpose(1, 2)
'''


def _attention(body: str) -> str:
    return _ATTENTION_HEAD + body


WRONG = [
    # KVCache
    Answer("KVCache", "returns only this call's keys and values", _CACHE_HEAD + '''
    def update(self, k, v):
        t = k.shape[2]
        if self.n + t > self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return k, v
''', message="returning only this call's keys"),
    Answer("KVCache", "returns the whole buffer, unwritten positions included", _CACHE_HEAD + '''
    def update(self, k, v):
        t = k.shape[2]
        if self.n + t > self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return self.k, self.v
''', message="the whole preallocated buffer"),
    Answer("KVCache", "leaves position 0 empty: writes one position too far", _CACHE_HEAD + '''
    def update(self, k, v):
        t = k.shape[2]
        if self.n + t >= self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, self.n + 1:self.n + 1 + t] = k
        self.v[:, :, self.n + 1:self.n + 1 + t] = v
        self.n += t
        return self.k[:, :, :self.n + 1], self.v[:, :, :self.n + 1]
''', message="positions off by one"),
    Answer("KVCache", "advances the counter before checking for overflow", _CACHE_HEAD + '''
    def update(self, k, v):
        start = self.n
        self.n += k.shape[2]
        if self.n > self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, start:self.n] = k
        self.v[:, :, start:self.n] = v
        return self.k[:, :, :self.n], self.v[:, :, :self.n]
''', message="the cache must be unchanged"),
    Answer("KVCache", "no overflow check: torch's shape error instead of a clear ValueError", _CACHE_HEAD + '''
    def update(self, k, v):
        t = k.shape[2]
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return self.k[:, :, :self.n], self.v[:, :, :self.n]
''', message="should raise ValueError"),
    Answer("KVCache", "rejects filling the cache exactly to max_seq_len (>= instead of >)", _CACHE_HEAD + '''
    def update(self, k, v):
        t = k.shape[2]
        if self.n + t >= self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return self.k[:, :, :self.n], self.v[:, :, :self.n]
'''),
    Answer("KVCache", "grows with torch.cat instead of preallocating", '''
class KVCache:
    def __init__(self, batch_size, num_heads, max_seq_len, head_dim, dtype=torch.float32, device=None):
        self.k = torch.zeros(batch_size, num_heads, 0, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros(batch_size, num_heads, 0, head_dim, dtype=dtype, device=device)
        self.max_seq_len = max_seq_len

    @property
    def seq_len(self):
        return self.k.shape[2]

    def update(self, k, v):
        if self.seq_len + k.shape[2] > self.max_seq_len:
            raise ValueError("cache full")
        self.k = torch.cat([self.k, k], dim=2)
        self.v = torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def reset(self):
        self.k, self.v = self.k[:, :, :0], self.v[:, :, :0]
''', message="preallocated"),
    Answer("KVCache", "preallocates, but returns copies of the filled part (.clone())", _CACHE_HEAD + '''
    def update(self, k, v):
        t = k.shape[2]
        if self.n + t > self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return self.k[:, :, :self.n].clone(), self.v[:, :, :self.n].clone()
''', message="not copies"),
    Answer("KVCache", "reset() zeroes the buffers but keeps the counter", '''
class KVCache:
    def __init__(self, batch_size, num_heads, max_seq_len, head_dim, dtype=torch.float32, device=None):
        shape = (batch_size, num_heads, max_seq_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.max_seq_len = max_seq_len
        self.n = 0

    @property
    def seq_len(self):
        return self.n

    def update(self, k, v):
        t = k.shape[2]
        if self.n + t > self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return self.k[:, :, :self.n], self.v[:, :, :self.n]

    def reset(self):
        self.k.zero_()
        self.v.zero_()
''', message="after reset()"),
    Answer("KVCache", "stores the values in the key buffer too", _CACHE_HEAD + '''
    def update(self, k, v):
        t = k.shape[2]
        if self.n + t > self.max_seq_len:
            raise ValueError("cache full")
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = k
        self.n += t
        return self.k[:, :, :self.n], self.v[:, :, :self.n]
''', message="returning the keys as values"),
    # CausalSelfAttention
    Answer("CausalSelfAttention", "is_causal=True with a cache: upper-left alignment", _attention('''
    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = self.heads(x, self.q_proj), self.heads(x, self.k_proj), self.heads(x, self.v_proj)
        if cache is not None:
            k, v = cache.update(k, v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
'''), message="upper-left causal alignment"),
    Answer("CausalSelfAttention", "updates the cache but attends only to this call's keys", _attention('''
    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = self.heads(x, self.q_proj), self.heads(x, self.k_proj), self.heads(x, self.v_proj)
        if cache is not None:
            cache.update(k, v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
'''), message="attending only to this call's keys"),
    Answer("CausalSelfAttention", "no mask when a cache is given (right only for single tokens)", _attention('''
    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = self.heads(x, self.q_proj), self.heads(x, self.k_proj), self.heads(x, self.v_proj)
        if cache is not None:
            k, v = cache.update(k, v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
'''), message="no causal mask within a chunk"),
    Answer("CausalSelfAttention", "mask diagonal off by one", _attention('''
    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = self.heads(x, self.q_proj), self.heads(x, self.k_proj), self.heads(x, self.v_proj)
        if cache is not None:
            k, v = cache.update(k, v)
        n_q, n_k = q.shape[2], k.shape[2]
        mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q + 1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
'''), message="off by one"),
    Answer("CausalSelfAttention", "splits the heads with view(B, H, T, Dh)", _attention('''
    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, self.h, T, self.dh) for p in (self.q_proj, self.k_proj, self.v_proj))
        if cache is not None:
            k, v = cache.update(k, v)
        n_q, n_k = q.shape[2], k.shape[2]
        mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(y.reshape(B, T, D))
'''), message="heads split in the wrong order"),
    Answer("CausalSelfAttention", "hand-written attention without the 1/sqrt(head_dim) scale", _attention('''
    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = self.heads(x, self.q_proj), self.heads(x, self.k_proj), self.heads(x, self.v_proj)
        if cache is not None:
            k, v = cache.update(k, v)
        n_q, n_k = q.shape[2], k.shape[2]
        scores = q @ k.transpose(-1, -2)
        mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        y = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
'''), message="no 1/sqrt(head_dim) scaling"),
    Answer("CausalSelfAttention", "projections with bias", '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dh = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.h, self.dh).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        if cache is not None:
            k, v = cache.update(k, v)
        n_q, n_k = q.shape[2], k.shape[2]
        mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
''', message="bias=False"),
    # generate
    Answer("generate", "returns only the new tokens", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return ids[:, prompt_ids.shape[1]:]
''', message="returning only the new tokens"),
    Answer("generate", "ignores use_cache: always recomputes", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return ids
''', message="With use_cache=True, pass the caches"),
    Answer("generate", "feeds the whole sequence into the cache at every step", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    caches = model.make_caches(ids.shape[0], ids.shape[1] + max_new_tokens) if use_cache else None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(ids, caches) if use_cache else model(ids)
            ids = torch.cat([ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return ids
''', message="feed only the newest token"),
    Answer("generate", "reads the logits of the first position", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            ids = torch.cat([ids, model(ids)[:, 0].argmax(dim=-1, keepdim=True)], dim=1)
    return ids
''', message="logits of the first position instead of the last"),
    Answer("generate", "one token too many", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    with torch.no_grad():
        for _ in range(max_new_tokens + 1):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    return ids
''', message="one token too many"),
    Answer("generate", "with the cache, decodes from the last prompt token without a prefill", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    with torch.no_grad():
        if not use_cache:
            for _ in range(max_new_tokens):
                ids = torch.cat([ids, model(ids)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
            return ids
        caches = model.make_caches(ids.shape[0], ids.shape[1] + max_new_tokens)
        token = ids[:, -1:]
        for _ in range(max_new_tokens):
            token = model(token, caches)[:, -1].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, token], dim=1)
    return ids
'''),
    Answer("generate", "returns float probabilities' argmax as floats", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids.float()
    with torch.no_grad():
        for _ in range(max_new_tokens):
            nxt = model(ids.long())[:, -1].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, nxt.float()], dim=1)
    return ids
''', message="dtype torch.int64"),
    # kv_cache_bytes
    Answer("kv_cache_bytes", "forgets the factor 2 for K and V", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
''', message="forgetting the factor 2 for K and V"),
    Answer("kv_cache_bytes", "ignores batch_size", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element
''', message="ignoring batch_size"),
    Answer("kv_cache_bytes", "counts bits", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8
''', message="counting bits instead of bytes"),
    Answer("kv_cache_bytes", "returns a float (converts from bits with /)", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    bits = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8
    return bits / 8
''', message="Python int"),
    Answer("kv_cache_bytes", "default of 4 bytes per element (fp32)", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=4):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
'''),
]

RIGHT = [
    Answer("KVCache", "torch.empty buffers, narrow() views and copy_()", '''
class KVCache:
    def __init__(self, batch_size, num_heads, max_seq_len, head_dim, dtype=torch.float32, device=None):
        self.buffers = torch.empty(2, batch_size, num_heads, max_seq_len, head_dim, dtype=dtype, device=device)
        self.capacity = max_seq_len
        self.length = 0

    @property
    def seq_len(self):
        return int(self.length)

    def update(self, k, v):
        new = k.size(2)
        if self.length + new > self.capacity:
            raise ValueError(f"no room for {new} positions: {self.length}/{self.capacity} used")
        self.buffers[0].narrow(2, self.length, new).copy_(k)
        self.buffers[1].narrow(2, self.length, new).copy_(v)
        self.length += new
        return self.buffers[0].narrow(2, 0, self.length), self.buffers[1].narrow(2, 0, self.length)

    def reset(self):
        self.length = 0
'''),
    Answer("CausalSelfAttention", "hand-written softmax with an arange mask; is_causal only without a cache", _attention('''
    def forward(self, x, cache=None):
        B, T, D = x.shape
        q, k, v = self.heads(x, self.q_proj), self.heads(x, self.k_proj), self.heads(x, self.v_proj)
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            k, v = cache.update(k, v)
            past = k.shape[2] - T
            allowed = torch.arange(k.shape[2])[None, :] <= past + torch.arange(T)[:, None]
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.dh)
            y = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
''')),
    Answer("generate", "separate loops, a decorator for no_grad and a list of tokens", '''
@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    tokens = [prompt_ids]
    if not use_cache:
        for _ in range(max_new_tokens):
            logits = model(torch.cat(tokens, dim=1))
            tokens.append(logits[:, -1, :].argmax(-1).unsqueeze(-1))
        return torch.cat(tokens, dim=1)
    caches = model.make_caches(prompt_ids.shape[0], prompt_ids.shape[1] + max_new_tokens)
    if max_new_tokens == 0:
        return prompt_ids.clone()
    logits = model(prompt_ids, caches)
    while True:
        tokens.append(logits[:, -1, :].argmax(-1).unsqueeze(-1))
        if len(tokens) == max_new_tokens + 1:
            return torch.cat(tokens, dim=1)
        logits = model(tokens[-1], caches)
'''),
    Answer("kv_cache_bytes", "math.prod over the factors", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_position = math.prod((2, num_layers, num_kv_heads, head_dim, bytes_per_element))
    return per_position * seq_len * batch_size
'''),
]
