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
    num_params: float  # unique parameters (a tied embedding counted once)
    source: str
    intermediate_size: int  # width of the MLP's hidden layer
    gated_mlp: bool  # SwiGLU (three d x ff matrices: gate, up, down) or a plain GELU MLP (two)
    max_context: int  # the context length the model was trained for (max_position_embeddings)
    # Sliding-window attention: each position sees only the last `sliding_window` positions, so a
    # sequence's KV cache never holds more than that many (a rolling buffer). None: the whole context.
    sliding_window: int | None = None
    # Local and global layers (Gemma 2 and 3): one layer in every `global_every` attends over the whole
    # context, the others over the sliding window. None with a window: every layer is local.
    global_every: int | None = None
    # Multi-head latent attention (DeepSeek-V2): per token and layer the cache holds one latent of
    # kv_latent_dim numbers and one decoupled RoPE key of rope_dim numbers, both shared by every head.
    kv_latent_dim: int | None = None
    rope_dim: int | None = None
    rope_theta: float | None = None  # the RoPE base; None: no RoPE (learned positions)
    rope_scaling: str | None = None  # rope_scaling's rope_type in config.json, if any (Llama 3.1: "llama3")
    rope_scaling_factor: float | None = None  # rope_scaling's factor in config.json, with rope_scaling
    # The RoPE base of the local (sliding-window) layers where it differs from rope_theta (Gemma 3).
    rope_local_theta: float | None = None

    @property
    def weight_bytes_fp16(self) -> int:
        """Bytes of the weights stored in fp16/bf16 (2 bytes per parameter)."""
        return int(self.num_params * 2)

    def cached_positions(self, seq_len: int) -> int:
        """Positions one sequence of seq_len tokens keeps in the KV cache of a local layer: all, or the window."""
        return seq_len if self.sliding_window is None else min(seq_len, self.sliding_window)

    @property
    def num_global_layers(self) -> int:
        """Layers that attend over the whole context: all without a window, one in `global_every` with one."""
        if self.sliding_window is None:
            return self.num_layers
        return 0 if self.global_every is None else self.num_layers // self.global_every

    def layer_positions(self, seq_len: int) -> int:
        """Positions one sequence of seq_len tokens keeps, summed over every layer's cache."""
        local = self.num_layers - self.num_global_layers
        return self.num_global_layers * seq_len + local * self.cached_positions(seq_len)


GPT3_175B = ModelConfig(
    "GPT-3 175B", num_layers=96, d_model=12288, num_heads=96, num_kv_heads=96, head_dim=128, num_params=175e9,
    intermediate_size=4 * 12288, gated_mlp=False, max_context=2048,
    source="Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1 and section 2.1 "
           "(learned positions, no RoPE; feed-forward 4 d_model)")
LLAMA2_7B = ModelConfig(
    "Llama 2 7B", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=32, head_dim=128, num_params=6.74e9,
    intermediate_size=11008, gated_mlp=True, rope_theta=10000.0, max_context=4096,
    source="Touvron et al. 2023, Llama 2, Table 1; config.json of meta-llama/Llama-2-7b-hf "
           "(intermediate_size 11008, rope_theta 10000.0, max_position_embeddings 4096); transformers' "
           "LlamaConfig defaults are that checkpoint's shapes")
LLAMA2_70B = ModelConfig(
    "Llama 2 70B", num_layers=80, d_model=8192, num_heads=64, num_kv_heads=8, head_dim=128, num_params=68.98e9,
    intermediate_size=28672, gated_mlp=True, rope_theta=10000.0, max_context=4096,
    source="Touvron et al. 2023, Llama 2, Table 1 and section 2.2 (GQA); config.json of meta-llama/Llama-2-70b-hf "
           "(intermediate_size 28672, rope_theta 10000.0)")
LLAMA3_8B = ModelConfig(
    "Llama 3 8B", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=8, head_dim=128, num_params=8.03e9,
    intermediate_size=14336, gated_mlp=True, rope_theta=500000.0, max_context=8192,
    source="Meta 2024, The Llama 3 Herd of Models, Table 3 (RoPE base frequency 500,000); config.json of "
           "meta-llama/Meta-Llama-3-8B (rope_theta 500000.0, max_position_embeddings 8192)")
# Llama 3.1 8B has Llama 3 8B's shapes and a 128K context, reached by rescaling RoPE's frequencies.
LLAMA31_8B = ModelConfig(
    "Llama 3.1 8B", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=8, head_dim=128, num_params=8.03e9,
    intermediate_size=14336, gated_mlp=True, rope_theta=500000.0, max_context=131072, rope_scaling="llama3",
    rope_scaling_factor=8.0,
    source="Meta 2024, The Llama 3 Herd of Models (context up to 128K tokens); config.json of "
           "meta-llama/Llama-3.1-8B (rope_theta 500000.0, rope_scaling.rope_type llama3, factor 8.0, "
           "max_position_embeddings 131072)")
