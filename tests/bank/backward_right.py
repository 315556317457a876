"""Chapter 9's bank: differently written right answers for softmax_backward, attention_backward and
flash_attention, each written apart from the reference (no one-token edits of it)."""

from tests.bank import Answer

SOFTMAX_SIGNATURE = "def softmax_backward(p, grad_p, dim=-1):\n"

RIGHT = [
    Answer("softmax_backward", "p * grad_p minus p times the row sum of p * grad_p",
           SOFTMAX_SIGNATURE + """
    weighted = p * grad_p
    return weighted - p * weighted.sum(dim, keepdim=True)
"""),
    Answer("attention_backward", "dS from task 1's softmax_backward, a softmax with a where() for empty rows", """
def attention_backward(q, k, v, grad_out, mask=None):
    d = q.shape[-1]
    s = torch.matmul(q, k.mT) / d ** 0.5
    if mask is None:
        mask = torch.ones(s.shape[-2:], dtype=torch.bool)
    s = torch.where(mask, s, torch.finfo(s.dtype).min)
    p = torch.where(mask, torch.softmax(s, dim=-1), 0.0)
    p = p / p.sum(-1, keepdim=True).clamp_min(torch.finfo(p.dtype).tiny)
    dv = torch.matmul(p.mT, grad_out)
    ds = softmax_backward(p, torch.matmul(grad_out, v.mT))
    return torch.matmul(ds, k) / d ** 0.5, torch.matmul(ds.mT, q) / d ** 0.5, dv
"""),
    Answer("softmax_backward", "moves dim last and takes the row dot products with a batched matmul",
           SOFTMAX_SIGNATURE + """
    p_last, g_last = torch.movedim(p, dim, -1), torch.movedim(grad_p, dim, -1)
    dots = (p_last.unsqueeze(-2) @ g_last.unsqueeze(-1)).squeeze(-1)   # (..., 1): sum_i p_i g_i per row
    return torch.movedim(p_last * (g_last - dots), -1, dim)
"""),
    Answer("softmax_backward", "the Jacobian-vector product written with einsum over a vector of ones",
           SOFTMAX_SIGNATURE + """
    n = p.shape[dim]
    ones = torch.ones(n, dtype=p.dtype)
    pg = torch.mul(p, grad_p)
    total = torch.tensordot(torch.movedim(pg, dim, -1), ones, dims=1).unsqueeze(-1)
    return torch.sub(pg, torch.movedim(torch.movedim(p, dim, -1) * total, -1, dim))
"""),
    Answer("attention_backward", "log-sum-exp weights, D as rowsum(P * dP), einsum throughout", """
def attention_backward(q, k, v, grad_out, mask=None):
    d = q.shape[-1]
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d)
    if mask is not None:
        scores = torch.where(mask, scores, -math.inf)
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    lse = torch.where(torch.isfinite(lse), lse, math.inf)    # a row that sees no key: exp(-inf - inf) = 0
    weights = torch.exp(scores - lse)
    dv = torch.einsum("...ij,...ie->...je", weights, grad_out)
    dweights = torch.einsum("...ie,...je->...ij", grad_out, v)
    dscores = weights * (dweights - (weights * dweights).sum(-1, keepdim=True))
    dq = torch.einsum("...ij,...jd->...id", dscores, k) / math.sqrt(d)
    dk = torch.einsum("...ij,...id->...jd", dscores, q) / math.sqrt(d)
    return dq, dk, dv
"""),
    Answer("attention_backward", "row max by max(), masked scores pushed to the dtype's lowest value, rows renormalised", """
def attention_backward(q, k, v, grad_out, mask=None):
    inv = q.shape[-1] ** -0.5
    s = torch.matmul(q, k.transpose(-2, -1)) * inv
    if mask is None:
        allowed = torch.ones(s.shape[-2:], dtype=torch.bool)
    else:
        allowed = mask.expand(s.shape)
    s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
    top = s.max(dim=-1, keepdim=True).values
    e = torch.exp(s - top) * allowed
    den = e.sum(dim=-1, keepdim=True)
    p = e / torch.clamp(den, min=torch.finfo(s.dtype).tiny)
    o = torch.matmul(p, v)
    dv = torch.matmul(p.transpose(-2, -1), grad_out)
    dp = torch.matmul(grad_out, v.transpose(-2, -1))
    ds = p * (dp - torch.sum(grad_out * o, dim=-1, keepdim=True))
    return torch.matmul(ds, k) * inv, torch.matmul(ds.transpose(-2, -1), q) * inv, dv
"""),
    Answer("flash_attention", "query blocks outer in the backward, dK and dV accumulated in place, logaddexp in the forward",
           """
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, block_q=64, block_k=64):
        n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
        out = torch.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
        lse = torch.empty(q.shape[:-1], dtype=q.dtype)
        for q0 in range(0, n_q, block_q):
            rows = torch.arange(q0, min(q0 + block_q, n_q))
            run_lse = torch.full(q.shape[:-2] + (len(rows),), float("-inf"), dtype=q.dtype)
            acc = torch.zeros(q.shape[:-2] + (len(rows), v.shape[-1]), dtype=q.dtype)
            for k0 in range(0, n_k, block_k):
                cols = torch.arange(k0, min(k0 + block_k, n_k))
                s = q[..., rows, :] @ k[..., cols, :].mT / math.sqrt(d)
                if is_causal:
                    s = torch.where(cols <= rows[:, None] + n_k - n_q, s, float("-inf"))
                tile_lse = torch.logsumexp(s, dim=-1)
                new_lse = torch.logaddexp(run_lse, tile_lse)
                safe = torch.where(torch.isinf(new_lse), 0.0, new_lse)
                acc = acc * torch.exp(run_lse - safe)[..., None] + torch.exp(s - safe[..., None]) @ v[..., cols, :]
                run_lse = new_lse
            out[..., rows, :], lse[..., rows] = acc, run_lse
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.settings = (is_causal, block_q, block_k)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        is_causal, block_q, block_k = ctx.settings
        n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
        delta = (grad_out * out).sum(-1)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for q0 in range(0, n_q, block_q):
            rows = torch.arange(q0, min(q0 + block_q, n_q))
            row_lse = lse[..., rows].nan_to_num(neginf=float("inf"))[..., None]
            for k0 in range(0, n_k, block_k):
                cols = torch.arange(k0, min(k0 + block_k, n_k))
                s = q[..., rows, :] @ k[..., cols, :].mT / math.sqrt(d)
                if is_causal:
                    s = torch.where(cols <= rows[:, None] + n_k - n_q, s, float("-inf"))
                p = torch.exp(s - row_lse)
                dv[..., cols, :] += p.mT @ grad_out[..., rows, :]
                ds = p * (grad_out[..., rows, :] @ v[..., cols, :].mT - delta[..., rows, None]) / math.sqrt(d)
                dq[..., rows, :] += ds @ k[..., cols, :]
                dk[..., cols, :] += ds.mT @ q[..., rows, :]
        return dq, dk, dv, None, None, None


def flash_attention(q, k, v, is_causal=False, block_q=64, block_k=64):
    return FlashAttention.apply(q, k, v, is_causal, block_q, block_k)
"""),
    Answer("flash_attention", "tiles from torch.split, each tile's causal mask from tril(diagonal), nan_to_num for "
                              "queries that see no key, dK and dV blocks concatenated at the end", """
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, block_q=64, block_k=64):
        n_q, n_k = q.shape[-2], k.shape[-2]
        scale = q.shape[-1] ** -0.5
        outs, lses = [], []
        for qi, q_blk in enumerate(torch.split(q, block_q, dim=-2)):
            m = torch.full(q_blk.shape[:-1], -math.inf, dtype=q.dtype)
            l = torch.zeros(q_blk.shape[:-1], dtype=q.dtype)
            acc = torch.zeros(q_blk.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
            for kj, (k_blk, v_blk) in enumerate(zip(torch.split(k, block_k, dim=-2), torch.split(v, block_k, dim=-2))):
                s = q_blk @ k_blk.transpose(-2, -1) * scale
                if is_causal:
                    keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril(qi * block_q + n_k - n_q - kj * block_k)
                    s = s.masked_fill(~keep, -math.inf)
                m_new = torch.maximum(m, s.max(dim=-1).values)
                m_ref = m_new.clamp(min=torch.finfo(q.dtype).min)
                p = torch.exp(s - m_ref[..., None])
                corr = torch.exp(m - m_ref)
                l = l * corr + p.sum(-1)
                acc = acc * corr[..., None] + p @ v_blk
                m = m_new
            outs.append(torch.nan_to_num(acc / l[..., None], nan=0.0))
            lses.append(m + torch.log(l))
        out, lse = torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.cfg = (is_causal, block_q, block_k)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        is_causal, block_q, block_k = ctx.cfg
        n_q, n_k = q.shape[-2], k.shape[-2]
        scale = q.shape[-1] ** -0.5
        delta = (grad_out * out).sum(-1)
        dq = torch.zeros_like(q)
        dks, dvs = [], []
        for kj in range(0, n_k, block_k):
            k_blk, v_blk = k[..., kj:kj + block_k, :], v[..., kj:kj + block_k, :]
            dk_blk, dv_blk = torch.zeros_like(k_blk), torch.zeros_like(v_blk)
            for qi in range(0, n_q, block_q):
                rows = slice(qi, qi + block_q)
                s = q[..., rows, :] @ k_blk.transpose(-2, -1) * scale
                if is_causal:
                    keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril(qi + n_k - n_q - kj)
                    s = s.masked_fill(~keep, -math.inf)
                p = torch.exp(s - lse[..., rows, None]).nan_to_num(nan=0.0)
                g = grad_out[..., rows, :]
                dv_blk = dv_blk + p.transpose(-2, -1) @ g
                ds = p * (g @ v_blk.transpose(-2, -1) - delta[..., rows, None]) * scale
                dq[..., rows, :] += ds @ k_blk
                dk_blk = dk_blk + ds.transpose(-2, -1) @ q[..., rows, :]
            dks.append(dk_blk)
            dvs.append(dv_blk)
        return dq, torch.cat(dks, dim=-2), torch.cat(dvs, dim=-2), None, None, None


def flash_attention(q, k, v, is_causal=False, block_q=64, block_k=64):
    return FlashAttention.apply(q, k, v, is_causal, block_q, block_k)
"""),
    Answer("flash_attention", "batch dimensions flattened for torch.bmm, hidden key blocks skipped in both passes", """
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, block_q=64, block_k=64):
        n_q, d, n_k, d_v = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
        q3, k3, v3 = q.reshape(-1, n_q, d), k.reshape(-1, n_k, d), v.reshape(-1, n_k, d_v)
        nb, offset = q3.shape[0], n_k - n_q
        out = torch.zeros(nb, n_q, d_v, dtype=q.dtype)
        lse = torch.full((nb, n_q), -math.inf, dtype=q.dtype)
        for a in range(0, n_q, block_q):
            b = min(a + block_q, n_q)
            row_max = torch.full((nb, b - a, 1), -math.inf, dtype=q.dtype)
            row_sum = torch.zeros((nb, b - a, 1), dtype=q.dtype)
            acc = torch.zeros((nb, b - a, d_v), dtype=q.dtype)
            for c in range(0, n_k, block_k):
                if is_causal and c > b - 1 + offset:
                    break
                e = min(c + block_k, n_k)
                s = torch.bmm(q3[:, a:b], k3[:, c:e].transpose(1, 2)) / math.sqrt(d)
                if is_causal:
                    visible = torch.arange(c, e)[None, :] - torch.arange(a, b)[:, None] <= offset
                    s = torch.where(visible, s, -math.inf)
                new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
                base = torch.where(new_max == -math.inf, torch.zeros_like(new_max), new_max)
                w = torch.exp(s - base)
                fade = torch.exp(row_max - base)
                row_sum = fade * row_sum + w.sum(-1, keepdim=True)
                acc = fade * acc + torch.bmm(w, v3[:, c:e])
                row_max = new_max
            has = row_sum > 0
            denom = torch.where(has, row_sum, torch.ones_like(row_sum))
            out[:, a:b] = torch.where(has, acc / denom, torch.zeros_like(acc))
            lse[:, a:b] = torch.where(has, row_max + torch.log(denom), -math.inf)[..., 0]
        out, lse = out.reshape(q.shape[:-1] + (d_v,)), lse.reshape(q.shape[:-1])
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.opts = (is_causal, block_q, block_k)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        is_causal, block_q, block_k = ctx.opts
        n_q, d, n_k, d_v = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
        q3, k3, v3 = q.reshape(-1, n_q, d), k.reshape(-1, n_k, d), v.reshape(-1, n_k, d_v)
        g3, o3 = grad_out.reshape(-1, n_q, d_v), out.reshape(-1, n_q, d_v)
        lse3 = lse.reshape(-1, n_q, 1)
        lse3 = lse3.masked_fill(lse3 == -math.inf, math.inf)
        delta = (g3 * o3).sum(-1, keepdim=True)
        dq3, dk3, dv3 = torch.zeros_like(q3), torch.zeros_like(k3), torch.zeros_like(v3)
        offset = n_k - n_q
        for c in range(0, n_k, block_k):
            e = min(c + block_k, n_k)
            for a in range(0, n_q, block_q):
                b = min(a + block_q, n_q)
                if is_causal and c > b - 1 + offset:
                    continue
                s = torch.bmm(q3[:, a:b], k3[:, c:e].transpose(1, 2)) / math.sqrt(d)
                if is_causal:
                    visible = torch.arange(c, e)[None, :] - torch.arange(a, b)[:, None] <= offset
                    s = torch.where(visible, s, -math.inf)
                w = torch.exp(s - lse3[:, a:b])
                dv3[:, c:e] += torch.bmm(w.transpose(1, 2), g3[:, a:b])
                ds = w * (torch.bmm(g3[:, a:b], v3[:, c:e].transpose(1, 2)) - delta[:, a:b]) / math.sqrt(d)
                dq3[:, a:b] += torch.bmm(ds, k3[:, c:e])
                dk3[:, c:e] += torch.bmm(ds.transpose(1, 2), q3[:, a:b])
        return dq3.reshape(q.shape), dk3.reshape(k.shape), dv3.reshape(v.shape), None, None, None


def flash_attention(q, k, v, is_causal=False, block_q=64, block_k=64):
    return FlashAttention.apply(q, k, v, is_causal, block_q, block_k)
"""),
]
