"""Chapter 3 answers: split_heads, merge_heads, MultiHeadAttention."""

import functools

from tests.bank import Answer, mutant

ASSIGNMENT = "03_multi_head"
_m = functools.partial(mutant, ASSIGNMENT, "MultiHeadAttention")

_INIT = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"{d_model} is not divisible by {num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
'''


def _layer(forward: str) -> str:
    """A whole MultiHeadAttention cell: a correct __init__ followed by the given forward method."""
    return _INIT + forward


WRONG = [
    mutant(ASSIGNMENT, "split_heads", "a ValueError that does not give the two numbers",
           ('f"d_model={d_model} is not divisible by num_heads={num_heads}"', '"the width is not divisible"'),
           message="must give both numbers"),
    Answer("split_heads", "reshape to (B, H, T, Dh) without a transpose", """
def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    return x.reshape(B, num_heads, T, D // num_heads)
""", message="reshape without transpose"),
    Answer("split_heads", "views the last axis as (Dh, H): interleaved heads", """
def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    return x.view(B, T, D // num_heads, num_heads).permute(0, 3, 1, 2)
""", message="interleaved"),
    Answer("split_heads", "forgets to swap T and H: returns (B, T, H, Dh)", """
def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    return x.view(B, T, num_heads, D // num_heads)
""", message="were not swapped"),
    Answer("split_heads", "no divisibility check: view raises RuntimeError", """
def split_heads(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)
""", message="should raise ValueError, but it raised RuntimeError"),
    Answer("split_heads", "checks divisibility with assert (AssertionError, not ValueError)", """
def split_heads(x, num_heads):
    B, T, D = x.shape
    assert D % num_heads == 0, "D must be divisible by num_heads"
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)
""", message="should raise ValueError, but it raised AssertionError"),
    Answer("split_heads", "returns the tuple of column blocks from chunk, not one tensor", """
def split_heads(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError("D must be divisible by num_heads")
    return x.chunk(num_heads, dim=-1)
""", message="should be a torch.Tensor"),
    Answer("merge_heads", "reshape to (B, T, H * Dh) without a transpose", """
def merge_heads(x):
    B, H, T, Dh = x.shape
    return x.reshape(B, T, H * Dh)
""", message="reshape without transpose"),
    Answer("merge_heads", "interleaves the heads (permute to (B, T, Dh, H))", """
def merge_heads(x):
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, H * Dh)
""", message="interleaved"),
    Answer("merge_heads", ".view after .transpose fails on a non-contiguous tensor", """
def merge_heads(x):
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).view(B, T, H * Dh)
""", message="contiguous"),
    Answer("merge_heads", "sums the heads instead of concatenating them", """
def merge_heads(x):
    return x.sum(dim=1)
""", message="the shape of"),
    Answer("MultiHeadAttention", "splits the heads with a reshape and no transpose", _layer('''
    def forward(self, x, mask=None, is_causal=False):
        B, T, D = x.shape
        H, Dh = self.num_heads, self.head_dim
        q, k, v = (p(x).reshape(B, H, T, Dh) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)
        allowed = torch.ones(T, T, dtype=torch.bool)
        if is_causal:
            allowed = allowed.tril()
        if mask is not None:
            allowed = allowed & mask
        w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).masked_fill(~allowed, 0.0)
        return self.out_proj((w @ v).reshape(B, T, D))
'''), message="reshape without transpose"),
    Answer("MultiHeadAttention", "interleaves the heads: view as (B, T, Dh, H)", _layer('''
    def forward(self, x, mask=None, is_causal=False):
        B, T, D = x.shape
        H, Dh = self.num_heads, self.head_dim
        q, k, v = (p(x).view(B, T, Dh, H).permute(0, 3, 1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)
        allowed = torch.ones(T, T, dtype=torch.bool)
        if is_causal:
            allowed = allowed.tril()
        if mask is not None:
            allowed = allowed & mask
        w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).masked_fill(~allowed, 0.0)
        return self.out_proj((w @ v).permute(0, 2, 3, 1).reshape(B, T, D))
