"""What the KV cache buys and what it costs, measured on this machine.

    python -m benchmarks.kv_cache       # prints every figure of book/04_kv_cache.md

It trains chapter 4's TinyDecoder for a few seconds on the opening of *Alice's Adventures in
Wonderland* (Lewis Carroll, 1865, public domain), checks that cached and uncached greedy decoding
agree token for token and logit for logit, times decoding with and without the cache against the
generated length, times one cache append (preallocated buffer against torch.cat growth) against the
cache length, and sizes the cache of published models. The book page imports these functions; the
model code is the course's reference solution, loaded with `load_solution("04_kv_cache")`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils import benchmark

from course.configs import FALCON_7B, LLAMA2_70B, LLAMA3_8B, MISTRAL_7B, ModelConfig
from course.machine import describe_machine
from course.solutions import load_solution

ch4 = load_solution("04_kv_cache")

DECODE_LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384)
CACHE_LENGTHS = (64, 256, 1024, 4096, 16384)
THREADS = 1  # decoding a small model is latency-bound; one thread gives steadier timings on a shared machine
CONFIGS: tuple[ModelConfig, ...] = (LLAMA2_70B, LLAMA3_8B, MISTRAL_7B, FALCON_7B)

TEXT = (
    "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing "
    "to do: once or twice she had peeped into the book her sister was reading, but it had no pictures "
    "or conversations in it, 'and what is the use of a book,' thought Alice 'without pictures or "
    "conversations?' So she was considering in her own mind (as well as she could, for the hot day made "
    "her feel very sleepy and stupid), whether the pleasure of making a daisy-chain would be worth the "
    "trouble of getting up and picking the daisies, when suddenly a White Rabbit with pink eyes ran close "
    "by her."
)
TEXT_SOURCE = "Lewis Carroll, Alice's Adventures in Wonderland (1865), chapter 1, opening paragraphs; public domain"


@dataclass(frozen=True)
class Chars:
    """A character-level tokenizer: one token id per distinct character of a text."""

    alphabet: str

    @classmethod
    def of(cls, text: str) -> Chars:
        return cls("".join(sorted(set(text))))

    def encode(self, text: str) -> torch.Tensor:
        """text -> ids (1, len(text)), a LongTensor."""
        return torch.tensor([[self.alphabet.index(c) for c in text]])

    def decode(self, ids: torch.Tensor) -> str:
        """ids (T,) -> text."""
        return "".join(self.alphabet[i] for i in ids.tolist())


def train_tiny_decoder(text: str = TEXT, steps: int = 60, lr: float = 5e-3, max_seq_len: int = 1024,
                       seed: int = 0) -> tuple[torch.nn.Module, Chars, list[float]]:
    """Train a TinyDecoder (2 layers, d_model 64) to recite `text` from its first character.

    Each step is one full pass over the whole text (positions 0..len-1): the model memorises it,
    which is all the book needs, a model whose greedy output is recognisable. Returns the model (in
    eval mode), the tokenizer and the loss of every step.
    """
    chars = Chars.of(text)
    data = chars.encode(text)
    model = ch4.TinyDecoder(vocab_size=len(chars.alphabet), d_model=64, num_heads=4, num_layers=2,
                            max_seq_len=max_seq_len, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits[0], data[0, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model.eval(), chars, losses


def stepwise_logits(model: torch.nn.Module, ids: torch.Tensor, prefill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (B, T, V) of one full pass, and of a cached prefill then one token per step."""
    caches = model.make_caches(ids.shape[0], ids.shape[1])
    with torch.no_grad():
        full = model(ids)
        steps = [model(ids[:, :prefill], caches)] + [model(ids[:, t:t + 1], caches) for t in range(prefill, ids.shape[1])]
    return full, torch.cat(steps, dim=1)


def time_generate(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int, use_cache: bool,
                  repeats: int = 1) -> float:
    """Best of `repeats` timings of generate(model, prompt, new_tokens, use_cache), in seconds of CPU time.

    CPU time (time.process_time) rather than wall-clock time: with torch on one thread it equals the
    wall-clock time of an idle machine, and other programs on a shared machine do not inflate it.
    """
    times = []
    for _ in range(repeats):
        start = time.process_time()
        ch4.generate(model, prompt, new_tokens, use_cache=use_cache)
        times.append(time.process_time() - start)
    return min(times)


def decode_speed(model: torch.nn.Module, prompt: torch.Tensor, lengths: tuple[int, ...], rounds: int = 3,
                 round_s: float = 0.02) -> list[dict[str, float]]:
    """Tokens per second of greedy decoding, with and without the cache, for each generated length.

    Every (length, cache or not) pair is timed once per round, rounds interleaved, and each time is
    the best of as many runs as fit in about `round_s` seconds (1 to 10): the best run is the one
    least disturbed by other work on the machine. Returns one row per length.
    """
    time_generate(model, prompt, 8, use_cache=True)  # warm-up: first calls allocate and dispatch
    time_generate(model, prompt, 8, use_cache=False)
    pairs = [(n, use_cache) for n in lengths for use_cache in (True, False)]
    best = {pair: time_generate(model, prompt, *pair) for pair in pairs}
    repeats = {pair: max(1, min(10, int(round_s / best[pair]))) for pair in pairs}
    for _ in range(rounds - 1):
        for pair in pairs:
            best[pair] = min(best[pair], time_generate(model, prompt, *pair, repeats=repeats[pair]))
    return [{"new_tokens": n, "cached_tok_s": n / best[n, True], "uncached_tok_s": n / best[n, False]}
            for n in lengths]


