"""The run record written by ``tokenwatt collect`` (``runs/*.json``)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, model_validator

from tokenwatt import __version__
from tokenwatt.records.run.accuracy import AccuracyResult
from tokenwatt.records.run.environment import EngineMetrics, Environment, ToolInfo
from tokenwatt.records.run.power import PowerWindow
from tokenwatt.records.run.window import WindowSummary
from tokenwatt.records.shared.base import (
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    PlainName,
    PosFloat,
    PosInt,
    StrictModel,
)
from tokenwatt.records.shared.cost import CloudCost
from tokenwatt.records.spec.launch import EngineProcess
from tokenwatt.records.spec.mode import ModeOverride
from tokenwatt.records.spec.spec import Spec

SIM_ENGINE_NAME = "tokenwatt-sim"
"""The simulated engine's name: the first word of what its ``/version`` reports."""

SIM_VERSION = f"{SIM_ENGINE_NAME} {__version__}"
"""What the simulated engine's ``/version`` reports; the collector marks records of such an
engine simulated. Here, not in :mod:`tokenwatt.sim`, so that the collector recognises the
simulator without importing it."""


class Probe(StrictModel):
    """One SLO-search probe (``phase``: grow, list, down, bisect)."""

    phase: Literal["grow", "list", "down", "bisect"]
    """The search phase that chose the probe's load: grow (from the start load, multiplied by the
    growth factor until a miss), list (the spec's sweep.rates), down (the first probe missed: the
    load divided by the growth factor until a pass or the floor) or bisect (between the highest
    pass and the lowest miss)."""
    window: WindowSummary
    """What the probe's window measured, with its SLO verdict."""
    metrics: EngineMetrics | None = None
    """The engine's /metrics over the window; null when not scraped."""
    warmup_s: NonNegFloat = 0.0
    """Seconds of load before the window began, whose requests are not counted."""


class Repeat(StrictModel):
    """One measurement repeat at the found rate (``backoff`` counts rate reductions)."""

    window: WindowSummary
    """What the repeat's window measured, with its SLO verdict."""
    power: PowerWindow | None = None
    """Power over the window; null without a power source."""
    metrics: EngineMetrics | None = None
    """The engine's /metrics over the window; null when not scraped."""
    backoff: NonNegInt = 0
    """How many times the rate had been reduced before this repeat (a repeat that missed the SLO
    backs off); 0 at the rate the search found."""


class MbuResult(StrictModel):
    """MBU inputs and result (bytes per decode step, steps/s, TB/s, %)."""

    weights_bytes_per_step: NonNegFloat
    """Bytes of weights read per decode step, over all GPUs (the active experts' share for a
    mixture-of-experts model)."""
    kv_bytes_per_step: NonNegFloat
    """Bytes of KV cache read per decode step: running batch × mean context (prompt + half the
    output, tokens) × KV bytes per token of the model's geometry and kv_dtype."""
    decode_steps_per_s: NonNegFloat
    """Decode steps per second at the found load: mean goodput of the passing repeats (tok/s) /
    running_batch."""
    running_batch: NonNegFloat
    """Mean requests running at once over the passing repeats at the found load (the engine's
    running gauge, EngineMetrics.running_mean)."""
    rated_bw_tbs_per_gpu: PosFloat
    """Rated memory bandwidth per GPU used (TB/s, 10^12 bytes/s)."""
    gpus: PosInt
    """GPUs the bandwidth is summed over: those the power source reads, else tensor_parallel ×
    replicas."""
    mbu_pct: NonNegFloat
    """Memory-bandwidth utilisation (%) = bytes per step × decode steps/s ÷ (rated TB/s × 10^12 ×
    GPUs) × 100; above 100 points at a wrong rated bandwidth or model geometry."""


ResultStatus = Literal["measured", "none_met", "inconclusive"]
"""What a run's result is: ``measured`` (a load met the SLO and the result stands on clean
windows), ``none_met`` (a measured finding: no load met the SLO, down to the search's floor or
among the listed loads) or ``inconclusive`` (the result would rest on windows that cannot be
trusted, or the found boundary did not repeat: not measured, no number)."""


