"""The ``none`` power source: no readings; every window says that power was not measured."""

from __future__ import annotations

from tokenwatt.records import PowerMethod, PowerSample, PowerScope
from tokenwatt.telemetry.base import HardwareIdentity, ReadError


class NullSource:
    """Reads nothing: windows come back invalid with "no power samples in the window"."""

    name = "none"
    scope: PowerScope = "board"
    power_method: PowerMethod = "reading"
    devices = 0

    def __init__(self) -> None:
        self.notes: list[str] = ["power.source is none: power was not measured"]

    def identity(self) -> HardwareIdentity:
        """Nothing is known about the hardware."""
        return HardwareIdentity(vendor="unknown", accelerator="unknown", count=0)

    def read(self) -> PowerSample:
        """Always fails: there is nothing to read.

        Raises:
            ReadError: always.
        """
        raise ReadError("no power source configured")

    def close(self) -> None:
        """Nothing to release."""
