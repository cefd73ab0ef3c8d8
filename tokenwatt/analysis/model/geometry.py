"""Model geometry and parameter counts from a Hugging Face ``config.json`` (dense and MoE).

Pure: takes the parsed JSON object (the CLI or the collector reads the file) and the name of
its source for error messages. Covers decoder-only transformers with grouped-query attention
and gated (SwiGLU-style, three-matrix) MLPs: Llama, Mistral, Mixtral, Qwen2/Qwen2-MoE,
Qwen3/Qwen3-MoE and their relatives. Multi-head latent attention (DeepSeek-V2/V3,
``kv_lora_rank``) stores a compressed KV cache with a different formula and is refused with
a clear message rather than counted wrongly.

Key names follow the ``transformers`` configuration classes (``LlamaConfig``,
``MixtralConfig``, ``Qwen2MoeConfig``, ``Qwen3MoeConfig``, ``DeepseekV3Config``); a
multimodal config's language model is read from its nested ``text_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tokenwatt.errors import InputError, Problem

_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
_EXPERTS_PER_TOKEN_KEYS = ("num_experts_per_tok", "experts_per_token")
# Model types whose q/k/v projections carry a bias although the config has no
# ``attention_bias`` key (transformers' Qwen2Attention: bias on q, k, v; none on o).
_QKV_BIAS_TYPES = frozenset({"qwen2", "qwen2_moe"})
# Model types with a per-head RMSNorm on queries and keys (Qwen3Attention q_norm/k_norm).
_QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe"})


@dataclass(frozen=True)
class MoeGeometry:
    """The mixture-of-experts part of a model.

    Attributes:
        num_experts: routed experts per MoE layer (E).
        experts_per_token: experts each token is routed to (k).
        expert_intermediate_size: one routed expert's MLP width.
        moe_layers: how many decoder layers are MoE layers (the rest have a dense MLP).
        shared_intermediate_size: total width of the always-active shared expert(s) per MoE
            layer (0 when none): ``n_shared_experts × moe_intermediate_size`` (DeepSeek) or
            ``shared_expert_intermediate_size`` (Qwen2-MoE).
        shared_expert_gate: whether a sigmoid gate (hidden → 1) scales the shared expert.
    """

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    moe_layers: int
    shared_intermediate_size: int = 0
    shared_expert_gate: bool = False


@dataclass(frozen=True)
class ModelGeometry:
    """The shape of a decoder-only transformer, as read from its ``config.json``.

    Attributes:
        source: where the config came from (a path), for messages.
        model_type: the config's ``model_type``, or None.
        layers: decoder layers (``num_hidden_layers``).
        attention_heads: query heads (``num_attention_heads``).
        kv_heads: key/value heads (``num_key_value_heads``; equal to the query heads when
            absent, i.e. multi-head attention).
        head_dim: per-head width (``head_dim`` when the config gives it, else hidden / heads).
        hidden_size: residual stream width.
        intermediate_size: dense MLP width (None for a model with no dense MLP layer).
        vocab_size: embedding rows.
        tie_word_embeddings: the LM head shares the embedding matrix.
        qkv_bias: q, k and v projections carry biases.
        o_bias: the output projection carries a bias.
        mlp_bias: the MLP projections carry biases (``mlp_bias``).
        qk_norm: a per-head RMSNorm on queries and keys (Qwen3).
        dense_layers: decoder layers with a dense MLP.
        moe: the MoE geometry, or None for a dense model.
        weight_dtype_hint: the weight dtype the config suggests (``quantization_config`` or
            ``torch_dtype``), in this package's dtype names; None when it says nothing usable.
    """

    source: str
    model_type: str | None
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int | None
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    dense_layers: int
    moe: MoeGeometry | None
    weight_dtype_hint: str | None

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model."""
        return self.moe is not None