'''), message="interleaved"),
    Answer("MultiHeadAttention", "one packed qkv projection instead of q_proj, k_proj, v_proj", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None, is_causal=False):
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv_proj(x).chunk(3, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        T = x.shape[1]
        allowed = torch.ones(T, T, dtype=torch.bool)
        if is_causal:
            allowed = allowed.tril()
        if mask is not None:
            allowed = allowed & mask
        w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).masked_fill(~allowed, 0.0)
        return self.out_proj(merge_heads(w @ v))
'''),
    _m("scales by sqrt(d_model) instead of sqrt(head_dim)", ("math.sqrt(self.head_dim)", "math.sqrt(x.shape[-1])"),
       message="sqrt(d_model) instead of sqrt(head_dim)"),
    _m("forgets the 1/sqrt(head_dim) scale", (" / math.sqrt(self.head_dim)", ""), message="no 1/sqrt(head_dim) scaling"),
    _m("never applies out_proj", ("return self.out_proj(merge_heads(weights @ v))", "return merge_heads(weights @ v)"),
       message="missing output projection"),
    _m("inverts the mask (fills where mask is True)", ("allowed = allowed & mask", "allowed = allowed & ~mask"),
       message="the mask inverted"),
    _m("ignores the mask argument", ("allowed = allowed & mask", "pass"), message="the mask ignored"),
    _m("uses the causal mask instead of the given mask when both are set",
       ("allowed = allowed & mask", "allowed = allowed if is_causal else mask"), message="the mask ignored"),
    _m("applies is_causal only when no mask is given", ("allowed = allowed & mask", "allowed = mask"),
       message="is_causal ignored"),
    _m("ignores is_causal", ("allowed = torch.tril(allowed)", "pass"), message="is_causal ignored"),
    _m("builds the causal mask with triu: queries see the future", ("torch.tril(allowed)", "torch.triu(allowed)"),
       message="upper triangle"),
    _m("a fully masked row gives nan", ("weights = weights.masked_fill(~allowed, 0.0)", "pass"), message="gives nan"),
    _m("masks with -1e9: a fully masked row averages every value",
       ('float("-inf")', "-1e9"), ("weights = weights.masked_fill(~allowed, 0.0)", "pass"), message="uniform weights"),
    _m("softmax over the query axis", ("dim=-1)", "dim=-2)")),
    _m("softmax over all keys, masked weights zeroed and renormalised: a masked key with the largest score wins",
       ('weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)',
        "weights = torch.softmax(scores, dim=-1).masked_fill(~allowed, 0.0)\n"
        "        weights = weights / weights.sum(-1, keepdim=True)")),
    _m("calls F.scaled_dot_product_attention",
       ("merge_heads(weights @ v)", "merge_heads(torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed))"),
       message="torch attention functions called by forward"),
    _m("calls F.scaled_dot_product_attention only when there is no mask and is_causal is False",
       ("return self.out_proj(merge_heads(weights @ v))",
        "if mask is None and not is_causal:\n"
        "            return self.out_proj(merge_heads(torch.nn.functional.scaled_dot_product_attention(q, k, v)))\n"
        "        return self.out_proj(merge_heads(weights @ v))"),
       message="torch attention functions called by forward"),
    _m("no ValueError: d_model // num_heads silently drops columns",
       ('raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")', "pass"),
       message="should raise ValueError, but it returned"),
    _m("ignores the bias flag", *[(f"self.{n} = nn.Linear(d_model, d_model, bias=bias)", f"self.{n} = nn.Linear(d_model, d_model)")
                                  for n in ("q_proj", "k_proj", "v_proj", "out_proj")], message="has a bias"),
    _m("scores K Q^T instead of Q K^T (transposed before the softmax)", ("q @ k.transpose(-2, -1)", "k @ q.transpose(-2, -1)")),
    _m("weights the keys instead of the values (v_proj never used)", ("weights @ v", "weights @ k")),
]

