"""``board`` power on AMD Instinct GPUs through AMD SMI's Python binding (``import amdsmi``).

Per GPU and per reading:

- energy: ``amdsmi_get_energy_count`` — an accumulator times ``counter_resolution``
  (µJ per tick; the key is ``energy_accumulator`` in current amdsmi, ``power`` in older
  releases); unsupported (e.g. in a VM guest) → energy integrated from power samples;
- power: ``amdsmi_get_power_info`` — ``current_socket_power`` (instantaneous, MI300 and
  newer) or ``socket_power``; ``average_socket_power`` is the fallback, flagged ``average``;
- violation status (``amdsmi_get_violation_status``): the ``active_*`` flags become throttle
  reasons ``ppt_power`` (package power tracking — the power cap), ``socket_thermal``,
  ``prochot_thermal``, ``vr_thermal``, ``hbm_thermal`` and ``gfx_clk_below_host_limit``;
- GFX and memory clocks (``amdsmi_get_clock_info``, MHz), hotspot temperature (°C).

Devices are taken in PCI (BDF) order and filtered by ``HIP_VISIBLE_DEVICES`` or
``ROCR_VISIBLE_DEVICES`` (indices) when set.
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

VIOLATION_REASONS: tuple[tuple[str, str], ...] = (
    ("active_ppt_pwr", "ppt_power"),
    ("active_socket_thrm", "socket_thermal"),
    ("active_prochot_thrm", "prochot_thermal"),
    ("active_vr_thrm", "vr_thermal"),
    ("active_hbm_thrm", "hbm_thermal"),
    ("active_gfx_clk_below_host_limit", "gfx_clk_below_host_limit"),
)
"""``amdsmi_get_violation_status`` flags and the throttle-reason names they become."""

_NA = "N/A"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None or value == _NA:
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def violation_names(status: Mapping[str, Any]) -> frozenset[str]:
    """Throttle-reason names of the active flags in a violation-status dict (``N/A`` = unset)."""
    return frozenset(name for key, name in VIOLATION_REASONS if status.get(key) is True)


class AmdSmiSource:
    """AMD board (socket) power through amdsmi; see the module docstring.

    Args:
        environ: the environment (``HIP_VISIBLE_DEVICES`` / ``ROCR_VISIBLE_DEVICES``).
        gpus: positions among the visible GPUs (spec ``hardware.gpus``); None = all.
        amdsmi: the ``amdsmi`` module (tests inject a fake with the same names).
        engine_pids: the launched engine's PIDs; the GPUs running them are measured
            (:mod:`tokenwatt.telemetry.gpu_selection`).

    Raises:
        TelemetryError: amdsmi missing or failing to initialise, or no GPU selected.
    """

    name = "amdsmi"
    scope: PowerScope = "board"
    counter_step_j: float | None = None
    """The energy counter's step (J): the coarsest ``counter_resolution`` seen (µJ → J)."""
    counter_wrap_j: float | None = None
    """The counter's modulus (J): 2^64 ticks of its resolution."""

    def __init__(
        self,
        *,
        environ: Mapping[str, str],
        gpus: Sequence[int] | None = None,
        amdsmi: ModuleType | None = None,
        engine_pids: frozenset[int] | None = None,
    ) -> None:
        if amdsmi is None:
            amdsmi = import_binding(
                "amdsmi",
                "power.source 'board' on AMD needs AMD SMI's Python binding, amdsmi: "
                "pip install 'tokenwatt-bench[amd]' (it loads ROCm's libamd_smi)",
            )
        self.smi = amdsmi
        self.notes: list[str] = []
        self.selection: Selection | None = None
        self._closed = False
        try:
            self.smi.amdsmi_init()
        except self.smi.AmdSmiException as exc:
            raise TelemetryError(f"amdsmi did not initialise: {exc}") from exc
        try:
            self._handles, self._ids = self._select(environ, gpus, engine_pids)
            self._check_partitions()
            self._has_counter = self._probe_counter()
            self._power_key = self._probe_power_key()
        except self.smi.AmdSmiException as exc:
            self.close()
            raise TelemetryError(f"amdsmi failed while opening the GPUs: {exc}") from exc
        except BaseException:
            self.close()
            raise
        self.devices = len(self._handles)
        self.power_method: PowerMethod = (
            "average" if self._power_key == "average_socket_power" else "instant"
        )
        if self.power_method == "average":
            self.notes.append("power samples from average_socket_power (a running average)")
        if not self._has_counter:
            self.notes.append("energy integrated from power samples: no energy counter")

    def _select(
        self,
        environ: Mapping[str, str],
        gpus: Sequence[int] | None,
        engine_pids: frozenset[int] | None,
    ) -> tuple[list[Any], list[str]]:
        smi = self.smi
        found = sorted(
            (
                GpuDevice(
                    uuid=self._uuid(h) or str(smi.amdsmi_get_gpu_device_bdf(h)).lower(),
                    name=str(smi.amdsmi_get_gpu_asic_info(h).get("market_name", "unknown")),
                    bus_id=str(smi.amdsmi_get_gpu_device_bdf(h)).lower(),
                    handle=h,
                    pids=self._pids(h) if engine_pids else frozenset(),
                )
                for h in smi.amdsmi_get_processor_handles()
            ),
            key=lambda d: d.bus_id,
        )
        var = "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in environ else "ROCR_VISIBLE_DEVICES"
        raw = environ.get(var)
        # Every entry counts: one that is neither an index nor a UUID is an error, never
        # silently skipped (that would measure a different set of GPUs).
        visible = None if raw is None else [x.strip() for x in raw.split(",") if x.strip()]
        for entry in visible or []:
            if not (entry.isdigit() or entry.startswith("GPU-")):
                raise TelemetryError(f"AMD SMI cannot apply {var} entry {entry!r}")
        self.selection = select_gpus(
            found,
            visible=visible,
            visible_var=var,
            environ=environ,
            gpus=gpus,
            engine_pids=engine_pids,
            library="AMD SMI",
        )
        self.notes.extend(self.selection.notes)
        chosen = self.selection.devices
        return [d.handle for d in chosen], [d.bus_id for d in chosen]

    def _uuid(self, handle: Any) -> str | None:
        """``amdsmi_get_gpu_device_uuid``, or None where the library lacks it."""
        try:
            return str(self.smi.amdsmi_get_gpu_device_uuid(handle))
        except (AttributeError, self.smi.AmdSmiException):
            return None

    def _pids(self, handle: Any) -> frozenset[int]:
        """PIDs of the GPU's processes (``amdsmi_get_gpu_process_list``: dicts with ``pid``)."""
        try:
            listed = self.smi.amdsmi_get_gpu_process_list(handle)
        except (AttributeError, self.smi.AmdSmiException):
            return frozenset()
        return frozenset(
            int(p["pid"]) for p in listed if isinstance(p, Mapping) and _number(p.get("pid"))
        )

    def _energy_j(self, handle: Any) -> float:
        info = self.smi.amdsmi_get_energy_count(handle)
        ticks = info.get("energy_accumulator", info.get("power"))
        resolution_uj = _number(info.get("counter_resolution"))
        if _number(ticks) is None or resolution_uj is None:
            raise ReadError("energy counter answered N/A")
        # amdsmi_get_energy_count: a uint64 accumulator of ticks of counter_resolution µJ.
        step_j = resolution_uj / 1e6
        self.counter_step_j = max(self.counter_step_j or 0.0, step_j)
        self.counter_wrap_j = 2.0**64 * step_j
        return float(ticks) * step_j

    def _probe_counter(self) -> bool:
        try:
            for h in self._handles:
                self._energy_j(h)
        except (self.smi.AmdSmiException, ReadError):
            return False
        return True

    def _probe_power_key(self) -> str:
        info = self.smi.amdsmi_get_power_info(self._handles[0])
        for key in ("current_socket_power", "socket_power", "average_socket_power"):
            if _number(info.get(key)) is not None:
                return key
        raise TelemetryError("amdsmi_get_power_info reports no socket power on this GPU")

    def _lost(self, exc: Exception) -> bool:
        code = getattr(exc, "err_code", None)
        ret = getattr(self.smi, "AmdSmiRetCode", None)
        lost = {getattr(ret, n, None) for n in ("ERR_NOT_FOUND", "NOT_INIT", "DRM_ERROR")}
        return code is not None and code in lost

    def read(self) -> PowerSample:
        """Read every selected GPU once and merge.

        Raises:
            DeviceLostError: the GPU is gone (not found, not initialised, DRM error).
            ReadError: another amdsmi error while reading power or energy.
        """
        smi = self.smi
        total = 0.0
        counters: dict[str, float] = {}
        gfx: list[float] = []
        mem: list[float] = []
        temps: list[float] = []
        reasons: set[str] = set()
        for handle, bdf in zip(self._handles, self._ids, strict=True):
            try:
                watts = _number(smi.amdsmi_get_power_info(handle).get(self._power_key))
                if watts is None:
                    raise ReadError(f"{bdf}: {self._power_key} is N/A")
                total += watts
                if self._has_counter:
                    counters[bdf] = self._energy_j(handle)
            except smi.AmdSmiException as exc:
                if self._lost(exc):
                    raise DeviceLostError(f"{bdf}: {exc}") from exc
                raise ReadError(f"{bdf}: {exc}") from exc
            try:
                for clk_type, out in ((smi.AmdSmiClkType.GFX, gfx), (smi.AmdSmiClkType.MEM, mem)):
                    info = smi.amdsmi_get_clock_info(handle, clk_type)
                    value = _number(info.get("clk", info.get("cur_clk")))
                    if value is not None:
                        out.append(value)
                t = _number(
                    smi.amdsmi_get_temp_metric(
                        handle,
                        smi.AmdSmiTemperatureType.HOTSPOT,
                        smi.AmdSmiTemperatureMetric.CURRENT,
                    )
                )
                if t is not None:
                    temps.append(t)
                reasons |= violation_names(smi.amdsmi_get_violation_status(handle))
            except smi.AmdSmiException as exc:
                if self._lost(exc):
                    raise DeviceLostError(f"{bdf}: {exc}") from exc
        return merge_reading(
            power_w=total,
            counters_j=counters if self._has_counter else None,
            sm_clock_mhz=gfx,
            mem_clock_mhz=mem,
            temperature_c=temps,
            throttle=reasons,
        )

    def identity(self) -> HardwareIdentity:
        """Market name, count, driver and VRAM; bandwidth from the hardware table."""
        smi = self.smi
        try:
            driver: str | None = str(
                smi.amdsmi_get_gpu_driver_info(self._handles[0])["driver_version"]
            )
        except (smi.AmdSmiException, KeyError):
            driver = None
        try:
            vram_mb = _number(smi.amdsmi_get_gpu_vram_usage(self._handles[0]).get("vram_total"))
            memory = int(vram_mb * 1024 * 1024) if vram_mb is not None else None
        except smi.AmdSmiException:
            memory = None
        return board_identity(
            power_limit_w=self._power_limit_w(),
            vendor="AMD",
            names=(
                str(smi.amdsmi_get_gpu_asic_info(h).get("market_name", "unknown"))
                for h in self._handles
            ),
            device_ids=self._ids,
            driver=driver,
            memory_bytes_per_gpu=memory,
        )

    def _check_partitions(self) -> None:
        """Refuse a GPU split into compute partitions (DPX … CPX): each logical device would
        report its board's socket power, so one board would be counted once per partition
        (as MIG slices are on NVIDIA, refused likewise)."""
        smi = self.smi
        for handle, bdf in zip(self._handles, self._ids, strict=True):
            try:
                mode = str(smi.amdsmi_get_gpu_compute_partition(handle)).strip().upper()
            except (smi.AmdSmiException, AttributeError):
                continue  # not supported: a GPU that cannot be partitioned
            if mode not in ("", "SPX", "N/A"):
                raise TelemetryError(
                    f"GPU {bdf} is in {mode} compute-partition mode: its logical devices "
                    "share one board's power, which cannot be attributed to this benchmark; "
                    "use SPX mode (amd-smi set --compute-partition SPX) or a node-level "
                    "power source"
                )

    def _power_limit_w(self) -> float | None:
        """The selected GPUs' power caps summed (W; ``amdsmi_get_power_info``'s
        ``power_limit``), or None when any is unknown."""
        total = 0.0
        for h in self._handles:
            try:
                cap = _number(self.smi.amdsmi_get_power_info(h).get("power_limit"))
            except self.smi.AmdSmiException:
                return None
            if cap is None or cap <= 0:
                return None
            total += cap
        return total

    def close(self) -> None:
        """Shut amdsmi down (once)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(self.smi.AmdSmiException):
            self.smi.amdsmi_shut_down()
