"""Report record, version 1: the "lab-h100 draft schema" of the first real run.

A record without ``schema_version`` is version 1. The seed record
``lab-h100-qwen3-30b-a3b-kv-cache.report.json`` validates against this model unchanged.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, model_validator

from tokenwatt.records.base import (
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    Percent,
    PlainName,
    PosFloat,
    PosInt,
    StrictModel,
)
from tokenwatt.records.spec import Spec


class HardwareV1(StrictModel):
    """The accelerators measured. ``rated_bw_tbs_per_gpu`` in TB/s (10^12 bytes/s)."""

    vendor: NonEmptyStr
    accelerator: NonEmptyStr
    count: PosInt
    rated_bw_tbs_per_gpu: PosFloat | None = None
    driver: str | None = None
    host: str | None = None


class SoftwareV1(StrictModel):
    """The serving engine and its build."""

    engine: NonEmptyStr
    engine_version: str | None = None
    kernels: str | None = None


class ModelV1(StrictModel):
    """The model, described for readers."""

    name: NonEmptyStr
    shape: str
    quantization: str
    parallelism: str


class SloV1(StrictModel):
    """The SLO limits (ms)."""

    ttft_p99_ms: PosFloat
    tpot_p99_ms: PosFloat


class WorkloadV1(StrictModel):
    """The workload, described for readers."""

    trace: NonEmptyStr
    input_tokens: str
    output_tokens: str
    arrival: str


class PowerV1(StrictModel):
    """Where the power figures come from and their scope (``kind``: board, node, module)."""

    source: str
    kind: Literal["board", "node", "module", "sim"]
    sampling_hz: PosFloat
    window: str


class AccuracySuiteV1(StrictModel):
    """The accuracy suite and the gate threshold (points)."""

    suite: NonEmptyStr
    threshold_pts: NonNegFloat


class FleetV1(StrictModel):
    """The fleet the capacity math scales to."""

    cards: PosInt


class ConfigAccuracyV1(StrictModel):
    """A configuration's accuracy score (%) and the stored delta and spread (points)."""

    score: Percent
    delta_pts: float = Field(ge=-100, le=100)
    spread_pts: NonNegFloat


class ConfigV1(StrictModel):
    """One measured serving configuration.

    ``node_power_kw`` is the mean summed board power over the measurement windows (kW);
    ``goodput_tok_s`` the SLO goodput (tok/s); latencies in ms.
    """

    key: PlainName
    label: PlainName = Field(max_length=120)
    engine: str
    mbu_pct: Percent | None = None
    node_power_kw: PosFloat | None = None
    goodput_tok_s: NonNegFloat
    ttft_p99_ms: NonNegFloat
    tpot_p99_ms: NonNegFloat
    slo_pass_count: NonNegInt
    repeats: PosInt
    throttle_counts: dict[str, NonNegInt] = Field(default_factory=dict)
    accuracy: ConfigAccuracyV1 | None = None

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
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=120)
    status: Literal["draft", "published", "retracted"]
    title: PlainName = Field(max_length=200)
    published: dt.date
    summary: str
    hardware: HardwareV1
    software: SoftwareV1
    model: ModelV1
    slo: SloV1
    workload: WorkloadV1
    power: PowerV1
    accuracy: AccuracySuiteV1
    runs: PosInt
    variance_band_pct: NonNegFloat
    fleet: FleetV1
    configs: list[ConfigV1] = Field(min_length=1)
    not_covered: list[str] = Field(default_factory=list)
    reproduce: str = Field(max_length=20_000)
    spec: Spec | None = None

    @model_validator(mode="after")
    def _one_baseline(self) -> ReportV1:
        check_configs(
            self.configs, [i for i, c in enumerate(self.configs) if c.key == "baseline"], "key"
        )
        return self