@dataclass(frozen=True)
class ParameterCounts:
    """Parameter counts (elements, not bytes) by part of the model.

    "Linear" parts (attention, dense MLP, routed and shared experts) are the matrices that
    weight quantization (FP8, INT8, INT4) applies to; the rest (embedding, LM head, router,
    norms, biases) usually stays in 16 bits (see :mod:`tokenwatt.analysis.model.mbu`).

    Attributes:
        embedding: vocab × hidden.
        attention: q, k, v, o weight matrices over all layers.
        attention_bias: their biases.
        qk_norm: per-head query/key norms over all layers.
        dense_mlp: gate, up and down matrices of the dense MLP layers.
        mlp_bias: dense MLP biases.
        routed_experts: every routed expert of every MoE layer (gate, up, down).
        expert: one routed expert in one layer.
        shared_experts: the shared experts' matrices over all MoE layers.
        shared_expert_gate: the shared experts' gates over all MoE layers.
        router: the routers (hidden × E per MoE layer, no bias).
        norms: two RMSNorms per layer plus the final norm (weights only).
        lm_head: vocab × hidden when untied, else 0 (the embedding is reused).
    """

    embedding: int
    attention: int
    attention_bias: int
    qk_norm: int
    dense_mlp: int
    mlp_bias: int
    routed_experts: int
    expert: int
    shared_experts: int
    shared_expert_gate: int
    router: int
    norms: int
    lm_head: int

    @property
    def linear(self) -> int:
        """Parameters in quantizable weight matrices (attention, MLP, experts)."""
        return self.attention + self.dense_mlp + self.routed_experts + self.shared_experts

    @property
    def other(self) -> int:
        """Parameters that quantized checkpoints keep in 16 bits (embedding, head, norms…)."""
        return self.total - self.linear

    @property
    def total(self) -> int:
        """All parameters."""
        return (
            self.embedding
            + self.attention
            + self.attention_bias
            + self.qk_norm
            + self.dense_mlp
            + self.mlp_bias
            + self.routed_experts
            + self.shared_experts
            + self.shared_expert_gate
            + self.router
            + self.norms
            + self.lm_head
        )

    def as_dict(self) -> dict[str, int]:
        """The counts with ``linear``, ``other`` and ``total`` added (for JSON output)."""
        out = asdict(self)
        out.update(linear=self.linear, other=self.other, total=self.total)
        return out


MAX_CONFIG_INT = 2**31 - 1
"""Largest integer a config field may hold: Hugging Face configs are int32-sized; beyond it
the byte counts lose meaning (and ``num_hidden_layers`` would drive a loop that long)."""

MAX_LAYERS = 100_000
"""Largest ``num_hidden_layers`` accepted (today's largest models have under 200 layers)."""


def _problem(source: str, field: str, message: str) -> InputError:
    return InputError([Problem(source, field, message)])


class _Reader:
    """Typed access to config keys, naming the key (with its prefix) in every error."""

    def __init__(self, data: Mapping[str, Any], source: str, prefix: str) -> None:
        self.data = data
        self.source = source
        self.prefix = prefix

    def field(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int_(self, key: str, *, minimum: int = 1, maximum: int = MAX_CONFIG_INT) -> int:
        if key not in self.data or self.data[key] is None:
            raise _problem(self.source, self.field(key), "missing: the model config needs it")
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise _problem(
                self.source, self.field(key), f"must be an integer, got {value!r} ({_kind(value)})"
            )
        if value < minimum:
            raise _problem(self.source, self.field(key), f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise _problem(
                self.source, self.field(key), f"must be at most {maximum:,}, got {value:,}"
            )
        return value

    def opt_int(self, key: str, default: int, *, minimum: int = 0) -> int:
        if not self.has(key):
            return default
        return self.int_(key, minimum=minimum)

    def first_int(self, keys: tuple[str, ...]) -> int | None:
        for key in keys:
            if self.has(key):
                return self.int_(key, minimum=0)
        return None

    def bool_(self, key: str, default: bool) -> bool:
        if not self.has(key):
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            raise _problem(self.source, self.field(key), f"must be true or false, got {value!r}")
        return value

    def int_list(self, key: str) -> list[int]:
        if not self.has(key):
            return []
        value = self.data[key]
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise _problem(self.source, self.field(key), "must be a list of layer indices")
        return list(value)


def _kind(value: object) -> str:
    return type(value).__name__


def _language_model(config: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], str]:
    """The language-model part: the config itself, or its nested ``text_config``."""
    nested = config.get("text_config")
    if "num_hidden_layers" not in config and nested is not None:
        if not isinstance(nested, Mapping):
            raise _problem(source, "text_config", "must be an object")
        return nested, "text_config."
    return config, ""


def _weight_dtype_hint(config: Mapping[str, Any], text: Mapping[str, Any]) -> str | None:
    """Map ``quantization_config`` / ``torch_dtype`` to this package's dtype names."""
    quant = config.get("quantization_config") or text.get("quantization_config")
    if isinstance(quant, Mapping):
        method = str(quant.get("quant_method", "")).lower()
        bits = quant.get("bits")
        if method == "fp8":
            return "fp8"
        if method in ("awq", "gptq") and bits == 4:
            return method
        if bits == 8:
            return "int8"
        if bits == 4:
            return "int4"
        return None
    dtype = config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype")
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(dtype))


