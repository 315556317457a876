"""Chapter 4 answers: KVCache, CausalSelfAttention, generate, kv_cache_bytes.

Most wrong answers are one-line mutations of the reference (tests.bank.mutant)."""

import functools

from tests.bank import Answer, mutant

ASSIGNMENT = "04_kv_cache"
_cache = functools.partial(mutant, ASSIGNMENT, "KVCache")
_attn = functools.partial(mutant, ASSIGNMENT, "CausalSelfAttention")
_gen = functools.partial(mutant, ASSIGNMENT, "generate")
_RETURN = "return self.keys[:, :, :end], self.values[:, :, :end]"
_UPDATE = "logits = model(new_input, caches) if use_cache else model(ids)"
_SDPA = "y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"

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
    _cache("returns only this call's keys and values", (_RETURN, "return k, v"), message="only this call's keys"),
    _cache("returns the whole buffer, unwritten positions included", (_RETURN, "return self.keys, self.values"),
           message="whole preallocated buffer"),
    _cache("leaves position 0 empty: writes one position too far",
           ("self.keys[:, :, start:end] = k", "self.keys[:, :, start + 1:end + 1] = k"),
           ("self.values[:, :, start:end] = v", "self.values[:, :, start + 1:end + 1] = v"),
           message="position 0 is left empty"),
    _cache("advances the counter before checking for overflow",
           ("        self._filled = end\n        return", "        return"),
           ("start, end = self._filled, self._filled + k.shape[2]\n",
            "start, end = self._filled, self._filled + k.shape[2]\n        self._filled = end\n"),
           message="the cache must be unchanged"),
    _cache("no overflow check: torch's shape error instead of a clear ValueError",
           ("if end > self.max_seq_len:", "if False:"), message="should raise ValueError, but it raised RuntimeError"),
    _cache("rejects filling the cache exactly to max_seq_len (>= instead of >)",
           ("if end > self.max_seq_len:", "if end >= self.max_seq_len:"), message="Filling the cache exactly"),
    _cache("preallocates, but returns copies of the filled part (.clone())",
           (_RETURN, "return self.keys[:, :, :end].clone(), self.values[:, :, :end].clone()"),
           message="starts in the same buffer as the first update's k_all"),
    _cache("returns a view of the keys but a copy of the values",
           (_RETURN, "return self.keys[:, :, :end], self.values[:, :, :end].clone()"),
           message="starts in the same buffer as the first update's v_all"),
    _cache("reset() zeroes the buffers but keeps the counter",
           ("### BEGIN SOLUTION\n        self._filled = 0\n", "### BEGIN SOLUTION\n        self.keys.zero_()\n"),
           message="after reset()"),
    _cache("reset() allocates new buffers instead of reusing them",
           ("### BEGIN SOLUTION\n        self._filled = 0\n",
            "### BEGIN SOLUTION\n        self._filled = 0\n        self.keys = torch.zeros_like(self.keys)\n"),
           message="the data pointer of k_all after reset()"),
    _cache("stores the values in the key buffer too",
           ("self.values[:, :, start:end] = v", "self.values[:, :, start:end] = k"),
           message="returning the keys as values"),
    Answer("KVCache", "seq_len is a plain attribute that anyone can overwrite", '''
class KVCache:
    def __init__(self, batch_size, num_heads, max_seq_len, head_dim, dtype=torch.float32, device=None):
        shape = (batch_size, num_heads, max_seq_len, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.max_seq_len = max_seq_len
        self.seq_len = 0

    def update(self, k, v):
        start, end = self.seq_len, self.seq_len + k.shape[2]
        if end > self.max_seq_len:
            raise ValueError("cache full")
        self.keys[:, :, start:end] = k
        self.values[:, :, start:end] = v
        self.seq_len = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def reset(self):
        self.seq_len = 0
''', message="read-only property"),
    _attn("is_causal=True with a cache: upper-left alignment",
          (_SDPA, "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)"), message="upper-left causal alignment"),
    _attn("updates the cache but attends only to this call's keys", ("k, v = cache.update(k, v)", "cache.update(k, v)"),
          message="attending only to this call's keys"),
    _attn("no mask when a cache is given (right only for single tokens)",
          ("attn_mask=mask)", "attn_mask=mask if cache is None else None)"), message="no causal mask within a chunk"),
    _attn("mask diagonal off by one", ("tril(diagonal=n_k - n_q)", "tril(diagonal=n_k - n_q + 1)"), message="off by one"),
    _attn("splits the heads with view(B, H, T, Dh)",
          ("view(B, T, self.num_heads, self.head_dim).transpose(1, 2)", "view(B, self.num_heads, T, self.head_dim)"),
          ("y.transpose(1, 2).reshape(B, T, D)", "y.reshape(B, T, D)"), message="heads split in the wrong order"),
    _attn("no 1/sqrt(head_dim) scale", ("attn_mask=mask)", "attn_mask=mask, scale=1.0)"), message="no 1/sqrt(head_dim)"),
    _attn("projections with bias", *[(f"self.{n} = nn.Linear(d_model, d_model, bias=False)",
                                      f"self.{n} = nn.Linear(d_model, d_model)") for n in ("q_proj", "k_proj", "v_proj")],
          message="should be nn.Linear(12, 12, bias=False)"),
    _gen("returns only the new tokens", ("    return ids\n", "    return ids[:, prompt_ids.shape[1]:]\n"),
         message="returning only the new tokens"),
    _gen("ignores use_cache: always recomputes", (_UPDATE, "logits = model(ids)"), message="pass the caches every time"),
    _gen("feeds the whole sequence into the cache at every step",
         (_UPDATE, "logits = model(ids, caches) if use_cache else model(ids)"),
         message="feed only the newest token after the prefill"),
    _gen("reads the logits of the first position", ("logits[:, -1]", "logits[:, 0]"), message="first position"),
    _gen("one token too many", ("range(max_new_tokens)", "range(max_new_tokens + 1)"), message="one token too many"),
    _gen("makes the caches for batch 1", ("model.make_caches(ids.shape[0],", "model.make_caches(1,"),
         message="batch_size=1"),
    _gen("makes the caches for the model's whole max_seq_len", ("ids.shape[1] + max_new_tokens)", "None)"),
         message="make_caches call"),
    Answer("generate", "one wasted model call after the last token", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    caches = model.make_caches(ids.shape[0], ids.shape[1] + max_new_tokens) if use_cache else None
    with torch.no_grad():
        logits = model(ids, caches) if use_cache else model(ids)
        for _ in range(max_new_tokens):
            next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, next_token], dim=1)
            logits = model(next_token, caches) if use_cache else model(ids)
    return ids
