"""A fake ``pynvml`` module: the names, constants, structures and error classes of the real
nvidia-ml-py, driven by scripted GPUs instead of a driver.

Constants, ``NVMLError`` and its generated subclasses (``NVMLError_NotSupported``,
``NVMLError_GpuIsLost`` …) and the ctypes structures are taken from the installed real
module, so the adapter under test sees exactly the classes it would see on a GPU box;
``test_fake_matches_real_nvml`` checks that every function here exists in the real binding
with the same parameters.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pynvml as real


def nvml_error(code: int) -> Exception:
    """The real binding's error for an NVML status code (e.g. NVMLError_GpuIsLost)."""
    return real.NVMLError(code)


@dataclass(frozen=True)
class SineTrace:
    """Power ``mean + amp·sin(2πt/period)`` (W) with its exact integral (J)."""

    mean_w: float = 600.0
    amp_w: float = 0.0
    period_s: float = 30.0

    def power_w(self, t: float) -> float:
        """Power at time t (W)."""
        return self.mean_w + self.amp_w * math.sin(2 * math.pi * t / self.period_s)

    def energy_j(self, a: float, b: float) -> float:
        """Exact energy between times a and b (J)."""
        w = 2 * math.pi / self.period_s
        return self.mean_w * (b - a) - self.amp_w / w * (math.cos(w * b) - math.cos(w * a))


@dataclass
class FakeGpu:
    """One scripted GPU whose true power follows ``trace`` over the fake clock's time (s).

    The energy counter is the trace's exact integral plus ``counter_offset_mj``;
    ``counter_reset_at`` makes it restart from zero at that time (a driver reload); the
    value wraps at ``counter_wrap_mj`` (NVML's counter is an unsigned 64-bit mJ count);
    ``counter_extra_w`` is power the counter counts but the power reading does not (the
    module counter of a GH200/GB200 superchip, which includes the CPU and its memory).
    """

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:18:00.0"
    trace: SineTrace = field(default_factory=SineTrace)
    energy_supported: bool = True
    instant_supported: bool = True
    mig_enabled: bool = False
    mig_supported: bool = True
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 2619
    temperature_c: int = 60
    reasons: Callable[[float], int] = lambda t: 0
    counter_offset_mj: float = 5.0e9
    counter_reset_at: float | None = None
    counter_wrap_mj: int = 2**64
    counter_extra_w: float = 0.0
    processes: tuple[int, ...] = ()
    """PIDs of the compute processes running on the GPU (its CUDA contexts)."""
    lost_at: float | None = None
    event_reasons_supported: bool = True
    memory_total: int = 85_520_809_984
    power_limit_w: float = 700.0
    reads: int = field(default=0)

    def power_w(self, t: float) -> float:
        """True power at time t (W)."""
        return self.trace.power_w(t)

    def energy_mj(self, t: float, t_origin: float) -> int:
        """Counter value (mJ) at time t, an integer modulo ``counter_wrap_mj``."""
        if self.counter_reset_at is not None and t >= self.counter_reset_at:
            return int(1000.0 * self._energy_j(self.counter_reset_at, t))
        return (
            int(self.counter_offset_mj) + int(1000.0 * self._energy_j(t_origin, t))
        ) % self.counter_wrap_mj

    def _energy_j(self, a: float, b: float) -> float:
        return self.trace.energy_j(a, b) + self.counter_extra_w * (b - a)


