"""Chapter 6 answers: rope_frequencies, apply_rope, LlamaAttention."""

from tests.bank import Answer, mutant

ASSIGNMENT = "06_rope"

_FREQUENCIES = '''
def rope_frequencies(head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    return (base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)).float()
'''

# A correct apply_rope with one marked piece swapped out, so each wrong answer differs from a right one
# by exactly the mistake it names.
_ROPE = '''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    wide = torch.promote_types(x.dtype, torch.float32)
    angles = positions.to(wide)[..., None] * rope_frequencies(d, base).to(wide)
    if angles.dim() == 3:
        angles = angles[:, None]
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :d // 2].to(wide), x[..., d // 2:].to(wide)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)
'''

# A correct LlamaAttention, likewise.
_LLAMA = '''
class LlamaAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads or (d_model // num_heads) % 2:
            raise ValueError("heads do not divide evenly, or head_dim is odd")
        self.num_heads, self.num_kv_heads, self.rope_base = num_heads, num_kv_heads, rope_base
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        past = 0 if cache is None else cache.seq_len
        pos = torch.arange(past, past + T)
        q, k = apply_rope(q, pos, self.rope_base), apply_rope(k, pos, self.rope_base)
        if cache is not None:
            k, v = cache.update(k, v)
        n_rep = self.num_heads // self.num_kv_heads
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        n_k = k.shape[2]
        mask = torch.ones(T, n_k, dtype=torch.bool).tril(diagonal=n_k - T)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, D))
'''


def _swap(source: str, old: str, new: str) -> str:
    """source with one piece of code replaced."""
    assert old in source, old
    return source.replace(old, new)


