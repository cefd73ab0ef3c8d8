"""What ``tokenwatt collect`` is asked to do (the command's options as one typed value)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tokenwatt.collect.plan.modes import Mode
from tokenwatt.collect.plan.point import PointFlags

Role = Literal["baseline", "tuned"]


@dataclass
class CollectOptions:
    """What ``tokenwatt collect`` was asked to do.

    Attributes:
        spec_path: the benchmark spec (YAML).
        label: the configuration's name (e.g. ``vllm-fp8kv``).
        role: ``baseline`` or ``tuned``.
        out: the run record to write.
        mode: ``smoke``, ``quick`` or ``full`` (see :mod:`tokenwatt.collect.plan.modes`).
        engine_log: an engine log to scan for known warnings.
        endpoint: overrides ``engine.endpoint``.
        kv_dtype: overrides ``model.kv_dtype`` (a per-configuration setting, outside the
            fingerprint), so two configurations can share one spec.
        accuracy: run the accuracy suite when the spec names one.
        command: the command line, stored in the record for the report's reproduce block.
        progress: show the live display (read by the command line's reporter; collect
            itself never prints).
        fast_search: the cheaper search of ``benchmarks/search_cost.py`` (about half the
            GPU time there): shorter warm-ups after a passing probe, short "scout" windows
            while the verdict is not close, geometric bisection until the bracket is 5%
            wide. Off by default: the search of methods/goodput.md is the default.
        workers: overrides ``measurement.workers``: load-generator processes sharing each
            window's schedule, a number or ``auto`` (:mod:`tokenwatt.collect.load.pool.workers`).
        ray_address: overrides ``measurement.ray_address``: the workers run as Ray actors
            on this cluster (:mod:`tokenwatt.collect.load.pool.ray_pool`).
        point: the point-and-shoot flags (:mod:`tokenwatt.collect.plan.point`): with
            ``spec_path`` :data:`~tokenwatt.collect.plan.point.FLAGS_SPEC`, the spec is built
            from them; else they override the spec's fields. None: none given.
        engine_cmd: the engine's command line: ``collect`` starts it, waits until it is
            healthy, measures and stops it (:mod:`tokenwatt.collect.engine.engine_proc`); sets
            ``engine.launch.cmd``.
    """

    spec_path: Path
    label: str
    role: Role
    out: Path
    mode: Mode = "quick"
    engine_log: Path | None = None
    endpoint: str | None = None
    kv_dtype: str | None = None
    accuracy: bool = True
    command: str = ""
    progress: bool = True
    fast_search: bool = False
    workers: str | None = None
    ray_address: str | None = None
    engine_cmd: str | None = None
    environ: dict[str, str] | None = field(default=None, repr=False)
    point: PointFlags | None = None
