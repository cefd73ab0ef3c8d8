"""The counter against the samples, resolution and bands, on synthetic traces."""

from __future__ import annotations

import pytest

from tokenwatt.analysis.power.power import summarise_power_window
from tokenwatt.analysis.power.power_agreement import TOLERANCE_BOARD, TOLERANCE_OTHER
from tokenwatt.analysis.power.power_band import (
    NODE_FLOOR_W,
    Resolution,
    plausible_band,
)
from tokenwatt.records.run.power import PowerSample


def trace(sample_w: float, counter_w: float, seconds: int = 30) -> list[PowerSample]:
    """1 Hz readings of ``sample_w`` whose one counter advances at ``counter_w``."""
    return [
        PowerSample(
            t_s=float(k), power_w=sample_w, counters_j={"gpu0": 1e6 + counter_w * k}, counted=k > 0
        )
        for k in range(seconds + 1)
    ]


@pytest.mark.parametrize(
    ("source", "tol"), [("nvml", TOLERANCE_BOARD), ("redfish", TOLERANCE_OTHER)]
)
def test_agreement_is_judged_by_the_sources_tolerance(source: str, tol: float) -> None:
    # 500 W samples; a counter just inside and just outside tolerance (+2 W slack).
    inside = 500.0 / (1 - tol) - 1.0
    outside = 500.0 / (1 - tol) + 4.0
    scope = "board" if source == "nvml" else "node"
    ok = summarise_power_window(trace(500.0, inside), duration_s=30, source=source, scope=scope)
    bad = summarise_power_window(trace(500.0, outside), duration_s=30, source=source, scope=scope)
    assert ok.valid, ok.invalid_reasons
    assert not bad.valid
    assert bad.invalid_reasons[0].startswith(f"energy counter says {outside:.1f} W")
    assert f"{source} tolerance {100 * tol:g}%" in bad.invalid_reasons[0]


def test_a_counter_below_the_samples_is_a_disagreement_too() -> None:
    w = summarise_power_window(trace(500.0, 300.0), duration_s=30, source="nvml", scope="board")
    assert not w.valid and "0.60×" in w.invalid_reasons[0]
    assert "GH200" not in w.invalid_reasons[0]  # the superchip hint is for a counter above


def test_a_window_too_short_to_compare_gets_a_note_not_a_verdict() -> None:
    w = summarise_power_window(trace(500.0, 900.0, seconds=3), duration_s=3, source="nvml",
                               scope="board")  # fmt: skip
    assert w.valid
    assert any("not cross-checked" in n for n in w.notes)


def test_a_reading_interval_too_long_for_an_integrated_window() -> None:
    samples = [PowerSample(t_s=float(k), power_w=400.0, counted=k > 0) for k in range(11)]
    w = summarise_power_window(
        samples, duration_s=10, source="ipmi", scope="node",
        resolution=Resolution(reading_interval_s=5.0),
    )  # fmt: skip
    assert not w.valid
    assert w.invalid_reasons == [
        "power reading refreshed every 5 s, 50% of the 10 s window (at most 2%): the window "
        "needs at least 250 s"
    ]


def test_a_fine_counter_step_passes() -> None:
    w = summarise_power_window(
        trace(500.0, 500.0), duration_s=30, source="nvml", scope="board",
        resolution=Resolution(counter_step_j=1e-3),
    )  # fmt: skip
    assert w.valid


def test_node_band_from_the_accelerators_limits_and_a_host_allowance() -> None:
    band = plausible_band("node", devices=8, power_limit_w=8 * 700.0)
    assert band is not None
    # 1.3 × 5,600 W + max(2,000, 0.8 × 5,600) W; an 8× H100 HGX node is rated 10.2 kW.
    assert band.ceiling_w == pytest.approx(1.3 * 5600 + 4480)
    assert band.floor_w == NODE_FLOOR_W
    assert plausible_band("sim", devices=1, power_limit_w=None) is None


def test_an_ipmi_node_reading_in_milliwatts_is_named() -> None:
    samples = [PowerSample(t_s=float(k), power_w=3_200_000.0, counted=k > 0) for k in range(11)]
    w = summarise_power_window(
        samples, duration_s=10, source="ipmi", scope="node", accelerators=8,
        power_limit_w=5600.0,
    )  # fmt: skip
    assert not w.valid
    assert "likely milliwatts read as watts: 3200.0 W if mW" in w.invalid_reasons[0]


def test_the_disagreement_reaches_the_terminal_with_both_figures() -> None:
    from tests.runs_factory import make_run
    from tokenwatt.analysis import power_warnings

    run = make_run(powers_w=(640.0, 900.0))
    refused = summarise_power_window(
        trace(900.0, 1200.0), duration_s=30, source="nvml", scope="board"
    )
    run.repeats[1].power = refused
    [line] = [n for n in power_warnings(run) if "invalid in" in n]
    assert "invalid in 1 of 2 repeats" in line
    assert "energy counter says 1200.0 W" in line and "integrate to 900.0 W" in line
