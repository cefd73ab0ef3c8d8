"""Which GPUs the engine uses, by identity, most reliable evidence first.

1. **the engine's own processes**: the GPUs whose compute processes (NVML
   ``nvmlDeviceGetComputeRunningProcesses``, AMD SMI ``amdsmi_get_gpu_process_list``) include
   a PID of the launched engine's process group. Nothing is guessed: the driver says which
   GPU holds the engine's contexts. In a container without the host's PID namespace the
   driver reports host PIDs that match nothing here; the next rule is then used, and a note
   says so;
2. **the visible-devices variable** (``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``):
   UUIDs are exact; indices count in ``CUDA_DEVICE_ORDER``, whose default is
   ``FASTEST_FIRST``, not PCI bus order. CUDA's fastest-first heuristic is not published, so
   indices are read in PCI order only where that is certain: ``CUDA_DEVICE_ORDER=PCI_BUS_ID``,
   or every GPU the same model (ties keep PCI order, noted); indices over mixed models
   without it are refused;
3. **the spec** (``hardware.gpus``): positions among the GPUs left after rule 2 (rules 2
   and 3 together are the configuration, compared with rule 1 as one answer).

Where two rules both give an answer and they differ, the note says so and the more reliable
one is used. Every choice is kept with the devices (UUID, name, bus id) in the record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenwatt.errors import TelemetryError


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as the vendor library lists it.

    Attributes:
        uuid: its UUID (``GPU-…``) or, for AMD, its BDF when no UUID is read.
        name: the model name the driver reports.
        bus_id: PCI bus id, lower case.
        handle: the library's handle (not compared).
        pids: PIDs of its compute processes, where read.
    """

    uuid: str
    name: str
    bus_id: str
    handle: Any = field(compare=False, default=None)
    pids: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Selection:
    """The GPUs chosen and how: ``method`` is ``engine processes``, ``CUDA_VISIBLE_DEVICES``
    (or ``HIP_VISIBLE_DEVICES``), ``spec hardware.gpus`` or ``all visible``; ``notes`` say
    what was assumed or where the rules disagreed."""

    devices: tuple[GpuDevice, ...]
    method: str
    notes: tuple[str, ...] = ()


def process_group_pids(pgid: int, proc: Path = Path("/proc")) -> frozenset[int]:
    """PIDs whose process group is ``pgid`` (the launched engine's, which ``collect``
    starts in its own group), read from ``/proc/<pid>/stat``; empty off Linux."""
    pids: set[int] = set()
    try:
        entries = list(proc.iterdir())
    except OSError:
        return frozenset()
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 5 is the process group; the command name (field 2) may hold spaces.
        rest = stat.rpartition(")")[2].split()
        if len(rest) >= 3 and rest[2].isdigit() and int(rest[2]) == pgid:
            pids.add(int(entry.name))
    return frozenset(pids)


def _by_visible(
    found: Sequence[GpuDevice],
    entries: Sequence[str],
    environ: Mapping[str, str],
    var: str,
    library: str,
) -> tuple[list[GpuDevice], list[str]]:
    """The GPUs a visible-devices list names, in its order, and notes on the order used.

    ``CUDA_DEVICE_ORDER`` applies to CUDA only; HIP enumerates in PCI bus order."""
    notes: list[str] = []
    order = environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    cuda = var == "CUDA_VISIBLE_DEVICES"
    if cuda and any(e.isdigit() for e in entries) and order != "PCI_BUS_ID":
        if len({d.name for d in found}) > 1:
            raise TelemetryError(
                f"{var} gives indices but CUDA_DEVICE_ORDER is {order} (fastest first) over "
                "different GPU models: which GPU an index means is not known; give UUIDs, "
                "or set CUDA_DEVICE_ORDER=PCI_BUS_ID for the engine and for tokenwatt"
            )
        notes.append(
            f"{var} indices read in PCI bus order: CUDA_DEVICE_ORDER is {order}, and with "
            "every GPU the same model its order is taken to be PCI order"
        )
    chosen: list[GpuDevice] = []
    for entry in entries:
        if entry.startswith("MIG-"):
            raise TelemetryError(
                f"{var} names a MIG slice ({entry}): board power cannot be attributed to a "
                "MIG slice; benchmark on whole GPUs"
            )
        if entry.isdigit():
            if int(entry) >= len(found):
                raise TelemetryError(
                    f"{var} names GPU {entry}, but {library} sees {len(found)} GPU(s)"
                )
            chosen.append(found[int(entry)])
            continue
        hits = [d for d in found if d.uuid.startswith(entry)]
        if len(hits) != 1:
            raise TelemetryError(f"{var} entry {entry} matches {len(hits)} GPUs in {library}")
        chosen.append(hits[0])
    return chosen, notes


