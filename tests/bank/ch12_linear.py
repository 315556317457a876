"""Chapter 12 answers: linear_attention, gated_delta_rule, chunked_gated_delta_rule, decode_state_bytes.

Most wrong answers are one-line mutations of the reference (`mutant` checks that the text it changes occurs exactly
once), so each differs from a right answer by exactly the mistake it names. The right answers are written apart from
the reference: a running state in a Python loop, the Householder form of the delta rule, a padded chunked form,
forward substitution instead of a triangular solve, and so on.
"""

from tests.bank import Answer, mutant

ASSIGNMENT = "12_linear"

_LA = "linear_attention"
_GDR = "gated_delta_rule"
_CHUNK = "chunked_gated_delta_rule"
_BYTES = "decode_state_bytes"
_PHI = "phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1"
_STATES = 'states = torch.einsum("bhtd,bhte->bhtde", phi_k, v).cumsum(dim=2)'
_DECAY = "state = state * g[:, :, t, None, None].exp()  # forget"
_UPDATE = "state = state + k_t[..., :, None] * delta[..., None, :]  # (B, H, D_k, D_v)"
_READ = 'out[:, :, t] = torch.einsum("bhkv,bhk->bhv", state, q[:, :, t]) / math.sqrt(Dk)'

WRONG = [
    # linear_attention
    mutant(ASSIGNMENT, _LA, "phi(x) = exp(x), softmax's weights without the max",
           (_PHI, "phi_q, phi_k = q.exp(), k.exp()"), message="phi(x) = exp(x)"),
    mutant(ASSIGNMENT, _LA, "phi(x) = relu(x)", (_PHI, "phi_q, phi_k = F.relu(q), F.relu(k)"), message="relu"),
    mutant(ASSIGNMENT, _LA, "no normaliser", ("return numerator / (denominator + eps)", "return numerator"),
           message="no normaliser"),
    mutant(ASSIGNMENT, _LA, "the causal sums stop before the query (j < i)",
           (_STATES, _STATES + "\n        states = states - torch.einsum(\"bhtd,bhte->bhtde\", phi_k, v)"),
           ("norms = phi_k.cumsum(dim=2)", "norms = phi_k.cumsum(dim=2) - phi_k"), message="stop before the query"),
    mutant(ASSIGNMENT, _LA, "causal=True ignored", ("    if causal:\n", "    if False:\n"),
           message="causal=True ignored"),
    mutant(ASSIGNMENT, _LA, "causal=False ignored", ("    if causal:\n", "    if True:\n"),
           message="causal=False ignored"),
    mutant(ASSIGNMENT, _LA, "eps ignored", ("return numerator / (denominator + eps)", "return numerator / denominator"),
           message="eps ignored"),
    mutant(ASSIGNMENT, _LA, "the output always in float32",
           ("return numerator / (denominator + eps)", "return (numerator / (denominator + eps)).float()"),
           message="dtype torch.float64"),
    Answer(_LA, "the quadratic masked form: a (T, T) matrix of weights", '''
def linear_attention(q, k, v, causal=True, eps=1e-6):
    weights = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)  # (B, H, T, T)
    if causal:
        weights = weights.tril()
    return (weights @ v) / (weights.sum(-1, keepdim=True) + eps)
''', message="never the (T, T) weights"),
    Answer(_LA, "softmax attention instead of linear attention", '''
def linear_attention(q, k, v, causal=True, eps=1e-6):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
''', message="softmax attention instead of linear attention"),
    # gated_delta_rule
    mutant(ASSIGNMENT, _GDR, "no decay", (_DECAY, "pass"), message="no decay"),
    mutant(ASSIGNMENT, _GDR, "the decay applied after the write", (f"        {_DECAY}\n", ""),
           (_UPDATE, _UPDATE + "\n        " + _DECAY), message="after the write"),
    mutant(ASSIGNMENT, _GDR, "the state multiplied by g_t instead of exp(g_t)",
           (_DECAY, "state = state * g[:, :, t, None, None]"), message="g_t itself"),
    mutant(ASSIGNMENT, _GDR, "the additive rule: no correction",
           ("delta = beta[:, :, t, None] * (v[:, :, t] - predicted)", "delta = beta[:, :, t, None] * v[:, :, t]"),
           message="additive rule"),
    mutant(ASSIGNMENT, _GDR, "the output read before the update", (f"        {_READ}\n", ""),
           (_DECAY, _DECAY + "\n        " + _READ), message="read before"),
    mutant(ASSIGNMENT, _GDR, "no 1/sqrt(D_k) on the output", (" / math.sqrt(Dk)", ""), message="no 1/sqrt(D_k)"),
    mutant(ASSIGNMENT, _GDR, "initial_state ignored",
           ("torch.zeros(B, H, Dk, Dv) if initial_state is None else initial_state.float()", "torch.zeros(B, H, Dk, Dv)"),
           message="initial_state ignored"),
    mutant(ASSIGNMENT, _GDR, "the state returned in v's dtype",
           ("return out.to(out_dtype), state", "return out.to(out_dtype), state.to(out_dtype)"),
           message="dtype torch.float32"),
    mutant(ASSIGNMENT, _GDR, "out returned in float32 whatever v's dtype",
           ("return out.to(out_dtype), state", "return out, state"), message="dtype torch.float64"),
    mutant(ASSIGNMENT, _GDR, "keeps every token's state and reads the outputs from the stack",
           ("    out = torch.empty(B, H, T, Dv)\n", "    history = []\n"),
           (_READ, "history.append(state)"),
           ("    return out.to(out_dtype), state",
            '    out = torch.einsum("bhtkv,bhtk->bhtv", torch.stack(history, dim=2), q) / math.sqrt(Dk)\n'
            "    return out.to(out_dtype), state"), message="never a list or a stack of states"),
    # chunked_gated_delta_rule
    mutant(ASSIGNMENT, _CHUNK, "no decay inside the chunk",
           ('mask = (gamma[..., :, None] - gamma[..., None, :]).masked_fill(~lower, float("-inf")).exp()',
            "mask = lower.float()"), message="no decay inside the chunk"),
    mutant(ASSIGNMENT, _CHUNK, "the state not decayed across the chunk",
           ("state = last[..., None].exp() * state + ", "state = state + "), message="not decayed across the chunk"),
    mutant(ASSIGNMENT, _CHUNK, "no triangular solve",
           ("u = torch.linalg.solve_triangular(A + torch.eye(size), rhs, upper=False, unitriangular=True)", "u = rhs"),
           message="no triangular solve"),
    mutant(ASSIGNMENT, _CHUNK, "the old state read without the decay on the queries",
           ("((gamma.exp()[..., None] * q_c) @ state + inside)", "(q_c @ state + inside)"),
           message="without the decay e^{gamma_r}"),
    mutant(ASSIGNMENT, _CHUNK, "attention inside the chunk excludes the diagonal",
           ("inside = (q_c @ k_c.transpose(-1, -2) * mask) @ u", "inside = (q_c @ k_c.transpose(-1, -2) * mask).tril(-1) @ u"),
           message="excludes the diagonal"),
    mutant(ASSIGNMENT, _CHUNK, "the last, shorter chunk dropped",
           ("out = torch.empty(B, H, T, Dv)", "out = torch.zeros(B, H, T, Dv)"),
           ("for start in range(0, T, chunk_size):", "for start in range(0, T - T % chunk_size, chunk_size):"),
           message="the last, shorter chunk is dropped"),
    mutant(ASSIGNMENT, _CHUNK, "the diagonal of A kept and solved as a general triangular system",
           ("* mask).tril(-1)  # (B, H, C, C), strictly lower", "* mask).tril()"),
           ("upper=False, unitriangular=True)", "upper=False)")),
    mutant(ASSIGNMENT, _CHUNK, "the state returned in v's dtype",
           ("return out.to(out_dtype), state", "return out.to(out_dtype), state.to(out_dtype)"),
           message="dtype torch.float32"),
    mutant(ASSIGNMENT, _CHUNK, "chunk_size ignored: the whole sequence as one chunk, (T, T) matrices",
           ("    for start in range(0, T, chunk_size):", "    chunk_size = T\n    for start in range(0, T, chunk_size):"),
           message="never over the whole sequence"),
    mutant(ASSIGNMENT, _CHUNK, "the decay mask cut out of a (T, T) matrix over the whole sequence",
           ("    for start in range(0, T, chunk_size):",
            "    total = g.cumsum(dim=-1)\n"
            "    every_pair = (total[..., :, None] - total[..., None, :]).exp()  # (B, H, T, T)\n"
            "    for start in range(0, T, chunk_size):"),
           ('mask = (gamma[..., :, None] - gamma[..., None, :]).masked_fill(~lower, float("-inf")).exp()',
            "mask = every_pair[..., start:end, start:end] * lower"),
           message="never over the whole sequence"),
    # decode_state_bytes
    mutant(ASSIGNMENT, _BYTES, "the linear state counted once per position",
           ("* linear_key_dim * linear_value_dim  # one state", "* linear_key_dim * linear_value_dim * seq_len"),
           message="once per position"),
    mutant(ASSIGNMENT, _BYTES, "no factor 2 for keys and values",
           ('* 2 * num_kv_heads * head_dim * seq_len', '* num_kv_heads * head_dim * seq_len'), message="no factor 2"),
    mutant(ASSIGNMENT, _BYTES, "a factor 2 on the linear state",
           ('layer_types.count("linear_attention") * linear_num_heads', 'layer_types.count("linear_attention") * 2 * linear_num_heads'),
           message="a factor 2 on the linear state"),
    mutant(ASSIGNMENT, _BYTES, "every layer counted as full attention",
           ('full = layer_types.count("full_attention") * 2', 'full = len(layer_types) * 2'),
           ('linear = layer_types.count("linear_attention") *', 'linear = 0 *'), message="every layer counted as full"),
    mutant(ASSIGNMENT, _BYTES, "the linear layers left out",
           ('linear = layer_types.count("linear_attention") *', 'linear = 0 *'), message="linear layers left out"),
    mutant(ASSIGNMENT, _BYTES, "the linear state counted as key_dim x key_dim",
           ("* linear_key_dim * linear_value_dim  # one state", "* linear_key_dim * linear_key_dim"),
           message="key_dim x key_dim"),
    mutant(ASSIGNMENT, _BYTES, "ignoring batch_size", (" * batch_size", ""), message="ignoring batch_size"),
    mutant(ASSIGNMENT, _BYTES, "ignoring bytes_per_element", (" * bytes_per_element", ""),
           message="ignoring bytes_per_element"),
    mutant(ASSIGNMENT, _BYTES, "counts bits", ("* bytes_per_element", "* bytes_per_element * 8"), message="bits"),
    mutant(ASSIGNMENT, _BYTES, "an unknown layer type ignored, no ValueError",
           ("    if unknown:\n", "    if False:\n"), message="should raise ValueError"),
    mutant(ASSIGNMENT, _BYTES, "returns a float", ("return (full + linear) * batch_size * bytes_per_element",
                                                   "return (full + linear) * batch_size * bytes_per_element / 1"),
           message="a float"),
]

