"""Model geometry and parameter counts from Hugging Face config.json (dense and MoE).

Known totals checked here are the parameter counts the model publishers quote: Llama-2-7B
6,738,415,616; Mistral-7B 7,241,732,096; Mixtral-8x7B 46.7 B total / 12.9 B active;
Qwen3-30B-A3B 30.5 B / 3.3 B; Qwen1.5-MoE-A2.7B 14.3 B / 2.7 B; DeepSeekMoE-16B 16.4 B / 2.8 B.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tokenwatt.analysis.model.geometry import (
    active_parameters_per_token,
    geometry_from_config,
    parameter_counts,
)
from tokenwatt.errors import InputError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


QWEN3 = load("qwen3-30b-a3b.config.json")
LLAMA2 = load("llama-2-7b.config.json")

# mistralai/Mistral-7B-v0.1 config.json (fields read here).
MISTRAL_7B = {
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
    "sliding_window": 4096,
}
# mistralai/Mixtral-8x7B-v0.1: the expert width is intermediate_size (no moe_intermediate_size).
MIXTRAL = {
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}
# Qwen/Qwen1.5-MoE-A2.7B: one shared expert with a sigmoid gate; q/k/v biases (qwen2_moe).
QWEN15_MOE = {
    "model_type": "qwen2_moe",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "decoder_sparse_step": 1,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
}
# deepseek-ai/deepseek-moe-16b-base: multi-head attention, first layer dense, 2 shared experts.
DEEPSEEK_MOE_16B = {
    "model_type": "deepseek",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "vocab_size": 102400,
    "tie_word_embeddings": False,
}


def test_qwen3_30b_a3b_geometry_takes_head_dim_from_the_config() -> None:
    g = geometry_from_config(QWEN3, "qwen3.json")
    assert (g.layers, g.attention_heads, g.kv_heads) == (48, 32, 4)
    # hidden / heads would be 2048 / 32 = 64: the config's head_dim (128) wins.
    assert g.head_dim == 128
    assert (g.hidden_size, g.vocab_size, g.tie_word_embeddings) == (2048, 151936, False)
    assert g.moe is not None
    assert (g.moe.num_experts, g.moe.experts_per_token) == (128, 8)
    assert (g.moe.expert_intermediate_size, g.moe.moe_layers) == (768, 48)
    assert g.dense_layers == 0
    assert g.qk_norm and not g.qkv_bias
    assert g.weight_dtype_hint == "bf16"


def test_qwen3_30b_a3b_parameters_total_30_5b_active_3_3b() -> None:
    g = geometry_from_config(QWEN3, "qwen3.json")
    c = parameter_counts(g)
    # Per layer: q 2048×4096 + k, v 2048×512 + o 4096×2048 = 18,874,368; q/k norms 2×128;
    # 128 experts × 3×2048×768 = 603,979,776; router 2048×128 = 262,144; 2 norms 4,096.
    per_layer = 18_874_368 + 256 + 603_979_776 + 262_144 + 4_096
    embed = 151_936 * 2048
    assert c.total == 48 * per_layer + 2 * embed + 2048 == 30_532_122_624
    active = active_parameters_per_token(g, c)
    assert active == c.total - 48 * 120 * 3 * 2048 * 768 == 3_353_032_704
    assert round(c.total / 1e9, 1) == 30.5
    assert 3.3e9 < active < 3.4e9  # the model card says "3.3B activated"


def test_llama2_7b_matches_hand_count() -> None:
    g = geometry_from_config(LLAMA2, "llama.json")
    assert g.kv_heads == 32 and g.head_dim == 4096 // 32 == 128
    assert g.moe is None and g.dense_layers == 32
    c = parameter_counts(g)
    attention = 4 * 4096 * 4096  # q, k, v, o: MHA, 32 KV heads × 128 = 4096
    mlp = 3 * 4096 * 11008  # gate, up, down
    norms = 2 * 4096
    embed = 32000 * 4096
    assert c.attention == 32 * attention
    assert c.dense_mlp == 32 * mlp
    assert c.total == 32 * (attention + mlp + norms) + 2 * embed + 4096 == 6_738_415_616
    assert active_parameters_per_token(g, c) == c.total
    assert g.weight_dtype_hint == "fp16"


def test_mistral_7b_gqa_total() -> None:
    c = parameter_counts(geometry_from_config(MISTRAL_7B, "mistral.json"))
    assert c.total == 7_241_732_096


def test_mixtral_uses_intermediate_size_as_expert_width() -> None:
    g = geometry_from_config(MIXTRAL, "mixtral.json")
    assert g.moe is not None and g.moe.expert_intermediate_size == 14336
    c = parameter_counts(g)
    assert c.total == 46_702_792_704
    assert active_parameters_per_token(g, c) == 12_879_925_248


def test_qwen15_moe_shared_expert_gate_and_qkv_bias() -> None:
    g = geometry_from_config(QWEN15_MOE, "qwen15.json")
    assert g.qkv_bias and not g.o_bias
    assert g.moe is not None and g.moe.shared_intermediate_size == 5632
    c = parameter_counts(g)
    assert c.attention_bias == 24 * 3 * 2048
    assert c.shared_expert_gate == 24 * 2048
    assert c.total == 14_315_784_192
    assert round(active_parameters_per_token(g, c) / 1e9, 1) == 2.7


def test_deepseek_moe_first_dense_layer_and_shared_experts() -> None:
    g = geometry_from_config(DEEPSEEK_MOE_16B, "deepseek.json")
    assert g.moe is not None
    assert (g.moe.moe_layers, g.dense_layers) == (27, 1)
    assert g.moe.shared_intermediate_size == 2 * 1408
    c = parameter_counts(g)
    assert c.dense_mlp == 3 * 2048 * 10944
    assert c.total == 16_375_728_128
    assert round(active_parameters_per_token(g, c) / 1e9, 1) == 2.8


def test_sparse_step_and_mlp_only_layers_make_dense_layers() -> None:
    cfg = dict(QWEN3, decoder_sparse_step=2, mlp_only_layers=[1])
    g = geometry_from_config(cfg, "q.json")
    # Sparse when (i + 1) % 2 == 0 → odd i (24 layers), minus layer 1.
    assert g.moe is not None and g.moe.moe_layers == 23
    assert g.dense_layers == 25
    assert parameter_counts(g).dense_mlp == 25 * 3 * 2048 * 6144


def test_kv_heads_default_to_attention_heads() -> None:
    cfg = {k: v for k, v in LLAMA2.items() if k != "num_key_value_heads"}
    assert geometry_from_config(cfg, "x").kv_heads == 32


def test_tied_embeddings_have_no_separate_head() -> None:
    g = geometry_from_config(dict(LLAMA2, tie_word_embeddings=True), "x")
    c = parameter_counts(g)
    assert c.lm_head == 0
    assert c.total == 6_738_415_616 - 32000 * 4096


def test_attention_bias_adds_qkvo_biases() -> None:
    g = geometry_from_config(dict(LLAMA2, attention_bias=True), "x")
    assert parameter_counts(g).attention_bias == 32 * 4 * 4096


def test_nested_text_config_is_read() -> None:
    cfg = {"model_type": "wrapper", "text_config": copy.deepcopy(QWEN3)}
    g = geometry_from_config(cfg, "vlm.json")
    assert g.layers == 48 and g.head_dim == 128


def test_quantization_config_gives_the_weight_dtype_hint() -> None:
    fp8 = dict(
        QWEN3,
        quantization_config={
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "quant_method": "fp8",
            "weight_block_size": [128, 128],
        },
    )
    assert geometry_from_config(fp8, "x").weight_dtype_hint == "fp8"
    awq = dict(LLAMA2, quantization_config={"quant_method": "awq", "bits": 4})
    assert geometry_from_config(awq, "x").weight_dtype_hint == "awq"


@pytest.mark.parametrize(
    ("config", "field", "words"),
    [
        ({k: v for k, v in LLAMA2.items() if k != "vocab_size"}, "vocab_size", "missing"),
        (dict(LLAMA2, num_hidden_layers="32"), "num_hidden_layers", "integer"),
        (dict(LLAMA2, num_attention_heads=0), "num_attention_heads", "at least 1"),
        (dict(LLAMA2, num_key_value_heads=5), "num_key_value_heads", "do not divide"),
        (dict(LLAMA2, tie_word_embeddings="no"), "tie_word_embeddings", "true or false"),
        (
            {k: v for k, v in QWEN3.items() if k != "num_experts_per_tok"},
            "num_experts_per_tok",
            "missing",
        ),
        (dict(QWEN3, num_experts_per_tok=200), "num_experts_per_tok", "between 1"),
        (dict(QWEN3, mlp_only_layers="all"), "mlp_only_layers", "list"),
        (dict(QWEN3, mlp_only_layers=[0, 48]), "mlp_only_layers", "outside"),
        (dict(QWEN3, mlp_only_layers=[-1]), "mlp_only_layers", "[-1] are outside"),
        (dict(QWEN3, mlp_only_layers=[3, 3]), "mlp_only_layers", "more than once"),
        (dict(QWEN3, mlp_only_layers=list(range(48))), "num_hidden_layers", "none of the 48"),
        (dict(QWEN3, decoder_sparse_step=49), "num_hidden_layers", "none of the 48"),
        (dict(QWEN3, num_experts_per_tok=0), "num_experts_per_tok", "between 1"),
        (dict(QWEN3, num_key_value_heads=0), "num_key_value_heads", "at least 1"),
        (dict(QWEN3, head_dim=0), "head_dim", "at least 1"),
        (dict(LLAMA2, num_hidden_layers=10**12), "num_hidden_layers", "at most 100,000"),
        (dict(LLAMA2, hidden_size=2**31), "hidden_size", "at most 2,147,483,647"),
        (dict(MIXTRAL, kv_lora_rank=512), "kv_lora_rank", "latent attention"),
        (
            {"text_config": {k: v for k, v in QWEN3.items() if k != "hidden_size"}},
            "text_config.hidden_size",
            "missing",
        ),
    ],
)
def test_bad_config_names_file_and_field(config: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        geometry_from_config(config, "models/m/config.json")
    (problem,) = info.value.problems
    assert problem.file == "models/m/config.json"
    assert problem.field == field
    assert words in problem.message


def test_head_dim_needed_when_hidden_does_not_divide() -> None:
    cfg = dict(LLAMA2, hidden_size=4000, num_attention_heads=48, num_key_value_heads=8)
    with pytest.raises(InputError) as info:
        geometry_from_config(cfg, "c.json")
    assert info.value.problems[0].field == "head_dim"
    assert geometry_from_config(dict(cfg, head_dim=96), "c.json").head_dim == 96


def test_not_an_object_is_refused() -> None:
    with pytest.raises(InputError, match="JSON object"):
        geometry_from_config([1, 2], "c.json")  # type: ignore[arg-type]
