"""What the two board-power sources (NVML, AMD SMI) share: merging per-GPU figures.

Each source reads its GPUs one by one in its own library's terms; these helpers turn the
per-GPU lists into one :class:`~tokenwatt.telemetry.base.Reading` and one
:class:`~tokenwatt.telemetry.base.HardwareIdentity` the same way for both vendors.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType

from tokenwatt.errors import TelemetryError
from tokenwatt.records import PowerSample
from tokenwatt.telemetry.base import HardwareIdentity
from tokenwatt.telemetry.hardware import lookup_accelerator


def import_binding(module: str, missing: str) -> ModuleType:
    """Import a vendor library by name (``pynvml``, ``amdsmi``).

    Raises:
        TelemetryError: the module is not installed; ``missing`` is the message.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise TelemetryError(missing) from exc


def merge_reading(
    *,
    power_w: float,
    counters_j: Mapping[str, float] | None,
    sm_clock_mhz: Sequence[float],
    mem_clock_mhz: Sequence[float],
    temperature_c: Sequence[float],
    throttle: Iterable[str],
) -> PowerSample:
    """One reading from per-GPU figures: power summed (W, by the caller), clocks averaged
    (MHz, over the GPUs that reported one), the hottest temperature (°C), reasons united.

    ``counters_j`` is the energy counter per device id (J), or None without counters.
    """
    return PowerSample(
        power_w=power_w,
        counters_j=counters_j,
        sm_clock_mhz=sum(sm_clock_mhz) / len(sm_clock_mhz) if sm_clock_mhz else None,
        mem_clock_mhz=sum(mem_clock_mhz) / len(mem_clock_mhz) if mem_clock_mhz else None,
        temperature_c=max(temperature_c) if temperature_c else None,
        throttle=frozenset(throttle),
    )


def board_identity(
    *,
    vendor: str,
    names: Iterable[str],
    device_ids: Sequence[str],
    driver: str | None,
    memory_bytes_per_gpu: int | None,
    power_limit_w: float | None = None,
) -> HardwareIdentity:
    """The identity of the selected GPUs; rated bandwidth (TB/s) from the hardware table.

    Mixed models are named ``A + B`` and match no table row (no single rated bandwidth).
    """
    distinct = sorted(set(names))
    name = distinct[0] if len(distinct) == 1 else " + ".join(distinct)
    row = lookup_accelerator(name) if len(distinct) == 1 else None
    return HardwareIdentity(
        vendor=vendor,
        accelerator=name,
        count=len(device_ids),
        driver=driver,
        rated_bw_tbs_per_gpu=row.rated_bw_tbs if row else None,
        rated_bw_source=row.source if row else None,
        memory_bytes_per_gpu=memory_bytes_per_gpu,
        table_key=row.key if row else None,
        device_ids=tuple(device_ids),
        power_limit_w=power_limit_w,
    )