class SearchResult(StrictModel):
    """The outcome of the SLO search and the repeats (rate in req/s, goodput in tok/s)."""

    rate_rps: NonNegFloat
    """The load found: the highest rate (req/s) whose repeats met the SLO, after any back-off; for a
    closed-loop run the rate measured at the found concurrency; 0 when none met it."""
    goodput_tok_s: NonNegFloat
    """The run's SLO goodput (tok/s): mean goodput of the repeats at the found load; 0 when none met
    the SLO."""
    slo_pass_count: NonNegInt
    """Repeats at the found load that met the SLO."""
    repeats: NonNegInt
    """Repeats measured at the found load."""
    backoffs: NonNegInt = 0
    """Times a repeat missed the SLO and the load was reduced before measuring again."""
    gpu_seconds: NonNegFloat = 0.0
    """Seconds the run held the engine under load: every probe's and repeat's warm-up plus window.
    """
    gpu_seconds_saved: NonNegFloat = 0.0
    """Window seconds not spent because probes that missed the SLO beyond doubt were stopped early.
    """
    warnings: list[str] = Field(default_factory=list)
    """The search's own warnings in words (e.g. pass/fail not monotonic in the load)."""
    concurrency: PosInt | None = Field(
        default=None,
        description="For a closed-loop run (measurement.profile: concurrency): the number "
        "of clients found (or, for fixed loads, the one with the highest goodput among "
        "those that met the SLO); rate_rps is then the rate measured at it. Null for "
        "open-loop runs and when none met the SLO.",
    )
    status: ResultStatus | None = Field(
        default=None,
        description="measured: the result stands on clean windows; none_met: no load met "
        "the SLO (down to the search's floor, or among the listed loads), a measured "
        "finding; inconclusive: the result would rest on windows that cannot be trusted or "
        "the found boundary did not repeat, so rate and goodput are no measurement. Null in "
        "records written before it was kept: read by outcome() (measured when goodput is "
        "above 0, else inconclusive).",
    )
    status_reason: str | None = Field(
        default=None,
        description="Why the result is none_met or inconclusive, in words; null when measured.",
    )
    floor_rps: PosFloat | None = Field(
        default=None,
        description="The lowest load the search would probe (req/s; clients in a closed "
        "loop) when its first probe missed: sweep.min_rps, else start_rps / 64 but not "
        "below 0.1 req/s. Null for fixed loads and in older records.",
    )

    def outcome(self) -> tuple[ResultStatus, str | None]:
        """(status, reason) of the result; for records written before ``status`` was kept,
        measured when the goodput is above 0, else inconclusive: such a search stopped at
        its first miss without looking below it, or its repeats never met the SLO."""
        if self.status is not None:
            return self.status, self.status_reason
        if self.goodput_tok_s > 0:
            return "measured", None
        return "inconclusive", (
            "recorded before results had a status: no load met the SLO, and the search "
            "then did not look below its first probe"
        )


class DatasetStats(StrictModel):
    """The conversation dataset a run replayed (``workload.dataset``) and what it used."""

    kind: Literal["sharegpt"] = Field(description="The dataset's format.")
    sha256: NonEmptyStr = Field(description="SHA-256 (hex) of the file's bytes.")
    entries: NonNegInt = Field(description="Entries in the file.")
    used: NonNegInt = Field(description="Entries that became requests (text prompts).")
    skipped: dict[str, NonNegInt] = Field(
        default_factory=dict,
        description="Entries left out, by reason (malformed, too short, longer than the "
        "engine's context).",
    )
    prompt_tokens: NonNegInt = Field(
        description="Prompt tokens of the used entries, summed, as the model's tokenizer "
        "measured them (no chat template)."
    )
    output_tokens: NonNegInt = Field(
        description="Output tokens asked for by the used entries, summed: each reply's "
        "length by the model's tokenizer."
    )


class PromptStats(StrictModel):
    """The prompts a run sent, from its one workload stream (so a reader can tell whether
    an engine's prefix cache could have served repeats)."""

    drawn: NonNegInt = Field(
        description="Requests drawn from the workload in the whole run: the windows' own, "
        "plus the warm-ups' and those sent while a window drained (load is kept on until "
        "its last request ends) or left unsent when a window ended."
    )
    distinct_prompts: NonNegInt = Field(description="Different prompts among them.")
    repeated_prompts: NonNegInt = Field(
        description="Requests whose prompt had been sent before in the run (0 unless the "
        "workload repeats on purpose, a trace is shorter than the run, or prompts are tiny)."
    )
    redrawn: NonNegInt = Field(
        default=0, description="Random prompts drawn again because they repeated one."
    )
    clipped: NonNegInt = Field(
        default=0, description="Requests shortened to fit the engine's context length."
    )
    notes: list[str] = Field(
        default_factory=list, description="What a reader must know about the prompts, in words."
    )
    dataset: DatasetStats | None = Field(
        default=None,
        description="The conversation dataset replayed (workload.dataset); null for "
        "synthetic prompts and traces.",
    )


class RequestsLog(StrictModel):
    """The per-request file written beside the run record (compressed JSON Lines).

    One line per request the load generator sent in a probe or repeat (warm-up and drain
    requests included, marked ``in_window: false``); the format is described in
    :mod:`tokenwatt.collect.measure.request_log`.
    """

    file: NonEmptyStr = Field(
        description="The file's name, in the run record's folder (RUN.requests.jsonl.gz)."
    )
    sha256: NonEmptyStr = Field(description="SHA-256 (hex) of the file's bytes as written.")
    requests: NonNegInt = Field(description="Lines in the file: requests of every window.")
    windows: NonNegInt = Field(description="Windows (probes and repeats) the file covers.")


Interruption = Literal["ctrl-c", "sigterm", "sighup", "engine-died"]
"""What stopped a run early (:attr:`RunRecord.interrupted`)."""


