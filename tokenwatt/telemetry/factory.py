"""``open_meter``: the one call the collector makes to get a power meter for a spec."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from tokenwatt.errors import TelemetryError
from tokenwatt.records import Spec
from tokenwatt.telemetry.base import HardwareIdentity, PowerSource
from tokenwatt.telemetry.clock import Clock
from tokenwatt.telemetry.gpu_selection import engine_pids_from
from tokenwatt.telemetry.meter import PowerMeter


def _source_for(
    spec: Spec,
    sim_endpoint: str | None,
    environ: Mapping[str, str],
    engine_pids: frozenset[int] | None = None,
) -> PowerSource:
    power, hardware = spec.power, spec.hardware
    if power.source == "board":
        if hardware.adapter == "nvidia":
            from tokenwatt.telemetry.board_nvidia import NvmlSource

            return NvmlSource(environ=environ, gpus=hardware.gpus, engine_pids=engine_pids)
        if hardware.adapter == "amd":
            from tokenwatt.telemetry.board_amd import AmdSmiSource

            return AmdSmiSource(environ=environ, gpus=hardware.gpus, engine_pids=engine_pids)
        if hardware.adapter == "sim":
            from tokenwatt.telemetry.sim import SimSource

            return SimSource(sim_endpoint or spec.engine.endpoint)
        raise TelemetryError(
            "power.source 'board' needs hardware.adapter nvidia, amd or sim "
            f"(got {hardware.adapter!r}); set power.source to none to measure without power"
        )
    if power.source == "sim":
        from tokenwatt.telemetry.sim import SimSource

        return SimSource(sim_endpoint or spec.engine.endpoint)
    if power.source == "redfish":
        from tokenwatt.telemetry.redfish import RedfishSource

        return RedfishSource(power, environ=environ)
    if power.source == "ipmi":
        from tokenwatt.telemetry.ipmi import IpmiSource

        return IpmiSource(power, environ=environ)
    if power.source == "command":
        from tokenwatt.telemetry.command import CommandSource

        return CommandSource(power)
    if power.source == "prometheus":
        from tokenwatt.telemetry.prometheus import PrometheusSource

        uuids = _engine_uuids(spec, environ, engine_pids)
        return PrometheusSource(power, gpus=None if uuids else spec.hardware.gpus, uuids=uuids)
    from tokenwatt.telemetry.null import NullSource

    return NullSource()


def _engine_uuids(
    spec: Spec, environ: Mapping[str, str], engine_pids: frozenset[int] | None
) -> list[str] | None:
    """The UUIDs of the GPUs running the launched engine, as NVML on this host sees them,
    for an exporter's ``UUID`` label; None without an engine, NVML, or a process match."""
    if not engine_pids or spec.hardware.adapter != "nvidia":
        return None
    try:
        from tokenwatt.telemetry.board_nvidia import NvmlSource

        local = NvmlSource(environ=environ, gpus=spec.hardware.gpus, engine_pids=engine_pids)
    except TelemetryError:
        return None
    try:
        selection = local.selection
        if selection is None or selection.method != "engine processes":
            return None
        return [d.uuid for d in selection.devices]
    finally:
        local.close()


def _board_identity(spec: Spec, environ: Mapping[str, str]) -> HardwareIdentity | None:
    """The accelerators' identity from NVML / AMD SMI when power comes from elsewhere.

    A node-level source (Redfish, IPMI, a command) cannot name the GPUs, but MBU still needs
    them. None when the board library is absent or fails: the source's own identity is used.
    """
    try:
        if spec.hardware.adapter == "nvidia":
            from tokenwatt.telemetry.board_nvidia import NvmlSource

            board: PowerSource = NvmlSource(environ=environ, gpus=spec.hardware.gpus)
        elif spec.hardware.adapter == "amd":
            from tokenwatt.telemetry.board_amd import AmdSmiSource

            board = AmdSmiSource(environ=environ, gpus=spec.hardware.gpus)
        else:
            return None
    except TelemetryError:
        return None
    try:
        return board.identity()
    finally:
        board.close()


def detect_board(
    environ: Mapping[str, str] | None = None,
) -> tuple[Literal["nvidia", "amd"] | None, list[str]]:
    """Which board library can read this machine's GPUs: NVML first, then AMD SMI, each
    opened as ``power.source: board`` would open it and closed at once.

    Returns:
        ``("nvidia", [])`` or ``("amd", [])``; ``(None, reasons)`` when neither opens, one
        reason per library (``NVML did not initialise (NVML Shared Library Not Found) …``).
    """
    env = os.environ if environ is None else environ
    reasons: list[str] = []
    try:
        from tokenwatt.telemetry.board_nvidia import NvmlSource

        NvmlSource(environ=env).close()
        return "nvidia", []
    except TelemetryError as exc:
        reasons.append(f"NVIDIA: {exc}")
    try:
        from tokenwatt.telemetry.board_amd import AmdSmiSource

        AmdSmiSource(environ=env).close()
        return "amd", []
    except TelemetryError as exc:
        reasons.append(f"AMD: {exc}")
    return None, reasons


def open_meter(
    spec: Spec,
    *,
    sim_endpoint: str | None = None,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    engine_pgid: int | None = None,
) -> PowerMeter:
    """Open the power meter the spec's ``power`` and ``hardware`` sections ask for.

    ``power.source``: ``board`` (NVML or AMD SMI by ``hardware.adapter``; the simulator's
    model when the adapter is ``sim``), ``redfish``, ``ipmi``, ``command``, ``prometheus``,
    ``sim`` (scrapes ``tokenwatt_sim_power_watts`` from ``sim_endpoint`` or the engine's
    endpoint) or ``none`` (windows come back invalid, saying no source was configured).
    A spec's ``hardware.rated_bw_tbs_per_gpu`` overrides the hardware table.

    Args:
        spec: the benchmark spec.
        sim_endpoint: base URL of a running ``tokenwatt sim`` (for dry runs).
        clock: the sampler's clock (tests inject a manual one).
        environ: environment (default ``os.environ``): ``CUDA_VISIBLE_DEVICES`` and the
            variable named by ``power.password_env``.
        engine_pgid: the launched engine's process group; board power is then read from
            the GPUs running its processes (:mod:`tokenwatt.telemetry.gpu_selection`).

    Raises:
        TelemetryError: the source cannot be opened (no driver, MIG, bad credentials …).
    """
    env = os.environ if environ is None else environ
    source = _source_for(spec, sim_endpoint, env, engine_pids_from(engine_pgid))
    if spec.hardware.gpus is not None and source.scope != "board":
        # A node or module reading covers every device: the selection cannot apply to it.
        source.notes.append(
            f"hardware.gpus {spec.hardware.gpus} selects devices, but {spec.power.source} "
            f"power is a {source.scope}-level reading of all of them"
        )
    try:
        identity = source.identity()
        if spec.power.source not in ("board", "sim", "none") and identity.count == 0:
            identity = _board_identity(spec, env) or identity
        if spec.hardware.rated_bw_tbs_per_gpu is not None:
            identity = replace(
                identity,
                rated_bw_tbs_per_gpu=spec.hardware.rated_bw_tbs_per_gpu,
                rated_bw_source="spec: hardware.rated_bw_tbs_per_gpu",
            )
        return PowerMeter(source, spec.power.sampling_hz, clock=clock, identity=identity)
    except BaseException:
        source.close()
        raise
