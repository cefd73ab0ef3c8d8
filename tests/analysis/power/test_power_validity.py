"""Power windows whose readings cannot be physical are invalid, with a named reason."""

from __future__ import annotations

import pytest

from tokenwatt.analysis.power.power import summarise_power_window
from tokenwatt.analysis.power.power_band import (
    CEILING_FACTOR,
    FLOOR_W_PER_DEVICE,
    GENERIC_DEVICE_MAX_W,
    plausible_band,
)
from tokenwatt.analysis.power.power_validity import plausibility_problems
from tokenwatt.records.run.power import PowerSample, PowerScope, PowerWindow


def steady(
    watts: float,
    *,
    seconds: int = 10,
    counter_step_j: float | None = None,
    devices: int = 1,
) -> list[PowerSample]:
    """1 Hz readings of a constant summed power; counters advance by ``counter_step_j``
    per device per second (None: no counters)."""
    out = []
    for k in range(seconds + 1):
        counters = None
        if counter_step_j is not None:
            counters = {f"gpu{d}": 1.0e6 + counter_step_j * k for d in range(devices)}
        out.append(PowerSample(t_s=float(k), power_w=watts, counters_j=counters, counted=k > 0))
    return out


def window(
    samples: list[PowerSample],
    *,
    scope: PowerScope = "board",
    power_limit_w: float | None = None,
) -> PowerWindow:
    return summarise_power_window(
        samples, duration_s=10.0, source="nvml", scope=scope, power_limit_w=power_limit_w
    )


def test_a_counter_frozen_while_power_reads_300_w_invalidates_the_window() -> None:
    w = window(steady(300.0, counter_step_j=0.0))
    assert not w.valid
    reasons = w.invalid_reasons
    assert reasons[0] == (
        "energy counter of gpu0 did not move over 10.0 s while power read 300 W on average: "
        "window energy not used"
    )
    # The counter against the samples says the same from the other side.
    assert reasons[1].startswith("energy counter says 0.0 W on average but the power samples")


def test_a_moving_counter_at_the_same_power_is_valid() -> None:
    w = window(steady(300.0, counter_step_j=300.0))
    assert w.valid and w.energy_j == pytest.approx(3000.0)


def test_negative_power_is_invalid_and_names_the_lowest_reading() -> None:
    w = window(steady(-300.0))
    assert not w.valid
    assert w.invalid_reasons == [
        "11 power readings were negative (lowest -300.0 W): power figure not used"
    ]


def test_an_h100_reading_1_5_w_under_load_is_below_the_floor() -> None:
    w = window(steady(1.5, counter_step_j=1.5))
    assert not w.valid
    assert w.invalid_reasons[0].startswith(
        f"11 power readings below the plausible floor of {FLOOR_W_PER_DEVICE:g} W (lowest 1.5 W)"
    )


def problems(samples: list[PowerSample], devices: int, limit: float | None) -> list[str]:
    band = plausible_band("board", devices=devices, power_limit_w=limit)
    return plausibility_problems(samples, devices=devices, band=band)


def test_the_floor_scales_with_the_device_count() -> None:
    # 8 W summed over four boards is 2 W each: implausible; on one board it is allowed.
    assert problems(steady(8.0), 4, None)
    assert problems(steady(8.0), 1, None) == []


def test_readings_above_1_3x_the_power_limit_are_invalid_and_below_are_not() -> None:
    limit = 700.0
    ok = problems(steady(limit * CEILING_FACTOR - 1), 1, limit)
    high = problems(steady(1000.0), 1, limit)
    assert ok == []
    assert high == [
        "11 power readings above the plausible ceiling of 910 W (1.3× the power limit of "
        "700 W; highest 1000.0 W): power figure not used"
    ]


def test_without_a_known_limit_the_generic_board_ceiling_applies() -> None:
    # No source kind is exempt: an unknown limit means the largest board's, not no ceiling.
    assert problems(steady(1.3 * GENERIC_DEVICE_MAX_W - 1), 1, None) == []
    high = problems(steady(5000.0), 1, None)
    assert len(high) == 1 and "no known power limit" in high[0]


def test_modelled_power_has_no_band_but_still_no_negative_readings() -> None:
    assert window(steady(1.5), scope="sim").valid
    assert not window(steady(-1.0), scope="sim").valid


def test_the_limit_reaches_the_record_through_summarize_window() -> None:
    w = window(steady(1000.0, counter_step_j=1000.0), power_limit_w=700.0)
    assert not w.valid
    assert "(1.3× the power limit of 700 W;" in w.invalid_reasons[0]