class RunRecord(StrictModel):
    """A measured configuration: spec, environment, probes, repeats, power, MBU, accuracy.

    ``complete`` is false when the run stopped early (Ctrl-C, engine died); everything
    measured up to then is kept, ``incomplete_reason`` says why in words and
    ``interrupted`` names the cause for programs.
    """

    schema_version: Literal[1] = 1
    """Version of the run record format (1)."""
    tool: ToolInfo
    """The TokenWatt Bench that wrote the record."""
    label: PlainName
    """The configuration's name on pages and in tables (--label or the spec's)."""
    role: Literal["baseline", "tuned"]
    """baseline (the configuration others are compared with) or tuned."""
    mode: Literal["smoke", "quick", "full"]
    """The mode preset measured with: smoke (a pipeline check, not a measurement), quick (shorter
    windows, fewer repeats) or full (the spec as written)."""
    simulated: bool = False
    """True when the engine measured was the simulated one (tokenwatt-sim): the numbers are no
    measurement."""
    spec: Spec
    """The spec the run measured with, as effective: point-and-shoot options and the mode preset
    applied (mode_overrides lists what the mode replaced)."""
    fingerprint: NonEmptyStr
    """Hash of the spec fields that make runs comparable (model, workload, SLO, measurement, ...);
    runs with different fingerprints cannot share a report."""
    command: str
    """The command line that made the run (secrets never included)."""
    started: dt.datetime
    """When the run started (ISO 8601 with UTC offset)."""
    finished: dt.datetime | None = None
    """When the run finished or was interrupted; null while it is still being written."""
    complete: bool = True
    """False when the run stopped early; everything measured up to then is kept."""
    incomplete_reason: str | None = None
    """Why the run is incomplete, in words; null for a complete run."""
    interrupted: Interruption | None = Field(
        default=None,
        description=(
            "What stopped an incomplete run: 'ctrl-c' (the user interrupted it; the CLI "
            "exits with status 130), 'sigterm' or 'sighup' (a signal asked it to stop; status "
            "143 or 129, the window in flight kept and marked partial) or 'engine-died' (the "
            "engine stopped answering; status 1). None for a run that was not interrupted."
        ),
    )
    environment: Environment = Field(default_factory=Environment)
    """What was read at run time from the machine and the engine."""
    probes: list[Probe] = Field(default_factory=list)
    """The SLO search's probe windows, in the order measured."""
    repeats: list[Repeat] = Field(default_factory=list)
    """The measurement repeats (and fixed-load windows), in the order measured."""
    result: SearchResult | None = None
    """The search's outcome: load found, goodput, repeats and their passes; null when the run
    stopped before one."""
    mbu: MbuResult | None = None
    """Memory-bandwidth utilisation at the found load, with its inputs; null when it could not be
    computed (no geometry, no rated bandwidth, no engine gauges)."""
    accuracy: AccuracyResult | None = None
    """The accuracy suite's results; null when no suite was run."""
    engine_warnings: list[str] = Field(default_factory=list)
    """Warnings about the engine: known warnings found in its log, a served model that differs from
    the spec's, ..."""
    not_covered: list[str] = Field(default_factory=list)
    """What this run could not measure or vouch for, in words (shown in the report's "not covered"
    list)."""
    idle_power: PowerWindow | None = Field(
        default=None,
        description="Power measured before the first window with the engine idle "
        "(power.idle_s seconds); None when not measured. Board power in every window "
        "includes this idle floor.",
    )
    prompts: PromptStats | None = Field(
        default=None, description="The prompts the run sent (None: records before 0.2)."
    )
    requests_log: RequestsLog | None = Field(
        default=None,
        description="The per-request timings file beside the record, with its SHA-256 "
        "(None: not written, or a record made before it existed).",
    )
    engine_process: EngineProcess | None = Field(
        default=None,
        description="The engine collect started and stopped itself (engine.launch, "
        "--engine-cmd): its command line, log file, start-up time and how it ended. None "
        "when collect measured an engine that was already running.",
    )
    mode_overrides: list[ModeOverride] | None = Field(
        default=None,
        description="The spec values the mode (quick, smoke) replaced, with the spec's "
        "value and the one measured with; empty when the mode changed nothing (full mode "
        "never does), null in records made before it was recorded.",
    )
    spec_unstated: list[str] | None = Field(
        default=None,
        description="Spec fields nobody stated, whose value in spec is only the spec "
        "model's default (dotted paths, e.g. 'model.weight_dtype', 'model.kv_dtype'): a "
        "spec built from collect's flags names no dtype. Pages say 'not stated' for them "
        "and note what was computed from them (MBU). Empty when all were stated; null in "
        "records made before it was kept (a spec built from flags is then read from the "
        "command line).",
    )
    cost: CloudCost | None = Field(
        default=None,
        description="What the run cost on a rented instance (tokenwatt cloud session): "
        "instance type, price per hour and the run's share of the session's bill; null "
        "for a run not measured in a cloud session.",
    )

    @model_validator(mode="after")
    def _finished_after_started(self) -> RunRecord:
        if self.finished is None:
            return self
        if (self.finished.tzinfo is None) != (self.started.tzinfo is None):
            raise FieldValueError(
                "finished", "started and finished must both carry a UTC offset, or neither"
            )
        if self.finished < self.started:
            raise FieldValueError(
                "finished",
                f"{self.finished.isoformat()} is before started ({self.started.isoformat()})",
            )
        return self
