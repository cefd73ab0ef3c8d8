"""``board`` power on NVIDIA GPUs through NVML (the ``nvidia-ml-py`` binding, ``import pynvml``).

Per GPU and per reading:

- energy: ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the driver loaded; Volta and
  newer); a GPU without it (``NVMLError_NotSupported``) makes the window's energy
  ``integrated`` from power samples instead;
- power: the field-value API, ``NVML_FI_DEV_POWER_INSTANT`` (mW). ``nvmlDeviceGetPowerUsage``
  is a one-second running average on recent GPUs, so it is only the fallback, flagged
  ``power_method="average"``;
- SM and memory clocks (``nvmlDeviceGetClockInfo``, MHz), temperature (°C);
- clock-event (throttle) reasons: ``nvmlDeviceGetCurrentClocksEventReasons``, or
  ``nvmlDeviceGetCurrentClocksThrottleReasons`` on drivers that predate the new name.

Device selection (:mod:`tokenwatt.telemetry.gpu_selection`): the GPUs running the launched
engine's processes, else ``CUDA_VISIBLE_DEVICES`` (UUID prefixes, or indices read with
``CUDA_DEVICE_ORDER``), narrowed by the spec's ``hardware.gpus``. MIG is refused: board power
cannot be split between MIG slices.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from tokenwatt.errors import TelemetryError
from tokenwatt.records import PowerMethod, PowerSample, PowerScope
from tokenwatt.telemetry.base import DeviceLostError, HardwareIdentity, ReadError
from tokenwatt.telemetry.board import board_identity, import_binding, merge_reading
from tokenwatt.telemetry.gpu_selection import GpuDevice, Selection, select_gpus

THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x0000000000000001, "gpu_idle"),
    (0x0000000000000002, "applications_clocks_setting"),
    (0x0000000000000004, "sw_power_cap"),
    (0x0000000000000008, "hw_slowdown"),
    (0x0000000000000010, "sync_boost"),
    (0x0000000000000020, "sw_thermal_slowdown"),
    (0x0000000000000040, "hw_thermal_slowdown"),
    (0x0000000000000080, "hw_power_brake_slowdown"),
    (0x0000000000000100, "display_clock_setting"),
)
"""Clock-event reason bits (``nvmlClocksEventReason*`` in nvml.h / nvidia-ml-py) and names."""

_LOST_ERRORS = (
    "NVMLError_GpuIsLost",
    "NVMLError_ResetRequired",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_Uninitialized",
)

# c_nvmlValue_t union member for each NVML_VALUE_TYPE_* (0..6).
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def throttle_names(mask: int) -> frozenset[str]:
    """Names of the clock-event reasons set in an NVML reason bit mask.

    Unknown bits come out as ``other_0x…`` so that nothing is silently dropped.
    """
    names = {name for bit, name in THROTTLE_REASONS if mask & bit}
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    if mask & ~known:
        names.add(f"other_{mask & ~known:#x}")
    return frozenset(names)


def parse_visible_devices(value: str | None) -> list[str] | None:
    """Entries of ``CUDA_VISIBLE_DEVICES``: None when unset; CUDA stops at the first bad one.

    Entries are integer indices or UUIDs (``GPU-…``, ``MIG-…``), possibly abbreviated.
    """
    if value is None:
        return None
    out: list[str] = []
    for raw in value.split(","):
        item = raw.strip()
        if item.isdigit() or item.startswith(("GPU-", "MIG-")):
            out.append(item)
        else:
            break
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlSource:
    """NVIDIA board power through NVML; see the module docstring.

    Args:
        environ: the environment (for ``CUDA_VISIBLE_DEVICES``).
        gpus: positions among the visible GPUs to measure (spec ``hardware.gpus``); None = all.
        nvml: the ``pynvml`` module (tests inject a fake with the same names).
        engine_pids: the launched engine's PIDs; the GPUs running them are measured
            (:mod:`tokenwatt.telemetry.gpu_selection`).

    Raises:
        TelemetryError: NVML missing or not initialising, no GPUs, a bad selection, or MIG.
    """

    name = "nvml"
    scope: PowerScope = "board"
    counter_step_j = 1e-3
    """nvmlDeviceGetTotalEnergyConsumption counts whole millijoules (J per step)."""
    counter_wrap_j = 2.0**64 / 1000.0
    """The counter is an unsigned long long of mJ: it wraps at 2^64 mJ (J)."""

    def __init__(
        self,
        *,
        environ: Mapping[str, str],
        gpus: Sequence[int] | None = None,
        nvml: ModuleType | None = None,
        engine_pids: frozenset[int] | None = None,
    ) -> None:
        if nvml is None:
            nvml = import_binding(
                "pynvml",
                "power.source 'board' on NVIDIA needs NVML's Python binding, nvidia-ml-py: "
                "pip install 'tokenwatt-bench[nvidia]'",
            )
        self.nv = nvml
        self.notes: list[str] = []
        self.selection: Selection | None = None
        self._closed = False
        try:
            self.nv.nvmlInit()
        except self.nv.NVMLError as exc:
            raise TelemetryError(
                f"NVML did not initialise ({exc}); is the NVIDIA driver loaded?"
            ) from exc
        try:
            self._handles, self._ids = self._select(environ, gpus, engine_pids)
            self._check_mig()
            self._has_counter = self._probe_counter()
            self._instant = self._probe_instant()
        except self.nv.NVMLError as exc:
            self.close()
            raise TelemetryError(
                f"NVML failed while opening the GPUs: {type(exc).__name__} ({exc})"
            ) from exc
        except BaseException:
            self.close()
            raise
        self.devices = len(self._handles)
        self.power_method: PowerMethod = "instant" if self._instant else "average"
        if not self._instant:
            self.notes.append(
                "power samples from nvmlDeviceGetPowerUsage (a one-second average on recent "
                "GPUs): NVML_FI_DEV_POWER_INSTANT not supported"
            )
        if not self._has_counter:
            self.notes.append(
                "energy integrated from power samples: nvmlDeviceGetTotalEnergyConsumption "
                "not supported"
            )
        self._event_reasons = True

    # -- setup -------------------------------------------------------------------------
    def _select(
        self,
        environ: Mapping[str, str],
        gpus: Sequence[int] | None,
        engine_pids: frozenset[int] | None,
    ) -> tuple[list[Any], list[str]]:
        nv = self.nv
        found: list[GpuDevice] = []
        for i in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            found.append(
                GpuDevice(
                    uuid=_text(nv.nvmlDeviceGetUUID(handle)),
                    name=_text(nv.nvmlDeviceGetName(handle)),
                    bus_id=_text(nv.nvmlDeviceGetPciInfo(handle).busId).lower(),
                    handle=handle,
                    pids=self._compute_pids(handle) if engine_pids else frozenset(),
                )
            )
        found.sort(key=lambda d: d.bus_id)
        self.selection = select_gpus(
            found,
            visible=parse_visible_devices(environ.get("CUDA_VISIBLE_DEVICES")),
            visible_var="CUDA_VISIBLE_DEVICES",
            environ=environ,
            gpus=gpus,
            engine_pids=engine_pids,
        )
        self.notes.extend(self.selection.notes)
        chosen = self.selection.devices
        return [d.handle for d in chosen], [d.uuid for d in chosen]

    def _compute_pids(self, handle: Any) -> frozenset[int]:
        """PIDs of a GPU's compute processes (``nvmlDeviceGetComputeRunningProcesses``)."""
        try:
            return frozenset(
                int(p.pid) for p in self.nv.nvmlDeviceGetComputeRunningProcesses(handle)
            )
        except self.nv.NVMLError:
            return frozenset()

    def _check_mig(self) -> None:
        nv = self.nv
        for handle, uuid in zip(self._handles, self._ids, strict=True):
            try:
                current = nv.nvmlDeviceGetMigMode(handle)[0]
            except nv.NVMLError:
                continue  # NotSupported: a GPU without MIG
            if current == nv.NVML_DEVICE_MIG_ENABLE:
                raise TelemetryError(
                    f"GPU {uuid} has MIG enabled: board power covers every MIG slice, so it "
                    "cannot be attributed to this benchmark; disable MIG "
                    "(nvidia-smi -mig 0) or use a node-level power source"
                )

    def _probe_counter(self) -> bool:
        nv = self.nv
        try:
            for handle in self._handles:
                nv.nvmlDeviceGetTotalEnergyConsumption(handle)
        except nv.NVMLError_NotSupported:
            return False
        return True

    def _probe_instant(self) -> bool:
        nv = self.nv
        try:
            for handle in self._handles:
                self._instant_mw(handle)
        except (nv.NVMLError, _FieldUnsupportedError):
            return False
        return True

    # -- reading -----------------------------------------------------------------------
    def _instant_mw(self, handle: Any) -> float:
        nv = self.nv
        field = nv.nvmlDeviceGetFieldValues(handle, [nv.NVML_FI_DEV_POWER_INSTANT])[0]
        if field.nvmlReturn != nv.NVML_SUCCESS:
            raise _FieldUnsupportedError(field.nvmlReturn)
        member = _VALUE_MEMBERS[field.valueType]
        return float(getattr(field.value, member))

    def _reasons(self, handle: Any) -> int:
        nv = self.nv
        if self._event_reasons:
            try:
                return int(nv.nvmlDeviceGetCurrentClocksEventReasons(handle))
            except (AttributeError, nv.NVMLError_FunctionNotFound):
                self._event_reasons = False  # driver or binding older than the new name
        return int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))

    def _lost(self, exc: Exception) -> bool:
        return any(
            isinstance(exc, cls)
            for cls in (getattr(self.nv, n, None) for n in _LOST_ERRORS)
            if isinstance(cls, type)
        )

    def _optional(self, call: Any, handle: Any, uuid: str) -> Any:
        """``call(handle)``, or None on an NVML error other than a lost device."""
        try:
            return call(handle)
        except self.nv.NVMLError as exc:
            if self._lost(exc):
                raise DeviceLostError(f"{uuid}: {type(exc).__name__} ({exc})") from exc
            return None

    def read(self) -> PowerSample:
        """Read every selected GPU once and merge (sum power, mean clocks, max temperature).

        Raises:
            DeviceLostError: a GPU fell off the bus or the driver went away.
            ReadError: another NVML error while reading power.
        """
        nv = self.nv
        total_mw = 0.0
        counters: dict[str, float] = {}
        sm: list[float] = []
        mem: list[float] = []
        temps: list[float] = []
        reasons: set[str] = set()
        for handle, uuid in zip(self._handles, self._ids, strict=True):
            try:
                if self._instant:
                    total_mw += self._instant_mw(handle)
                else:
                    total_mw += float(nv.nvmlDeviceGetPowerUsage(handle))
                if self._has_counter:
                    counters[uuid] = nv.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0
            except _FieldUnsupportedError as exc:
                raise ReadError(f"{uuid}: power field returned NVML status {exc}") from exc
            except nv.NVMLError as exc:
                if self._lost(exc):
                    raise DeviceLostError(f"{uuid}: {type(exc).__name__} ({exc})") from exc
                raise ReadError(f"{uuid}: {type(exc).__name__} ({exc})") from exc
            # Clocks, temperature and reasons are optional: one that a GPU does not support
            # is left out of the means, without costing the power sample.
            for out, call in (
                (sm, lambda h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                (mem, lambda h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                (temps, lambda h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            ):
                value = self._optional(call, handle, uuid)
                if value is not None:
                    out.append(float(value))
            mask = self._optional(self._reasons, handle, uuid)
            if mask is not None:
                reasons |= throttle_names(int(mask))
        return merge_reading(
            power_w=total_mw / 1000.0,
            counters_j=counters if self._has_counter else None,
            sm_clock_mhz=sm,
            mem_clock_mhz=mem,
            temperature_c=temps,
            throttle=reasons,
        )

    def identity(self) -> HardwareIdentity:
        """Name, count, driver and memory of the selected GPUs; bandwidth from the table."""
        nv = self.nv
        try:
            driver: str | None = _text(nv.nvmlSystemGetDriverVersion())
        except nv.NVMLError:
            driver = None
        try:
            memory: int | None = int(nv.nvmlDeviceGetMemoryInfo(self._handles[0]).total)
        except nv.NVMLError:
            memory = None
        try:
            # nvmlDeviceGetEnforcedPowerLimit: the limit in force, in mW.
            limit: float | None = sum(
                nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0 for h in self._handles
            )
        except nv.NVMLError:
            limit = None
        return board_identity(
            vendor="NVIDIA",
            names=(_text(nv.nvmlDeviceGetName(h)) for h in self._handles),
            device_ids=self._ids,
            driver=driver,
            memory_bytes_per_gpu=memory,
            power_limit_w=limit,
        )

    def close(self) -> None:
        """Shut NVML down (once)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(self.nv.NVMLError):
            self.nv.nvmlShutdown()


class _FieldUnsupportedError(Exception):
    """A field value came back with a non-success ``nvmlReturn``."""