WRONG = [
    Answer("rope_frequencies", "frequencies without the factor 2 (base ** (-i / head_dim))",
           _swap(_FREQUENCIES, "torch.arange(0, head_dim, 2, dtype=torch.float64)",
                 "torch.arange(head_dim // 2, dtype=torch.float64)"), message="without the factor 2"),
    Answer("rope_frequencies", "a positive exponent", _swap(_FREQUENCIES, "(-torch.arange", "(torch.arange"),
           message="positive exponent"),
    Answer("rope_frequencies", "pairs counted from 1", _swap(_FREQUENCIES, "torch.arange(0, head_dim, 2,", "torch.arange(2, head_dim + 2, 2,"),
           message="counted from 1"),
    Answer("rope_frequencies", "one frequency per dimension instead of one per pair",
           _swap(_FREQUENCIES, "torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim",
                 "torch.arange(head_dim, dtype=torch.float64) / head_dim"), message="shape"),
    Answer("rope_frequencies", "returns float64", _swap(_FREQUENCIES, ").float()", ")"), message="float32"),
    Answer("rope_frequencies", "no ValueError for an odd head_dim",
           _swap(_FREQUENCIES, '    if head_dim % 2:\n        raise ValueError("head_dim must be even")\n', ""),
           message="ValueError"),
    Answer("apply_rope", "interleaved pairs (2i, 2i + 1) instead of half-split", _swap(
        _ROPE, """    x1, x2 = x[..., :d // 2].to(wide), x[..., d // 2:].to(wide)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)""",
        """    x1, x2 = x[..., 0::2].to(wide), x[..., 1::2].to(wide)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2).to(x.dtype)"""),
        message="interleaved"),
    Answer("apply_rope", "the rotation's sign flipped", _swap(
        _ROPE, "[x1 * cos - x2 * sin, x1 * sin + x2 * cos]", "[x1 * cos + x2 * sin, x2 * cos - x1 * sin]"),
        message="sign flipped"),
    Answer("apply_rope", "frequencies without the factor 2, computed inline", _swap(
        _ROPE, "rope_frequencies(d, base).to(wide)", "base ** (-torch.arange(d // 2, dtype=wide) / d)"),
        message="without the factor 2"),
    Answer("apply_rope", "positions (B, T): every batch row rotated with the positions of row 0", _swap(
        _ROPE, "positions.to(wide)[..., None]", "positions.reshape(-1, positions.shape[-1])[0].to(wide)[..., None]"),
        message="row 0"),
    Answer("apply_rope", "angles computed in x's dtype (bfloat16 at large positions)", _swap(
        _ROPE, "wide = torch.promote_types(x.dtype, torch.float32)", "wide = x.dtype"), message="float32"),
    Answer("apply_rope", "rotates x in place and returns it", """
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    angles = positions.double()[..., None] * rope_frequencies(d, base).double()
    if angles.dim() == 3:
        angles = angles[:, None]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :d // 2].clone(), x[..., d // 2:].clone()
    x[..., :d // 2] = x1 * cos - x2 * sin
    x[..., d // 2:] = x1 * sin + x2 * cos
    return x
""", message="must not modify"),
    Answer("LlamaAttention", "positions not offset by the cache (a step's query at 0 instead of cache.seq_len)",
           _swap(_LLAMA, "past = 0 if cache is None else cache.seq_len", "past = 0"), message="not offset by the cache"),
    Answer("LlamaAttention", "only the queries rotated", _swap(
        _LLAMA, "q, k = apply_rope(q, pos, self.rope_base), apply_rope(k, pos, self.rope_base)",
        "q = apply_rope(q, pos, self.rope_base)")),
    Answer("LlamaAttention", "values rotated as well", _swap(
        _LLAMA, "q, k = apply_rope(q, pos, self.rope_base), apply_rope(k, pos, self.rope_base)",
        "q, k, v = (apply_rope(t, pos, self.rope_base) for t in (q, k, v))"), message="values rotated"),
    Answer("LlamaAttention", "KV heads tiled instead of interleaved", _swap(
        _LLAMA, "k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)",
        "k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)"), message="tiled"),
    Answer("LlamaAttention", "cached keys rotated a second time", _swap(
        _LLAMA, "            k, v = cache.update(k, v)\n",
        "            k, v = cache.update(k, v)\n            k = apply_rope(k, torch.arange(k.shape[2]), self.rope_base)\n"),
        message="rotated a second time"),
    Answer("LlamaAttention", "keys cached unrotated, the whole cache rotated at every call", _swap(
        _LLAMA, """        q, k = apply_rope(q, pos, self.rope_base), apply_rope(k, pos, self.rope_base)
        if cache is not None:
            k, v = cache.update(k, v)""", """        q = apply_rope(q, pos, self.rope_base)
        if cache is not None:
            k, v = cache.update(k, v)
        k = apply_rope(k, torch.arange(k.shape[2]), self.rope_base)"""), message="stored before they were rotated"),
    Answer("LlamaAttention", "is_causal=True: the mask is aligned to the upper left once the cache is in use", _swap(
        _LLAMA, "F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
        "F.scaled_dot_product_attention(q, k, v, is_causal=True)"), message="upper left"),
    Answer("LlamaAttention", "no ValueError for an odd head_dim", _swap(
        _LLAMA, "if d_model % num_heads or num_heads % num_kv_heads or (d_model // num_heads) % 2:",
        "if d_model % num_heads or num_heads % num_kv_heads:"), message="ValueError"),
    Answer("LlamaAttention", "no ValueError for indivisible heads", _swap(
        _LLAMA, "if d_model % num_heads or num_heads % num_kv_heads or (d_model // num_heads) % 2:",
        "if d_model % num_heads or (d_model // num_heads) % 2:"), message="ValueError"),
    Answer("LlamaAttention", "chapter 5's names (out_proj instead of o_proj): Hugging Face's state_dict does not load",
           _LLAMA.replace("o_proj", "out_proj"), message="o_proj"),
]

