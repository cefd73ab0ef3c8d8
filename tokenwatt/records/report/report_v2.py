"""Report record, version 2: version 1 plus optional detail.

Adds, all optional: a per-configuration ``role``, per-repeat values, the SLO-search probes,
a power timeline, an MBU breakdown, paired accuracy statistics, dated updates (errata),
the hashes of the run files a report was made from, and ``simulated``/``demo`` flags.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from tokenwatt.records.report.report_v1 import (
    ConfigAccuracyV1,
    ConfigV1,
    ReportV1,
    check_configs,
)
from tokenwatt.records.shared.base import (
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    NonNegMeasure,
    Percent,
    PosFloat,
    StrictModel,
    energy_mismatch,
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
    """The repeat's load (req/s): the rate set, or the rate measured for a closed-loop window."""
    goodput_tok_s: NonNegMeasure
    """The repeat window's goodput (tok/s): output tokens of its completed requests / window_s."""
    ttft_p99_ms: NonNegFloat | None = None
    """The repeat's p99 time to first token (ms); null when infinite (failures reached the 99th
    percentile) or without samples."""
    tpot_p99_ms: NonNegFloat | None = None
    """The repeat's p99 time per output token (ms); null when infinite or without samples."""
    slo_pass: bool
    """Whether the repeat met the SLO."""
    window_s: PosFloat | None = None
    """Length of the repeat's window (s)."""
    mean_power_w: PosFloat | None = None
    """Mean power over the window (W), summed over the boards; null without a valid power
    measurement."""
    energy_j: PosFloat | None = None
    """Energy over the window (J), summed over the boards; null without a valid power measurement.
    """
    power_refused: list[str] = Field(default_factory=list)
    """Why the window's power was refused, in the run record's words (its power
    ``invalid_reasons``: the counter against the samples, the resolution, the plausible band,
    …); empty when the power was valid or not measured. The page prints them in place of
    the figures."""
    slo_attainment_pct: Percent | None = None
    """Share of the window's requests that met both SLO limits individually (%)."""
    power_samples: NonNegInt | None = None
    """Power samples taken in the window; null without a power source."""
    throttle_counts: dict[str, NonNegInt] = Field(default_factory=dict)
    """Power samples of the window with each clock-event (throttle) reason set."""
    sm_clock_mhz: NonNegFloat | None = None
    """Mean SM (graphics) clock over the window (MHz); null where not read."""
    mem_clock_mhz: NonNegFloat | None = None
    """Mean memory clock over the window (MHz); null where not read."""

    @model_validator(mode="after")
    def _energy_of_its_power(self) -> RepeatV2:
        # Tokens per joule divides by energy_j: an edited energy or window length would
        # publish a figure nothing measured (:func:`energy_mismatch`).
        if self.energy_j is not None and self.mean_power_w is not None and self.window_s:
            why = energy_mismatch(self.energy_j, self.mean_power_w, self.window_s)
            if why is not None:
                raise FieldValueError("energy_j", why)
        return self


class ProbeV2(StrictModel):
    """One SLO-search probe. ``failure_reason`` names the limit missed, if any."""

    rate_rps: PosFloat
    """The probe's rate (req/s)."""
    slo_pass: bool
    """Whether the probe met the SLO."""
    ttft_p99_ms: NonNegFloat | None = None
    """The probe's p99 time to first token (ms); null when infinite or without samples."""
    tpot_p99_ms: NonNegFloat | None = None
    """The probe's p99 time per output token (ms); null when infinite or without samples."""
    failure_reason: str | None = None
    """The limit the probe missed, in words; null when it passed."""
    stopped_early: bool = False
    """The probe was cut short because it had already missed the SLO beyond doubt."""


class PowerSampleV2(StrictModel):
    """One point of the power timeline: seconds from window start, summed board power (W)."""

    t_s: NonNegFloat
    """Seconds from the start of the window."""
    power_w: NonNegFloat
    """Power at that moment (W), summed over the boards."""
    throttle: list[str] = Field(default_factory=list)
    """Clock-event (throttle) reasons set at that sample."""


