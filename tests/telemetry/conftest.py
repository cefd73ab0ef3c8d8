"""Shared helpers for the telemetry tests: a manual clock and a window runner."""

from __future__ import annotations

import pytest

from tokenwatt.records.run.power import PowerWindow
from tokenwatt.telemetry import ManualClock, PowerMeter


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when the test advances it (no real sleeping)."""
    return ManualClock(start=0.0)


def run_window(meter: PowerMeter, clock: ManualClock, seconds: float) -> PowerWindow:
    """Open a window, let ``seconds`` of manual time pass, close it."""
    meter.start_window()
    if meter._thread is not None:  # a lost device at the baseline starts no thread
        clock.wait_for_waiter()
    clock.advance(seconds)
    return meter.stop_window()
