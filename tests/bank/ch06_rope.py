"""Chapter 6 answers: rope_frequencies, apply_rope, LlamaAttention."""

from tests.bank import Answer

ASSIGNMENT = "06_rope"

WRONG: list[Answer] = []

RIGHT: list[Answer] = []
