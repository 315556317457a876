"""Published model configurations, each with the document its numbers come from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """The attention-relevant shape of a published decoder-only transformer."""

    name: str
    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_params: float  # total parameters, as published
    source: str
    # Sliding-window attention: each position sees only the last `sliding_window` positions, so a
    # sequence's KV cache never holds more than that many (a rolling buffer). None: the whole context.
    sliding_window: int | None = None

    @property
    def weight_bytes_fp16(self) -> int:
        """Bytes of the weights stored in fp16/bf16 (2 bytes per parameter)."""
        return int(self.num_params * 2)

    def cached_positions(self, seq_len: int) -> int:
        """Positions one sequence of seq_len tokens keeps in its KV cache: all of them, or the window."""
        return seq_len if self.sliding_window is None else min(seq_len, self.sliding_window)


GPT3_175B = ModelConfig(
    "GPT-3 175B", num_layers=96, d_model=12288, num_heads=96, num_kv_heads=96, head_dim=128, num_params=175e9,
    source="Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1")
LLAMA2_7B = ModelConfig(
    "Llama 2 7B", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=32, head_dim=128, num_params=6.74e9,
    source="Touvron et al. 2023, Llama 2, Table 1; config.json of meta-llama/Llama-2-7b-hf")
LLAMA2_70B = ModelConfig(
    "Llama 2 70B", num_layers=80, d_model=8192, num_heads=64, num_kv_heads=8, head_dim=128, num_params=68.98e9,
    source="Touvron et al. 2023, Llama 2, Table 1 and section 2.2 (GQA); config.json of meta-llama/Llama-2-70b-hf")
LLAMA3_8B = ModelConfig(
    "Llama 3 8B", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=8, head_dim=128, num_params=8.03e9,
    source="Meta 2024, The Llama 3 Herd of Models, Table 3; config.json of meta-llama/Meta-Llama-3-8B")
# Mistral 7B v0.1, the model of the paper, attends over a 4096-token sliding window, so its cache stops
# growing at 4096 positions per sequence. v0.2 and later dropped the window (config.json
# "sliding_window": null, 32k context): same shapes, but a cache that grows with the whole context.
MISTRAL_7B = ModelConfig(
    "Mistral 7B v0.1", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=8, head_dim=128, num_params=7.24e9,
    sliding_window=4096,
    source="Jiang et al. 2023, Mistral 7B, Table 1 (window_size 4096); config.json of mistralai/Mistral-7B-v0.1 "
           "(sliding_window: 4096)")
FALCON_7B = ModelConfig(
    "Falcon 7B", num_layers=32, d_model=4544, num_heads=71, num_kv_heads=1, head_dim=64, num_params=7.22e9,
    source="config.json of tiiuae/falcon-7b (multi_query: true); Almazrouei et al. 2023, The Falcon Series")

PUBLISHED = (LLAMA2_7B, LLAMA2_70B, LLAMA3_8B, MISTRAL_7B, FALCON_7B)


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a machine's memory hierarchy, as published: its size and its bandwidth."""

    name: str
    capacity_bytes: float
    capacity_label: str  # the size exactly as the source writes it (e.g. ">1 TB")
    bandwidth_bytes_per_s: float
    source: str


_FLASH_ATTENTION_FIGURE_1 = ("Dao et al. 2022, FlashAttention: Fast and Memory-Efficient Exact Attention with "
                             "IO-Awareness (NeurIPS 2022, arXiv:2205.14135), Figure 1 left: an A100 40 GB")
A100_MEMORY_HIERARCHY = (
    MemoryLevel("GPU SRAM (on chip)", 20e6, "20 MB", 19e12, _FLASH_ATTENTION_FIGURE_1),
    MemoryLevel("GPU HBM", 40e9, "40 GB", 1.5e12, _FLASH_ATTENTION_FIGURE_1),
    MemoryLevel("CPU DRAM (main memory)", 1e12, ">1 TB", 12.8e9, _FLASH_ATTENTION_FIGURE_1),
)

LONG_CONTEXT_TOKENS = 131072
LONG_CONTEXT_SOURCE = ("Meta 2024, The Llama 3 Herd of Models (a context window of up to 128K tokens); "
                       "config.json of meta-llama/Llama-3.1-8B (max_position_embeddings: 131072)")

LLAMA2_CONTEXT_TOKENS = 4096
LLAMA2_CONTEXT_SOURCE = ("Touvron et al. 2023, Llama 2, Table 1 (context length 4k); config.json of "
                         "meta-llama/Llama-2-7b-hf (max_position_embeddings: 4096)")
