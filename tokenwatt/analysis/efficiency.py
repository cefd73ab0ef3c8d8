"""Efficiency figures: tokens per joule and relative deltas."""

from __future__ import annotations

import math


def tokens_per_joule(goodput_tok_s: float, mean_power_w: float) -> float:
    """Tokens per joule = goodput (tok/s) / mean summed board power (W = J/s).

    Equal to goodput tokens in the window / energy in the window (J) when the power is the
    window's mean (DESIGN.md, "Tokens per joule"; seed: 4572.3 / 637 ≈ 7.18).

    Raises:
        ValueError: power not positive or either input not finite.
    """
    if not (math.isfinite(goodput_tok_s) and math.isfinite(mean_power_w)):
        raise ValueError("goodput and power must be finite")
    if mean_power_w <= 0:
        raise ValueError(f"mean power must be positive, got {mean_power_w} W")
    return goodput_tok_s / mean_power_w


def tokens_per_joule_from_energy(output_tokens: float, energy_j: float) -> float:
    """Tokens per joule from a window's goodput tokens and its measured energy (J).

    DESIGN.md, "Tokens per joule": goodput tokens in the window / energy in the window.

    Raises:
        ValueError: energy not positive or either input not finite.
    """
    if not (math.isfinite(output_tokens) and math.isfinite(energy_j)):
        raise ValueError("tokens and energy must be finite")
    if energy_j <= 0:
        raise ValueError(f"energy must be positive, got {energy_j} J")
    return output_tokens / energy_j


def delta_pct(value: float, baseline: float) -> float:
    """Relative change (%) of ``value`` against ``baseline``: 100 × (value − base) / base.

    Raises:
        ValueError: baseline is zero.
    """
    if baseline == 0:
        raise ValueError("baseline is zero; a relative change is undefined")
    return 100.0 * (value - baseline) / baseline