def _by_spec(
    pool: Sequence[GpuDevice], gpus: Sequence[int] | None, library: str
) -> list[GpuDevice] | None:
    """The spec's ``hardware.gpus`` positions among ``pool``; None when unset."""
    if gpus is None:
        return None
    bad = [g for g in gpus if g >= len(pool)]
    if bad:
        raise TelemetryError(
            f"hardware.gpus {list(gpus)} asks for GPU(s) {bad}, but only {len(pool)} "
            f"are visible to {library}"
        )
    return [pool[g] for g in gpus]


def select_gpus(
    found: Sequence[GpuDevice],
    *,
    visible: Sequence[str] | None,
    visible_var: str,
    environ: Mapping[str, str],
    gpus: Sequence[int] | None,
    engine_pids: frozenset[int] | None,
    library: str = "NVML",
) -> Selection:
    """Choose the GPUs to measure (see the module docstring).

    Args:
        found: every GPU the library sees, in PCI bus order.
        visible: the parsed visible-devices entries, or None when the variable is unset.
        visible_var: its name, for messages.
        environ: the environment (``CUDA_DEVICE_ORDER``).
        gpus: the spec's ``hardware.gpus`` positions, or None.
        engine_pids: the launched engine's PIDs, or None when no engine was launched.
        library: the source's name for messages (``NVML``, ``AMD SMI``).

    Raises:
        TelemetryError: a selection that cannot be applied (bad index, ambiguous UUID, MIG,
            indices over mixed models without PCI order), or nothing selected.
    """
    notes: list[str] = []
    by_env: list[GpuDevice] | None = None
    if visible is not None:
        by_env, env_notes = _by_visible(found, visible, environ, visible_var, library)
        notes += env_notes
    by_spec = _by_spec(by_env if by_env is not None else list(found), gpus, library)
    by_proc: list[GpuDevice] | None = None
    if engine_pids:
        by_proc = [d for d in found if d.pids & engine_pids] or None
        if by_proc is None:
            notes.append(
                "none of the engine's processes is among the GPUs' compute processes (a "
                "container's own PID namespace?): GPUs chosen by the next rule"
            )
    # The spec's positions refine the visible list: together they are one rule.
    by_config = by_spec if by_spec is not None else by_env
    config_method = " + ".join(
        m for m, d in ((visible_var, by_env), ("spec hardware.gpus", by_spec)) if d is not None
    )
    given = [(m, d) for m, d in (("engine processes", by_proc), (config_method, by_config)) if d]
    if not given:
        if not found or by_config is not None:
            raise TelemetryError(f"{library}: no GPU to measure (check {visible_var})")
        return Selection(tuple(found), "all visible", tuple(notes))
    method, chosen = given[0]
    for other, devices in given[1:]:
        if {d.uuid for d in devices} != {d.uuid for d in chosen}:
            notes.append(
                f"{other} selects {', '.join(d.uuid for d in devices)} but {method} says "
                f"{', '.join(d.uuid for d in chosen)}: {method} is used"
            )
    return Selection(tuple(chosen), method, tuple(notes))


def engine_pids_from(pgid: int | None) -> frozenset[int] | None:
    """The engine's PIDs from its process group, or None without an engine (or off Linux)."""
    if pgid is None or not Path("/proc").is_dir():
        return None
    return process_group_pids(pgid) or frozenset({pgid})


__all__ = [
    "GpuDevice",
    "Selection",
    "engine_pids_from",
    "process_group_pids",
    "select_gpus",
]
