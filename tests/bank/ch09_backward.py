"""Chapter 9 answers: softmax_backward, attention_backward, flash_attention."""

from tests.bank import Answer, edit
from tests.bank.backward_right import RIGHT, SOFTMAX_SIGNATURE as _SOFTMAX_SIGNATURE

ASSIGNMENT = "09_backward"

# A correct attention_backward with {softmax}, {ds} and {grads} left open for wrong answers that change one step.
_ATTENTION = """
def attention_backward(q, k, v, grad_out, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-1, -2) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    {softmax}
    out = p @ v
    dv = p.transpose(-1, -2) @ grad_out
    dp = grad_out @ v.transpose(-1, -2)
    {ds}
    {grads}
    return dq, dk, dv
"""
_SOFTMAX = "p = torch.softmax(s, dim=-1).nan_to_num(0.0)"
_DS = "ds = p * (dp - (grad_out * out).sum(-1, keepdim=True))"
_GRADS = "dq, dk = ds @ k * scale, ds.transpose(-1, -2) @ q * scale"


def _attention(softmax: str = _SOFTMAX, ds: str = _DS, grads: str = _GRADS) -> str:
    return _ATTENTION.format(softmax=softmax, ds=ds, grads=grads)


# A correct FlashAttention with one piece of each pass left open: {mask} builds a tile's visibility,
# {save} keeps what the backward needs, {p} recomputes a tile of weights, {ds} and {dk} the gradients.
_FLASH = '''
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, block_q=64, block_k=64):
        n_q, n_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
        shift = n_k - n_q
        outs, lses = [], []
        for q0 in range(0, n_q, block_q):
            q1 = min(q0 + block_q, n_q)
            m = q.new_full(q.shape[:-2] + (q1 - q0, 1), float("-inf"))
            l = q.new_zeros(q.shape[:-2] + (q1 - q0, 1))
            o = q.new_zeros(q.shape[:-2] + (q1 - q0, v.shape[-1]))
            for k0 in range(0, n_k, block_k):
                k1 = min(k0 + block_k, n_k)
                s = q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-1, -2) * scale
                if is_causal:
                    s = s.masked_fill(~({mask}), float("-inf"))
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))
                safe = torch.where(torch.isinf(m_new), 0.0, m_new)
                alpha, p = torch.exp(m - safe), torch.exp(s - safe)
                l, o, m = alpha * l + p.sum(-1, keepdim=True), alpha * o + p @ v[..., k0:k1, :], m_new
            seen = l > 0
            outs.append(torch.where(seen, o / torch.where(seen, l, 1.0), 0.0))
            lses.append(torch.where(seen, m + torch.log(torch.where(seen, l, 1.0)), float("-inf"))[..., 0])
        out, lse = torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
        {save}
        ctx.is_causal, ctx.block_q, ctx.block_k = is_causal, block_q, block_k
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        n_q, n_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
        shift = n_k - n_q
        D = (grad_out * out).sum(-1, keepdim=True)
        lse = lse[..., None]
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for k0 in range(0, n_k, ctx.block_k):
            k1 = min(k0 + ctx.block_k, n_k)
            dk_j, dv_j = torch.zeros_like(k[..., k0:k1, :]), torch.zeros_like(v[..., k0:k1, :])
            for q0 in range(0, n_q, ctx.block_q):
                q1 = min(q0 + ctx.block_q, n_q)
                s = q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-1, -2) * scale
                if ctx.is_causal:
                    s = s.masked_fill(~({mask}), float("-inf"))
                {p}
                dv_j += p.transpose(-1, -2) @ grad_out[..., q0:q1, :]
                {ds}
                dq[..., q0:q1, :] += ds @ k[..., k0:k1, :] * scale
                {dk}
            dk[..., k0:k1, :], dv[..., k0:k1, :] = dk_j, dv_j
        return dq, dk, dv, None, None, None


def flash_attention(q, k, v, is_causal=False, block_q=64, block_k=64):
    return FlashAttention.apply(q, k, v, is_causal, block_q, block_k)
'''
_LOWER_RIGHT = "torch.arange(k0, k1) <= torch.arange(q0, q1)[:, None] + shift"
_SAVE = "ctx.save_for_backward(q, k, v, out, lse)"
_P = "p = torch.exp(s - torch.where(torch.isinf(lse[..., q0:q1, :]), float('inf'), lse[..., q0:q1, :]))"
_FLASH_DS = "ds = p * (grad_out[..., q0:q1, :] @ v[..., k0:k1, :].transpose(-1, -2) - D[..., q0:q1, :])"
_DK = "dk_j += ds.transpose(-1, -2) @ q[..., q0:q1, :] * scale"

