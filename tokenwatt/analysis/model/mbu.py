"""Model bandwidth utilisation (MBU), KV-cache size and capacity (methods/mbu.md).

Pure functions over a :class:`~tokenwatt.analysis.model.geometry.ModelGeometry`:

- bytes per element from a dtype name; weight bytes;
- KV bytes per token = 2 (K and V) × layers × KV heads × head_dim × bytes per element;
- KV capacity in tokens for a cache size, in whole blocks as vLLM allocates it;
- bytes read from device memory per decode step = weights touched + KV cache of the running
  batch, where for MoE the weights touched are the shared weights plus the expected number of
  distinct experts the batch routes to;
- MBU (%) = bytes per step × decode steps per second / (rated TB/s × 10^12 × GPUs).

Units: bytes (B), GiB = 2^30 B, GB/s = 10^9 B/s, TB/s = 10^12 B/s (vendors rate memory
bandwidth in decimal units: H100 SXM 3.35 TB/s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenwatt.analysis.model.geometry import ModelGeometry, ParameterCounts, parameter_counts
from tokenwatt.errors import InputError, Problem
from tokenwatt.records import MbuBreakdownV2, MbuResult

GIB = 2**30
"""Bytes in a GiB (vLLM logs "Available KV cache memory" in GiB)."""

VLLM_BLOCK_SIZE = 16
"""Tokens per KV-cache block: vLLM's default ``--block-size`` on CUDA."""

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "awq": 0.5,
    "gptq": 0.5,
}
"""Storage bytes per element of each dtype name this package accepts."""

WEIGHT_DTYPES = tuple(BYTES_PER_ELEMENT)
"""Dtype names accepted for weights."""

KV_DTYPES = ("bf16", "fp16", "fp32", "fp8", "fp8_e4m3", "fp8_e5m2")
"""Dtype names accepted for the KV cache (vLLM ``--kv-cache-dtype`` values and 16/32-bit)."""

_QUANTIZED = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "awq", "gptq"})

_NOTES: dict[str, str] = {
    "fp8": (
        "FP8 weights: per-tensor or per-block scales (e.g. one fp32 scale per 128×128 block, "
        "+0.02%) are not counted"
    ),
    "int8": "INT8 weights: per-channel scales are not counted",
    "int4": (
        "4-bit weights: group scales and zero points (e.g. one fp16 scale per 128 weights, "
        "about +1.6%) are not counted"
    ),
}
_NOTES["fp8_e4m3"] = _NOTES["fp8_e5m2"] = _NOTES["fp8"]
_NOTES["awq"] = _NOTES["gptq"] = _NOTES["int4"]

_SIXTEEN_BIT = 2.0  # embedding, LM head, router, norms and biases in quantized checkpoints


def bytes_per_element(dtype: str, *, source: str = "<input>", field: str = "dtype") -> float:
    """Storage bytes per element of ``dtype`` (bf16/fp16 2, fp8/int8 1, int4/awq/gptq 0.5, fp32 4).

    4-bit formats are counted at 0.5 B per weight without their scales; see
    :func:`dtype_note`.

    Raises:
        InputError: an unknown dtype name, reported against ``source`` and ``field``.
    """
    key = dtype.strip().lower()
    if key not in BYTES_PER_ELEMENT:
        raise InputError(
            [
                Problem(
                    source, field, f"unknown dtype {dtype!r}; use one of {', '.join(WEIGHT_DTYPES)}"
                )
            ]
        )
    return BYTES_PER_ELEMENT[key]


def dtype_note(dtype: str) -> str | None:
    """What the byte count of ``dtype`` leaves out (quantization scales), or None."""
    return _NOTES.get(dtype.strip().lower())


@dataclass(frozen=True)
class WeightBytes:
    """Bytes the model's weights occupy in device memory.

    Attributes:
        dtype: the weight dtype name.
        linear_bytes: the attention, MLP and expert matrices at ``dtype``.
        other_bytes: embedding, LM head, router, norms and biases — at ``dtype`` for 16/32-bit
            weights, at 2 bytes (bf16) for quantized ones, as FP8/INT8/INT4 checkpoints keep
            them.
        notes: what the count leaves out.
    """

    dtype: str
    linear_bytes: float
    other_bytes: float
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        """All weight bytes."""
        return self.linear_bytes + self.other_bytes


