"""Attention, by hand: the instructor package (release and grade) and the checks hidden tests share."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBGRADER_CONFIG = Path(__file__).resolve().parent / "nbgrader_config.py"
ASSIGNMENTS = (
    "01_similarity",
    "02_scaled_attention",
    "03_multi_head",
    "04_kv_cache",
    "05_gqa",
    "06_gpu_sdpa",
)
