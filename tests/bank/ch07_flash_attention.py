"""Chapter 7 answers: merge_partials, tiled_attention."""

from tests.bank import Answer

ASSIGNMENT = "07_flash_attention"

WRONG: list[Answer] = []

RIGHT: list[Answer] = []
