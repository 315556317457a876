"""course.configs against transformers' config classes (the installed .venv is the source of truth
for their field names), where a class's defaults are the very checkpoint the course cites, and the
fields the course's pages rely on for the others."""

from __future__ import annotations

import pytest

from course import configs


def _fields(config: object) -> dict[str, object]:
    theta = config.rope_parameters["rope_theta"]
    return {"num_layers": config.num_hidden_layers, "d_model": config.hidden_size,
            "num_heads": config.num_attention_heads,
            "num_kv_heads": 1 if getattr(config, "multi_query", False) else config.num_key_value_heads,
            "head_dim": config.hidden_size // config.num_attention_heads, "rope_theta": theta}


# transformers documents these classes' defaults as these checkpoints (their docstrings name them).
@pytest.mark.parametrize(("name", "ours", "extra"), [
    ("LlamaConfig", configs.LLAMA2_7B, {"intermediate_size": 11008}),
    ("MistralConfig", configs.MISTRAL_7B, {"intermediate_size": 14336, "sliding_window": 4096}),
    ("FalconConfig", configs.FALCON_7B, {}),
])
def test_configs_match_the_transformers_defaults_of_the_same_checkpoint(name: str, ours, extra: dict) -> None:
    import transformers

    theirs = getattr(transformers, name)()
    expected = _fields(theirs) | {key: getattr(theirs, key) for key in extra}
    got = {key: getattr(ours, key) for key in expected}
    assert got == expected, f"{ours.name} in course/configs.py differs from transformers.{name}()"


def test_gemma3_global_layers_scale_rope_linearly_and_local_ones_keep_base_10000() -> None:
    import transformers

    gemma = configs.GEMMA3_12B
    assert (gemma.rope_scaling, gemma.rope_scaling_factor, gemma.rope_local_theta) == ("linear", 8.0, 10000.0)
    # the fields exist under these names in transformers' Gemma3TextConfig: one RoPE setting per layer type
    text = transformers.Gemma3TextConfig(
        num_hidden_layers=gemma.num_layers, sliding_window=gemma.sliding_window,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": gemma.rope_theta},
                         "sliding_attention": {"rope_type": "default", "rope_theta": gemma.rope_local_theta}})
    assert text.layer_types.count("full_attention") == gemma.num_global_layers
    assert text.rope_parameters["full_attention"]["factor"] == 8.0


def test_every_source_names_its_section() -> None:
    assert "section 3.1.2" in configs.DEEPSEEK_V2.source and "2.1 and Table 1" not in configs.DEEPSEEK_V2.source
