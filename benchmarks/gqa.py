"""Decode speed and KV cache memory of MHA, GQA and MQA versions of one small decoder.

    python -m benchmarks.gqa --threads 1 --layers 2 --prompt 1024 --new-tokens 16   # the book's run
    python -m benchmarks.gqa --device cuda --batch 64 --prompt 4096 --layers 8 --dtype float16

Every variant has the same width, query heads and layers; only num_kv_heads changes. The weights
are random: how fast a model decodes and how much cache it holds do not depend on their values.
The book page (book/05_gqa.md) runs `measure_decode` and `kv_cache_bytes` from this file.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from course.machine import describe_machine
from course.solutions import load_solution

ch5 = load_solution("05_gqa")


# Chapter 4 owns kv_cache_bytes: 2 * layers * kv_heads * head_dim * seq_len * batch * bytes.
kv_cache_bytes, KV_CACHE_BYTES_SOURCE = load_solution("04_kv_cache").kv_cache_bytes, "chapter 4's kv_cache_bytes"


class GroupedMatmulGQA(ch5.GroupedQueryAttention):
    """The same layer, computed without copying the shared KV heads.

    The course's module repeats each KV head for its g query heads (repeat_kv), which writes and
    then reads MHA-sized keys and values at every step. Here the g query heads of a group are
    stacked along the query axis instead, q (B, H, T, Dh) -> (B, H_kv, g * T, Dh), so one attention
    call per KV head reads that head once for its whole group. Same weights, same outputs.
    """

    def forward(self, x: torch.Tensor, cache: object = None) -> torch.Tensor:
        """x (B, T, d_model) -> (B, T, d_model); with a cache, x holds the T positions after cache.seq_len."""
        batch, seq_len, d_model = x.shape
        heads, kv_heads, head_dim = self.num_heads, self.num_kv_heads, self.head_dim
        group = heads // kv_heads
        q = self.q_proj(x).view(batch, seq_len, heads, head_dim).transpose(1, 2)
        q = q.reshape(batch, kv_heads, group * seq_len, head_dim)       # row r * T + t: head j * g + r, position t
        k = self.k_proj(x).view(batch, seq_len, kv_heads, head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq_len, kv_heads, head_dim).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v)
        n_k = k.shape[2]
        mask = torch.ones(seq_len, n_k, dtype=torch.bool, device=x.device).tril(diagonal=n_k - seq_len)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.repeat(group, 1))
        return self.out_proj(out.view(batch, heads, seq_len, head_dim).transpose(1, 2).reshape(batch, seq_len, d_model))


ATTENTION = {"repeat_kv": ch5.GroupedQueryAttention, "grouped matmul": GroupedMatmulGQA}


class Block(nn.Module):
    """Pre-norm block: x + GQA(norm(x)), then x + MLP(norm(x)); x is (B, T, d_model)."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, attention: str) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = ATTENTION[attention](d_model, num_heads, num_kv_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor, cache: object) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cache)
        return x + self.mlp(self.norm2(x))


class TinyDecoder(nn.Module):
    """A decoder-only language model with GQA layers: ids (B, T) -> logits (B, T, vocab_size)."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_kv_heads: int, num_layers: int,
                 max_seq_len: int, attention: str = "repeat_kv") -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, num_kv_heads, attention) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids: torch.Tensor, caches: list) -> torch.Tensor:
        """ids (B, T): the tokens after the caches' seq_len cached ones -> logits (B, T, vocab_size)."""
        start = caches[0].seq_len
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(start, start + ids.shape[1], device=ids.device))
        for block, cache in zip(self.blocks, caches):
            x = block(x, cache)
        return self.lm_head(self.norm(x))