RIGHT = [
    Answer("split_heads", "unflatten and permute", """
def split_heads(x, num_heads):
    if x.shape[-1] % num_heads != 0:
        raise ValueError(f"{x.shape[-1]} columns cannot be cut into {num_heads} equal heads")
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)
"""),
    Answer("split_heads", "stack the column blocks", """
def split_heads(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model {x.shape[-1]} must be a multiple of num_heads {num_heads}")
    return torch.stack(torch.split(x, d_model // num_heads, dim=-1), dim=1)
"""),
    Answer("merge_heads", "concatenate the heads along the last axis", """
def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)
"""),
    Answer("merge_heads", "permute, contiguous, view", """
def merge_heads(x):
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * Dh)
"""),
    Answer("MultiHeadAttention", "a loop over heads on column slices", _layer('''
    def forward(self, x, mask=None, is_causal=False):
        B, T, D = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        allowed = torch.ones(B, self.num_heads, T, T, dtype=torch.bool)
        if mask is not None:
            allowed = allowed & mask
        if is_causal:
            allowed = allowed & torch.ones(T, T, dtype=torch.bool).tril()
        heads = []
        for h in range(self.num_heads):
            cols = slice(h * self.head_dim, (h + 1) * self.head_dim)
            s = q[..., cols] @ k[..., cols].transpose(1, 2) / self.head_dim ** 0.5
            s = s.masked_fill(~allowed[:, h], float("-inf"))
            w = torch.where(allowed[:, h], torch.softmax(s, dim=-1), torch.zeros((), dtype=s.dtype))
            heads.append(w @ v[..., cols])
        return self.out_proj(torch.cat(heads, dim=-1))
''')),
    Answer("MultiHeadAttention", "baddbmm on (B*H, T, Dh) with an additive mask", _layer('''
    def forward(self, x, mask=None, is_causal=False):
        B, T, D = x.shape
        H, Dh = self.num_heads, self.head_dim
        q, k, v = (split_heads(p(x), H).reshape(B * H, T, Dh) for p in (self.q_proj, self.k_proj, self.v_proj))
        allowed = torch.ones(B, H, T, T, dtype=torch.bool)
        if mask is not None:
            allowed = allowed & mask
        if is_causal:
            allowed = allowed & torch.tril(torch.ones(T, T, dtype=torch.bool))
        allowed = allowed.reshape(B * H, T, T)
        bias = torch.zeros(B * H, T, T, dtype=x.dtype).masked_fill(~allowed, float("-inf"))
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=1 / math.sqrt(Dh))
        w = torch.softmax(scores, dim=-1).nan_to_num(nan=0.0)
        return self.out_proj(merge_heads(torch.bmm(w, v).reshape(B, H, T, Dh)))
''')),
    Answer("MultiHeadAttention", "einsum with an exp-normalise softmax written out", _layer('''
    def forward(self, x, mask=None, is_causal=False):
        T = x.shape[1]
        q = split_heads(self.q_proj(x), self.num_heads) * self.head_dim ** -0.5
        k = split_heads(self.k_proj(x), self.num_heads)
        v = split_heads(self.v_proj(x), self.num_heads)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k)
        allowed = torch.ones_like(scores, dtype=torch.bool)
        if mask is not None:
            allowed = allowed & mask
        if is_causal:
            allowed = allowed & torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
        peak = scores.amax(-1, keepdim=True)
        peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
        e = torch.exp(scores - peak)
        total = e.sum(-1, keepdim=True)
        w = e / torch.where(total > 0, total, torch.ones_like(total))
        return self.out_proj(merge_heads(torch.einsum("bhqk,bhkd->bhqd", w, v)))
''')),
    Answer("MultiHeadAttention", "softmax as exp(S - logsumexp(S)), empty rows zeroed after", _layer('''
    def forward(self, x, mask=None, is_causal=False):
        T = x.shape[1]
        q, k, v = (split_heads(p(x), self.num_heads) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        allowed = torch.ones(T, T, dtype=torch.bool)
        if is_causal:
            allowed = allowed.tril()
        if mask is not None:
            allowed = allowed & mask
        scores = scores.masked_fill(~allowed, float("-inf"))
        w = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True)).nan_to_num(0.0)
        return self.out_proj(merge_heads(w @ v))
''')),
    Answer("MultiHeadAttention", "masks with torch.finfo(dtype).min, then zeroes the disallowed weights", _layer('''
    def forward(self, x, mask=None, is_causal=False):
        q, k, v = (split_heads(p(x), self.num_heads) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        T = x.shape[1]
        allowed = torch.ones(T, T, dtype=torch.bool)
        if is_causal:
            allowed = allowed.tril()
        if mask is not None:
            allowed = allowed & mask
        w = torch.softmax(scores.masked_fill(~allowed, torch.finfo(scores.dtype).min), dim=-1)
        return self.out_proj(merge_heads(w.masked_fill(~allowed, 0.0) @ v))
''')),
]

# Issue 34 audit: merge_heads and split_heads written in other wrong ways (axes, order, dtype, a check upside down).
WRONG += [
    Answer("merge_heads", "concatenates the heads along T (dim=1) instead of the last axis", """
def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=1)
""", message="the shape of"),
    Answer("merge_heads", "flattens from dim 1: (B, T * H * Dh)", """
def merge_heads(x):
    return x.transpose(1, 2).flatten(1)
""", message="the shape of"),
    Answer("merge_heads", "puts the heads back in reverse order", """
def merge_heads(x):
    return torch.cat([x[:, h] for h in reversed(range(x.shape[1]))], dim=-1)
""", message="reverse order"),
    Answer("merge_heads", "casts to float32 (.float()): a float64 input comes back float32", """
def merge_heads(x):
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh).float()
""", message="should have dtype torch.float64"),
    Answer("split_heads", "casts to float32 (.float()): a float64 input comes back float32", """
def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError(f"D={D} is not divisible by num_heads={num_heads}")
    return x.float().view(B, T, num_heads, D // num_heads).transpose(1, 2)
""", message="should have dtype torch.float64"),
    Answer("split_heads", "the divisibility test upside down: num_heads % d_model", """
def split_heads(x, num_heads):
    B, T, D = x.shape
    if num_heads % D:
        raise ValueError(f"D={D} is not divisible by num_heads={num_heads}")
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)
"""),
]

RIGHT += [
    Answer("merge_heads", "permute, then flatten the last two axes", """
def merge_heads(x):
    return x.permute(0, 2, 1, 3).flatten(2)
"""),
    Answer("split_heads", "view and permute, then a contiguous copy", """
def split_heads(x, num_heads):
    batch, tokens, width = x.shape
    if width % num_heads:
        raise ValueError(f"width {width} does not split into {num_heads} heads")
    return x.view(batch, tokens, num_heads, width // num_heads).permute(0, 2, 1, 3).contiguous()
"""),
]

# Issue 34 audit (class 2): softmax written out without the max shift; the hidden "inputs times 30" cases give
# scores far above 88, where float32's exp overflows.
WRONG += [
    _m("softmax by hand without the max shift: exp overflows for large scores",
       ('weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)',
        "e = torch.exp(scores).masked_fill(~allowed, 0.0)\n        weights = e / e.sum(dim=-1, keepdim=True)"),
       message="large scores"),
]