def _moe_layers(r: _Reader, layers: int) -> int:
    """How many layers are MoE layers, from the layout keys each family uses.

    Qwen2/3-MoE: layer i is sparse when i is not in ``mlp_only_layers`` and
    (i + 1) % ``decoder_sparse_step`` == 0. DeepSeek: layer i is sparse when
    i ≥ ``first_k_dense_replace`` and i % ``moe_layer_freq`` == 0. Mixtral: every layer.
    """
    listed = r.int_list("mlp_only_layers")
    bad = sorted({i for i in listed if not 0 <= i < layers})
    if bad:
        raise _problem(
            r.source,
            r.field("mlp_only_layers"),
            f"layer indices {bad[:5]} are outside the model's layers 0..{layers - 1}",
        )
    if len(set(listed)) != len(listed):
        raise _problem(r.source, r.field("mlp_only_layers"), "lists a layer more than once")
    dense_only = set(listed)
    step = r.opt_int("decoder_sparse_step", 1, minimum=1)
    first_dense = r.opt_int("first_k_dense_replace", 0)
    freq = r.opt_int("moe_layer_freq", 1, minimum=1)
    count = sum(
        1
        for i in range(layers)
        if i not in dense_only and (i + 1) % step == 0 and i >= first_dense and i % freq == 0
    )
    if count == 0:
        raise _problem(
            r.source,
            r.field("num_hidden_layers"),
            f"a MoE config whose layout (mlp_only_layers, decoder_sparse_step, "
            f"first_k_dense_replace, moe_layer_freq) leaves none of the {layers} layers sparse",
        )
    return count


def geometry_from_config(config: Mapping[str, Any], source: str) -> ModelGeometry:
    """Read a :class:`ModelGeometry` from a parsed Hugging Face ``config.json``.

    ``head_dim`` is taken from the config when given — never recomputed as hidden / heads
    then (Qwen3-30B-A3B: head_dim 128 with hidden 2048 and 32 heads, where 2048 / 32 = 64
    would halve its KV cache).

    Args:
        config: the parsed JSON object.
        source: the file it came from, used in error messages.

    Raises:
        InputError: a required key is missing or has the wrong type (the problem names the
            file and the key, with ``text_config.`` in front for nested configs), or the
            model uses multi-head latent attention (``kv_lora_rank``), which is not covered.
    """
    if not isinstance(config, Mapping):
        raise _problem(source, "", "a model config must be a JSON object")
    text, prefix = _language_model(config, source)
    r = _Reader(text, source, prefix)
    if r.has("kv_lora_rank"):
        raise _problem(
            source,
            r.field("kv_lora_rank"),
            "multi-head latent attention (DeepSeek-V2/V3 style) stores a compressed KV cache; "
            "its KV and weight formulas are not covered yet",
        )
    layers = r.int_("num_hidden_layers", maximum=MAX_LAYERS)
    heads = r.int_("num_attention_heads")
    hidden = r.int_("hidden_size")
    vocab = r.int_("vocab_size")
    kv_heads = r.int_("num_key_value_heads") if r.has("num_key_value_heads") else heads
    if heads % kv_heads:
        raise _problem(
            source,
            r.field("num_key_value_heads"),
            f"{kv_heads} KV heads do not divide {heads} attention heads",
        )
    if r.has("head_dim"):
        head_dim = r.int_("head_dim")
    else:
        if hidden % heads:
            raise _problem(
                source,
                r.field("head_dim"),
                f"missing, and hidden_size {hidden} is not a multiple of "
                f"num_attention_heads {heads}: give head_dim",
            )
        head_dim = hidden // heads

    moe: MoeGeometry | None = None
    experts = r.first_int(_EXPERT_KEYS)
    moe_layers = 0
    if experts:
        per_token = r.first_int(_EXPERTS_PER_TOKEN_KEYS)
        if per_token is None:
            raise _problem(
                source,
                r.field("num_experts_per_tok"),
                f"missing: a MoE config with {experts} experts must say how many each token uses",
            )
        if not 1 <= per_token <= experts:
            raise _problem(
                source,
                r.field("num_experts_per_tok"),
                f"must be between 1 and the {experts} experts, got {per_token}",
            )
        # Mixtral-style configs have no moe_intermediate_size: intermediate_size is the expert's.
        expert_key = (
            "moe_intermediate_size" if r.has("moe_intermediate_size") else ("intermediate_size")
        )
        expert_size = r.int_(expert_key)
        moe_layers = _moe_layers(r, layers)
        shared = 0
        if r.has("n_shared_experts"):
            shared = r.opt_int("n_shared_experts", 0) * expert_size
        if r.has("shared_expert_intermediate_size"):
            shared = r.opt_int("shared_expert_intermediate_size", 0)
        moe = MoeGeometry(
            num_experts=experts,
            experts_per_token=per_token,
            expert_intermediate_size=expert_size,
            moe_layers=moe_layers,
            shared_intermediate_size=shared,
            shared_expert_gate=shared > 0 and r.has("shared_expert_intermediate_size"),
        )
    dense_layers = layers - moe_layers
    intermediate = (
        r.int_("intermediate_size") if dense_layers else r.opt_int("intermediate_size", 0)
    )

    model_type = text.get("model_type") or config.get("model_type")
    model_type = str(model_type) if model_type is not None else None
    attention_bias = r.bool_("attention_bias", False)
    qkv_bias_default = model_type in _QKV_BIAS_TYPES
    tie_default = bool(config.get("tie_word_embeddings", False))
    return ModelGeometry(
        source=source,
        model_type=model_type,
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        hidden_size=hidden,
        intermediate_size=intermediate or None,
        vocab_size=vocab,
        tie_word_embeddings=r.bool_("tie_word_embeddings", tie_default),
        qkv_bias=attention_bias or qkv_bias_default,
        o_bias=attention_bias,
        mlp_bias=r.bool_("mlp_bias", False),
        qk_norm=model_type in _QK_NORM_TYPES or r.bool_("use_qk_norm", False),
        dense_layers=dense_layers,
        moe=moe,
        weight_dtype_hint=_weight_dtype_hint(config, text),
    )


