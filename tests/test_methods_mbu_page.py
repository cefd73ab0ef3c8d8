"""The MBU methods page quotes figures that the analysis functions actually produce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenwatt.analysis.model.geometry import (
    active_parameters_per_token,
    geometry_from_config,
    parameter_counts,
)
from tokenwatt.analysis.model.mbu import (
    bytes_per_decode_step,
    decode_steps_per_s,
    kv_bytes_per_token,
    kv_capacity_tokens,
    mbu_breakdown,
    mbu_pct,
    weight_bytes,
    weights_touched_per_step,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "site_templates" / "methods" / "mbu.md").read_text()
G = geometry_from_config(
    json.loads((ROOT / "tests" / "fixtures" / "qwen3-30b-a3b.config.json").read_text()), "q"
)
CONTEXT = 1838.2 + 459.55 / 2  # chat-mix-v1 means, as in tests/analysis/model/test_mbu.py


def quoted(text: str) -> None:
    assert text in PAGE, f"the methods page should say {text!r}"


def test_geometry_and_capacity_figures() -> None:
    c = parameter_counts(G)
    quoted(f"{c.total / 1e9:.2f} B parameters")
    quoted(f"{active_parameters_per_token(G, c) / 1e9:.2f} B active")
    quoted(f"{weight_bytes(G, 'fp8').total / 1e9:.2f} GB")
    quoted(f"**{kv_bytes_per_token(G, 'bf16'):,.0f} B** in BF16")
    quoted(f"**{kv_bytes_per_token(G, 'fp8'):,.0f} B** in FP8")
    quoted(f"{kv_capacity_tokens(40.74, 98_304, block_size=1):,} tokens")
    quoted(f"{kv_capacity_tokens(40.74, 98_304):,} in whole blocks")


@pytest.mark.parametrize("batch", [1, 16, 64, 145])
def test_distinct_experts_table(batch: int) -> None:
    weights, distinct = weights_touched_per_step(G, "fp8", batch)
    assert distinct is not None
    quoted(f"| {batch} | {distinct:.1f} | {weights / 1e9:.2f} GB |")


@pytest.mark.parametrize(
    ("kv_dtype", "goodput", "batch", "kv_gbs", "weights_gbs", "mbu"),
    [("bf16", 4572.3, 145, "930", "963", "56.5%"), ("fp8", 5056.9, 154, "514", "1,003", "45.3%")],
)
def test_worked_mbu(
    kv_dtype: str, goodput: float, batch: int, kv_gbs: str, weights_gbs: str, mbu: str
) -> None:
    step = bytes_per_decode_step(
        G, weight_dtype="fp8", kv_dtype=kv_dtype, running_batch=batch, mean_context_tokens=CONTEXT
    )
    steps = decode_steps_per_s(goodput, batch)
    bd = mbu_breakdown(step, steps)
    assert f"{bd.kv_gbs:,.0f}" == kv_gbs
    assert f"{bd.weights_gbs:,.0f}" == weights_gbs
    assert f"{mbu_pct(step.total, steps, 3.35, 1):.1f}%" == mbu
    for text in (f"**{kv_gbs} GB/s**", f"**{weights_gbs} GB/s**", f"**{mbu}**"):
        quoted(text)