class FakeNvml:
    """The state behind one fake module: GPUs, a clock, and a driver version."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        now: Callable[[], float],
        driver: str = "580.105.08",
    ) -> None:
        self.gpus = gpus
        self.now = now
        self.t_origin = now()
        self.driver = driver
        self.initialised = 0
        self.module = self._build()

    def _gpu(self, handle: Any) -> FakeGpu:
        gpu = self.gpus[handle.index]
        t = self.now()
        if gpu.lost_at is not None and t >= gpu.lost_at:
            raise nvml_error(real.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def _build(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml")
        for name in dir(real):
            if name.startswith(("NVML_", "NVMLError", "nvmlClocks", "c_nvml", "nvmlPciInfo")):
                setattr(mod, name, getattr(real, name))
        state = self

        def nvmlInit() -> None:
            state.initialised += 1

        def nvmlShutdown() -> None:
            state.initialised -= 1

        def nvmlSystemGetDriverVersion() -> str:
            return state.driver

        def nvmlDeviceGetCount() -> int:
            return len(state.gpus)

        def nvmlDeviceGetHandleByIndex(index: int) -> Any:
            if index >= len(state.gpus):
                raise nvml_error(real.NVML_ERROR_INVALID_ARGUMENT)
            return types.SimpleNamespace(index=index)

        def nvmlDeviceGetName(handle: Any) -> str:
            return state._gpu(handle).name

        def nvmlDeviceGetUUID(handle: Any) -> str:
            return state._gpu(handle).uuid

        def nvmlDeviceGetPciInfo(handle: Any) -> Any:
            info = real.nvmlPciInfo_t()
            info.busId = state._gpu(handle).bus_id.encode()
            return info

        def nvmlDeviceGetMemoryInfo(handle: Any, version: Any = None) -> Any:
            return types.SimpleNamespace(total=state._gpu(handle).memory_total)

        def nvmlDeviceGetEnforcedPowerLimit(handle: Any) -> int:
            return round(state._gpu(handle).power_limit_w * 1000)

        def nvmlDeviceGetMigMode(device: Any) -> list[int]:
            gpu = state._gpu(device)
            if not gpu.mig_supported:
                raise nvml_error(real.NVML_ERROR_NOT_SUPPORTED)
            mode = real.NVML_DEVICE_MIG_ENABLE if gpu.mig_enabled else real.NVML_DEVICE_MIG_DISABLE
            return [mode, mode]

        def nvmlDeviceGetTotalEnergyConsumption(handle: Any) -> int:
            gpu = state._gpu(handle)
            if not gpu.energy_supported:
                raise nvml_error(real.NVML_ERROR_NOT_SUPPORTED)
            return gpu.energy_mj(state.now(), state.t_origin)

        def nvmlDeviceGetFieldValues(handle: Any, fieldIds: list[Any]) -> Any:  # noqa: N803
            gpu = state._gpu(handle)
            gpu.reads += 1
            values = (real.c_nvmlFieldValue_t * len(fieldIds))()
            for i, fid in enumerate(fieldIds):
                values[i].fieldId = fid
                if fid == real.NVML_FI_DEV_POWER_INSTANT and gpu.instant_supported:
                    values[i].nvmlReturn = real.NVML_SUCCESS
                    values[i].valueType = real.NVML_VALUE_TYPE_UNSIGNED_INT
                    values[i].value.uiVal = round(gpu.power_w(state.now()) * 1000)
                else:
                    values[i].nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED
            return values

        def nvmlDeviceGetPowerUsage(handle: Any) -> int:
            # The real call is a one-second running average; the fake averages 1 s back.
            gpu = state._gpu(handle)
            t = state.now()
            avg = sum(gpu.power_w(t - k / 10) for k in range(10)) / 10
            return round(avg * 1000)

        def nvmlDeviceGetClockInfo(handle: Any, type: int) -> int:
            gpu = state._gpu(handle)
            return gpu.sm_clock_mhz if type == real.NVML_CLOCK_SM else gpu.mem_clock_mhz

        def nvmlDeviceGetTemperature(handle: Any, sensor: int) -> int:
            return state._gpu(handle).temperature_c

        def nvmlDeviceGetCurrentClocksEventReasons(handle: Any) -> int:
            gpu = state._gpu(handle)
            if not gpu.event_reasons_supported:
                raise nvml_error(real.NVML_ERROR_FUNCTION_NOT_FOUND)
            return gpu.reasons(state.now())

        def nvmlDeviceGetComputeRunningProcesses(handle: Any) -> list[Any]:
            gpu = state._gpu(handle)
            return [types.SimpleNamespace(pid=pid, usedGpuMemory=0) for pid in gpu.processes]

        def nvmlDeviceGetCurrentClocksThrottleReasons(handle: Any) -> int:
            gpu = state._gpu(handle)
            return gpu.reasons(state.now())

        for fn in (
            nvmlInit,
            nvmlShutdown,
            nvmlSystemGetDriverVersion,
            nvmlDeviceGetCount,
            nvmlDeviceGetHandleByIndex,
            nvmlDeviceGetName,
            nvmlDeviceGetUUID,
            nvmlDeviceGetPciInfo,
            nvmlDeviceGetMemoryInfo,
            nvmlDeviceGetMigMode,
            nvmlDeviceGetEnforcedPowerLimit,
            nvmlDeviceGetTotalEnergyConsumption,
            nvmlDeviceGetFieldValues,
            nvmlDeviceGetPowerUsage,
            nvmlDeviceGetClockInfo,
            nvmlDeviceGetTemperature,
            nvmlDeviceGetCurrentClocksEventReasons,
            nvmlDeviceGetCurrentClocksThrottleReasons,
            nvmlDeviceGetComputeRunningProcesses,
        ):
            setattr(mod, fn.__name__, fn)
        mod.FAKE_FUNCTIONS = [  # type: ignore[attr-defined]
            n
            for n in vars(mod)
            if n.startswith("nvml")
            and callable(getattr(mod, n))
            and not n.startswith(("nvmlClocks", "nvmlPciInfo"))
        ]
        return mod