''', message="the number of calls to the model"),
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
''', message="Allocate both buffers once in __init__"),
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
''', message="prefill the prompt once"),
    Answer("generate", "returns float probabilities' argmax as floats", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids.float()
    with torch.no_grad():
        for _ in range(max_new_tokens):
            nxt = model(ids.long())[:, -1].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, nxt.float()], dim=1)
    return ids
''', message="dtype torch.int64"),
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
''', message="with the defaults batch_size=1, bytes_per_element=2"),
]

RIGHT = [
    _cache("update returns views made with narrow()", (_RETURN, "return self.keys.narrow(2, 0, end), self.values.narrow(2, 0, end)")),
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

WRONG += [
    _attn("hands the cache keys of shape (B, T, H, Dh): a raw RuntimeError, reported with the call's shapes",
          ("k, v = cache.update(k, v)", "k, v = cache.update(k.transpose(1, 2), v.transpose(1, 2))"),
          # without the layer's name, which describe_call gives as RemoteObject for a handle under trusted scoring
          message="(tensor of shape (1, 5, 16), float32, a CatCache) raised"),
]

# Issue 34 (expect_close audit): attention written out by hand, softmax as exp(S - logsumexp(S)), is right; it rounds
# differently from SDPA, which the float64 oracle and its derived bound accept.
RIGHT += [
    mutant(ASSIGNMENT, "CausalSelfAttention", "attention by hand with exp(S - logsumexp(S)) instead of SDPA",
           ("y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
            "s = (q @ k.transpose(-1, -2) / self.head_dim ** 0.5).masked_fill(~mask, float('-inf'))\n"
            "        y = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)) @ v")),
]

# Issue 34 (classes 2 and 6, and the bank's depth): large scores, where a softmax written by hand without the row max
# overflows float32's exp; more ways to get kv_cache_bytes wrong; right answers written differently.
WRONG += [
    mutant(ASSIGNMENT, "CausalSelfAttention", "attention by hand with a softmax that does not subtract the row max",
           (_SDPA,
            "s = (q @ k.transpose(-1, -2) / self.head_dim ** 0.5).masked_fill(~mask, float('-inf'))\n"
            "        e = torch.exp(s)\n"
            "        y = (e / e.sum(dim=-1, keepdim=True)) @ v"),
           message="exp overflows float32 past 88.7"),
    Answer("kv_cache_bytes", "hard-codes 2 bytes per element (fp16) instead of using bytes_per_element", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2
''', message="hard-coding 2 bytes per element"),
    Answer("kv_cache_bytes", "returns MiB instead of bytes", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element // 2**20
''', message="returning MiB"),
    Answer("kv_cache_bytes", "returns NumPy's int64 from np.prod, not a Python int", '''
import numpy as np


def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element])
''', message="Python int"),
]

RIGHT += [
    Answer("kv_cache_bytes", "functools.reduce over the factors, bytes per token first", '''
