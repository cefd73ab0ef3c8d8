"""The accuracy gate, tokens per joule, relative deltas and the variance band."""

from __future__ import annotations

import math

import pytest

from tokenwatt.analysis import (
    accuracy_delta_pts,
    delta_pct,
    gate_verdict,
    spread_pts,
    tokens_per_joule,
    tokens_per_joule_from_energy,
    variance_band_pct,
)


def test_gate_fails_below_the_threshold_and_passes_at_it() -> None:
    assert not gate_verdict(88.0, 96.0, 1.0).passed
    assert gate_verdict(95.0, 96.0, 1.0).passed  # exactly the allowed drop
    assert not gate_verdict(94.9, 96.0, 1.0).passed
    assert gate_verdict(97.0, 96.0, 0.0).passed  # a gain always passes


def test_gate_threshold_is_robust_to_float_noise() -> None:
    # 96.1 - 95.1 is 0.99999999999999 in binary; the drop is exactly the threshold.
    assert gate_verdict(95.1, 96.1, 1.0).passed


def test_gate_margin_and_delta() -> None:
    verdict = gate_verdict(92.0, 96.0, 1.0)
    assert verdict.delta_pts == -4.0 and verdict.margin_pts == 3.0
    assert gate_verdict(96.0, 96.0, 1.0).margin_pts == 0.0
    assert accuracy_delta_pts(88.0, 96.0) == -8.0


def test_gate_rejects_a_negative_threshold() -> None:
    with pytest.raises(ValueError, match="threshold"):
        gate_verdict(90.0, 90.0, -1.0)


def test_spread_is_max_minus_min() -> None:
    assert spread_pts([88.0, 90.5, 89.0]) == 2.5
    assert spread_pts([91.0]) == 0.0
    with pytest.raises(ValueError, match="no seed"):
        spread_pts([])


def test_tokens_per_joule_from_power_and_from_energy_agree() -> None:
    assert tokens_per_joule(4572.3, 637.0) == pytest.approx(7.1779, abs=1e-4)
    # 120 s window: 548,676 tokens over 76,440 J is the same ratio.
    assert tokens_per_joule_from_energy(4572.3 * 120, 637.0 * 120) == pytest.approx(
        tokens_per_joule(4572.3, 637.0)
    )


@pytest.mark.parametrize(
    ("goodput", "power"), [(100.0, 0.0), (100.0, -5.0), (math.nan, 100.0), (1.0, math.inf)]
)
def test_tokens_per_joule_rejects_bad_power(goodput: float, power: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        tokens_per_joule(goodput, power)


def test_tokens_per_joule_from_energy_rejects_bad_energy() -> None:
    with pytest.raises(ValueError, match="positive"):
        tokens_per_joule_from_energy(100.0, 0.0)
    with pytest.raises(ValueError, match="finite"):
        tokens_per_joule_from_energy(100.0, math.nan)


def test_delta_pct() -> None:
    assert delta_pct(5056.9, 4572.3) == pytest.approx(10.5986, abs=1e-4)
    assert delta_pct(90.0, 100.0) == pytest.approx(-10.0)
    with pytest.raises(ValueError, match="baseline is zero"):
        delta_pct(1.0, 0.0)


def test_variance_band_is_half_range_over_mean() -> None:
    assert variance_band_pct([99.0, 101.0]) == pytest.approx(1.0)
    assert variance_band_pct([4600.0, 4544.6]) == pytest.approx(0.6058, abs=1e-4)
    assert variance_band_pct([5.0]) == 0.0
    with pytest.raises(ValueError, match="no values"):
        variance_band_pct([])
    with pytest.raises(ValueError, match="mean is zero"):
        variance_band_pct([0.0, 0.0])


def test_tokens_per_joule_above_idle() -> None:
    from tokenwatt.analysis.power.efficiency import tokens_per_joule_above_idle

    # The seed's BF16 configuration with a 70 W idle floor: 4572.3 / (637 - 70).
    assert tokens_per_joule_above_idle(4572.3, 637.0, 70.0) == pytest.approx(8.0640, abs=1e-4)
    assert tokens_per_joule_above_idle(4572.3, 70.0, 70.0) is None  # nothing above idle
    with pytest.raises(ValueError, match="must not be negative"):
        tokens_per_joule_above_idle(1.0, 100.0, -1.0)
