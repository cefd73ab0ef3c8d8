"""Stage package: power and clock sources, sampled during measurement windows.

The collector calls :func:`open_meter` with the spec, then per window
:meth:`PowerMeter.start_window` / :meth:`PowerMeter.stop_window` (a
:class:`tokenwatt.records.run.power.PowerWindow`), and :meth:`PowerMeter.identity` once for the
hardware (name, count, driver, rated memory bandwidth). Heavy imports (NVML, AMD SMI, httpx)
happen only when the chosen source is opened.
"""

from tokenwatt.telemetry.base import (
    DeviceLostError,
    HardwareIdentity,
    PowerSource,
    ReadError,
    WindowSeriesSource,
)
from tokenwatt.telemetry.clock import Clock, ManualClock, SystemClock
from tokenwatt.telemetry.factory import detect_board, open_meter
from tokenwatt.telemetry.hardware import HardwareRow, hardware_table, lookup_accelerator
from tokenwatt.telemetry.meter import PowerMeter

__all__ = [
    "Clock",
    "DeviceLostError",
    "HardwareIdentity",
    "HardwareRow",
    "ManualClock",
    "PowerMeter",
    "PowerSource",
    "ReadError",
    "Reading",
    "SystemClock",
    "WindowSeriesSource",
    "detect_board",
    "hardware_table",
    "lookup_accelerator",
    "open_meter",
]
