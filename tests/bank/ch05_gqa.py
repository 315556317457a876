"""Chapter 5 answers: repeat_kv, GroupedQueryAttention, mha_to_gqa."""

from tests.bank import Answer, mutant

ASSIGNMENT = "05_gqa"

# A correct GroupedQueryAttention with one marked line swapped out, so each wrong answer differs
# from a right one by exactly the mistake it names.
_GQA = '''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError("heads do not divide evenly")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        n_rep = self.num_heads // self.num_kv_heads
        if cache is not None:
            k, v = cache.update(k, v)
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        n_k = k.shape[2]
        mask = torch.ones(T, n_k, dtype=torch.bool).tril(diagonal=n_k - T)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D))
'''


def _gqa(old: str, new: str) -> str:
    """The correct class above with one piece of code replaced."""
    assert old in _GQA, old
    return _GQA.replace(old, new)


WRONG = [
    Answer("repeat_kv", "tiles the heads with repeat", """
def repeat_kv(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)
""", message="tiled"),
    Answer("repeat_kv", "expands a new axis in front of the heads, which tiles them", """
def repeat_kv(x, n_rep):
    B, H, T, D = x.shape
    return x[:, None].expand(B, n_rep, H, T, D).reshape(B, n_rep * H, T, D)
""", message="tiled"),
    Answer("repeat_kv", "repeats along the sequence axis", """
def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)
""", message="the sequence (dim=2) axis"),
    Answer("repeat_kv", "repeat_interleave without dim flattens the tensor", """
def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep)
""", message="without dim= flattens the tensor"),
    Answer("GroupedQueryAttention", "tiles the KV heads instead of interleaving them",
           _gqa("k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)",
                "k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)"), message="tiled"),
    Answer("GroupedQueryAttention", "KV projections sized like MHA, split into num_heads heads",
           _gqa("""        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)""",
                """        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)""")
           .replace("view(B, T, self.num_kv_heads, self.head_dim)", "view(B, T, self.num_heads, self.head_dim)")
           .replace("        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)\n", ""),
           message="sized like MHA"),
    Answer("GroupedQueryAttention", "no causal mask",
           _gqa("F.scaled_dot_product_attention(q, k, v, attn_mask=mask)", "F.scaled_dot_product_attention(q, k, v)"),
           message="causal mask"),
    Answer("GroupedQueryAttention", "is_causal=True: the mask is aligned to the upper left once the cache is in use",
           _gqa("F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
                "F.scaled_dot_product_attention(q, k, v, is_causal=True)"), message="upper left"),
    Answer("GroupedQueryAttention", "repeats the KV heads before storing them in the cache",
           _gqa("""        if cache is not None:
            k, v = cache.update(k, v)
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)""",
                """        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        if cache is not None:
            k, v = cache.update(k, v)"""), message="before any repeat"),
    Answer("GroupedQueryAttention", "ignores the cache",
           _gqa("            k, v = cache.update(k, v)", "            pass"), message="attend over everything it returns"),
    Answer("GroupedQueryAttention", "no ValueError when num_heads is not divisible by num_kv_heads",
           _gqa("if d_model % num_heads or num_heads % num_kv_heads:", "if d_model % num_heads:"),
           message="ValueError"),
    Answer("GroupedQueryAttention", "splits heads in the wrong order (view as (B, H, T, Dh))",
           _gqa("q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)",
                "q = self.q_proj(x).view(B, self.num_heads, T, self.head_dim)"),
           message="the query heads split in the wrong order"),
    Answer("GroupedQueryAttention", "no 1/sqrt(head_dim) scale",
           _gqa("F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
                "F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)"), message="1/sqrt(head_dim)"),
    Answer("GroupedQueryAttention", "projections with biases",
           _GQA.replace("bias=False", "bias=True"), message="bias"),
    Answer("mha_to_gqa", "pools strided heads (h, h + H_kv, ...) instead of contiguous groups", """
def mha_to_gqa(mha, num_kv_heads):
    d = mha.q_proj.in_features
    gqa = GroupedQueryAttention(d, mha.num_heads, num_kv_heads)
    n_rep = mha.num_heads // num_kv_heads
    with torch.no_grad():
        gqa.q_proj.weight.copy_(mha.q_proj.weight)
        gqa.out_proj.weight.copy_(mha.out_proj.weight)
        for proj in ("k_proj", "v_proj"):
            W = getattr(mha, proj).weight.view(n_rep, num_kv_heads, mha.head_dim, d)
            getattr(gqa, proj).weight.copy_(W.mean(0).reshape(-1, d))
    return gqa
""", message="pooling across the wrong heads"),
    Answer("mha_to_gqa", "keeps the first head of each group", """
def mha_to_gqa(mha, num_kv_heads):
    d = mha.q_proj.in_features
    gqa = GroupedQueryAttention(d, mha.num_heads, num_kv_heads)
    n_rep = mha.num_heads // num_kv_heads
    with torch.no_grad():
        gqa.q_proj.weight.copy_(mha.q_proj.weight)
        gqa.out_proj.weight.copy_(mha.out_proj.weight)
        for proj in ("k_proj", "v_proj"):
            W = getattr(mha, proj).weight.view(num_kv_heads, n_rep, mha.head_dim, d)
            getattr(gqa, proj).weight.copy_(W[:, 0].reshape(-1, d))
    return gqa
""", message="first head"),
    Answer("mha_to_gqa", "sums each group's heads instead of averaging", """
def mha_to_gqa(mha, num_kv_heads):
    d = mha.q_proj.in_features
    gqa = GroupedQueryAttention(d, mha.num_heads, num_kv_heads)
    n_rep = mha.num_heads // num_kv_heads
    with torch.no_grad():
        gqa.q_proj.weight.copy_(mha.q_proj.weight)
        gqa.out_proj.weight.copy_(mha.out_proj.weight)
        for proj in ("k_proj", "v_proj"):
            W = getattr(mha, proj).weight.view(num_kv_heads, n_rep, mha.head_dim, d)
            getattr(gqa, proj).weight.copy_(W.sum(1).reshape(-1, d))
    return gqa
""", message="summing"),
    Answer("mha_to_gqa", "averages rows inside a head (wrong reshape order)", """
def mha_to_gqa(mha, num_kv_heads):
    d = mha.q_proj.in_features
    gqa = GroupedQueryAttention(d, mha.num_heads, num_kv_heads)
    n_rep = mha.num_heads // num_kv_heads
    with torch.no_grad():
        gqa.q_proj.weight.copy_(mha.q_proj.weight)
        gqa.out_proj.weight.copy_(mha.out_proj.weight)
        for proj in ("k_proj", "v_proj"):
            W = getattr(mha, proj).weight.view(num_kv_heads, mha.head_dim, n_rep, d)
            getattr(gqa, proj).weight.copy_(W.mean(2).reshape(-1, d))
    return gqa
""", message="averaging rows inside each head"),
    Answer("mha_to_gqa", "pools the MHA layer's weights in place and returns it", """
def mha_to_gqa(mha, num_kv_heads):
    d = mha.q_proj.in_features
    n_rep = mha.num_heads // num_kv_heads
    if mha.num_heads % num_kv_heads:
        raise ValueError("heads do not divide evenly")
    for proj in ("k_proj", "v_proj"):
        W = getattr(mha, proj).weight.detach().view(num_kv_heads, n_rep, mha.head_dim, d).mean(1).reshape(-1, d)
        setattr(mha, proj, nn.Linear(d, W.shape[0], bias=False))
        getattr(mha, proj).weight.data = W
    mha.num_kv_heads = num_kv_heads
    return mha
""", message="build a new GroupedQueryAttention"),
    Answer("mha_to_gqa", "pools before building the module: indivisible head counts raise RuntimeError", """
def mha_to_gqa(mha, num_kv_heads):
    d = mha.q_proj.in_features
    pooled = [getattr(mha, p).weight.detach().view(num_kv_heads, -1, mha.head_dim, d).mean(1).reshape(-1, d)
              for p in ("k_proj", "v_proj")]
    gqa = GroupedQueryAttention(d, mha.num_heads, num_kv_heads)
    with torch.no_grad():
        gqa.q_proj.weight.copy_(mha.q_proj.weight)
        gqa.out_proj.weight.copy_(mha.out_proj.weight)
        gqa.k_proj.weight.copy_(pooled[0])
        gqa.v_proj.weight.copy_(pooled[1])
    return gqa
""", message="should raise ValueError"),
]