RIGHT = [
    Answer("rope_frequencies", "Hugging Face's way: 1 / base ** (arange(0, d, 2) / d) in float32", """
def rope_frequencies(head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
"""),
    Answer("rope_frequencies", "a list comprehension with math", """
import math


def rope_frequencies(head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError("odd head_dim")
    return torch.tensor([math.exp(-2 * i / head_dim * math.log(base)) for i in range(head_dim // 2)],
                        dtype=torch.float32)
"""),
    Answer("apply_rope", "complex numbers: x1 + i x2 times e^(i angle)", """
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    angles = positions.to(wide).unsqueeze(-1) * rope_frequencies(x.shape[-1], base).to(wide)
    if positions.dim() == 2:
        angles = angles.unsqueeze(1)
    z = torch.complex(x[..., :half].to(wide), x[..., half:].to(wide))
    z = z * torch.polar(torch.ones_like(angles), angles)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)
"""),
    Answer("apply_rope", "cos/sin tables indexed by position and rotate_half (Hugging Face style)", """
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    wide = torch.promote_types(x.dtype, torch.float32)
    table = torch.outer(torch.arange(int(positions.max()) + 1, dtype=wide), rope_frequencies(d, base).to(wide))
    table = torch.cat([table, table], dim=-1)
    cos, sin = table.cos()[positions.long()], table.sin()[positions.long()]
    if positions.dim() == 2:
        cos, sin = cos[:, None], sin[:, None]
    rotated_half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
    return x * cos.to(x.dtype) + rotated_half * sin.to(x.dtype)
"""),
    Answer("LlamaAttention", "SDPA with enable_gqa, an explicit softmax-free mask offset, positions from a shifted arange", """
class LlamaAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be a multiple of num_heads")
        if num_heads % num_kv_heads != 0:
            raise ValueError("num_heads must be a multiple of num_kv_heads")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_model // num_heads
        if self.head_dim % 2 != 0:
            raise ValueError("RoPE needs an even head_dim")
        self.rope_base = rope_base
        self.q_proj = nn.Linear(d_model, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, d_model, bias=False)

    def _heads(self, t, n):
        return t.unflatten(-1, (n, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, x, cache=None):
        offset = cache.seq_len if cache is not None else 0
        positions = torch.arange(x.shape[1]) + offset
        q = apply_rope(self._heads(self.q_proj(x), self.num_heads), positions, self.rope_base)
        k = apply_rope(self._heads(self.k_proj(x), self.num_kv_heads), positions, self.rope_base)
        v = self._heads(self.v_proj(x), self.num_kv_heads)
        if cache is not None:
            k, v = cache.update(k, v)
        key_positions = torch.arange(k.shape[2])
        allowed = key_positions[None, :] <= positions[:, None]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
        return self.o_proj(out.permute(0, 2, 1, 3).flatten(2))
"""),
    Answer("LlamaAttention", "attention written out with einsum and a softmax, KV heads picked by index", """
import math


class LlamaAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        head_dim, rest = divmod(d_model, num_heads)
        if rest or num_heads % num_kv_heads or head_dim % 2:
            raise ValueError(f"cannot build {num_heads} heads of even width over {num_kv_heads} KV heads from {d_model}")
        self.num_heads, self.num_kv_heads, self.head_dim, self.rope_base = num_heads, num_kv_heads, head_dim, rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        split = lambda t, n: t.reshape(B, T, n, self.head_dim).transpose(1, 2)
        start = cache.seq_len if cache else 0
        pos = torch.arange(start, start + T).expand(B, T)
        q = apply_rope(split(self.q_proj(x), self.num_heads), pos, self.rope_base)
        k = apply_rope(split(self.k_proj(x), self.num_kv_heads), pos, self.rope_base)
        v = split(self.v_proj(x), self.num_kv_heads)
        if cache:
            k, v = cache.update(k, v)
        group = torch.arange(self.num_heads) // (self.num_heads // self.num_kv_heads)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k[:, group]) / math.sqrt(self.head_dim)
        n_k = k.shape[2]
        future = torch.arange(n_k)[None, :] > torch.arange(n_k - T, n_k)[:, None]
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v[:, group])
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))
"""),
]

WRONG += [
    Answer("apply_rope", "angles always in float32: a float64 x loses precision at large positions", _swap(
        _ROPE, "wide = torch.promote_types(x.dtype, torch.float32)", "wide = torch.float32"),
        message="float32 for a float64 x"),
    Answer("LlamaAttention", "keeps the base as self.base: no rope_base attribute", _swap(
        _LLAMA, "self.rope_base", "self.base"), message="rope_base"),
    Answer("LlamaAttention", "ignores rope_base: apply_rope with its default base 10000", _swap(
        _LLAMA, "apply_rope(q, pos, self.rope_base), apply_rope(k, pos, self.rope_base)",
        "apply_rope(q, pos), apply_rope(k, pos)")),
]