# A backward that is right but builds the (n_q, n_k) weights in one piece.
_NAIVE_BACKWARD = """    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        n_q, n_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
        s = q @ k.transpose(-1, -2) * scale
        if ctx.is_causal:
            s = s.masked_fill(torch.arange(n_k) > torch.arange(n_q)[:, None] + n_k - n_q, float("-inf"))
        p = torch.exp(s - torch.where(torch.isinf(lse), float("inf"), lse)[..., None])
        ds = p * (grad_out @ v.transpose(-1, -2) - (grad_out * out).sum(-1, keepdim=True))
        return ds @ k * scale, ds.transpose(-1, -2) @ q * scale, p.transpose(-1, -2) @ grad_out, None, None, None"""


def _flash(mask: str = _LOWER_RIGHT, save: str = _SAVE, p: str = _P, ds: str = _FLASH_DS, dk: str = _DK) -> str:
    return _FLASH.format(mask=mask, save=save, p=p, ds=ds, dk=dk)


WRONG = [
    Answer("softmax_backward", "p * grad_p: the - sum(p * grad_p) term is missing", _SOFTMAX_SIGNATURE + """
    return p * grad_p
""", message="the term - sum"),
    Answer("softmax_backward", "forgets to multiply by p", _SOFTMAX_SIGNATURE + """
    return grad_p - (p * grad_p).sum(dim=dim, keepdim=True)
""", message="not multiplied by p"),
    Answer("softmax_backward", "sums along the last axis whatever dim is", _SOFTMAX_SIGNATURE + """
    return p * (grad_p - (p * grad_p).sum(dim=-1, keepdim=True))
""", message="the sum runs along the wrong dimension"),
    Answer("softmax_backward", "sums over every element instead of along dim", _SOFTMAX_SIGNATURE + """
    return p * (grad_p - (p * grad_p).sum())
""", message="over all elements"),
    Answer("softmax_backward", "right values through the (n, n) Jacobian diag(p) - p p^T", _SOFTMAX_SIGNATURE + """
    pm, gm = p.movedim(dim, -1), grad_p.movedim(dim, -1)
    jacobian = torch.diag_embed(pm) - pm[..., :, None] * pm[..., None, :]
    return (jacobian @ gm[..., None])[..., 0].movedim(-1, dim)
""", message="Jacobian"),
    Answer("softmax_backward", "right values through one row's (n, n) Jacobian at a time", _SOFTMAX_SIGNATURE + """
    pm, gm = p.movedim(dim, -1), grad_p.movedim(dim, -1)
    rows = [(torch.diag(r) - torch.outer(r, r)) @ g for r, g in zip(pm.reshape(-1, pm.shape[-1]), gm.reshape(-1, gm.shape[-1]))]
    return torch.stack(rows).reshape(pm.shape).movedim(-1, dim)
""", message="one row's alone"),
    Answer("attention_backward", "the missing D term: dS = P * dP", _attention(ds="ds = p * dp"),
           message="the - D term"),
    Answer("attention_backward", "the wrong scale on dK: no 1/sqrt(d)",
           _attention(grads="dq, dk = ds @ k * scale, ds.transpose(-1, -2) @ q"), message="no 1/sqrt(d) on dk"),
    Answer("attention_backward", "a transposed dS: dq = dS^T K, dk = dS Q",
           _attention(grads="dq, dk = ds.transpose(-1, -2) @ k * scale, ds @ q * scale"), message="dS transposed"),
    Answer("attention_backward", "softmax without the row-max shift: exp(S) / sum(exp(S)) overflows in float32",
           _attention(softmax="e = torch.exp(s)\n    p = (e / e.sum(-1, keepdim=True)).nan_to_num(0.0)"),
           message="exp(130) overflows float32"),
    Answer("softmax_backward", "updates grad_p in place", _SOFTMAX_SIGNATURE + """
    grad_p -= (p * grad_p).sum(dim=dim, keepdim=True)
    return p * grad_p
""", message="changed its argument grad_p in place"),
    Answer("attention_backward", "nan on fully masked rows: the plain softmax", _attention(
        softmax="p = torch.softmax(s, dim=-1)"), message="nan"),
    Answer("attention_backward", "the scale applied twice on dK",
           _attention(grads="dq, dk = ds @ k * scale, ds.transpose(-1, -2) @ q * scale * scale"),
           message="applied twice"),
    Answer("softmax_backward", "subtracts the plain sum of grad_p instead of sum(p * grad_p)", _SOFTMAX_SIGNATURE + """
    return p * (grad_p - grad_p.sum(dim=dim, keepdim=True))
""", message="sum(grad_p) instead of sum(p * grad_p)"),
    Answer("softmax_backward", "works in float32 whatever the dtype of p", _SOFTMAX_SIGNATURE + """
    p32, g32 = p.float(), grad_p.float()
    return p32 * (g32 - (p32 * g32).sum(dim=dim, keepdim=True))
""", message="should have dtype torch.float64"),
    Answer("attention_backward", "the wrong scale on dQ: no 1/sqrt(d)",
           _attention(grads="dq, dk = ds @ k, ds.transpose(-1, -2) @ q * scale"), message="no 1/sqrt(d) on dq"),
    Answer("attention_backward", "the mask ignored: masked pairs still get weight and gradient", edit(
        _attention(), ('        s = s.masked_fill(~mask, float("-inf"))\n', "        pass\n")),
           message="the mask is ignored"),
    Answer("attention_backward", "the mask inverted: masked_fill(mask, -inf) fills the pairs that may attend", edit(
        _attention(), ('s.masked_fill(~mask, float("-inf"))', 's.masked_fill(mask, float("-inf"))')),
           message="the mask is inverted"),
    Answer("attention_backward", "computes in float64 and returns float64 gradients for float32 inputs", edit(
        _attention(), ("    scale = 1.0 / math.sqrt(q.shape[-1])\n",
                       "    q, k, v, grad_out = q.double(), k.double(), v.double(), grad_out.double()\n"
                       "    scale = 1.0 / math.sqrt(q.shape[-1])\n")), message="should have dtype torch.float32"),
    Answer("softmax_backward", "computes in float32 and casts the result back to the dtype of p", _SOFTMAX_SIGNATURE + """
    p32, g32 = p.float(), grad_p.float()
    return (p32 * (g32 - (p32 * g32).sum(dim=dim, keepdim=True))).to(p.dtype)
""", message="computed in float32 and cast back"),
    Answer("attention_backward", "computes in float32 and casts the gradients back to the inputs' dtype", edit(
        _attention(), ("    scale = 1.0 / math.sqrt(q.shape[-1])\n",
                       "    dtype = q.dtype\n    q, k, v, grad_out = q.float(), k.float(), v.float(), grad_out.float()\n"
                       "    scale = 1.0 / math.sqrt(q.shape[-1])\n"),
        ("    return dq, dk, dv\n", "    return dq.to(dtype), dk.to(dtype), dv.to(dtype)\n")),
           message="computed in float32 and cast back"),
    Answer("flash_attention", "the missing D term: dS = P * dP",
           _flash(ds="ds = p * (grad_out[..., q0:q1, :] @ v[..., k0:k1, :].transpose(-1, -2))"), message="the - D term"),
    Answer("flash_attention", "the wrong scale on dK: no 1/sqrt(d)",
           _flash(dk="dk_j += ds.transpose(-1, -2) @ q[..., q0:q1, :]"), message="no 1/sqrt(d) on dk"),
    Answer("flash_attention", "an upper-left causal mask", _flash(
        mask="torch.arange(k0, k1) <= torch.arange(q0, q1)[:, None]"), message="upper-left causal mask"),
    Answer("flash_attention", "nan on fully masked rows: exp(s - lse) with lse = -inf",
           _flash(p="p = torch.exp(s - lse[..., q0:q1, :])"), message="nan"),
    Answer("flash_attention", "lse recomputed from the wrong block: each tile normalised by its own log-sum-exp",
           _flash(p="p = torch.softmax(s, dim=-1).nan_to_num(0.0)"), message="normalised by its own sum"),
    Answer("flash_attention", "P saved instead of recomputed: the forward keeps every tile of weights", _flash(
        save="""ctx.save_for_backward(q, k, v, out, lse)
        scale_ = 1.0 / math.sqrt(q.shape[-1])
        ctx.tiles = [torch.exp(q[..., i:i + block_q, :] @ k[..., j:j + block_k, :].transpose(-1, -2) * scale_
                               - lse[..., i:i + block_q, None])
                     for i in range(0, n_q, block_q) for j in range(0, n_k, block_k)]"""),
           message="the memory of the process rose"),
    Answer("flash_attention", "P saved instead of recomputed: the whole (n_q, n_k) weights saved", _flash(
        save="""p_all = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.p_all = p_all"""), message="the memory of the process rose"),
    Answer("flash_attention", "the backward recomputes the whole (n_q, n_k) weights at once from lse",
           _flash()[:_flash().index("    @staticmethod\n    def backward")] + _NAIVE_BACKWARD
           + _flash()[_flash().index("\n\ndef flash_attention"):], message="the memory of the process rose"),
    Answer("flash_attention", "tiles hard-coded to 64 x 64: block_q and block_k ignored", _flash().replace(
        "        n_q, n_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])\n        shift = n_k - n_q\n"
        "        outs",
        "        n_q, n_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])\n        shift = n_k - n_q\n"
        "        block_q = block_k = 64\n        outs"), message="seems to ignore block_q and block_k"),
    Answer("flash_attention", "lse kept in float32 for float64 inputs", _flash(
        save="ctx.save_for_backward(q, k, v, out, lse.float())"), message="kept in float32"),
    Answer("flash_attention", "forward without the running max: l = sum(exp(s)), lse = log(l)", edit(
        _flash(), ("alpha, p = torch.exp(m - safe), torch.exp(s - safe)", "alpha, p = torch.ones_like(m), torch.exp(s)"),
        ("torch.where(seen, m + torch.log(", "torch.where(seen, torch.log(")), message="exp(130) overflows float32"),
    Answer("flash_attention", "the backward skips the last, shorter query block", _flash().replace(
        "            for q0 in range(0, n_q, ctx.block_q):", "            for q0 in range(0, n_q - n_q % ctx.block_q, ctx.block_q):"),
           message="Only rows"),
    Answer("flash_attention", "the backward skips fully masked tiles but keeps lse = -inf: nan where a tile mixes "
                              "a query that sees no key with one that does", _flash(
        p="if torch.isinf(s).all():\n                    continue\n                p = torch.exp(s - lse[..., q0:q1, :])"),
           message="hint 2"),
    Answer("flash_attention", "dV accumulated over query blocks wrongly: each query block overwrites the key "
                              "block's dV_j instead of adding to it, so only the last query block counts", _flash().replace(
        "dv_j += p.transpose(-1, -2) @ grad_out", "dv_j = p.transpose(-1, -2) @ grad_out"),
           message="dV_j overwritten by each query block"),
]