RIGHT = [
    Answer("repeat_kv", "expand a new axis after the heads, then reshape (Llama style)", """
def repeat_kv(x, n_rep):
    B, H, T, D = x.shape
    return x[:, :, None, :, :].expand(B, H, n_rep, T, D).reshape(B, H * n_rep, T, D)
"""),
    Answer("GroupedQueryAttention", "attention written out with einsum, an index instead of repeat_kv", """
import math


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"{num_heads} query heads cannot be split evenly over {num_kv_heads} KV heads")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model {d_model} is not a multiple of num_heads {num_heads}")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = d_model // num_heads
        kv_width = num_kv_heads * self.head_dim
        self.q_proj, self.out_proj = nn.Linear(d_model, d_model, bias=False), nn.Linear(d_model, d_model, bias=False)
        self.k_proj, self.v_proj = nn.Linear(d_model, kv_width, bias=False), nn.Linear(d_model, kv_width, bias=False)

    def _heads(self, t, n):
        return t.reshape(t.shape[0], t.shape[1], n, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, cache=None):
        q = self._heads(self.q_proj(x), self.num_heads)
        k = self._heads(self.k_proj(x), self.num_kv_heads)
        v = self._heads(self.v_proj(x), self.num_kv_heads)
        if cache is not None:
            k, v = cache.update(k, v)
        group = torch.arange(self.num_heads) // (self.num_heads // self.num_kv_heads)
        k, v = k[:, group], v[:, group]
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)
        n_q, n_k = q.shape[2], k.shape[2]
        allowed = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v)
        return self.out_proj(out.permute(0, 2, 1, 3).flatten(2))
"""),
    Answer("mha_to_gqa", "a loop over groups and load_state_dict", """
def mha_to_gqa(mha, num_kv_heads):
    d = mha.q_proj.in_features
    gqa = GroupedQueryAttention(d, mha.num_heads, num_kv_heads)
    size, n_rep = mha.head_dim, mha.num_heads // num_kv_heads
    state = {k: v.clone() for k, v in mha.state_dict().items()}
    for proj in ("k_proj.weight", "v_proj.weight"):
        W = state[proj]
        groups = [W[g * n_rep * size:(g + 1) * n_rep * size].reshape(n_rep, size, d).mean(0) for g in range(num_kv_heads)]
        state[proj] = torch.cat(groups)
    gqa.load_state_dict(state)
    return gqa
"""),
]