# yarn_frequencies: one-line mutations of the reference, and three answers written apart.
_YARN_MIX = "    inv_freq = theta * (1 - ramp) + (theta / factor) * ramp\n"
_YARN_FACTOR = "    attention_factor = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0\n"
_YARN_CLAMP = "    low, high = max(low, 0), min(high, head_dim - 1)\n"
WRONG += [
    mutant(ASSIGNMENT, "yarn_frequencies", "the ramp reversed",
           (_YARN_MIX, "    inv_freq = theta * ramp + (theta / factor) * (1 - ramp)\n"), message="the ramp reversed"),
    mutant(ASSIGNMENT, "yarn_frequencies", "position interpolation for every pair",
           (_YARN_MIX, "    inv_freq = theta / factor\n"), message="position interpolation everywhere"),
    mutant(ASSIGNMENT, "yarn_frequencies", "truncate ignored: never rounded",
           ("    if truncate:\n", "    if False:\n"), message="truncate ignored: the bounds never rounded"),
    mutant(ASSIGNMENT, "yarn_frequencies", "truncate ignored: always rounded",
           ("    if truncate:\n", "    if True:\n"), message="truncate ignored: the bounds always rounded"),
    mutant(ASSIGNMENT, "yarn_frequencies", "bounds not clamped", (_YARN_CLAMP, ""),
           message="the bounds not clamped to [0, head_dim - 1]"),
    mutant(ASSIGNMENT, "yarn_frequencies", "theta multiplied by the factor",
           (_YARN_MIX, "    inv_freq = theta * (1 - ramp) + (theta * factor) * ramp\n"),
           message="theta_i multiplied by factor instead of divided"),
    mutant(ASSIGNMENT, "yarn_frequencies", "attention factor without the + 1",
           (_YARN_FACTOR, "    attention_factor = 0.1 * math.log(factor) if factor > 1 else 1.0\n"),
           message="0.1 ln(factor) without the + 1"),
    mutant(ASSIGNMENT, "yarn_frequencies", "DeepSeek's squared multiplier returned as the attention factor",
           (_YARN_FACTOR, "    attention_factor = (0.1 * math.log(factor) + 1.0) ** 2 if factor > 1 else 1.0\n"),
           message="DeepSeek's softmax multiplier"),
    mutant(ASSIGNMENT, "yarn_frequencies", "beta_fast and beta_slow swapped",
           ("low, high = pair_index(beta_fast), pair_index(beta_slow)",
            "low, high = pair_index(beta_slow), pair_index(beta_fast)"), message="against transformers' ROPE_INIT"),
    mutant(ASSIGNMENT, "yarn_frequencies", "attention factor returned as a tensor",
           (_YARN_FACTOR, "    attention_factor = 0.1 * torch.log(torch.tensor(factor)) + 1.0 if factor > 1 else 1.0\n"),
           message="is a Python float"),
]

RIGHT += [
    Answer("yarn_frequencies", "in float64 with transformers' names, cast at the end", '''
import math


def yarn_frequencies(head_dim, base, factor, original_max_position, beta_fast=32.0, beta_slow=1.0, truncate=True):
    def correction_dim(rotations):
        return (head_dim * math.log(original_max_position / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    extrapolation = 1.0 - torch.clamp((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    inv_freq = 1.0 / (factor * pos_freqs) * (1 - extrapolation) + 1.0 / pos_freqs * extrapolation
    return inv_freq.float(), (0.1 * math.log(factor) + 1.0) if factor > 1 else 1.0
'''),
    Answer("yarn_frequencies", "a Python loop over the pairs", '''
import math


def yarn_frequencies(head_dim, base, factor, original_max_position, beta_fast=32.0, beta_slow=1.0, truncate=True):
    def bound(r):
        return head_dim * math.log(original_max_position / (2 * math.pi * r)) / (2 * math.log(base))

    lo, hi = bound(beta_fast), bound(beta_slow)
    if truncate:
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
    lo, hi = max(lo, 0.0), min(hi, head_dim - 1.0)
    if lo == hi:
        hi = hi + 0.001
    speeds = []
    for i in range(head_dim // 2):
        theta = base ** (-2 * i / head_dim)
        gamma = min(max((i - lo) / (hi - lo), 0.0), 1.0)
        speeds.append(theta * (1 - gamma) + theta / factor * gamma)
    scale = 1.0 if factor <= 1 else 1.0 + 0.1 * math.log(factor)
    return torch.tensor(speeds, dtype=torch.float32), float(scale)
'''),
    Answer("yarn_frequencies", "torch.lerp between the two speeds", '''
import math


def yarn_frequencies(head_dim, base, factor, original_max_position, beta_fast=32.0, beta_slow=1.0, truncate=True):
    i = torch.arange(head_dim // 2, dtype=torch.float32)
    theta = 1.0 / base ** (2 * i / head_dim)
    d = lambda r: head_dim * (math.log(original_max_position) - math.log(2 * math.pi * r)) / (2 * math.log(base))
    low, high = (math.floor(d(beta_fast)), math.ceil(d(beta_slow))) if truncate else (d(beta_fast), d(beta_slow))
    low, high = max(0, low), min(head_dim - 1, high)
    high = high + 0.001 if high == low else high
    ramp = torch.clip((i - low) / (high - low), 0.0, 1.0)
    return torch.lerp(theta, theta / factor, ramp), max(1.0, 0.1 * math.log(max(factor, 1.0)) + 1.0)
'''),
]