class MbuBreakdownV2(StrictModel):
    """Derived memory traffic per second (GB/s, 10^9 bytes/s): weights vs KV cache."""

    weights_gbs: NonNegFloat
    """Memory traffic for reading the weights (GB/s, 10^9 bytes/s): weight bytes per decode step ×
    decode steps/s."""
    kv_gbs: NonNegFloat
    """Memory traffic for reading the KV cache (GB/s): KV bytes per decode step × decode steps/s."""


class ConfigAccuracyV2(ConfigAccuracyV1):
    """Accuracy with the paired statistics against the baseline (same items)."""

    items: NonNegInt | None = None
    """Suite items scored (per seed); the paired statistics use the items both configurations
    answered."""
    seeds: NonNegInt | None = None
    """Passes over the suite with different sampling seeds."""
    ci_low_pts: float | None = Field(default=None, ge=-100, le=100)
    """Lower end of the 95% paired bootstrap interval of the score difference from the baseline
    (percentage points); null for the baseline or when the items differ."""
    ci_high_pts: float | None = Field(default=None, ge=-100, le=100)
    """Upper end of that interval (percentage points)."""
    mcnemar_p: float | None = Field(default=None, ge=0, le=1)
    """Exact McNemar p-value of the items one configuration answered correctly and the other not
    (binomial test on the discordant pairs); null when not computed."""


class ConfigDetail(ConfigV1):
    """The optional detail v2 added to a configuration, shared by v2 and v3 (which keeps
    all of it except ``sweep``)."""

    role: Literal["baseline", "tuned"] | None = None
    """baseline or tuned; null in v1 records, where the key 'baseline' marks the baseline."""
    accuracy: ConfigAccuracyV2 | None = None
    """The configuration's accuracy with the paired statistics against the baseline; null without an
    accuracy run."""
    repeats_detail: list[RepeatV2] = Field(default_factory=list)
    """Each repeat at the found load, with its power, energy and clocks."""
    power_timeline: list[PowerSampleV2] = Field(default_factory=list)
    """Power over one repeat's window, thinned to at most 600 points, for the power chart; empty
    without power."""
    mbu_breakdown: MbuBreakdownV2 | None = None
    """Memory traffic at the found load split into weights and KV cache; null without an MBU figure.
    """
    simulated: bool = False
    """True when the configuration was measured on the simulated engine."""

    @property
    def effective_role(self) -> str:
        """``role`` when given, else ``baseline`` for the key ``baseline`` (v1 convention)."""
        if self.role is not None:
            return self.role
        return "baseline" if self.key == "baseline" else "tuned"


class ConfigV2(ConfigDetail):
    """A configuration with the optional v2 detail: ``sweep`` holds the SLO-search probes."""

    sweep: list[ProbeV2] = Field(default_factory=list)
    """The SLO search's probes, in the order measured."""


class UpdateV2(StrictModel):
    """A dated update (erratum) shown as a notice at the top of the report page."""

    date: dt.date
    """The day of the update."""
    text: NonEmptyStr
    """What changed and why, shown at the top of the page."""
    run_file: NonEmptyStr | None = None
    """The run record (a path in run_files) whose change this update records (tokenwatt
    erratum): tokenwatt build then accepts that run record as run_sha256 gives it. Null: an
    update about the note itself."""
    run_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """SHA-256 (hex) of run_file as this update accepts it; null with run_file set: the run
    record was removed from the archive."""

    @model_validator(mode="after")
    def _sha_with_its_run(self) -> UpdateV2:
        if self.run_sha256 is not None and self.run_file is None:
            raise FieldValueError("run_sha256", "is set without run_file (which run record?)")
        return self


class RunFileV2(StrictModel):
    """A run record a report was made from, with its SHA-256 (hex)."""

    path: NonEmptyStr
    """The run record's file name as given to tokenwatt report."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 (hex) of the run record file's bytes."""


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
    """Version of the report format (2)."""
    configs: list[ConfigV2] = Field(min_length=1)  # type: ignore[assignment]
    """The configurations measured; exactly one has role baseline."""
    updates: list[UpdateV2] = Field(default_factory=list)
    """Dated updates (errata), shown at the top of the page."""
    run_files: list[RunFileV2] = Field(default_factory=list)
    """The run records the report was made from, with their hashes."""
    simulated: bool = False
    """True when any configuration was measured on the simulated engine."""
    demo: bool = False
    """True when made with tokenwatt report --demo (smoke or simulated runs allowed): a
    demonstration, not a measurement."""

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
