"""Report record, version 2: version 1 plus optional detail.

Adds, all optional: a per-configuration ``role``, per-repeat values, the SLO-search probes,
a power timeline, an MBU breakdown, paired accuracy statistics, dated updates (errata),
the hashes of the run files a report was made from, and ``simulated``/``demo`` flags.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from tokenwatt.records.base import (
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    Percent,
    PosFloat,
    StrictModel,
)
from tokenwatt.records.report_v1 import (
    ConfigAccuracyV1,
    ConfigV1,
    ReportV1,
    check_configs,
)


class RepeatV2(StrictModel):
    """One measurement window at the found rate. Latencies in ms, power in W, energy in J.

    ``slo_attainment_pct`` is the share of the window's requests that met both limits
    individually (DistServe's attainment, methods/goodput.md); ``mean_power_w`` is board power
    summed over the GPUs and averaged over the window;
    ``throttle_counts`` counts, per clock-event (throttle) reason, the window's
    ``power_samples`` that had it set; clocks are the window's mean SM and memory clocks
    (MHz). Tokens per joule of the window = ``goodput_tok_s`` × ``window_s`` / ``energy_j``.
    """

    rate_rps: PosFloat
    goodput_tok_s: NonNegFloat
    ttft_p99_ms: NonNegFloat | None = None
    tpot_p99_ms: NonNegFloat | None = None
    slo_pass: bool
    window_s: PosFloat | None = None
    mean_power_w: PosFloat | None = None
    energy_j: PosFloat | None = None
    slo_attainment_pct: Percent | None = None
    power_samples: NonNegInt | None = None
    throttle_counts: dict[str, NonNegInt] = Field(default_factory=dict)
    sm_clock_mhz: NonNegFloat | None = None
    mem_clock_mhz: NonNegFloat | None = None


class ProbeV2(StrictModel):
    """One SLO-search probe. ``failure_reason`` names the limit missed, if any."""

    rate_rps: PosFloat
    slo_pass: bool
    ttft_p99_ms: NonNegFloat | None = None
    tpot_p99_ms: NonNegFloat | None = None
    failure_reason: str | None = None
    stopped_early: bool = False


class PowerSampleV2(StrictModel):
    """One point of the power timeline: seconds from window start, summed board power (W)."""

    t_s: NonNegFloat
    power_w: NonNegFloat
    throttle: list[str] = Field(default_factory=list)


class MbuBreakdownV2(StrictModel):
    """Derived memory traffic per second (GB/s, 10^9 bytes/s): weights vs KV cache."""

    weights_gbs: NonNegFloat
    kv_gbs: NonNegFloat


class ConfigAccuracyV2(ConfigAccuracyV1):
    """Accuracy with the paired statistics against the baseline (same items)."""

    items: NonNegInt | None = None
    seeds: NonNegInt | None = None
    ci_low_pts: float | None = Field(default=None, ge=-100, le=100)
    ci_high_pts: float | None = Field(default=None, ge=-100, le=100)
    mcnemar_p: float | None = Field(default=None, ge=0, le=1)


class ConfigDetail(ConfigV1):
    """The optional detail v2 added to a configuration, shared by v2 and v3 (which keeps
    all of it except ``sweep``)."""

    role: Literal["baseline", "tuned"] | None = None
    accuracy: ConfigAccuracyV2 | None = None
    repeats_detail: list[RepeatV2] = Field(default_factory=list)
    power_timeline: list[PowerSampleV2] = Field(default_factory=list)
    mbu_breakdown: MbuBreakdownV2 | None = None
    simulated: bool = False

    @property
    def effective_role(self) -> str:
        """``role`` when given, else ``baseline`` for the key ``baseline`` (v1 convention)."""
        if self.role is not None:
            return self.role
        return "baseline" if self.key == "baseline" else "tuned"


class ConfigV2(ConfigDetail):
    """A configuration with the optional v2 detail: ``sweep`` holds the SLO-search probes."""

    sweep: list[ProbeV2] = Field(default_factory=list)


class UpdateV2(StrictModel):
    """A dated update (erratum) shown as a notice at the top of the report page."""

    date: dt.date
    text: NonEmptyStr


class RunFileV2(StrictModel):
    """A run record a report was made from, with its SHA-256 (hex)."""

    path: NonEmptyStr
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def require_schema_version(schema: dict[str, Any]) -> None:
    """Make ``schema_version`` required in a report model's exported JSON Schema (v2 on)."""
    # A record without schema_version is v1, so in the exported JSON Schema a v2 record must
    # say so; otherwise the report schema's oneOf would match the seed twice (v1 and v2).
    required = schema.setdefault("required", [])
    if "schema_version" not in required:
        required.insert(0, "schema_version")


class ReportV2(ReportV1):
    """Report record v2 (the newest). Its ``schema_version`` (2) is required in files."""

    model_config = ConfigDict(json_schema_extra=require_schema_version)
    schema_version: Literal[2] = 2  # type: ignore[assignment]
    configs: list[ConfigV2] = Field(min_length=1)  # type: ignore[assignment]
    updates: list[UpdateV2] = Field(default_factory=list)
    run_files: list[RunFileV2] = Field(default_factory=list)
    simulated: bool = False
    demo: bool = False

    @model_validator(mode="after")
    def _one_baseline(self) -> ReportV2:
        baselines = [i for i, c in enumerate(self.configs) if c.effective_role == "baseline"]
        check_configs(list(self.configs), baselines, "role")
        return self

    def baseline(self) -> ConfigV2:
        """The one baseline configuration (validated to exist)."""
        return next(c for c in self.configs if c.effective_role == "baseline")


def v1_to_v2(old: ReportV1) -> ReportV2:
    """Migrate a v1 report to v2: same content, roles made explicit from the keys."""
    data = old.model_dump(mode="json", exclude={"schema_version"})
    for config in data["configs"]:
        config["role"] = "baseline" if config["key"] == "baseline" else "tuned"
    data["schema_version"] = 2
    return ReportV2.model_validate(data)


# NonEmptyStr re-exported for models elsewhere that extend v2 configs.
__all__ = [
    "ConfigDetail",
    "ConfigV2",
    "NonEmptyStr",
    "ReportV2",
    "UpdateV2",
    "require_schema_version",
    "v1_to_v2",
]
