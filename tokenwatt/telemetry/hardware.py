"""The hardware table: rated memory bandwidth per accelerator, with a source per row.

The table is package data (``hardware.yaml`` beside this module). Names are matched as the
drivers report them: ``"NVIDIA H100 80GB HBM3"`` (NVML) is the H100 SXM5, 3.35 TB/s — the
``hardware.rated_bw_tbs_per_gpu`` of the seed record.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError

from tokenwatt.errors import TelemetryError


class HardwareRow(BaseModel):
    """One accelerator: its rated memory bandwidth (TB/s) and where that figure comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(min_length=1)
    vendor: str
    name: str
    match: tuple[str, ...] = Field(min_length=1)
    rated_bw_tbs: PositiveFloat
    memory_gb: PositiveFloat | None = None
    source: str = Field(min_length=1)

    def matches(self, reported_name: str) -> bool:
        """Whether a driver-reported name is this accelerator (case-insensitive regex)."""
        return any(re.search(p, reported_name, re.IGNORECASE) for p in self.match)


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: int = Field(alias="schema")
    accelerators: list[HardwareRow]


@cache
def hardware_table() -> tuple[HardwareRow, ...]:
    """All rows of the shipped table, in match order.

    Raises:
        TelemetryError: the shipped file is malformed (a packaging bug).
    """
    text = resources.files("tokenwatt.telemetry").joinpath("hardware.yaml").read_text("utf-8")
    try:
        table = _Table.model_validate(yaml.safe_load(text))
    except (ValidationError, yaml.YAMLError) as exc:
        raise TelemetryError(f"tokenwatt/telemetry/hardware.yaml is malformed: {exc}") from exc
    keys = [row.key for row in table.accelerators]
    if len(keys) != len(set(keys)):
        raise TelemetryError("tokenwatt/telemetry/hardware.yaml repeats a key")
    return tuple(table.accelerators)


def lookup_accelerator(reported_name: str) -> HardwareRow | None:
    """The first table row whose patterns match the driver-reported name, or None."""
    for row in hardware_table():
        if row.matches(reported_name):
            return row
    return None
