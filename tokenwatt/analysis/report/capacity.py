"""Capacity math: how many cards a tuned configuration saves (methods/capacity.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class NoCredit(StrEnum):
    """Why a configuration earns no capacity credit."""

    GATE_FAILED = "failed the accuracy gate"
    SLO_MISSED = "missed the SLO in at least one repeat"
    INSIDE_VARIANCE = "its gain lies inside the variance band"
    NO_GAIN = "its goodput is not above the baseline"
    NO_ACCURACY = "has no accuracy result to gate on"


@dataclass(frozen=True)
class Capacity:
    """Cards needed at the tuned configuration's goodput and cards saved.

    ``cards_needed`` = ceil(cards × baseline goodput / tuned goodput); ``saved`` =
    cards − cards_needed when credit is earned, else 0, with ``reasons`` saying why not.
    """

    cards: int
    cards_needed: int | None
    saved: int
    gain_pct: float
    reasons: tuple[NoCredit, ...]
    gain_ci_pct: tuple[float, float] | None = None

    @property
    def credited(self) -> bool:
        """True when the configuration earns capacity credit."""
        return not self.reasons

    @property
    def gain_in_doubt(self) -> bool:
        """True when the gain's 95% interval holds zero: the repeats cannot tell the gain
        from none. Shown beside the verdict; credit is the variance band's rule alone."""
        return self.gain_ci_pct is not None and self.gain_ci_pct[0] <= 0.0 <= self.gain_ci_pct[1]


def cards_needed(cards: int, baseline_goodput_tok_s: float, tuned_goodput_tok_s: float) -> int:
    """ceil(cards × baseline / tuned): cards serving the same load at the tuned goodput.

    Raises:
        ValueError: non-positive goodput or card count.
    """
    if cards < 1:
        raise ValueError(f"cards must be ≥ 1, got {cards}")
    if baseline_goodput_tok_s <= 0 or tuned_goodput_tok_s <= 0:
        raise ValueError("goodput must be positive for capacity math")
    # Round first: 64 × 4572.3 / 5056.9 must not become 57.0000000001 and cost a card.
    return math.ceil(round(cards * baseline_goodput_tok_s / tuned_goodput_tok_s, 9))


def capacity(
    *,
    cards: int,
    baseline_goodput_tok_s: float,
    tuned_goodput_tok_s: float,
    gate_passed: bool | None,
    slo_met_every_repeat: bool,
    variance_band_pct: float,
    gain_ci_pct: tuple[float, float] | None = None,
) -> Capacity:
    """Capacity credit with the gate exclusions (methods/capacity.md; seed lab note, change 2).

    No credit when the configuration failed the gate (or has no accuracy result), missed
    the SLO in any repeat, or its goodput gain (%) is not above ``variance_band_pct``.
    ``gain_ci_pct``, the gain's 95% interval (% of the baseline) when the repeats give one,
    is carried for the conclusion's words (:attr:`Capacity.gain_in_doubt`); it never
    changes the credit.
    """
    gain = 100.0 * (tuned_goodput_tok_s - baseline_goodput_tok_s) / baseline_goodput_tok_s
    reasons: list[NoCredit] = []
    if gate_passed is None:
        reasons.append(NoCredit.NO_ACCURACY)
    elif not gate_passed:
        reasons.append(NoCredit.GATE_FAILED)
    if not slo_met_every_repeat:
        reasons.append(NoCredit.SLO_MISSED)
    if gain <= 0:
        reasons.append(NoCredit.NO_GAIN)
    elif gain <= variance_band_pct:
        reasons.append(NoCredit.INSIDE_VARIANCE)
    needed = (
        cards_needed(cards, baseline_goodput_tok_s, tuned_goodput_tok_s)
        if tuned_goodput_tok_s > 0
        else None
    )
    saved = cards - needed if (needed is not None and not reasons) else 0
    return Capacity(cards, needed, saved, gain, tuple(reasons), gain_ci_pct)
