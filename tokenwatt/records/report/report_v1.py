"""Report record, version 1: the "lab-h100 draft schema" of the first real run.

A record without ``schema_version`` is version 1. The seed record
``lab-h100-qwen3-30b-a3b-kv-cache.report.json`` validates against this model unchanged.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, model_validator

from tokenwatt.records.shared.base import (
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    NonNegMeasure,
    Percent,
    PlainName,
    PosFloat,
    PosInt,
    StrictModel,
)
from tokenwatt.records.spec.spec import Spec


class HardwareV1(StrictModel):
    """The accelerators measured. ``rated_bw_tbs_per_gpu`` in TB/s (10^12 bytes/s)."""

    vendor: NonEmptyStr
    """The accelerators' vendor (NVIDIA, AMD; "simulated" for the simulated engine; "unknown" when
    it could not be told)."""
    accelerator: NonEmptyStr
    """The accelerator's name as the power source reported it (e.g. NVIDIA H100 80GB HBM3), else the
    spec's hardware adapter."""
    count: PosInt
    """Accelerators measured: those the power source read, else the spec's hardware.gpus, else
    tensor_parallel × replicas."""
    rated_bw_tbs_per_gpu: PosFloat | None = None
    """Rated memory bandwidth per accelerator (TB/s, 10^12 bytes/s) the MBU figures use; null when
    unknown."""
    driver: str | None = None
    """Accelerator driver version as the power source reported it; null when unknown."""
    host: str | None = None
    """The machine measured: the spec's hardware.host, else the load generator's host name."""


class SoftwareV1(StrictModel):
    """The serving engine and its build."""

    engine: NonEmptyStr
    """The serving engine's name (vllm, sglang, llama.cpp, ...), as probed, else the spec's
    engine.name."""
    engine_version: str | None = None
    """The engine's version as it reported it, else the spec's engine.version; null when unknown."""
    kernels: str | None = None
    """Attention/GEMM kernels or backend the spec names (engine.kernels); null when not given."""


class ModelV1(StrictModel):
    """The model, described for readers."""

    name: NonEmptyStr
    """The model's name as the spec gives it (model.name)."""
    shape: str
    """"dense" or "MoE" (mixture of experts), from the model's geometry; empty when the geometry is
    unknown."""
    quantization: str
    """Weight quantization or dtype and the KV-cache dtype, in words (e.g. "bf16 weights; KV cache
    fp8")."""
    parallelism: str
    """Replicas and tensor parallelism, in words (e.g. "1 replica × TP2")."""


class SloV1(StrictModel):
    """The SLO limits (ms)."""

    ttft_p99_ms: PosFloat
    """The SLO limit on the p99 time to first token (ms), from the spec's slo."""
    tpot_p99_ms: PosFloat
    """The SLO limit on the p99 time per output token (ms), from the spec's slo."""


class WorkloadV1(StrictModel):
    """The workload, described for readers."""

    trace: NonEmptyStr
    """What the requests were drawn from: the built-in trace's name (chat-mix-v1), a trace file, or
    a replayed dataset (its kind and the first hex digits of its SHA-256)."""
    input_tokens: str
    """Prompt lengths in words (median and p90, tokens), or where they come from."""
    output_tokens: str
    """Output lengths in words (median and p90, tokens), or where they come from."""
    arrival: str
    """How the load was offered, in words (load profile, and the rates or concurrencies measured or
    swept)."""


class PowerV1(StrictModel):
    """Where the power figures come from and their scope (``kind``: board, node, module)."""

    source: str
    """The power sources of the repeats' valid power windows (comma-separated), or why there is no
    power figure."""
    kind: Literal["board", "node", "module", "sim"]
    """What the power figures cover: board (accelerator boards only), node (the whole server),
    module, or sim (the simulated engine's model)."""
    sampling_hz: PosFloat
    """Power samples per second asked for (the spec's power.sampling_hz)."""
    window: str
    """The window the figures are averaged over, in words (e.g. "60 s measurement windows")."""


class AccuracySuiteV1(StrictModel):
    """The accuracy suite and the gate threshold (points)."""

    suite: NonEmptyStr
    """The accuracy suite's name for readers (e.g. gsm8k-5shot)."""
    threshold_pts: NonNegFloat
    """The accuracy gate: the largest drop from the baseline's score (percentage points) a tuned
    configuration may show and still earn capacity credit."""


class FleetV1(StrictModel):
    """The fleet the capacity math scales to."""

    cards: PosInt
    """Accelerator cards of the fleet the capacity conclusion scales to (tokenwatt report --cards).
    """


class ConfigAccuracyV1(StrictModel):
    """A configuration's accuracy score (%) and the stored delta and spread (points)."""

    score: Percent
    """The configuration's mean accuracy score over seeds (%)."""
    delta_pts: float = Field(ge=-100, le=100)
    """Score minus the baseline's score (percentage points); 0 for the baseline."""
    spread_pts: NonNegFloat
    """Highest minus lowest per-seed score (percentage points)."""