import functools
import operator


def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_token = functools.reduce(operator.mul, (2, num_layers, num_kv_heads, head_dim, bytes_per_element))
    return per_token * seq_len * batch_size
'''),
    Answer("kv_cache_bytes", "a torch int64 product turned into a Python int", '''
def kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    factors = torch.tensor([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element])
    return int(factors.prod())
'''),
    Answer("generate", "the output preallocated and filled in place; the newest token sliced from it", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    B, T = prompt_ids.shape
    out = torch.empty(B, T + max_new_tokens, dtype=torch.long)
    out[:, :T] = prompt_ids
    caches = model.make_caches(B, T + max_new_tokens) if use_cache else None
    with torch.no_grad():
        for t in range(T, T + max_new_tokens):
            if use_cache:
                logits = model(out[:, :T] if t == T else out[:, t - 1:t], caches)
            else:
                logits = model(out[:, :t])
            out[:, t] = logits[:, -1].argmax(dim=-1)
    return out
'''),
    Answer("generate", "torch.set_grad_enabled(False) and the next token from topk", '''
def generate(model, prompt_ids, max_new_tokens, use_cache=True):
    ids = prompt_ids
    with torch.set_grad_enabled(False):
        caches = model.make_caches(ids.size(0), ids.size(1) + max_new_tokens) if use_cache else None
        feed = ids
        for _ in range(max_new_tokens):
            logits = model(feed, caches) if use_cache else model(ids)
            token = logits[:, -1, :].topk(1, dim=-1).indices
            ids = torch.cat((ids, token), dim=1)
            feed = token
    return ids
'''),
    mutant(ASSIGNMENT, "CausalSelfAttention", "SDPA with an additive float mask (-inf where a query may not look)",
           (_SDPA, "bias = torch.zeros(n_q, n_k, dtype=x.dtype).masked_fill(~mask, float('-inf'))\n"
                   "        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)")),
    _cache("one stacked (2, B, H, L, Dh) buffer; keys and values are its two views",
           ("        self.keys = torch.zeros(shape, dtype=dtype, device=device)\n"
            "        self.values = torch.zeros(shape, dtype=dtype, device=device)\n",
            "        self.kv = torch.zeros((2,) + shape, dtype=dtype, device=device)\n"
            "        self.keys, self.values = self.kv[0], self.kv[1]\n")),
]
