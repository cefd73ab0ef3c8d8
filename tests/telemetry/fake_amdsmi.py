"""A fake ``amdsmi`` module with the real binding's function names, enums, result keys and
exception classes (``AmdSmiException``, ``AmdSmiLibraryException`` with ``err_code``), from
ROCm/amdsmi ``py-interface/amdsmi_interface.py`` and ``amdsmi_exception.py``. The real
package needs ROCm's shared library, so it cannot be imported here; enum values are the
fake's own, the adapter only uses the names.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from tests.telemetry.fake_nvml import SineTrace


class AmdSmiRetCode(IntEnum):
    SUCCESS = 0
    ERR_INVAL = 1
    ERR_NOT_SUPPORTED = 2
    DRM_ERROR = 6
    ERR_NOT_FOUND = 31
    NOT_INIT = 32


class AmdSmiException(Exception):  # noqa: N818 - the real binding's name
    """Base exception of amdsmi."""


class AmdSmiLibraryException(AmdSmiException):
    """An error from the library, with ``err_code`` (as in amdsmi_exception.py)."""

    def __init__(self, err_code: int) -> None:
        super().__init__(err_code)
        self.err_code = abs(err_code)
        self.err_info = AmdSmiRetCode(self.err_code).name

    def __str__(self) -> str:
        return f"An error occured with code: {self.err_code}({self.err_info})"


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 1
    MEM = 5


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    VRAM = 3


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0


@dataclass
class FakeAmdGpu:
    """One scripted Instinct GPU; the energy accumulator counts ticks of ``resolution_uj``."""

    bdf: str = "0000:0c:00.0"
    market_name: str = "AMD Instinct MI300X"
    trace: SineTrace = field(default_factory=lambda: SineTrace(700.0))
    resolution_uj: float = 15.259
    energy_supported: bool = True
    old_energy_key: bool = False
    power_key: str = "current_socket_power"
    ppt_active: Callable[[float], bool] = lambda t: False
    lost_at: float | None = None
    compute_partition: str = "SPX"
    uuid: str = ""
    """Its UUID; empty: one made from the BDF."""
    processes: tuple[int, ...] = ()


class FakeAmdSmi:
    """State behind one fake ``amdsmi`` module."""

    def __init__(self, gpus: list[FakeAmdGpu], now: Callable[[], float]) -> None:
        self.gpus = gpus
        self.now = now
        self.initialised = 0
        self.module = self._build()

    def _gpu(self, handle: Any) -> FakeAmdGpu:
        gpu = self.gpus[handle.index]
        if gpu.lost_at is not None and self.now() >= gpu.lost_at:
            raise AmdSmiLibraryException(AmdSmiRetCode.ERR_NOT_FOUND)
        return gpu

    def _build(self) -> types.ModuleType:
        mod = types.ModuleType("amdsmi")
        for cls in (
            AmdSmiRetCode,
            AmdSmiException,
            AmdSmiLibraryException,
            AmdSmiClkType,
            AmdSmiTemperatureType,
            AmdSmiTemperatureMetric,
        ):
            setattr(mod, cls.__name__, cls)
        st = self

        def amdsmi_init(flag: int = 0) -> None:
            st.initialised += 1

        def amdsmi_shut_down() -> None:
            st.initialised -= 1

        def amdsmi_get_processor_handles() -> list[Any]:
            return [types.SimpleNamespace(index=i) for i in range(len(st.gpus))]

        def amdsmi_get_gpu_device_bdf(processor_handle: Any) -> str:
            return st._gpu(processor_handle).bdf

        def amdsmi_get_gpu_device_uuid(processor_handle: Any) -> str:
            gpu = st._gpu(processor_handle)
            return gpu.uuid or "GPU-" + gpu.bdf.replace(":", "").replace(".", "")

        def amdsmi_get_gpu_process_list(processor_handle: Any) -> list[dict[str, Any]]:
            return [{"name": "python3", "pid": p} for p in st._gpu(processor_handle).processes]

        def amdsmi_get_gpu_asic_info(processor_handle: Any) -> dict[str, Any]:
            return {"market_name": st._gpu(processor_handle).market_name, "vendor_id": "0x1002"}

        def amdsmi_get_gpu_driver_info(processor_handle: Any) -> dict[str, Any]:
            return {"driver_name": "amdgpu", "driver_version": "6.12.12", "driver_date": "N/A"}

        def amdsmi_get_gpu_vram_usage(processor_handle: Any) -> dict[str, Any]:
            return {"vram_total": 196592, "vram_used": 1024}

        def amdsmi_get_power_info(processor_handle: Any, sensor_ind: int = 0) -> dict[str, Any]:
            gpu = st._gpu(processor_handle)
            info: dict[str, Any] = {
                "current_socket_power": "N/A",
                "average_socket_power": "N/A",
                "gfx_voltage": "N/A",
                "soc_voltage": "N/A",
                "mem_voltage": "N/A",
                "power_limit": 750,
            }
            info[gpu.power_key] = round(gpu.trace.power_w(st.now()))
            return info

        def amdsmi_get_energy_count(processor_handle: Any) -> dict[str, Any]:
            gpu = st._gpu(processor_handle)
            if not gpu.energy_supported:
                raise AmdSmiLibraryException(AmdSmiRetCode.ERR_NOT_SUPPORTED)
            ticks = int(gpu.trace.energy_j(0, st.now()) * 1e6 / gpu.resolution_uj) + 10**9
            key = "power" if gpu.old_energy_key else "energy_accumulator"
            return {key: ticks, "counter_resolution": gpu.resolution_uj, "timestamp": 0}

        def amdsmi_get_clock_info(processor_handle: Any, clock_type: Any) -> dict[str, Any]:
            st._gpu(processor_handle)
            clk = 2100 if clock_type == AmdSmiClkType.GFX else 1300
            return {"clk": clk, "min_clk": 500, "max_clk": 2100, "clk_locked": False}

        def amdsmi_get_temp_metric(processor_handle: Any, sensor_type: Any, metric: Any) -> int:
            st._gpu(processor_handle)
            return 71 if sensor_type == AmdSmiTemperatureType.HOTSPOT else 50

        def amdsmi_get_violation_status(processor_handle: Any) -> dict[str, Any]:
            gpu = st._gpu(processor_handle)
            return {
                "reference_timestamp": 0,
                "violation_timestamp": 0,
                "acc_ppt_pwr": 0,
                "active_prochot_thrm": False,
                "active_ppt_pwr": gpu.ppt_active(st.now()),
                "active_socket_thrm": False,
                "active_vr_thrm": "N/A",
                "active_hbm_thrm": False,
                "active_gfx_clk_below_host_limit": "N/A",
            }

        def amdsmi_get_gpu_compute_partition(processor_handle: Any) -> str:
            return st._gpu(processor_handle).compute_partition

        for fn in (
            amdsmi_get_gpu_compute_partition,
            amdsmi_init,
            amdsmi_shut_down,
            amdsmi_get_processor_handles,
            amdsmi_get_gpu_device_bdf,
            amdsmi_get_gpu_asic_info,
            amdsmi_get_gpu_driver_info,
            amdsmi_get_gpu_vram_usage,
            amdsmi_get_power_info,
            amdsmi_get_energy_count,
            amdsmi_get_gpu_device_uuid,
            amdsmi_get_gpu_process_list,
            amdsmi_get_clock_info,
            amdsmi_get_temp_metric,
            amdsmi_get_violation_status,
        ):
            setattr(mod, fn.__name__, fn)
        return mod
