"""Capacity math: ceil(cards × baseline / tuned) and the no-credit rules."""

from __future__ import annotations

import pytest

from tokenwatt.analysis import NoCredit, capacity, cards_needed


def _cap(**overrides: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "cards": 64,
        "baseline_goodput_tok_s": 4572.3,
        "tuned_goodput_tok_s": 5056.9,
        "gate_passed": True,
        "slo_met_every_repeat": True,
        "variance_band_pct": 1.0,
    }
    args.update(overrides)
    return capacity(**args)  # type: ignore[arg-type]


def test_cards_needed_rounds_up() -> None:
    assert cards_needed(64, 4572.3, 5056.9) == 58
    assert cards_needed(10, 100.0, 300.0) == 4  # 3.33 → 4
    assert cards_needed(64, 100.0, 100.0) == 64


def test_cards_needed_does_not_charge_a_card_for_float_noise() -> None:
    # 3 × 0.7 / 0.7 is 3.0000000000000004 in binary floating point.
    assert cards_needed(3, 0.7, 0.7) == 3
    assert cards_needed(100, 110.0, 110.0) == 100


@pytest.mark.parametrize(
    ("cards", "base", "tuned"), [(0, 1.0, 1.0), (64, 0.0, 1.0), (64, 1.0, -1.0)]
)
def test_cards_needed_rejects_nonsense(cards: int, base: float, tuned: float) -> None:
    with pytest.raises(ValueError, match=r"must be"):
        cards_needed(cards, base, tuned)


def test_credited_configuration_saves_cards() -> None:
    cap = _cap()
    assert cap.credited and cap.saved == 6 and cap.cards_needed == 58
    assert cap.gain_pct == pytest.approx(10.5986, abs=1e-4)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"gate_passed": False}, NoCredit.GATE_FAILED),
        ({"gate_passed": None}, NoCredit.NO_ACCURACY),
        ({"slo_met_every_repeat": False}, NoCredit.SLO_MISSED),
        ({"variance_band_pct": 10.6}, NoCredit.INSIDE_VARIANCE),
        ({"tuned_goodput_tok_s": 4500.0}, NoCredit.NO_GAIN),
        ({"tuned_goodput_tok_s": 4572.3}, NoCredit.NO_GAIN),
    ],
)
def test_each_exclusion_gives_no_credit_and_says_why(
    overrides: dict[str, object], reason: NoCredit
) -> None:
    cap = _cap(**overrides)
    assert cap.saved == 0 and not cap.credited
    assert cap.reasons == (reason,)


def test_gain_just_above_the_band_is_credited() -> None:
    assert _cap(variance_band_pct=10.5).credited


def test_zero_tuned_goodput_has_no_cards_figure() -> None:
    cap = _cap(tuned_goodput_tok_s=0.0)
    assert cap.cards_needed is None and cap.saved == 0
    assert cap.reasons == (NoCredit.NO_GAIN,)