WRONG += [
    mutant(ASSIGNMENT, "mha_to_gqa", "reuses the MHA's q_proj and out_proj modules",
           ("gqa.q_proj.weight.copy_(mha.q_proj.weight)", "gqa.q_proj = mha.q_proj"),
           ("gqa.out_proj.weight.copy_(mha.out_proj.weight)", "gqa.out_proj = mha.out_proj"),
           message="is the MHA's own module"),
    mutant(ASSIGNMENT, "mha_to_gqa", "assigns the MHA's q_proj Parameter to the new layer",
           ("gqa.q_proj.weight.copy_(mha.q_proj.weight)", "gqa.q_proj.weight = mha.q_proj.weight"),
           message="shares its memory"),
    mutant(ASSIGNMENT, "GroupedQueryAttention", "no ValueError when d_model is not divisible by num_heads",
           ("if d_model % num_heads:", "if False:"), message="is not divisible by num_heads"),
]

RIGHT += [
    Answer("mha_to_gqa", "deep-copies the MHA layer, then replaces its K/V projections", """
import copy


def mha_to_gqa(mha, num_kv_heads):
    heads, head_dim = mha.num_heads, mha.head_dim
    if heads % num_kv_heads:
        raise ValueError(f"{heads} query heads cannot share {num_kv_heads} KV heads equally")
    gqa = copy.deepcopy(mha)
    d_model = mha.q_proj.in_features
    gqa.num_kv_heads = num_kv_heads
    for name in ("k_proj", "v_proj"):
        weight = getattr(mha, name).weight.detach()
        groups = weight.reshape(num_kv_heads, heads // num_kv_heads, head_dim, d_model)
        layer = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        with torch.no_grad():
            layer.weight.copy_(groups.mean(dim=1).reshape(num_kv_heads * head_dim, d_model))
        setattr(gqa, name, layer)
    return gqa
"""),
]