# Issue 34 (expect_close audit): attention written out by hand, softmax as exp(S - logsumexp(S)), is right; it rounds
# differently from transformers' eager attention, which the float64 oracle and its derived bound accept.
RIGHT += [
    mutant(ASSIGNMENT, "LlamaAttention", "attention by hand with exp(S - logsumexp(S)) instead of SDPA",
           ("out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
            "s = (q @ k.transpose(-1, -2) / self.head_dim ** 0.5).masked_fill(~mask, float('-inf'))\n"
            "        out = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)) @ v")),
]

# Issue 34 audit: a ValueError that does not say why, integer exponents, the wrong denominator, a base ignored.
WRONG += [
    Answer("rope_frequencies", "a ValueError whose message does not say why", _swap(
        _FREQUENCIES, 'raise ValueError("head_dim must be even")', 'raise ValueError(f"bad head_dim: {head_dim}")'),
        message="its message should say why"),
    Answer("rope_frequencies", "integer division in the exponent: every speed is 1", _swap(
        _FREQUENCIES, "torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim",
        "(torch.arange(0, head_dim, 2) // head_dim).double()"), message="integer division"),
    Answer("rope_frequencies", "the exponent divided by head_dim / 2", _swap(
        _FREQUENCIES, "torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim",
        "torch.arange(0, head_dim, 2, dtype=torch.float64) / (head_dim // 2)"), message="head_dim / 2"),
    Answer("LlamaAttention", "one ValueError for every bad configuration, whose message does not say why", _swap(
        _LLAMA, 'raise ValueError("heads do not divide evenly, or head_dim is odd")',
        'raise ValueError(f"invalid configuration: {d_model}, {num_heads}, {num_kv_heads}")'),
        message="its message should say why"),
    Answer("apply_rope", "the speeds from rope_frequencies(d): base ignored", _swap(
        _ROPE, "rope_frequencies(d, base).to(wide)", "rope_frequencies(d).to(wide)"), message="base ignored"),
    Answer("apply_rope", "computes in float64 and returns float64 for a float32 x", _swap(
        _ROPE, "dim=-1).to(x.dtype)", "dim=-1).double()"), message="should have dtype torch.float32"),
]

RIGHT += [
    Answer("rope_frequencies", "exp of -2i ln(base) / head_dim in float64", """
import math


def rope_frequencies(head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    pairs = torch.arange(head_dim // 2, dtype=torch.float64)
    return torch.exp(-2.0 * pairs * math.log(base) / head_dim).to(torch.float32)
"""),
    Answer("apply_rope", "angles always in float64, halves rotated and the result cast back", """
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base).double()
    angles = positions.double().unsqueeze(-1) * theta
    if positions.dim() == 2:
        angles = angles.unsqueeze(1)
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    y1 = x1 * angles.cos() - x2 * angles.sin()
    y2 = x1 * angles.sin() + x2 * angles.cos()
    return torch.cat((y1, y2), dim=-1).to(x.dtype)
"""),
]

# Issue 34 audit (class 2): attention by hand without the max shift; the hidden "inputs times 30" case gives scores
# far above 88, where float32's exp overflows.
WRONG += [
    mutant(ASSIGNMENT, "LlamaAttention", "attention by hand without the max shift: exp overflows for large scores",
           ("out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
            "e = torch.exp(q @ k.transpose(-1, -2) / self.head_dim ** 0.5).masked_fill(~mask, 0.0)\n"
            "        out = (e / e.sum(dim=-1, keepdim=True)) @ v"), message="subtract each row's maximum"),
]