def crossover(rows: list[dict[str, float]]) -> int | None:
    """The first generated length from which the cache is faster at every longer length measured."""
    for i, row in enumerate(rows):
        if all(r["cached_tok_s"] > r["uncached_tok_s"] for r in rows[i:]):
            return int(row["new_tokens"])
    return None


def append_seconds(cache_len: int, method: str, num_heads: int = 8, head_dim: int = 64, appends: int = 200,
                   min_run_time: float = 0.05) -> float:
    """Median seconds to append one position's keys and values to a cache already holding `cache_len`.

    method "preallocated": chapter 4's KVCache.update, timed call by call over `appends` successive
    single-position updates (its buffer holds cache_len + appends positions, allocated once);
    method "cat": torch.cat of the old keys and values with the new ones, as a cache grown step by
    step does (a copy of the whole cache), timed with torch.utils.benchmark.
    Shapes: one layer, batch 1, (1, num_heads, cache_len, head_dim) in float32.
    """
    old = torch.randn(1, num_heads, cache_len, head_dim)
    new = torch.randn(1, num_heads, 1, head_dim)
    if method == "preallocated":
        cache = ch4.KVCache(1, num_heads, cache_len + appends, head_dim)
        cache.update(old, old)
        times = []
        for _ in range(appends):
            start = time.perf_counter()
            cache.update(new, new)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    if method == "cat":
        timer = benchmark.Timer(stmt="torch.cat([k, new], dim=2); torch.cat([v, new], dim=2)",
                                globals={"torch": torch, "k": old, "v": old.clone(), "new": new},
                                num_threads=torch.get_num_threads())
        return timer.blocked_autorange(min_run_time=min_run_time).median
    raise ValueError(f"unknown method {method!r}")


def cache_growth(lengths: tuple[int, ...], **kwargs: int) -> list[dict[str, float]]:
    """Seconds per append, preallocated against torch.cat, for each cache length."""
    return [{"cache_len": n, "preallocated_s": append_seconds(n, "preallocated", **kwargs),
             "cat_s": append_seconds(n, "cat", **kwargs)} for n in lengths]


def config_rows(seq_len: int = 4096, configs: tuple[ModelConfig, ...] = CONFIGS) -> list[dict[str, object]]:
    """Per published configuration: cache bytes per token and per sequence (fp16), and weight bytes."""
    rows = []
    for c in configs:
        per_token = ch4.kv_cache_bytes(c.num_layers, c.num_kv_heads, c.head_dim, seq_len=1)
        rows.append({"config": c, "per_token": per_token,
                     "per_sequence": ch4.kv_cache_bytes(c.num_layers, c.num_kv_heads, c.head_dim, seq_len),
                     "weights": c.weight_bytes_fp16,
                     "tokens_to_match_weights": c.weight_bytes_fp16 // per_token})
    return rows


def main() -> None:
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    print(describe_machine(), end="\n\n")
    start = time.perf_counter()
    model, chars, losses = train_tiny_decoder()
    print(f"trained TinyDecoder on {len(TEXT)} characters ({TEXT_SOURCE}) in {time.perf_counter() - start:.1f} s: "
          f"loss {losses[0]:.2f} -> {losses[-1]:.4f}")
    prompt = chars.encode("Alice was beginning")
    cached = ch4.generate(model, prompt, 120, use_cache=True)
    uncached = ch4.generate(model, prompt, 120, use_cache=False)
    print(f"greedy continuation: {chars.decode(cached[0])!r}")
    print(f"cached and uncached tokens identical: {torch.equal(cached, uncached)}")
    full, steps = stepwise_logits(model, cached, prefill=prompt.shape[1])
    print(f"max |logits(full pass) - logits(prefill + one token per step)|: {(full - steps).abs().max().item():.2e}")

    print(f"\ngreedy decoding after a {prompt.shape[1]}-token prompt, tokens per second:")
    rows = decode_speed(model, prompt, DECODE_LENGTHS)
    print(f"{'new tokens':>10} {'cached':>10} {'uncached':>10} {'speedup':>8}")
    for r in rows:
        print(f"{r['new_tokens']:>10} {r['cached_tok_s']:>10.0f} {r['uncached_tok_s']:>10.0f} "
              f"{r['cached_tok_s'] / r['uncached_tok_s']:>7.2f}x")
    print(f"the cache is faster from {crossover(rows)} generated tokens on")

    print("\nappend one position to a float32 cache of 8 heads x 64 dims, microseconds:")
    print(f"{'cache len':>10} {'prealloc':>10} {'torch.cat':>10}")
    for r in cache_growth(CACHE_LENGTHS):
        print(f"{r['cache_len']:>10} {r['preallocated_s'] * 1e6:>10.1f} {r['cat_s'] * 1e6:>10.1f}")

    print("\nKV cache in fp16, 4096 positions, batch 1:")
    for r in config_rows():
        c = r["config"]
        print(f"{c.name:>12}: {r['per_token'] / 2**10:>6.0f} KiB/token, {r['per_sequence'] / 2**30:>5.2f} GiB/sequence, "
              f"weights {r['weights'] / 2**30:>6.1f} GiB  ({c.source})")


if __name__ == "__main__":
    main()