class ConfigV1(StrictModel):
    """One measured serving configuration.

    ``node_power_kw`` is the mean summed board power over the measurement windows (kW);
    ``goodput_tok_s`` the SLO goodput (tok/s); latencies in ms.
    """

    key: PlainName
    """The configuration's key, unique in the report: baseline, tuned, or a slug of the label when
    there are several tuned configurations."""
    label: PlainName = Field(max_length=120)
    """The configuration's name on the page (the run's label)."""
    engine: str
    """The engine, its version and the KV-cache dtype, in words (e.g. "vllm 0.11.0 · KV FP8")."""
    mbu_pct: Percent | None = None
    """Memory-bandwidth utilisation at the found load (%); null when not computed or above 100 (then
    noted as not covered)."""
    node_power_kw: PosFloat | None = None
    """Mean power over the repeats' valid power windows at the found load (kW), summed over the
    boards (or the node, per power.kind); null without a valid power measurement."""
    goodput_tok_s: NonNegMeasure
    """SLO goodput (tok/s): the mean goodput of the repeats at the load the search found."""
    ttft_p99_ms: NonNegFloat
    """The worst finite p99 time to first token over the repeats at the found load (ms)."""
    tpot_p99_ms: NonNegFloat
    """The worst finite p99 time per output token over the repeats at the found load (ms)."""
    slo_pass_count: NonNegInt
    """Repeats at the found load that met the SLO."""
    repeats: PosInt
    """Repeats measured at the found load."""
    throttle_counts: dict[str, NonNegInt] = Field(default_factory=dict)
    """Power samples with each clock-event (throttle) reason set, summed over the repeats at the
    found load."""
    accuracy: ConfigAccuracyV1 | None = None
    """The configuration's accuracy score against the baseline; null without an accuracy run."""

    @model_validator(mode="after")
    def _passes_within_repeats(self) -> ConfigV1:
        if self.slo_pass_count > self.repeats:
            raise FieldValueError(
                "slo_pass_count",
                f"{self.slo_pass_count} passes cannot exceed repeats ({self.repeats})",
            )
        return self


def check_configs(configs: list[ConfigV1], baseline_indices: list[int], role_field: str) -> None:
    """Raise :class:`FieldValueError` unless keys are unique and exactly one baseline exists.

    ``baseline_indices`` are the positions of the baseline configurations; ``role_field`` is
    the field that makes a configuration the baseline (``key`` in v1, ``role`` in v2).
    """
    seen: dict[str, int] = {}
    for index, c in enumerate(configs):
        if c.key in seen:
            raise FieldValueError(
                f"configs[{index}].key",
                f"configs[{seen[c.key]}] already has the key {c.key!r}; keys must be unique",
            )
        seen[c.key] = index
    if not baseline_indices:
        raise FieldValueError(
            "configs",
            f"no baseline configuration: exactly one must have {role_field} 'baseline'",
        )
    if len(baseline_indices) > 1:
        first, second = baseline_indices[0], baseline_indices[1]
        raise FieldValueError(
            f"configs[{second}].{role_field}",
            f"a second baseline (configs[{first}] is already the baseline); "
            "exactly one configuration may be the baseline",
        )


class ReportV1(StrictModel):
    """Report record v1. The baseline is the configuration whose key is ``baseline``."""

    schema_version: Literal[1] = 1
    """Version of the report format; a record without it is version 1."""
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=120)
    """The report's id, its page's name: lower-case letters, digits, '.', '_' and '-' (tokenwatt
    report --id, else a slug of the title)."""
    status: Literal["draft", "published", "retracted"]
    """draft (made by tokenwatt report, not yet reviewed), published, or retracted (kept, marked as
    withdrawn)."""
    title: PlainName = Field(max_length=200)
    """The report's title (tokenwatt report --title)."""
    published: dt.date
    """The report's date: the day the last of its runs finished, so the same runs give the same
    record."""
    summary: str
    """The conclusion in a few sentences, shown at the top of the page."""
    hardware: HardwareV1
    """The accelerators measured."""
    software: SoftwareV1
    """The serving engine measured, its version and kernels."""
    model: ModelV1
    """The model measured."""
    slo: SloV1
    """The SLO limits every configuration was measured against."""
    workload: WorkloadV1
    """The workload, in words."""
    power: PowerV1
    """Where the power figures come from and what they cover."""
    accuracy: AccuracySuiteV1
    """The accuracy suite and the gate's threshold."""
    runs: PosInt
    """The most repeats any configuration had at its found load."""
    variance_band_pct: NonNegFloat
    """The variance band the report states (±%): how far repeat goodput may stray from its mean; a
    difference inside it earns no capacity credit. tokenwatt report states the widest measured
    half-range of repeat goodput over its mean."""
    fleet: FleetV1
    """The fleet the capacity conclusion scales to."""
    configs: list[ConfigV1] = Field(min_length=1)
    """The configurations measured, the baseline first; exactly one is the baseline."""
    not_covered: list[str] = Field(default_factory=list)
    """What the report does not measure or vouch for, in words: the specs' not_covered lists, then
    what the runs lacked (power, accuracy, a full-mode run, ...)."""
    reproduce: str = Field(max_length=20_000)
    """The commands that reproduce the report: each run's collect command line, then the tokenwatt
    report command."""
    spec: Spec | None = None
    """The baseline run's spec, the one every configuration shares up to KV-cache dtype and engine
    flags; null in hand-written v1 records."""

    @model_validator(mode="after")
    def _one_baseline(self) -> ReportV1:
        check_configs(
            self.configs, [i for i, c in enumerate(self.configs) if c.key == "baseline"], "key"
        )
        return self
