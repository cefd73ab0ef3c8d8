"""What ``tokenwatt model-info`` reports: geometry, parameters, weight and KV bytes, capacity.

Pure: the CLI reads and parses the file; this turns the parsed config into numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tokenwatt.analysis.model.geometry import (
    ModelGeometry,
    ParameterCounts,
    active_parameters_per_token,
    geometry_from_config,
    parameter_counts,
)
from tokenwatt.analysis.model.mbu import (
    VLLM_BLOCK_SIZE,
    WeightBytes,
    kv_bytes_per_token,
    kv_capacity_tokens,
    weight_bytes,
    weights_touched_per_step,
)

DEFAULT_WEIGHT_DTYPE = "bf16"
"""Weight dtype when neither the user nor the config names one."""


@dataclass(frozen=True)
class ModelInfo:
    """Everything ``model-info`` prints. Bytes in B, capacity in tokens.

    Attributes:
        geometry: the model's shape.
        parameters: counts by part.
        active_parameters: parameters per token (the total for a dense model).
        weight_dtype: the dtype used for the weights, and ``weight_dtype_from``: ``option``,
            ``config`` (from ``quantization_config``/``torch_dtype``) or ``default``.
        weights: weight bytes.
        kv_dtype: the KV-cache dtype.
        kv_bytes_per_token: KV bytes per token (whole model, one GPU).
        kv_cache_gib: the cache size asked about, or None.
        kv_capacity_tokens: tokens it holds in whole blocks of ``block_size``, or None.
        batch: the running batch asked about, or None.
        distinct_experts: expected distinct routed experts per MoE layer at that batch.
        weights_bytes_per_step: weight bytes one decode step of that batch reads.
    """

    geometry: ModelGeometry
    parameters: ParameterCounts
    active_parameters: int
    weight_dtype: str
    weight_dtype_from: str
    weights: WeightBytes
    kv_dtype: str
    kv_bytes_per_token: float
    kv_cache_gib: float | None = None
    kv_capacity_tokens: int | None = None
    block_size: int = VLLM_BLOCK_SIZE
    batch: float | None = None
    distinct_experts: float | None = None
    weights_bytes_per_step: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (what ``model-info --json`` prints)."""
        geometry = asdict(self.geometry)
        return {
            "source": self.geometry.source,
            "geometry": {k: v for k, v in geometry.items() if k != "source"},
            "parameters": {
                **self.parameters.as_dict(),
                "active_per_token": self.active_parameters,
            },
            "weight_dtype": self.weight_dtype,
            "weight_dtype_from": self.weight_dtype_from,
            "weight_bytes": {
                "total": _num(self.weights.total),
                "linear": _num(self.weights.linear_bytes),
                "other": _num(self.weights.other_bytes),
                "notes": list(self.weights.notes),
            },
            "kv_dtype": self.kv_dtype,
            "kv_bytes_per_token": _num(self.kv_bytes_per_token),
            "kv_cache_gib": self.kv_cache_gib,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "block_size": self.block_size,
            "batch": self.batch,
            "distinct_experts": self.distinct_experts,
            "weights_bytes_per_step": _num(self.weights_bytes_per_step),
        }


def _num(value: float | None) -> float | int | None:
    """Whole byte counts as JSON integers (98304, not 98304.0)."""
    if value is not None and float(value).is_integer():
        return int(value)
    return value