def _linear_and_other_bpe(weight_dtype: str, source: str) -> tuple[float, float]:
    bpe = bytes_per_element(weight_dtype, source=source, field="weight_dtype")
    key = weight_dtype.strip().lower()
    return bpe, (_SIXTEEN_BIT if key in _QUANTIZED else bpe)


def weight_bytes(g: ModelGeometry, weight_dtype: str) -> WeightBytes:
    """Weight bytes of the whole model at ``weight_dtype`` (see :class:`WeightBytes`).

    Raises:
        InputError: unknown dtype.
    """
    counts = parameter_counts(g)
    linear_bpe, other_bpe = _linear_and_other_bpe(weight_dtype, g.source)
    note = dtype_note(weight_dtype)
    return WeightBytes(
        dtype=weight_dtype,
        linear_bytes=counts.linear * linear_bpe,
        other_bytes=counts.other * other_bpe,
        notes=(note,) if note else (),
    )


def kv_heads_per_gpu(g: ModelGeometry, tensor_parallel: int = 1) -> int:
    """KV heads each GPU holds under tensor parallelism.

    max(1, KV heads // TP): with more GPUs than KV heads, vLLM replicates heads
    (``ModelConfig.get_num_kv_heads``).
    """
    if tensor_parallel < 1:
        raise ValueError(f"tensor parallel size must be at least 1, got {tensor_parallel}")
    return max(1, g.kv_heads // tensor_parallel)


def kv_bytes_per_token(g: ModelGeometry, kv_dtype: str, *, tensor_parallel: int = 1) -> float:
    """KV-cache bytes one token occupies on one GPU.

    2 (K and V) × layers × KV heads per GPU × head_dim × bytes per element (methods/mbu.md).
    Qwen3-30B-A3B: 2 × 48 × 4 × 128 × 2 = 98,304 B in BF16, 49,152 B in FP8. Every layer is
    counted as full attention (no sliding-window savings).

    Raises:
        InputError: unknown dtype.
        ValueError: ``tensor_parallel`` below 1.
    """
    bpe = bytes_per_element(kv_dtype, source=g.source, field="kv_dtype")
    return 2 * g.layers * kv_heads_per_gpu(g, tensor_parallel) * g.head_dim * bpe


def kv_capacity_tokens(
    kv_cache_gib: float, kv_bytes_per_token: float, *, block_size: int = VLLM_BLOCK_SIZE
) -> int:
    """Tokens a KV cache of ``kv_cache_gib`` GiB holds, in whole blocks of ``block_size`` tokens.

    floor(cache bytes / (block_size × KV bytes per token)) × block_size: vLLM divides the
    memory left after profiling into whole blocks (``block_size=1`` gives the plain quotient).
    Seed check: vLLM's "40.74 GiB" is rounded to two decimals; 40.7417 GiB at 98,304 B/token
    is 27,813 blocks = 445,008 tokens, while exactly 40.74 GiB gives 444,992.

    Raises:
        ValueError: a negative cache size, or a non-positive byte count or block size.
    """
    if kv_cache_gib < 0 or not math.isfinite(kv_cache_gib):
        raise ValueError(f"KV-cache size must be a non-negative number of GiB, got {kv_cache_gib}")
    if kv_bytes_per_token <= 0 or block_size < 1:
        raise ValueError("KV bytes per token and block size must be positive")
    block_bytes = block_size * kv_bytes_per_token
    return math.floor(kv_cache_gib * GIB / block_bytes) * block_size


def expected_distinct_experts(num_experts: int, experts_per_token: int, batch: float) -> float:
    """Expected number of distinct experts a batch of tokens routes to, per MoE layer.

    E × (1 − (1 − k/E)^B): each token picks k of E experts; a given expert is missed by one
    token with probability 1 − k/E and, assuming tokens route independently and uniformly,
    by all B tokens with probability (1 − k/E)^B; summing the hit probability over the E
    experts gives the expectation (linearity of expectation). Real routers are not uniform,
    so this is an upper estimate of distinct experts for a skewed router; prefer a measured
    count when the engine reports one. Qwen3-30B-A3B (E=128, k=8): B=1 → 8, B=16 → 82.4,
    B=145 → 127.99.

    Raises:
        ValueError: k outside 1..E, or a negative batch.
    """
    if not 1 <= experts_per_token <= num_experts:
        raise ValueError(f"experts per token must be in 1..{num_experts}, got {experts_per_token}")
    if batch < 0:
        raise ValueError(f"batch must be non-negative, got {batch}")
    miss_one: float = 1.0 - experts_per_token / num_experts
    return num_experts * (1.0 - math.pow(miss_one, batch))


@dataclass(frozen=True)
class StepBytes:
    """Bytes read from device memory in one decode step of the running batch.

    Attributes:
        weights: weights touched (B).
        kv: KV cache of the running batch (B).
        distinct_experts: routed experts read per MoE layer (None for a dense model).
    """

    weights: float
    kv: float
    distinct_experts: float | None = None

    @property
    def total(self) -> float:
        """Weights plus KV bytes."""
        return self.weights + self.kv


def weights_touched_per_step(
    g: ModelGeometry,
    weight_dtype: str,
    running_batch: float,
    *,
    distinct_experts: float | None = None,
) -> tuple[float, float | None]:
    """Weight bytes one decode step reads, and the routed experts per MoE layer it assumes.

    Every weight except the embedding table, of which only the batch's rows are read (an
    untied model's table is otherwise idle in decode; a tied one is read whole as the LM head),
    and, for MoE, only the distinct experts the batch routes to: ``distinct_experts`` when the
    engine measured it, else :func:`expected_distinct_experts`.

    Returns:
        (bytes, distinct experts per MoE layer or None for a dense model).

    Raises:
        InputError: unknown dtype. ValueError: negative batch or expert count.
    """
    if running_batch < 0:
        raise ValueError(f"running batch must be non-negative, got {running_batch}")
    counts: ParameterCounts = parameter_counts(g)
    linear_bpe, other_bpe = _linear_and_other_bpe(weight_dtype, g.source)
    linear: float = counts.linear - counts.routed_experts
    distinct: float | None = None
    if g.moe is not None:
        m = g.moe
        if distinct_experts is None:
            distinct = expected_distinct_experts(m.num_experts, m.experts_per_token, running_batch)
        else:
            if not 0 <= distinct_experts <= m.num_experts:
                raise ValueError(
                    f"distinct experts must be in 0..{m.num_experts}, got {distinct_experts}"
                )
            distinct = distinct_experts
        linear += distinct * counts.expert * m.moe_layers
    other: float = counts.other
    if not g.tie_word_embeddings:
        other -= counts.embedding
        other += min(running_batch, g.vocab_size) * g.hidden_size
    return linear * linear_bpe + other * other_bpe, distinct


def bytes_per_decode_step(
    g: ModelGeometry,
    *,
    weight_dtype: str,
    kv_dtype: str,
    running_batch: float,
    mean_context_tokens: float,
    distinct_experts: float | None = None,
) -> StepBytes:
    """Bytes read from device memory per decode step (methods/mbu.md).

    weights touched (:func:`weights_touched_per_step`) + running batch × mean context length
    (tokens in the KV cache per running sequence) × KV bytes per token. Attention reads each
    sequence's whole KV cache once per step; activations and the batch's own new K/V writes
    are ignored (small next to these terms).

    Raises:
        InputError: unknown dtype. ValueError: negative batch or context.
    """
    if mean_context_tokens < 0:
        raise ValueError(f"mean context must be non-negative, got {mean_context_tokens}")
    weights, distinct = weights_touched_per_step(
        g, weight_dtype, running_batch, distinct_experts=distinct_experts
    )
    kv = running_batch * mean_context_tokens * kv_bytes_per_token(g, kv_dtype)
    return StepBytes(weights=weights, kv=kv, distinct_experts=distinct)


def decode_steps_per_s(output_tok_s: float, running_batch: float) -> float:
    """Decode steps per second = output tokens per second ÷ running batch (sequences).

    Each decode step emits one token for each running sequence. With goodput as the output
    rate this is the steady-state rate of the measurement window.

    Raises:
        ValueError: running batch not positive.
    """
    if running_batch <= 0:
        raise ValueError(f"running batch must be positive, got {running_batch}")
    return output_tok_s / running_batch


def mean_context_from_kv_usage(
    kv_usage_pct: float, kv_capacity_tokens: int, running_batch: float
) -> float:
    """Mean tokens in the KV cache per running sequence, from the engine's usage gauge.

    usage (%) / 100 × capacity (tokens) ÷ running batch — e.g. vLLM's
    ``vllm:kv_cache_usage_perc`` (a 0–1 fraction there; pass it ×100) and its logged
    "GPU KV cache size". Block rounding makes it slightly high (up to block_size − 1 tokens).

    Raises:
        ValueError: running batch not positive or usage outside 0–100.
    """
    if running_batch <= 0:
        raise ValueError(f"running batch must be positive, got {running_batch}")
    if not 0 <= kv_usage_pct <= 100:
        raise ValueError(f"KV usage must be in 0–100 %, got {kv_usage_pct}")
    return kv_usage_pct / 100.0 * kv_capacity_tokens / running_batch


def mean_decode_context_tokens(mean_input_tokens: float, mean_output_tokens: float) -> float:
    """Mean context of a sequence over its own decode steps: input + output / 2 (tokens).

    A sequence's cache grows from its prompt to prompt + output while it decodes. This is the
    per-sequence mean; a running batch holds long outputs for longer, so the batch's mean
    context is somewhat higher. Prefer :func:`mean_context_from_kv_usage` when measured.
    """
    return mean_input_tokens + mean_output_tokens / 2.0


def mbu_pct(
    bytes_per_step: float, steps_per_s: float, rated_bw_tbs_per_gpu: float, gpus: int
) -> float:
    """MBU (%) = bytes per step × decode steps/s ÷ (rated TB/s × 10^12 × GPUs) × 100.

    Raises:
        ValueError: bandwidth or GPU count not positive.
    """
    if rated_bw_tbs_per_gpu <= 0 or gpus < 1:
        raise ValueError("rated bandwidth and GPU count must be positive")
    return 100.0 * bytes_per_step * steps_per_s / (rated_bw_tbs_per_gpu * 1e12 * gpus)


def mbu_breakdown(step: StepBytes, steps_per_s: float) -> MbuBreakdownV2:
    """Derived memory traffic (GB/s, 10^9 B/s): weights vs KV cache, for the report record."""
    return MbuBreakdownV2(
        weights_gbs=step.weights * steps_per_s / 1e9, kv_gbs=step.kv * steps_per_s / 1e9
    )


def mbu_result(
    step: StepBytes,
    *,
    steps_per_s: float,
    running_batch: float,
    rated_bw_tbs_per_gpu: float,
    gpus: int,
) -> MbuResult:
    """The run record's MBU block (inputs and result) from one step's bytes.

    Raises:
        ValueError: bandwidth or GPU count not positive.
    """
    return MbuResult(
        weights_bytes_per_step=step.weights,
        kv_bytes_per_step=step.kv,
        decode_steps_per_s=steps_per_s,
        running_batch=running_batch,
        rated_bw_tbs_per_gpu=rated_bw_tbs_per_gpu,
        gpus=gpus,
        mbu_pct=mbu_pct(step.total, steps_per_s, rated_bw_tbs_per_gpu, gpus),
    )


def mbu_from_measurements(
    g: ModelGeometry,
    *,
    weight_dtype: str,
    kv_dtype: str,
    output_tok_s: float,
    running_batch: float,
    mean_context_tokens: float,
    rated_bw_tbs_per_gpu: float,
    gpus: int,
    distinct_experts: float | None = None,
) -> MbuResult:
    """MBU of a measurement window, from what the collector measured.

    Decode steps/s = ``output_tok_s`` (tok/s, e.g. goodput) ÷ ``running_batch`` (mean running
    sequences); bytes per step from :func:`bytes_per_decode_step`; MBU from :func:`mbu_pct`.

    Raises:
        InputError: unknown dtype. ValueError: non-positive batch, bandwidth or GPU count.
    """
    step = bytes_per_decode_step(
        g,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        running_batch=running_batch,
        mean_context_tokens=mean_context_tokens,
        distinct_experts=distinct_experts,
    )
    return mbu_result(
        step,
        steps_per_s=decode_steps_per_s(output_tok_s, running_batch),
        running_batch=running_batch,
        rated_bw_tbs_per_gpu=rated_bw_tbs_per_gpu,
        gpus=gpus,
    )