@dataclass(frozen=True)
class DecodeResult:
    """One variant's measurement: decode speed and the cache it allocated."""

    num_kv_heads: int
    attention: str          # a key of ATTENTION: how the shared KV heads are read
    ms_per_step: float      # median wall time of one decode step (every sequence of the batch)
    tokens_per_s: float     # batch_size / ms_per_step
    cache_bytes: int        # measured: nbytes of every tensor the layers' caches hold
    formula_bytes: int      # kv_cache_bytes for the same shape
    num_params: int


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_decode(variants: list[tuple[int, str]], *, d_model: int = 256, num_heads: int = 8, num_layers: int = 4,
                   vocab_size: int = 1024, batch_size: int = 8, prompt_len: int = 512, new_tokens: int = 24,
                   device: str = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0) -> list[DecodeResult]:
    """For each (num_kv_heads, attention): prefill one random prompt, then greedily decode new_tokens tokens.

    The variants take their decode steps in turn (round robin), so a machine that slows down for a
    while slows every variant alike; each step's time is taken alone and the median reported.
    """
    dev = torch.device(device)
    max_len = prompt_len + new_tokens
    head_dim = d_model // num_heads
    torch.manual_seed(seed)
    prompt = torch.randint(vocab_size, (batch_size, prompt_len), device=dev)
    models, caches, next_ids = [], [], []
    with torch.no_grad():
        for g, attention in variants:
            torch.manual_seed(seed)
            model = TinyDecoder(vocab_size, d_model, num_heads, g, num_layers, max_len, attention).to(dev, dtype).eval()
            layer_caches = [ch5.KVCache(batch_size, g, max_len, head_dim, dtype=dtype, device=dev)
                            for _ in range(num_layers)]
            models.append(model)
            caches.append(layer_caches)
            next_ids.append(model(prompt, layer_caches)[:, -1:].argmax(-1))
        seconds: list[list[float]] = [[] for _ in variants]
        for _ in range(new_tokens):
            for i, model in enumerate(models):
                _sync(dev)
                start = time.perf_counter()
                next_ids[i] = model(next_ids[i], caches[i])[:, -1:].argmax(-1)
                _sync(dev)
                seconds[i].append(time.perf_counter() - start)
    element = torch.empty((), dtype=dtype).element_size()
    results = []
    for (g, attention), model, layer_caches, times in zip(variants, models, caches, seconds):
        step = statistics.median(times)
        measured = sum(t.nbytes for cache in layer_caches for t in vars(cache).values() if isinstance(t, torch.Tensor))
        formula = kv_cache_bytes(num_layers, g, head_dim, max_len, batch_size, element)
        results.append(DecodeResult(g, attention, step * 1e3, batch_size / step, measured, formula,
                                    sum(p.numel() for p in model.parameters())))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, nargs="+", default=None, help="default: every divisor of --heads")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    kv_heads = args.kv_heads or [g for g in range(args.heads, 0, -1) if args.heads % g == 0]
    variants = [(g, attention) for g in kv_heads for attention in ATTENTION if g < args.heads or attention == "repeat_kv"]
    print(describe_machine())
    print(f"d_model={args.d_model}, {args.heads} query heads, {args.layers} layers, batch {args.batch}, "
          f"prompt {args.prompt} + {args.new_tokens} decoded tokens, {args.dtype} on {args.device}; "
          f"formula from {KV_CACHE_BYTES_SOURCE}")
    print(f"{'KV heads':>8} {'attention':>15} {'params':>10} {'cache MiB':>10} {'formula MiB':>12} {'ms/step':>8} "
          f"{'tokens/s':>9}")
    results = measure_decode(variants, d_model=args.d_model, num_heads=args.heads, num_layers=args.layers,
                             batch_size=args.batch, prompt_len=args.prompt, new_tokens=args.new_tokens,
                             device=args.device, dtype=getattr(torch, args.dtype))
    for r in results:
        print(f"{r.num_kv_heads:>8} {r.attention:>15} {r.num_params:>10,} {r.cache_bytes / 2**20:>10.2f} {r.formula_bytes / 2**20:>12.2f} "
              f"{r.ms_per_step:>8.2f} {r.tokens_per_s:>9.0f}")


if __name__ == "__main__":
    main()
