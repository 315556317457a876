"""Chapter 10 answers: sliding_window_mask, RollingKVCache, LatentCache, MultiHeadLatentAttention, mla_cache_bytes, PagedKVCache."""

from tests.bank import Answer

ASSIGNMENT = "10_serving"

WRONG: list[Answer] = []

RIGHT: list[Answer] = []