def parameter_counts(g: ModelGeometry) -> ParameterCounts:
    """Count parameters by part of the model (elements).

    Per layer: q (hidden × heads·head_dim), k and v (hidden × kv_heads·head_dim each),
    o (heads·head_dim × hidden); a gated MLP has three matrices (gate, up: hidden × I;
    down: I × hidden); each routed expert is such an MLP of width I_e; the router is
    hidden × E; two RMSNorm weight vectors. Plus the embedding (vocab × hidden), the final
    norm, and an untied LM head (vocab × hidden). Checks: Llama-2-7B → 6,738,415,616;
    Mixtral-8x7B → 46,702,792,704; Qwen3-30B-A3B → 30,532,122,624 (tests/analysis).
    """
    h, hd = g.hidden_size, g.head_dim
    q_out, kv_out = g.attention_heads * hd, g.kv_heads * hd
    attention = g.layers * (h * q_out + 2 * h * kv_out + q_out * h)
    attention_bias = g.layers * ((q_out + 2 * kv_out if g.qkv_bias else 0) + (h if g.o_bias else 0))
    qk_norm = g.layers * 2 * hd if g.qk_norm else 0
    inter = g.intermediate_size or 0
    dense_mlp = g.dense_layers * 3 * h * inter
    mlp_bias = g.dense_layers * (2 * inter + h) if g.mlp_bias else 0
    expert = routed = shared = shared_gate = router = 0
    if g.moe is not None:
        m = g.moe
        expert = 3 * h * m.expert_intermediate_size
        routed = m.moe_layers * m.num_experts * expert
        shared = m.moe_layers * 3 * h * m.shared_intermediate_size
        shared_gate = m.moe_layers * h if m.shared_expert_gate else 0
        router = m.moe_layers * h * m.num_experts
    embedding = g.vocab_size * h
    return ParameterCounts(
        embedding=embedding,
        attention=attention,
        attention_bias=attention_bias,
        qk_norm=qk_norm,
        dense_mlp=dense_mlp,
        mlp_bias=mlp_bias,
        routed_experts=routed,
        expert=expert,
        shared_experts=shared,
        shared_expert_gate=shared_gate,
        router=router,
        norms=g.layers * 2 * h + h,
        lm_head=0 if g.tie_word_embeddings else embedding,
    )


def active_parameters_per_token(g: ModelGeometry, counts: ParameterCounts) -> int:
    """Parameters one token uses: all but the routed experts it is not sent to.

    total − (E − k) × expert × MoE layers; equal to the total for a dense model. Counts the
    whole embedding, as model cards do ("A3B": Qwen3-30B-A3B → 3,353,032,704 ≈ 3.3 B).
    """
    if g.moe is None:
        return counts.total
    m = g.moe
    return counts.total - (m.num_experts - m.experts_per_token) * counts.expert * m.moe_layers