# Mistral 7B v0.1, the model of the paper, attends over a 4096-token sliding window, so its cache stops
# growing at 4096 positions per sequence. v0.2 and later dropped the window (config.json
# "sliding_window": null, 32k context): same shapes, but a cache that grows with the whole context.
MISTRAL_7B = ModelConfig(
    "Mistral 7B v0.1", num_layers=32, d_model=4096, num_heads=32, num_kv_heads=8, head_dim=128, num_params=7.24e9,
    intermediate_size=14336, gated_mlp=True, rope_theta=10000.0, max_context=8192, sliding_window=4096,
    source="Jiang et al. 2023, Mistral 7B, Table 1 (window_size 4096, context_len 8192, hidden_dim 14336); "
           "config.json of mistralai/Mistral-7B-v0.1 and transformers' MistralConfig, whose defaults are that "
           "checkpoint (sliding_window 4096, rope_theta 10000.0, intermediate_size 14336; its "
           "max_position_embeddings, 32768 in config.json and 131072 in MistralConfig, is not the trained "
           "context: max_context follows the paper)")
# num_params: counted, not published (the paper gives none): transformers' FalconConfig with the
# config.json below, built on the meta device, has 6,921,720,704 unique parameters (the output
# layer shares the embedding's weights).
FALCON_7B = ModelConfig(
    "Falcon 7B", num_layers=32, d_model=4544, num_heads=71, num_kv_heads=1, head_dim=64, num_params=6.92e9,
    intermediate_size=4 * 4544, gated_mlp=False, rope_theta=10000.0, max_context=2048,
    source="config.json of tiiuae/falcon-7b and transformers' FalconConfig, whose defaults are that checkpoint "
           "(multi_query: true, parallel_attn: true, vocab_size 65024, rope_theta 10000.0); "
           "Almazrouei et al. 2023, The Falcon Series; parameters counted with transformers.FalconConfig")

# Gemma 2 alternates local layers (a 4096-token sliding window) and global ones (the whole 8192-token
# context), one to one.
GEMMA2_9B = ModelConfig(
    "Gemma 2 9B", num_layers=42, d_model=3584, num_heads=16, num_kv_heads=8, head_dim=256, num_params=9.24e9,
    intermediate_size=14336, gated_mlp=True, rope_theta=10000.0, max_context=8192,
    sliding_window=4096, global_every=2,
    source="Gemma Team 2024, Gemma 2: Improving Open Language Models at a Practical Size (arXiv:2408.00118), "
           "Table 1 and section 2 (local sliding window 4096, global span 8192, alternating); config.json of "
           "google/gemma-2-9b (sliding_window 4096, intermediate_size 14336, GeGLU MLP, rope_theta 10000.0, "
           "max_position_embeddings 8192)")
# Gemma 3 keeps five local layers, with a window of only 1024 tokens, for every global layer.
GEMMA3_12B = ModelConfig(
    "Gemma 3 12B", num_layers=48, d_model=3840, num_heads=16, num_kv_heads=8, head_dim=256, num_params=12.2e9,
    intermediate_size=15360, gated_mlp=True, rope_theta=1_000_000.0, max_context=131072,
    sliding_window=1024, global_every=6, rope_scaling="linear", rope_scaling_factor=8.0, rope_local_theta=10000.0,
    source="Gemma Team 2025, Gemma 3 Technical Report (arXiv:2503.19786), section 2 (5 local layers per global "
           "layer, local span 1024, 128K context) and Table 1 (parameters, vision encoder included); config.json "
           "of google/gemma-3-12b-pt (sliding_window 1024, sliding_window_pattern 6, intermediate_size 15360, "
           "rope_theta 1000000.0 and rope_scaling {rope_type: linear, factor: 8.0} on global layers, "
           "rope_local_base_freq 10000.0 on local ones); transformers' Gemma3TextConfig names the same fields "
           "(rope_parameters per layer type, layer_types)")
