"""The run record written by ``tokenwatt collect`` (``runs/*.json``)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, model_validator

from tokenwatt import __version__
from tokenwatt.records.accuracy import AccuracyResult
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
from tokenwatt.records.cost import CloudCost
from tokenwatt.records.launch import EngineProcess
from tokenwatt.records.mode import ModeOverride
from tokenwatt.records.power import PowerWindow
from tokenwatt.records.spec import Spec
from tokenwatt.records.window import WindowSummary

SIM_ENGINE_NAME = "tokenwatt-sim"
"""The simulated engine's name: the first word of what its ``/version`` reports."""

SIM_VERSION = f"{SIM_ENGINE_NAME} {__version__}"
"""What the simulated engine's ``/version`` reports; the collector marks records of such an
engine simulated. Here, not in :mod:`tokenwatt.sim`, so that the collector recognises the
simulator without importing it."""


class ToolInfo(StrictModel):
    """Which TokenWatt Bench made the record."""

    name: str = "tokenwatt-bench"
    version: str
    git_commit: str | None = None


class Environment(StrictModel):
    """What was read at run time from the machine and the engine.

    ``kv_capacity_source`` says where ``kv_capacity_tokens`` came from (e.g. vLLM's
    ``vllm:cache_config_info`` blocks × block size, or llama.cpp's /props, an upper bound).
    ``context_length_tokens`` is the longest request (prompt + output, tokens) the engine
    accepts, as it reported before the first request; ``context_length_source`` names where
    it was read (vLLM ``max_model_len``, llama.cpp ``n_ctx``, ...).
    """

    gpu_name: str | None = None
    gpu_count: NonNegInt | None = None
    driver: str | None = None
    rated_bw_tbs_per_gpu: PosFloat | None = None
    engine_name: str | None = None
    engine_version: str | None = None
    engine_flags: list[str] = Field(default_factory=list)
    served_models: list[str] = Field(default_factory=list)
    kv_capacity_tokens: NonNegInt | None = None
    kv_capacity_source: str | None = None
    context_length_tokens: NonNegInt | None = None
    context_length_source: str | None = None
    hostname: str | None = None


class IdleStart(StrictModel):
    """Whether the engine was idle (running and waiting gauges at zero) before a window's
    warm-up, and how long the collector waited for it."""

    waited_s: NonNegFloat = Field(
        description="Seconds spent polling /metrics before the warm-up began."
    )
    idle: bool | None = Field(
        description=(
            "True: both gauges read zero; False: the bounded wait ran out with requests "
            "still running or waiting (the window started anyway, with a warning); None: "
            "not checked (no such gauges, or /metrics did not answer; see note)."
        )
    )
    running: NonNegFloat | None = Field(
        default=None, description="Running requests at the last read (summed gauge)."
    )
    waiting: NonNegFloat | None = Field(
        default=None, description="Waiting (queued) requests at the last read (summed gauge)."
    )
    note: str | None = Field(
        default=None, description="Why the check was skipped, or the warning when not idle."
    )


class EngineMetrics(StrictModel):
    """Engine ``/metrics`` over a window: means and maxima of the gauges, counter deltas.

    Prefix cache (None where the engine exposes none): ``prefix_cache_queries_tokens`` and
    ``prefix_cache_hits_tokens`` are the prompt tokens the engine looked up in its prefix
    cache and found there during the window (counter differences); ``prefix_cache_hit_pct``
    is 100 × hits / queries, or the mean of a sampled hit-rate gauge where the engine has
    no counters; ``prefix_cache_source`` names the metrics read.

    ``scrapes`` counts the scrapes that answered within their deadline.
    """

    running_mean: NonNegFloat | None = None
    waiting_mean: NonNegFloat | None = None
    waiting_max: NonNegFloat | None = None
    kv_usage_max_pct: Percent | None = None
    preemptions: NonNegInt | None = None
    scrapes: NonNegInt = 0
    prefix_cache_hit_pct: Percent | None = None
    prefix_cache_queries_tokens: NonNegInt | None = None
    prefix_cache_hits_tokens: NonNegInt | None = None
    prefix_cache_source: str | None = None
    missed_scrapes: NonNegInt = Field(
        default=0,
        description=(
            "Scrapes that failed or did not answer within their deadline "
            "(collect.instruments.SCRAPE_DEADLINE_S); they are left out of the figures."
        ),
    )
    valid: bool = Field(
        default=True,
        description=(
            "False when the window's figures cannot be used: fewer than two scrapes "
            "answered (counters need a first and a last), or the scraper did not hand its "
            "readings over in time. Only these metrics are invalid, not the window."
        ),
    )
    invalid_reason: str | None = Field(
        default=None, description="Why ``valid`` is false (e.g. '/metrics answered 0 of 3 …')."
    )
    idle_start: IdleStart | None = Field(
        default=None,
        description="The idle check before the window's warm-up (None: not run, old records).",
    )


class Probe(StrictModel):
    """One SLO-search probe (``phase``: grow, list, bisect)."""

    phase: Literal["grow", "list", "bisect"]
    window: WindowSummary
    metrics: EngineMetrics | None = None
    warmup_s: NonNegFloat = 0.0


class Repeat(StrictModel):
    """One measurement repeat at the found rate (``backoff`` counts rate reductions)."""

    window: WindowSummary
    power: PowerWindow | None = None
    metrics: EngineMetrics | None = None
    backoff: NonNegInt = 0


class MbuResult(StrictModel):
    """MBU inputs and result (bytes per decode step, steps/s, TB/s, %)."""

    weights_bytes_per_step: NonNegFloat
    kv_bytes_per_step: NonNegFloat
    decode_steps_per_s: NonNegFloat
    running_batch: NonNegFloat
    rated_bw_tbs_per_gpu: PosFloat
    gpus: PosInt
    mbu_pct: NonNegFloat


class SearchResult(StrictModel):
    """The outcome of the SLO search and the repeats (rate in req/s, goodput in tok/s)."""

    rate_rps: NonNegFloat
    goodput_tok_s: NonNegFloat
    slo_pass_count: NonNegInt
    repeats: NonNegInt
    backoffs: NonNegInt = 0
    gpu_seconds: NonNegFloat = 0.0
    gpu_seconds_saved: NonNegFloat = 0.0
    warnings: list[str] = Field(default_factory=list)
    concurrency: PosInt | None = Field(
        default=None,
        description="For a closed-loop run (measurement.profile: concurrency): the number "
        "of clients found (or, for fixed loads, the highest that met the SLO); rate_rps is "
        "then the rate measured at it. Null for open-loop runs and when none met the SLO.",
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
    :mod:`tokenwatt.collect.request_log`.
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
    tool: ToolInfo
    label: PlainName
    role: Literal["baseline", "tuned"]
    mode: Literal["smoke", "quick", "full"]
    simulated: bool = False
    spec: Spec
    fingerprint: NonEmptyStr
    command: str
    started: dt.datetime
    finished: dt.datetime | None = None
    complete: bool = True
    incomplete_reason: str | None = None
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
    probes: list[Probe] = Field(default_factory=list)
    repeats: list[Repeat] = Field(default_factory=list)
    result: SearchResult | None = None
    mbu: MbuResult | None = None
    accuracy: AccuracyResult | None = None
    engine_warnings: list[str] = Field(default_factory=list)
    not_covered: list[str] = Field(default_factory=list)
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