# Issue 34 (expect_close audit): attention written out by hand, softmax as exp(S - logsumexp(S)), is right; it rounds
# differently from SDPA, which the float64 oracle and its derived bound accept.
RIGHT += [
    mutant(ASSIGNMENT, "GroupedQueryAttention", "attention by hand with exp(S - logsumexp(S)) instead of SDPA",
           ("out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
            "scores = (q @ k.transpose(-1, -2) / self.head_dim ** 0.5).masked_fill(~mask, float('-inf'))\n"
            "        out = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True)) @ v")),
]

# Issue 34 (class 2 and the bank's depth): large scores, where a softmax written by hand without the row max overflows
# float32's exp; more ways to get repeat_kv wrong; right answers written differently.
WRONG += [
    Answer("GroupedQueryAttention", "attention by hand with a softmax that does not subtract the row max",
           _gqa("out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
                "scores = (q @ k.transpose(-1, -2) / self.head_dim ** 0.5).masked_fill(~mask, float('-inf'))\n"
                "        e = torch.exp(scores)\n"
                "        out = (e / e.sum(dim=-1, keepdim=True)) @ v"),
           message="exp overflows float32 past 88.7"),
    Answer("repeat_kv", "repeats along the last axis (head_dim) instead of the heads", """
def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=-1)
""", message="the head_dim (dim=3) axis"),
    Answer("repeat_kv", "repeats along the batch axis (dim=0)", """
def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=0)
""", message="the batch (dim=0) axis"),
    Answer("repeat_kv", "fills a new tensor made with torch.zeros: float32 whatever the input's dtype", """
def repeat_kv(x, n_rep):
    B, H, T, D = x.shape
    out = torch.zeros(B, H * n_rep, T, D)
    for h in range(H * n_rep):
        out[:, h] = x[:, h // n_rep]
    return out
""", message="float64"),
    Answer("repeat_kv", "the MQA shortcut: expand over the heads axis, right only for one KV head", """
def repeat_kv(x, n_rep):
    B, H, T, D = x.shape
    return x.expand(B, H * n_rep, T, D)
""", message="expand repeats only an axis of size 1"),
]

RIGHT += [
    Answer("repeat_kv", "stack n_rep copies after the heads axis, then flatten", """
def repeat_kv(x, n_rep):
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)
"""),
    Answer("repeat_kv", "index_select with the KV head of each query head", """
def repeat_kv(x, n_rep):
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)
"""),
    Answer("GroupedQueryAttention", "SDPA with an additive float mask (-inf where a query may not look)",
           _gqa("out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
                "bias = torch.zeros(T, n_k, dtype=x.dtype).masked_fill(~mask, float('-inf'))\n"
                "        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)")),
    Answer("mha_to_gqa", "new Parameters assigned: clones of q/out, unflatten-mean-flatten for k/v", """
def mha_to_gqa(mha, num_kv_heads):
    gqa = GroupedQueryAttention(mha.q_proj.in_features, mha.num_heads, num_kv_heads)
    n_rep = mha.num_heads // num_kv_heads

    def pool(w):
        return w.detach().unflatten(0, (num_kv_heads, n_rep, mha.head_dim)).mean(dim=1).flatten(0, 1)

    gqa.q_proj.weight = nn.Parameter(mha.q_proj.weight.detach().clone())
    gqa.out_proj.weight = nn.Parameter(mha.out_proj.weight.detach().clone())
    gqa.k_proj.weight = nn.Parameter(pool(mha.k_proj.weight))
    gqa.v_proj.weight = nn.Parameter(pool(mha.v_proj.weight))
    return gqa
"""),
]

# Issue 34 (class 3): the task asks for a ValueError "that says so"; an empty one says nothing.
WRONG += [
    Answer("GroupedQueryAttention", "raises a ValueError with no message",
           _gqa('raise ValueError("heads do not divide evenly")', "raise ValueError()"), message="an empty message"),
]