def model_info(
    config: Mapping[str, Any],
    source: str,
    *,
    weight_dtype: str | None = None,
    kv_dtype: str = "bf16",
    kv_cache_gib: float | None = None,
    batch: float | None = None,
    block_size: int = VLLM_BLOCK_SIZE,
) -> ModelInfo:
    """Compute the ``model-info`` figures for a parsed ``config.json``.

    ``weight_dtype`` None means: what the config's ``quantization_config`` or ``torch_dtype``
    says, else bf16.

    Raises:
        InputError: a missing or malformed config key, or an unknown dtype.
        ValueError: a negative cache size or batch.
    """
    g = geometry_from_config(config, source)
    counts = parameter_counts(g)
    if weight_dtype is not None:
        dtype, origin = weight_dtype, "option"
    elif g.weight_dtype_hint is not None:
        dtype, origin = g.weight_dtype_hint, "config"
    else:
        dtype, origin = DEFAULT_WEIGHT_DTYPE, "default"
    kv_per_token = kv_bytes_per_token(g, kv_dtype)
    capacity = None
    if kv_cache_gib is not None:
        capacity = kv_capacity_tokens(kv_cache_gib, kv_per_token, block_size=block_size)
    per_step = distinct = None
    if batch is not None:
        per_step, distinct = weights_touched_per_step(g, dtype, batch)
    return ModelInfo(
        geometry=g,
        parameters=counts,
        active_parameters=active_parameters_per_token(g, counts),
        weight_dtype=dtype,
        weight_dtype_from=origin,
        weights=weight_bytes(g, dtype),
        kv_dtype=kv_dtype,
        kv_bytes_per_token=kv_per_token,
        kv_cache_gib=kv_cache_gib,
        kv_capacity_tokens=capacity,
        block_size=block_size,
        batch=batch,
        distinct_experts=distinct,
        weights_bytes_per_step=per_step,
    )


def _count(n: float) -> str:
    return f"{n / 1e9:.2f} B ({n:,.0f})" if n >= 1e9 else f"{n:,.0f}"


def _bytes(n: float) -> str:
    """Bytes in GB and GiB; in MB and MiB below 0.01 GB (a test model would read 0.00 GB)."""
    if n < 1e7:
        return f"{n / 1e6:.2f} MB ({n / 2**20:.2f} MiB)"
    return f"{n / 1e9:.2f} GB ({n / 2**30:.2f} GiB)"


def info_rows(info: ModelInfo) -> list[tuple[str, str]]:
    """The figures as (label, value) text rows, in the order ``model-info`` prints them."""
    g = info.geometry
    rows: list[tuple[str, str]] = [
        ("config", g.source),
        ("model type", g.model_type or "—"),
        ("layers", f"{g.layers}"),
        ("attention heads", f"{g.attention_heads}"),
        ("KV heads", f"{g.kv_heads}"),
        ("head dim", f"{g.head_dim}"),
        ("hidden size", f"{g.hidden_size}"),
        (
            "dense MLP size",
            f"{g.intermediate_size} × {g.dense_layers} layers" if g.dense_layers else "—",
        ),
        ("vocab size", f"{g.vocab_size:,}"),
        ("tied embeddings", "yes" if g.tie_word_embeddings else "no"),
    ]
    if g.moe is not None:
        m = g.moe
        rows += [
            ("experts (routed)", f"{m.num_experts}, {m.experts_per_token} per token"),
            ("expert MLP size", f"{m.expert_intermediate_size} × {m.moe_layers} MoE layers"),
            (
                "shared expert size",
                f"{m.shared_intermediate_size}" if m.shared_intermediate_size else "—",
            ),
        ]
    rows += [
        ("parameters", _count(info.parameters.total)),
        ("active per token", _count(info.active_parameters)),
        (
            f"weights ({info.weight_dtype}, from {info.weight_dtype_from})",
            _bytes(info.weights.total),
        ),
        (f"KV bytes per token ({info.kv_dtype})", f"{info.kv_bytes_per_token:,.0f} B"),
    ]
    if info.kv_capacity_tokens is not None:
        rows.append(
            (
                f"KV capacity of {info.kv_cache_gib:g} GiB",
                f"{info.kv_capacity_tokens:,} tokens (blocks of {info.block_size})",
            )
        )
    if info.weights_bytes_per_step is not None:
        if info.distinct_experts is not None:
            rows.append(
                (
                    f"distinct experts per layer, batch {info.batch:g}",
                    f"{info.distinct_experts:.2f}",
                )
            )
        rows.append(
            (
                f"weights read per decode step, batch {info.batch:g}",
                _bytes(info.weights_bytes_per_step),
            )
        )
    rows += [("note", note) for note in info.weights.notes]
    return rows