RIGHT = [
    # linear_attention
    Answer(_LA, "a running state in a Python loop over the positions", '''
def linear_attention(q, k, v, causal=True, eps=1e-6):
    fq, fk = torch.nn.functional.elu(q) + 1.0, torch.nn.functional.elu(k) + 1.0
    if not causal:
        s = torch.einsum("bhtd,bhte->bhde", fk, v)
        z = fk.sum(dim=2)
        return torch.einsum("bhtd,bhde->bhte", fq, s) / (torch.einsum("bhtd,bhd->bht", fq, z)[..., None] + eps)
    B, H, T, D = q.shape
    s = q.new_zeros(B, H, D, v.shape[-1])
    z = q.new_zeros(B, H, D)
    outs = []
    for t in range(T):
        s = s + fk[:, :, t, :, None] * v[:, :, t, None, :]
        z = z + fk[:, :, t]
        num = (fq[:, :, t, :, None] * s).sum(dim=2)
        den = (fq[:, :, t] * z).sum(dim=-1, keepdim=True)
        outs.append(num / (den + eps))
    return torch.stack(outs, dim=2)
'''),
    Answer(_LA, "values augmented with a column of ones: one cumulative state gives numerator and normaliser", '''
def linear_attention(q, k, v, causal=True, eps=1e-6):
    phi = lambda x: torch.where(x > 0, x + 1, torch.exp(x))
    fq, fk = phi(q), phi(k)
    v1 = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)  # (B, H, T, D_v + 1)
    outer = fk.unsqueeze(-1) * v1.unsqueeze(-2)  # (B, H, T, D, D_v + 1)
    state = outer.cumsum(dim=2) if causal else outer.sum(dim=2, keepdim=True)
    both = (fq.unsqueeze(-1) * state).sum(dim=-2)  # (B, H, T, D_v + 1)
    return both[..., :-1] / (both[..., -1:] + eps)
'''),
    Answer(_LA, "chunks of 32 positions: a small masked block inside, the state between blocks", '''
def linear_attention(q, k, v, causal=True, eps=1e-6):
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    if not causal:
        kv = fk.transpose(-1, -2) @ v
        return (fq @ kv) / (fq @ fk.sum(2).unsqueeze(-1) + eps)
    T = q.shape[2]
    kv = fk.new_zeros(*fk.shape[:2], fk.shape[-1], v.shape[-1])
    z = fk.new_zeros(*fk.shape[:2], fk.shape[-1], 1)
    pieces = []
    for a in range(0, T, 32):
        b = min(a + 32, T)
        w = (fq[:, :, a:b] @ fk[:, :, a:b].transpose(-1, -2)).tril()
        num = fq[:, :, a:b] @ kv + w @ v[:, :, a:b]
        den = fq[:, :, a:b] @ z + w.sum(-1, keepdim=True)
        pieces.append(num / (den + eps))
        kv = kv + fk[:, :, a:b].transpose(-1, -2) @ v[:, :, a:b]
        z = z + fk[:, :, a:b].sum(2).unsqueeze(-1)
    return torch.cat(pieces, dim=2)
'''),
    # gated_delta_rule
    Answer(_GDR, "the Householder form S = e^g (I - beta k k^T) S + beta k v^T, with matmuls", '''
def gated_delta_rule(q, k, v, g, beta, initial_state=None):
    dtype = v.dtype
    q, k, v, g, beta = q.float(), k.float(), v.float(), g.float(), beta.float()
    B, H, T, Dk = q.shape
    S = q.new_zeros(B, H, Dk, v.shape[-1]) if initial_state is None else initial_state.to(torch.float32).clone()
    eye = torch.eye(Dk)
    ys = []
    for t in range(T):
        kt = k[:, :, t].unsqueeze(-1)  # (B, H, Dk, 1)
        bt = beta[:, :, t][..., None, None]
        S = g[:, :, t].exp()[..., None, None] * ((eye - bt * kt @ kt.transpose(-1, -2)) @ S) + bt * kt @ v[:, :, t].unsqueeze(-2)
        ys.append((q[:, :, t].unsqueeze(-2) @ S).squeeze(-2) * Dk ** -0.5)
    return torch.stack(ys, dim=2).to(dtype), S
'''),
    Answer(_GDR, "queries scaled first, as transformers does; state updated in place", '''
def gated_delta_rule(q, k, v, g, beta, initial_state=None):
    out_dtype = v.dtype
    q = q.to(torch.float32) / math.sqrt(q.shape[-1])
    k, v, g, beta = (t.to(torch.float32) for t in (k, v, g, beta))
    B, H, T, _ = k.shape
    S = torch.zeros(B, H, k.shape[-1], v.shape[-1])
    if initial_state is not None:
        S.copy_(initial_state)
    out = torch.zeros(B, H, T, v.shape[-1])
    for t in range(T):
        S.mul_(torch.exp(g[:, :, t]).view(B, H, 1, 1))
        err = v[:, :, t] - (S * k[:, :, t].unsqueeze(-1)).sum(-2)
        S.add_(k[:, :, t].unsqueeze(-1) * (beta[:, :, t].unsqueeze(-1) * err).unsqueeze(-2))
        out[:, :, t] = (S * q[:, :, t].unsqueeze(-1)).sum(-2)
    return out.to(out_dtype), S
'''),
    Answer(_GDR, "batch and heads flattened, bmm, decay folded into the prediction", '''
def gated_delta_rule(q, k, v, g, beta, initial_state=None):
    B, H, T, Dk = k.shape
    Dv = v.shape[-1]
    Q, K, V = (x.float().reshape(B * H, T, -1) for x in (q, k, v))
    G, Be = g.float().reshape(B * H, T), beta.float().reshape(B * H, T)
    S = torch.zeros(B * H, Dk, Dv) if initial_state is None else initial_state.float().reshape(B * H, Dk, Dv)
    out = []
    for t in range(T):
        a = G[:, t].exp()[:, None, None]
        kt, vt = K[:, t, :, None], V[:, t, None, :]  # (BH, Dk, 1), (BH, 1, Dv)
        pred = a * torch.bmm(kt.transpose(1, 2), S)  # (BH, 1, Dv): decayed state's prediction
        S = a * S + torch.bmm(kt, Be[:, t, None, None] * (vt - pred))
        out.append(torch.bmm(Q[:, t, None, :], S) / Dk ** 0.5)
    return torch.cat(out, dim=1).reshape(B, H, T, Dv).to(v.dtype), S.reshape(B, H, Dk, Dv)
'''),
    # chunked_gated_delta_rule
    Answer(_CHUNK, "padded to whole chunks, every chunk's matrices at once, then a loop that carries the state", '''
def chunked_gated_delta_rule(q, k, v, g, beta, chunk_size=64, initial_state=None):
    B, H, T, Dk = k.shape
    Dv, dtype, C = v.shape[-1], v.dtype, chunk_size
    pad = (-T) % C
    q, k, v = (F.pad(x.float(), (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x.float(), (0, pad)) for x in (g, beta))
    N = (T + pad) // C
    q, k, v = (x.view(B, H, N, C, -1) for x in (q, k, v))
    g, beta = g.view(B, H, N, C), beta.view(B, H, N, C)
    gam = g.cumsum(-1)
    tri = torch.tril(torch.ones(C, C, dtype=torch.bool))
    M = torch.exp((gam.unsqueeze(-1) - gam.unsqueeze(-2)).masked_fill(~tri, -float("inf")))
    kb = k * beta.unsqueeze(-1)
    L = torch.eye(C) + torch.tril(kb @ k.transpose(-1, -2) * M, diagonal=-1)
    W = torch.linalg.solve_triangular(L, kb * gam.exp().unsqueeze(-1), upper=False, unitriangular=True)
    U0 = torch.linalg.solve_triangular(L, v * beta.unsqueeze(-1), upper=False, unitriangular=True)
    P = (q @ k.transpose(-1, -2)) * M
    qd, kd = q * gam.exp().unsqueeze(-1), k * (gam[..., -1:] - gam).exp().unsqueeze(-1)
    S = torch.zeros(B, H, Dk, Dv) if initial_state is None else initial_state.float()
    outs = []
    for n in range(N):
        u = U0[:, :, n] - W[:, :, n] @ S
        outs.append((qd[:, :, n] @ S + P[:, :, n] @ u) / Dk ** 0.5)
        S = gam[:, :, n, -1, None, None].exp() * S + kd[:, :, n].transpose(-1, -2) @ u
    return torch.cat(outs, dim=2)[:, :, :T].to(dtype), S
'''),
    Answer(_CHUNK, "forward substitution over each chunk's rows instead of a triangular solve", '''
def chunked_gated_delta_rule(q, k, v, g, beta, chunk_size=64, initial_state=None):
    B, H, T, Dk = k.shape
    dtype = v.dtype
    q, k, v, g, beta = (t.float() for t in (q, k, v, g, beta))
    S = torch.zeros(B, H, Dk, v.shape[-1]) if initial_state is None else initial_state.float()
    chunks = []
    for a in range(0, T, chunk_size):
        b = min(T, a + chunk_size)
        qc, kc, vc, bc = q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], beta[:, :, a:b].unsqueeze(-1)
        cg = torch.cumsum(g[:, :, a:b], dim=-1)
        n = b - a
        keep = torch.ones(n, n, dtype=torch.bool).tril()
        D = torch.exp(torch.where(keep, cg[..., :, None] - cg[..., None, :], torch.full_like(cg[..., :, None] - cg[..., None, :], -torch.inf)))
        A = torch.tril(bc * (kc @ kc.transpose(-1, -2)) * D, diagonal=-1)
        rhs = bc * vc - bc * torch.exp(cg)[..., None] * (kc @ S)
        rows = []
        for r in range(n):
            prior = torch.stack(rows, dim=-2) if rows else rhs[..., :0, :]
            rows.append(rhs[..., r, :] - (A[..., r, :r, None] * prior).sum(dim=-2))
        u = torch.stack(rows, dim=-2)
        chunks.append((torch.exp(cg)[..., None] * qc @ S + (qc @ kc.transpose(-1, -2) * D) @ u) / math.sqrt(Dk))
        S = torch.exp(cg[..., -1])[..., None, None] * S + (torch.exp(cg[..., -1:] - cg)[..., None] * kc).transpose(-1, -2) @ u
    return torch.cat(chunks, dim=2).to(dtype), S
'''),
    Answer(_CHUNK, "the WY form: the decayed keys' transform W and the values' U0 per chunk, u = U0 - W S", '''
def chunked_gated_delta_rule(q, k, v, g, beta, chunk_size=64, initial_state=None):
    out_dtype = v.dtype
    q, k, v, g, beta = (x.to(torch.float32) for x in (q, k, v, g, beta))
    q = q * q.shape[-1] ** -0.5
    state = (torch.zeros(*k.shape[:2], k.shape[-1], v.shape[-1]) if initial_state is None
             else initial_state.to(torch.float32))
    out = torch.empty(*v.shape)
    T = k.shape[2]
    for lo in range(0, T, chunk_size):
        hi = min(lo + chunk_size, T)
        c = torch.cumsum(g[:, :, lo:hi], -1)
        n = hi - lo
        decay = (c.unsqueeze(-1) - c.unsqueeze(-2)).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf")).exp()
        kk, qq, vv, bb = k[:, :, lo:hi], q[:, :, lo:hi], v[:, :, lo:hi], beta[:, :, lo:hi, None]
        T_mat = torch.linalg.inv(torch.eye(n) + ((bb * kk) @ kk.mT * decay).tril(-1))
        W = T_mat @ (bb * c.exp()[..., None] * kk)
        U0 = T_mat @ (bb * vv)
        u = U0 - W @ state
        out[:, :, lo:hi] = c.exp()[..., None] * (qq @ state) + (qq @ kk.mT * decay) @ u
        state = c[..., -1:].exp()[..., None] * state + (kk * (c[..., -1:] - c).exp()[..., None]).mT @ u
    return out.to(out_dtype), state
'''),
    # decode_state_bytes
    Answer(_BYTES, "a loop over the layers with a dict of costs", '''
def decode_state_bytes(layer_types, num_kv_heads, head_dim, linear_num_heads, linear_key_dim, linear_value_dim,
                       seq_len, batch_size=1, bytes_per_element=2):
    cost = {"full_attention": 2 * num_kv_heads * head_dim * seq_len,
            "linear_attention": linear_num_heads * linear_key_dim * linear_value_dim}
    total = 0
    for kind in layer_types:
        if kind not in cost:
            raise ValueError(f"layer type {kind!r} is neither full_attention nor linear_attention")
        total += cost[kind]
    return total * batch_size * bytes_per_element
'''),
    Answer(_BYTES, "per-position bytes and fixed bytes, added at the end", '''
def decode_state_bytes(layer_types, num_kv_heads, head_dim, linear_num_heads, linear_key_dim, linear_value_dim,
                       seq_len, batch_size=1, bytes_per_element=2):
    n_full = sum(1 for t in layer_types if t == "full_attention")
    n_linear = sum(1 for t in layer_types if t == "linear_attention")
    if n_full + n_linear != len(layer_types):
        raise ValueError("layer_types may only hold 'full_attention' and 'linear_attention'")
    per_position = n_full * 2 * num_kv_heads * head_dim * bytes_per_element
    fixed = n_linear * linear_num_heads * linear_key_dim * linear_value_dim * bytes_per_element
    return batch_size * (per_position * seq_len + fixed)
'''),
    Answer(_BYTES, "a match statement in a generator", '''
def decode_state_bytes(layer_types, num_kv_heads, head_dim, linear_num_heads, linear_key_dim, linear_value_dim,
                       seq_len, batch_size=1, bytes_per_element=2):
    def elements(kind):
        match kind:
            case "full_attention":
                return 2 * num_kv_heads * head_dim * seq_len
            case "linear_attention":
                return linear_num_heads * linear_key_dim * linear_value_dim
            case _:
                raise ValueError(f"unknown layer type: {kind}")
    return int(sum(elements(kind) for kind in layer_types)) * int(batch_size) * int(bytes_per_element)
'''),
]
