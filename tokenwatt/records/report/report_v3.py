"""Report record, version 3: version 2 with the whole SLO search kept.

Version 2 kept the search's probes (``sweep``) and only the repeats at the final rate: a
repeat that missed the SLO, and the back-off after it, left no trace, so a page could show
probes that passed at 45 req/s beside a result of 38.25 req/s without saying why. Version 3
replaces ``sweep`` with ``search``: every window the run measured, probes and repeats, in
the order measured, each with its verdict, failure reason, p99s, goodput, error kinds and
samples and warnings. Everything else is v2's (``repeats_detail`` still gives the power
detail of the repeats the result counts).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from tokenwatt.records.report.report_v1 import ReportV1, check_configs
from tokenwatt.records.report.report_v2 import (
    ConfigDetail,
    ReportV2,
    RunFileV2,
    UpdateV2,
    require_schema_version,
)
from tokenwatt.records.shared.base import (
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    NonNegMeasure,
    Percent,
    PosFloat,
    PosInt,
    StrictModel,
    goodput_mismatch,
)
from tokenwatt.records.shared.cost import CloudCost
from tokenwatt.records.shared.interval import MeanCI, QuantileCI
from tokenwatt.records.spec.mode import ModeOverride, RunMode

LatencyMsV3 = NonNegFloat | Literal["inf"] | None
"""A p99 in ms; ``"inf"`` when failed requests reached the 99th percentile (they count as
infinitely slow); null when the window had no sample of it."""


CDF_LEVELS_PCT: tuple[float, ...] = (*(float(q) for q in range(1, 100)), 99.9, 100.0)
"""The fixed grid of quantile levels (%) a report keeps latency distributions at: p1 to
p99 in steps of one, p99.9, and p100 (the largest value)."""


class LatencyDistributionV3(StrictModel):
    """A configuration's TTFT and TPOT distributions at its found operating point, as
    quantiles on the fixed grid :data:`CDF_LEVELS_PCT`, from the run's per-request file.

    The requests are those that arrived in the windows of the repeats at the found load
    (after the last back-off; warm-up, drain and client-cancelled requests left out). As in
    the windows' percentiles, a failed request counts as infinitely slow (``"inf"``) and a
    one-token output has no TPOT. Quantiles use the linear method (NumPy's default,
    Hyndman and Fan's definition 7): the value at rank q/100 × (n - 1) of the sorted sample,
    interpolated between neighbours.
    """

    levels_pct: list[float] = Field(
        min_length=1,
        max_length=len(CDF_LEVELS_PCT),
        description="The quantile levels (%), ascending: p1..p99, p99.9 and p100 (the max).",
    )
    requests: PosInt = Field(
        description="Requests the TTFT quantiles are over (failed ones included)."
    )
    ttft_ms: list[LatencyMsV3] = Field(
        description="Time to first token (ms) at each level of levels_pct, in order, from "
        'the scheduled time; "inf" where failed requests reach the level.'
    )
    tpot_requests: NonNegInt = Field(
        description="Requests the TPOT quantiles are over: one-token outputs left out."
    )
    tpot_ms: list[LatencyMsV3] = Field(
        default_factory=list,
        description="Time per output token (ms) at each level of levels_pct, in order; "
        "empty when no request had a TPOT.",
    )

    @model_validator(mode="after")
    def _one_value_per_level(self) -> LatencyDistributionV3:
        n = len(self.levels_pct)
        if len(self.ttft_ms) != n:
            raise FieldValueError("ttft_ms", f"{len(self.ttft_ms)} values for {n} levels")
        if len(self.tpot_ms) != (n if self.tpot_requests else 0):
            raise FieldValueError(
                "tpot_ms",
                f"{len(self.tpot_ms)} values for {n} levels and {self.tpot_requests} requests",
            )
        if any(b <= a for a, b in zip(self.levels_pct, self.levels_pct[1:], strict=False)):
            raise FieldValueError("levels_pct", "levels must be strictly ascending")
        return self


class ErrorSampleV3(StrictModel):
    """One failed request of a window, as the collector kept it.

    ``kind`` is the error kind (``connect``, ``timeout``, ``http_500``, …); ``exception`` the
    client's exception class; ``message`` its message; ``status`` the HTTP status, if a
    response came; ``body`` the first bytes of the error body. The collector caps the texts
    and scrubs credentials from them before they reach a record.
    """

    kind: NonEmptyStr
    """The request's error kind (connect, timeout, http_500, ...)."""
    exception: str | None = None
    """The client's exception class, if any."""
    message: str | None = None
    """The exception's message (capped, credentials scrubbed)."""
    status: int | None = None
    """The HTTP status, if a response came."""
    body: str | None = None
    """The first bytes of the error body (capped, credentials scrubbed)."""


class SearchWindowV3(StrictModel):
    """One window of the SLO search, probe or repeat, in the order it was measured.

    ``step``: a search ``probe`` (``phase``: grow, list or bisect; null when unknown) or a
    measurement ``repeat`` (``backoff``: how many back-offs preceded its rate, 0 at the
    found rate; null when unknown, as in records migrated from v2). ``remeasured``: the
    window missed while the client itself lagged, so it was measured once more and its
    verdict replaced by the next window's. Rates in req/s, p99s in ms (:data:`LatencyMsV3`),
    goodput in tok/s. ``error_kinds`` counts failed requests per kind; ``error_samples``
    holds a few of them per kind. ``warnings`` are the window's own flags in words;
    ``valid`` is false when the window cannot be trusted (``invalid_reason`` says why).
    """

    step: Literal["probe", "repeat"]
    """probe (a window of the SLO search) or repeat (a measurement window at the found load, or a
    fixed-load window)."""
    phase: Literal["grow", "list", "down", "bisect"] | None = None
    """For a probe, the search phase: grow, list, down (below a first probe that missed) or
    bisect; null for repeats and when unknown."""
    backoff: NonNegInt | None = None
    """For a repeat, how many back-offs preceded its load (0 at the found load); null for probes and
    when unknown (records migrated from v2)."""
    rate_rps: PosFloat
    """The window's load (req/s): set for open-loop windows, measured for closed-loop ones."""
    slo_pass: bool
    """The window's SLO verdict (for a remeasured window, the verdict it had before being replaced).
    """
    remeasured: bool = False
    """The window missed while the client itself lagged, so it was measured once more and its
    verdict replaced by the next window's."""
    failure_reason: str | None = None
    """Why the window failed the SLO, in words; null when it passed."""
    stopped_early: bool = False
    """The window was cut short because it had already missed the SLO beyond doubt."""
    ttft_p99_ms: LatencyMsV3 = None
    """The window's p99 time to first token (ms; "inf" when failures reached the 99th percentile;
    null without samples)."""
    tpot_p99_ms: LatencyMsV3 = None
    """The window's p99 time per output token (ms; "inf" when failures reached the 99th percentile;
    null without samples)."""
    goodput_tok_s: NonNegMeasure | None = None
    """The window's goodput (tok/s); null when not known (probes migrated from v2)."""
    requests: NonNegInt | None = None
    """Requests that arrived in the window; null when unknown."""
    errors: NonNegInt | None = None
    """Requests of the window the engine failed; null when unknown."""
    error_kinds: dict[str, NonNegInt] = Field(default_factory=dict)
    """Failed requests counted per error kind."""
    error_samples: list[ErrorSampleV3] = Field(default_factory=list)
    """A few failed requests per error kind."""
    warnings: list[str] = Field(default_factory=list)
    """The window's own flags, in words."""
    valid: bool = True
    """False when the window cannot be trusted (see invalid_reason); such a window fails the SLO."""
    invalid_reason: str | None = None
    """Why the window is invalid; null when valid."""
    profile: Literal["poisson", "constant", "concurrency"] = Field(
        default="poisson",
        description="How the window offered its load (the run record's "
        "WindowSummary.profile); reports made before it existed read as 'poisson'.",
    )
    concurrency: PosInt | None = Field(
        default=None,
        description="Closed-loop clients of the window; rate_rps is then measured, not set.",
    )
    transport_retries: NonNegInt = Field(
        default=0,
        description="Requests sent again on a new connection because they provably never "
        "reached the server (never engine errors).",
    )
    cancelled_by_client: NonNegInt = Field(
        default=0, description="Requests the client cancelled itself (an early stop)."
    )
    prefix_cache_hit_pct: Percent | None = Field(
        default=None,
        description="The engine's prefix-cache hit rate over the window (%), from its "
        "/metrics; None where the engine exposes none.",
    )
    ttft_p99_ci_ms: QuantileCI | None = Field(
        default=None,
        description="95% distribution-free interval of the window's p99 TTFT (ms), as the "
        "run record keeps it; null when none was kept.",
    )
    tpot_p99_ci_ms: QuantileCI | None = Field(
        default=None, description="The same for the window's p99 TPOT (ms)."
    )
    ttft_p50_ms: LatencyMsV3 = Field(
        default=None,
        description='The window\'s median TTFT (ms; "inf" when failed requests reached the '
        "median); null in records made before it was kept.",
    )
    tpot_p50_ms: LatencyMsV3 = Field(
        default=None, description="The same for the window's median TPOT (ms)."
    )
    scout: bool = Field(
        default=False,
        description="A probe measured over a shorter scout window than the spec's "
        "measurement.search_window_s (collect --fast-search) without being stopped early; "
        "false for other windows and in reports made before it was kept.",
    )
    slo_beyond_doubt: bool | None = Field(
        default=None,
        description="Whether the verdict holds across both p99 intervals (false: 'pass, "
        "but not beyond doubt' or 'miss, but not beyond doubt'); null when the intervals do "
        "not bear on it or were not kept. The verdict itself is slo_pass.",
    )


class ConfigV3(ConfigDetail):
    """A configuration with the whole SLO search.

    ``search``: every window, in order (see :class:`SearchWindowV3`). ``whole_search``:
    true when ``search`` holds every window the run measured (reports made by v3); false
    for a record migrated from v2, which kept only the probes and the final repeats.
    ``search_warnings``: the search's own warnings (e.g. pass/fail not monotonic in rate).
    ``repeats_planned``: repeats per rate the spec asked for. ``complete`` is false when the
    run stopped early; ``incomplete_reason`` says why.
    """

    repeats: NonNegInt
    """Repeats at the found load (repeats_detail); 0 for a configuration whose result is not
    measured (result_status none_met or inconclusive), which has no found load."""
    search: list[SearchWindowV3] = Field(default_factory=list)
    """Every window the run measured, probes and repeats, in the order measured."""
    whole_search: bool = False
    """True when search holds every window the run measured; false for a record migrated from v2,
    which kept only the probes and the final repeats."""
    search_warnings: list[str] = Field(default_factory=list)
    """The search's own warnings (e.g. pass/fail not monotonic in the load)."""
    repeats_planned: PosInt | None = None
    """Repeats per load the spec asked for (measurement.repeats, after the mode preset)."""
    complete: bool = True
    """False when the configuration's run stopped early (incomplete_reason says why)."""
    incomplete_reason: str | None = None
    """Why the run stopped early, in words; null for a complete run."""
    idle_power_w: PosFloat | None = Field(
        default=None,
        description="The boards' idle power (W) measured before the run's first window; "
        "board power in every window includes it. None when not measured.",
    )
    prompts_drawn: NonNegInt | None = Field(
        default=None, description="Requests the run drew from its workload (None: unknown)."
    )
    prompts_distinct: NonNegInt | None = Field(
        default=None, description="Different prompts among them (equal: none sent twice)."
    )
    ttft_p99_ci_ms: QuantileCI | None = Field(
        default=None,
        description="95% interval of the headline p99 TTFT (ms): that of the repeat whose "
        "p99 it is (the worst finite one); null when not kept.",
    )
    tpot_p99_ci_ms: QuantileCI | None = Field(
        default=None, description="The same for the headline p99 TPOT (ms)."
    )
    settings: dict[str, str] = Field(
        default_factory=dict,
        description="What the run record says about this configuration's serving setup, as "
        "text by name (engine, engine_version, engine_flags, kv_dtype, weight_dtype, "
        "quantization, tensor_parallel, replicas, accelerator, driver, ...), for the page's "
        "configuration comparison; empty in records made before it was kept.",
    )
    goodput_ci_tok_s: MeanCI | None = Field(
        default=None,
        description="95% Student t-interval of the mean goodput over the repeats at the "
        "found rate (tok/s), from repeats_detail; null with one repeat or a missed repeat.",
    )
    goodput_delta_ci_pct: MeanCI | None = Field(
        default=None,
        description="95% Welch t-interval of the goodput difference from the baseline "
        "(tuned − baseline repeat means), as % of the baseline's repeat mean; null for the "
        "baseline, with one repeat on either side, or a missed repeat.",
    )
    tokens_per_joule_delta_ci_pct: MeanCI | None = Field(
        default=None,
        description="The same for tokens per joule, from each repeat's goodput tokens ÷ "
        "energy; null without every repeat's energy.",
    )
    mode: RunMode | None = Field(
        default=None,
        description="The run's mode preset (smoke, quick or full); null in reports made "
        "before it was recorded.",
    )
    mode_overrides: list[ModeOverride] | None = Field(
        default=None,
        description="The spec values the mode replaced, from the run record (spec value → "
        "value measured with); empty when it replaced none, null when the run record did "
        "not say.",
    )
    cost: CloudCost | None = Field(
        default=None,
        description="What the run cost on a rented instance (tokenwatt cloud session), from "
        "the run record: instance type, price per hour, the run's share of the session's "
        "bill; null for a run not measured in a cloud session.",
    )
    result_status: Literal["measured", "none_met", "inconclusive"] = Field(
        default="measured",
        description="The run's result status (run record result.outcome()): measured; "
        "none_met (no load met the SLO down to the search's floor, a measured finding); "
        "inconclusive (not measured: no goodput figure, no comparison, no capacity credit). "
        "Reports made before it was kept read as measured.",
    )
    result_reason: str | None = Field(
        default=None,
        description="Why the result is none_met or inconclusive, in words; null when measured.",
    )
    latency_at_operating_point: LatencyDistributionV3 | None = Field(
        default=None,
        description="TTFT and TPOT distributions (quantiles) over the requests of the "
        "repeats at the found load, from the run's per-request file; null when the run kept "
        "no such file or tokenwatt report did not find it.",
    )

    @model_validator(mode="after")
    def _goodput_of_its_repeats(self) -> ConfigV3:
        # A measured goodput the page and capacity math use must be what its repeats give
        # (an edited report would otherwise publish a figure nothing measured).
        passing = [r.goodput_tok_s for r in self.repeats_detail if r.slo_pass]
        if self.result_status == "measured" and passing:
            why = goodput_mismatch(self.goodput_tok_s, passing)
            if why is not None:
                raise FieldValueError("goodput_tok_s", why)
        return self


class ReportV3(ReportV1):
    """Report record v3 (the newest). Its ``schema_version`` (3) is required in files."""

    model_config = ConfigDict(json_schema_extra=require_schema_version)
    schema_version: Literal[3] = 3  # type: ignore[assignment]
    """Version of the report format (3)."""
    runs: NonNegInt
    """The most repeats any configuration had at its found load (0 when none was measured)."""
    configs: list[ConfigV3] = Field(min_length=1)  # type: ignore[assignment]
    """The configurations measured, each with its whole SLO search; exactly one has role baseline.
    """
    updates: list[UpdateV2] = Field(default_factory=list)
    """Dated updates (errata), shown at the top of the page."""
    run_files: list[RunFileV2] = Field(default_factory=list)
    """The run records the report was made from, with their hashes."""
    simulated: bool = False
    """True when any configuration was measured on the simulated engine."""
    demo: bool = False
    """True when made with tokenwatt report --demo (smoke or simulated runs allowed): a
    demonstration, not a measurement."""
    variance_band_measured_pct: NonNegFloat | None = Field(
        default=None,
        description="The variance band measured from the repeats (±%): the widest of the "
        "configurations' half-range of repeat goodput over its mean, from repeats_detail. "
        "variance_band_pct is the band the report states, which decides capacity credit; a "
        "stated band narrower than this one is flagged. Null when not measured.",
    )

    @model_validator(mode="after")
    def _one_baseline(self) -> ReportV3:
        baselines = [i for i, c in enumerate(self.configs) if c.effective_role == "baseline"]
        check_configs(list(self.configs), baselines, "role")
        return self

    def baseline(self) -> ConfigV3:
        """The one baseline configuration (validated to exist)."""
        return next(c for c in self.configs if c.effective_role == "baseline")


def v2_to_v3(old: ReportV2) -> ReportV3:
    """Migrate a v2 report to v3 (pure): ``sweep`` becomes the probe windows of ``search``
    and ``repeats_detail`` its repeat windows (back-off unknown); ``whole_search`` is false,
    since v2 kept no repeat before the last back-off. Every other value is kept."""
    data = old.model_dump(mode="json", exclude={"schema_version"})
    for config, cfg in zip(data["configs"], old.configs, strict=True):
        del config["sweep"]
        probes = [
            SearchWindowV3(
                step="probe",
                rate_rps=p.rate_rps,
                slo_pass=p.slo_pass,
                failure_reason=p.failure_reason,
                stopped_early=p.stopped_early,
                ttft_p99_ms=p.ttft_p99_ms,
                tpot_p99_ms=p.tpot_p99_ms,
            )
            for p in cfg.sweep
        ]
        repeats = [
            SearchWindowV3(
                step="repeat",
                rate_rps=r.rate_rps,
                slo_pass=r.slo_pass,
                ttft_p99_ms=r.ttft_p99_ms,
                tpot_p99_ms=r.tpot_p99_ms,
                goodput_tok_s=r.goodput_tok_s,
            )
            for r in cfg.repeats_detail
        ]
        config["search"] = [w.model_dump(mode="json") for w in probes + repeats]
        config["whole_search"] = False
    data["schema_version"] = 3
    return ReportV3.model_validate(data)


__all__ = [
    "CDF_LEVELS_PCT",
    "ConfigV3",
    "ErrorSampleV3",
    "LatencyDistributionV3",
    "LatencyMsV3",
    "ReportV1",
    "ReportV3",
    "SearchWindowV3",
    "v2_to_v3",
]
