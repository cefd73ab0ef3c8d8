"""A configuration's serving setup as the run record states it, and what differs between
configurations.

Pure: a run record in, ``name -> text`` out (kept in the report as ``configs[].settings``);
the report page compares those mappings across configurations and highlights the names
whose values differ. Only what the run record holds is named; nothing is inferred.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from tokenwatt.records import NOT_STATED, RunRecord, Spec, run_unstated

SETTING_LABELS: dict[str, str] = {
    "engine": "Engine",
    "engine_version": "Engine version",
    "engine_flags": "Engine flags (spec)",
    "engine_flags_reported": "Engine flags (as the engine reported them)",
    "engine_command": "Engine command (collect started it)",
    "kernels": "Kernels / image",
    "api": "API",
    "served_model": "Served model",
    "kv_dtype": "KV-cache dtype",
    "weight_dtype": "Weight dtype",
    "quantization": "Quantization",
    "tensor_parallel": "Tensor parallel",
    "replicas": "Replicas",
    "kv_capacity_tokens": "KV-cache capacity (tokens)",
    "context_length_tokens": "Context length (tokens)",
    "accelerator": "Accelerator",
    "gpu_count": "GPUs",
    "driver": "Driver",
    "mode": "Measurement mode",
}
"""Display names of the settings, in display order; a name not listed here (one a newer
collector adds) is shown as it is, after these."""


def stated_value(run: RunRecord, field: str) -> str:
    """The run's value of a dotted ``model.*`` spec field as text, or ``not stated`` when
    nobody gave it and the spec holds only its default (:func:`tokenwatt.records.run_unstated`)."""
    if field in run_unstated(run):
        return NOT_STATED
    return str(getattr(run.spec.model, field.split(".", 1)[1]))


def _flags(flags: Sequence[str]) -> str:
    return " ".join(flags)


def _launch(spec: Spec) -> str | None:
    """The command line collect started the engine with, as the spec gives it (with its
    ``{port}`` placeholder, so that two runs on different ports compare equal)."""
    launch = spec.engine.launch
    if launch is None:
        return None
    return launch.cmd or (shlex.join(launch.argv) if launch.argv else None)


def config_settings(run: RunRecord) -> dict[str, str]:
    """The run's serving setup by name (see :data:`SETTING_LABELS`), values as text.

    From the spec the run used (engine, flags, dtypes, parallelism; ``--kv-dtype`` is
    already applied there) and from what the collector read at run time (``environment``:
    engine version and flags as reported, KV capacity, context length, accelerator,
    driver). A value the record does not have is left out, not written as "none".
    """
    spec, env = run.spec, run.environment
    values: dict[str, object] = {
        "engine": env.engine_name or spec.engine.name,
        "engine_version": env.engine_version or spec.engine.version,
        "engine_flags": _flags(spec.engine.flags),
        "engine_flags_reported": _flags(env.engine_flags),
        "engine_command": _launch(spec),
        "kernels": spec.engine.kernels,
        "api": spec.engine.api,
        "served_model": spec.engine.model,
        "kv_dtype": stated_value(run, "model.kv_dtype"),
        "weight_dtype": stated_value(run, "model.weight_dtype"),
        "quantization": spec.model.quantization,
        "tensor_parallel": spec.model.tensor_parallel,
        "replicas": spec.model.replicas,
        "kv_capacity_tokens": env.kv_capacity_tokens,
        "context_length_tokens": env.context_length_tokens,
        "accelerator": env.gpu_name,
        "gpu_count": env.gpu_count,
        "driver": env.driver,
        "mode": run.mode,
    }
    return {k: str(v) for k, v in values.items() if v is not None and str(v) != ""}


def differing_settings(settings: Sequence[Mapping[str, str]]) -> list[tuple[str, bool]]:
    """Every setting name found in any configuration, in display order, with whether its
    value differs between configurations (a value missing in one counts as different)."""
    names = {name for s in settings for name in s}
    known = [n for n in SETTING_LABELS if n in names]
    ordered = known + sorted(names - set(known))
    return [(n, len({s.get(n) for s in settings}) > 1) for n in ordered]