# DeepSeek-V2's attention computes 128 heads of keys and values (num_kv_heads=128, as if MHA) but caches
# only the latent and the decoupled RoPE key: 512 + 64 numbers per token and layer.
DEEPSEEK_V2 = ModelConfig(
    "DeepSeek-V2", num_layers=60, d_model=5120, num_heads=128, num_kv_heads=128, head_dim=128, num_params=236e9,
    kv_latent_dim=512, rope_dim=64, rope_theta=10000.0, rope_scaling="yarn", max_context=131072,
    # Only the first layer has a dense MLP of this width; the others are mixtures of experts, so
    # `layer_cost`'s MLP does not describe this model (it is not in PUBLISHED).
    intermediate_size=12288, gated_mlp=True,
    source="DeepSeek-AI 2024, DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language Model "
           "(arXiv:2405.04434), section 3.1.2, Model Hyper-Parameters (d_c = 512, d_h^R = 64, 128 heads of 128, "
           "60 layers, d_model 5120); "
           "config.json of deepseek-ai/DeepSeek-V2 (kv_lora_rank 512, qk_rope_head_dim 64, intermediate_size 12288, "
           "rope_scaling yarn, factor 40; max_position_embeddings 163840, while max_context is the paper's 128K)")

PUBLISHED = (LLAMA2_7B, LLAMA2_70B, LLAMA3_8B, MISTRAL_7B, FALCON_7B)


@dataclass(frozen=True)
class Cost:
    """FLOPs and the fewest bytes moved (each input, weight and output read or written once, fp16)."""

    flops: float
    bytes: float


@dataclass(frozen=True)
class LayerCost:
    """The forward pass of one decoder layer over n tokens, in its three parts."""

    projections: Cost  # x @ W_q, W_k, W_v and the output projection W_o
    attention: Cost  # the core: Q K^T and P V over every head (no causal halving)
    mlp: Cost


def layer_cost(config: ModelConfig, n: int) -> LayerCost:
    """FLOPs (2 per multiply-add) and minimum fp16 bytes of one layer on a sequence of n tokens.

    Projections: 2 n d (d + 2 d_kv) for Q, K, V and 2 n d^2 for the output, d_kv = H_kv d_h. The
    core: 2 n^2 d_h per head for Q K^T and as much for P V (a fused kernel never stores the n x n
    scores). The MLP: 2 n d f per d x f matrix, three for SwiGLU, two for a plain MLP.
    """
    d, kv = config.d_model, config.num_kv_heads * config.head_dim
    q_width = config.num_heads * config.head_dim
    proj_weights = d * (q_width + 2 * kv) + q_width * d
    projections = Cost(2.0 * n * proj_weights, 2.0 * (proj_weights + n * (d + q_width + 2 * kv) + n * (q_width + d)))
    attention = Cost(4.0 * n * n * config.head_dim * config.num_heads, 2.0 * n * (2 * q_width + 2 * kv))
    matrices = 3 if config.gated_mlp else 2
    mlp_weights = matrices * d * config.intermediate_size
    mlp = Cost(2.0 * n * mlp_weights, 2.0 * (mlp_weights + 2 * n * d))
    return LayerCost(projections, attention, mlp)


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


@dataclass(frozen=True)
class SparseIndexer:
    """DeepSeek Sparse Attention (DSA) in a published model: the lightning indexer and the main attention it feeds.

    The main attention is multi-head latent attention run against the latent: each head scores a query of
    kv_latent_dim + rope_dim numbers against one shared key of the same width and reads kv_latent_dim values.
    """

    name: str
    num_layers: int
    num_heads: int  # heads of the main attention
    kv_latent_dim: int
    rope_dim: int
    index_heads: int
    index_head_dim: int
    top_k: int  # keys each query keeps
    max_context: int
    source: str


DEEPSEEK_V32 = SparseIndexer(
    "DeepSeek-V3.2", num_layers=61, num_heads=128, kv_latent_dim=512, rope_dim=64, index_heads=64, index_head_dim=128,
    top_k=2048, max_context=163840,
    source="DeepSeek-AI 2025, DeepSeek-V3.2-Exp: Boosting Long-Context Efficiency with DeepSeek Sparse Attention "
           "(technical report, github.com/deepseek-ai/DeepSeek-V3.2-Exp), section 2: the lightning indexer and top-2048 "
           "selection; config.json of deepseek-ai/DeepSeek-V3.2 (index_n_heads 64, index_head_dim 128, index_topk 2048, "
           "61 layers, 128 heads, kv_lora_rank 512, qk_rope_head_dim 64), the defaults of transformers' DeepseekV32Config")

GLM5 = SparseIndexer(
    "GLM-5", num_layers=78, num_heads=64, kv_latent_dim=512, rope_dim=64, index_heads=32, index_head_dim=128, top_k=2048,
    max_context=202752,
    source="config.json of zai-org/GLM-5 (index_n_heads 32, index_head_dim 128, index_topk 2048, 78 layers, 64 heads, "
           "kv_lora_rank 512, qk_rope_head_dim 64, max_position_embeddings 202752), the defaults of transformers' "
           "GlmMoeDsaConfig")
