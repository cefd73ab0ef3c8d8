"""The load half of the benchmark spec: what is sent (``workload``: lengths, a dataset), how
it is measured (``measurement``: windows, clients, arrivals), the SLO search (``sweep``) and
the accuracy suite (``accuracy``), with the bounds that keep one load-generator host able to
run them. :mod:`tokenwatt.records.spec.spec` puts them together into the whole ``Spec``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tokenwatt.records.shared.base import (
    ArrivalProcess,
    FieldValueError,
    LoadProfile,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    PlainName,
    PosFloat,
    PosInt,
    StrictModel,
)

MAX_CONCURRENCY = 10_000
"""Most requests a client may hold in flight (``measurement.max_concurrency``, and so the
most closed-loop clients). Every client is a coroutine with a connection and buffers: far
beyond this one load-generator host runs out of memory or sockets before the engine is
measured."""
MAX_WORKERS = 256
"""Most load-generator processes ``measurement.workers`` may ask for: each is a Python
process with its own interpreter (tens of MB); more than this is no benchmark host's."""
MAX_SCHEDULE_ARRIVALS = 10_000_000
"""Most arrivals one window's schedule may hold: rate × (warm-up + window + keep-load tail,
which is at most ``request_timeout_s``). The schedule is a float64 array built before the
window starts (80 MB at this bound), so a larger load is refused when the spec is read."""


class LengthDist(StrictModel):
    """A token-length distribution given by its median and 90th percentile (tokens)."""

    median: PosInt
    """Median length (tokens)."""
    p90: PosInt
    """90th-percentile length (tokens); not below the median."""

    @model_validator(mode="after")
    def _p90_not_below_median(self) -> LengthDist:
        if self.p90 < self.median:
            raise FieldValueError(
                "p90", f"p90 ({self.p90}) must not be below the median ({self.median})"
            )
        return self


class DatasetSpec(StrictModel):
    """A conversation file replayed as the workload, instead of synthetic prompts."""

    kind: Literal["sharegpt"] = Field(
        description="The file's format. 'sharegpt': a JSON list of {'id', 'conversations': "
        "[{'from': 'human' | 'gpt', 'value': text}, ...]}; the first human turn is the "
        "prompt, the length of the gpt reply after it (tokens, by model.tokenizer) the "
        "output length."
    )
    path: NonEmptyStr = Field(
        description="The file, relative to the spec file's folder (or absolute). Outside "
        "the fingerprint: the content's sha256 identifies it."
    )
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 (hex) of the file's bytes. collect fills it in the run "
        "record's spec; written in a spec file, a file with other content is refused.",
    )


class WorkloadSpec(StrictModel):
    """What the requests ask for.

    ``trace`` is ``chat-mix-v1`` or the path of a JSON Lines trace to replay; ``seed`` seeds
    lengths, token ids and arrivals.

    Every prompt of a run is new unless the workload asks otherwise, so that an engine's
    prefix cache finds nothing it was not meant to find:

    * ``shared_prefix_tokens`` (default 0: none): a deliberate shared prefix, a "system
      prompt" of this many tokens (seeded, the same for every request of the run), put in
      front of each prompt (as vLLM's ``bench serve`` random dataset does with its prefix
      length). Text prompts (``engine.api: chat``) get about this many words.
    * ``prompt_pool`` (default none: never re-send): draw this many requests, then send
      them again in the same order for the rest of the run, deliberately warming the prefix
      cache. A trace shorter than the run is cycled; prompts it re-sends are counted.
    """

    trace: NonEmptyStr = "chat-mix-v1"
    """chat-mix-v1 (the built-in synthetic mix) or the path of a JSON Lines trace to replay."""
    input_tokens: LengthDist | None = None
    """Prompt lengths (median, p90); null: the trace's own (chat-mix-v1: median 1,024, p90
    4,096)."""
    output_tokens: LengthDist | None = None
    """Output lengths asked for with max_tokens (median, p90); null: the trace's own (chat-mix-v1:
    median 256, p90 1,024)."""
    seed: int = 0
    """Seed of the lengths, token ids and arrival times: the same seed sends the same requests at
    the same times."""
    shared_prefix_tokens: NonNegInt = 0
    """Tokens of a deliberate shared prefix (a system prompt) in front of every prompt; 0: none."""
    prompt_pool: PosInt | None = None
    """Draw this many requests, then send them again in order, deliberately warming the prefix
    cache; null: never re-send a prompt."""
    dataset: DatasetSpec | None = Field(
        default=None,
        description="A conversation file to replay (text prompts; needs model.tokenizer to "
        "measure lengths); null: trace decides. Only with trace chat-mix-v1 (the default).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadSpec:
        if self.dataset is not None and self.trace != "chat-mix-v1":
            raise FieldValueError(
                "dataset", "give either a dataset or a trace other than chat-mix-v1, not both"
            )
        return self


class MeasurementSpec(StrictModel):
    """Window lengths (s), repeats, the client's limits, and how arrivals are drawn."""

    warmup_s: NonNegFloat
    """Seconds of load before each window's measurement starts (not measured)."""
    window_s: PosFloat
    """Length of each measurement repeat at the found rate (s)."""
    search_window_s: PosFloat
    """Length of each SLO-search probe window (s)."""
    repeats: PosInt
    """Measurement repeats at the found rate; all must meet the SLO, else the rate backs off."""
    request_timeout_s: PosFloat
    """A request still unanswered after this many seconds fails (kind timeout) and counts as
    infinitely slow."""
    max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
    """Most requests the client keeps in flight (at most 10,000); arrivals beyond it wait, and
    the wait counts in their TTFT."""
    workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)] | Literal["auto"] = Field(
        default=1,
        description="Load-generator processes that share each window's one Poisson schedule "
        "(round-robin by arrival), at most 256; 'auto' picks from the CPU cores and the "
        "expected chunk rate (tokenwatt.collect.load.pool.workers.auto_workers). "
        "1: one process, one event loop. "
        "How the client drives the load, not what is measured: outside the fingerprint.",
    )
    ray_address: str | None = Field(
        default=None,
        max_length=500,
        description="An existing Ray cluster whose nodes run the load-generator workers as "
        "Ray actors (ray.init's address: 'HOST:6379', 'ray://HOST:10001' or 'auto'; "
        "collect --ray-address; needs the [ray] extra). With workers 1 or 'auto': one "
        "actor per node; with N above 1: N actors spread over the nodes. Each actor's "
        "clock offset is measured and corrected before every window. None: workers are "
        "local processes. How the client drives the load: outside the fingerprint.",
    )
    arrivals: ArrivalProcess = Field(
        default="conditioned",
        description="How each window's arrival times are drawn. 'conditioned' (default): "
        "exactly round(rate × window) arrivals in the measured window, placed as a Poisson "
        "process conditioned on that count, so the achieved rate is the target and goodput "
        "carries no count noise. 'poisson': the unconditioned Poisson process, whose count "
        "is random (about 1/sqrt(rate × window) relative noise). Outside the spec "
        "fingerprint: both load the engine at the same mean rate. Runs made before this "
        "field existed used 'poisson' whatever their spec reads; each window records the "
        "process it used (WindowSummary.arrivals).",
    )
    profile: LoadProfile = Field(
        default="poisson",
        description="How load is offered. 'poisson' (default): open loop, Poisson arrivals "
        "at each window's rate, drawn as 'arrivals' says. 'constant': open loop, one "
        "arrival every 1/rate s (offsets k/rate), no burstiness. 'concurrency': closed loop, "
        "a fixed number of clients, each sending its next request when its previous one "
        "ends; the window's rate is measured, not set, and the SLO search runs over the "
        "number of clients (sweep.start_concurrency, sweep.concurrencies, at most "
        "max_concurrency). Inside the spec fingerprint when not 'poisson' (it changes what "
        "is measured); 'poisson' leaves the fingerprint of specs written before the field "
        "existed unchanged.",
    )


def max_schedule_rate(measurement: MeasurementSpec) -> float:
    """The highest open-loop rate (req/s) whose schedule stays within
    :data:`MAX_SCHEDULE_ARRIVALS`: the bound over warm-up + the longer of the two window
    lengths + the keep-load tail (at most ``request_timeout_s``)."""
    m = measurement
    span_s = m.warmup_s + max(m.window_s, m.search_window_s) + m.request_timeout_s
    return MAX_SCHEDULE_ARRIVALS / span_s


class SweepSpec(StrictModel):
    """The SLO search: grow by ``growth`` from ``start_rps`` (or walk ``rates``), then bisect.

    With ``measurement.profile: concurrency`` the search runs over the number of
    closed-loop clients instead: from ``start_concurrency`` (or along ``concurrencies``),
    grown by ``growth`` (at least one more client a step) up to the client's
    ``measurement.max_concurrency``, then bisected over whole numbers. ``fixed`` measures
    the listed loads instead of searching.
    """

    rates: list[PosFloat] | None = None
    """Rates to probe in order (req/s, strictly increasing) instead of growing from start_rps; null:
    grow."""
    start_rps: PosFloat
    """First probe's arrival rate (req/s)."""
    growth: float = Field(gt=1, le=100)
    """Factor by which the probe rate grows while probes meet the SLO (above 1)."""
    max_rps: PosFloat
    """Highest rate the search probes (req/s)."""
    min_rps: PosFloat | None = Field(
        default=None,
        description="Lowest rate the search probes (req/s) when its first probe misses: it "
        "goes down by the growth factor until a probe passes or this floor misses too (then "
        "no rate meets the SLO). Null: start_rps / 64, but not below 0.1 req/s (nor above "
        "start_rps).",
    )
    bisect_steps: NonNegInt
    """Bisection probes between the last rate that met the SLO and the first that missed it."""
    backoff: float = Field(gt=0, lt=1)
    """Factor (between 0 and 1) the rate is multiplied by when a repeat at the found rate misses the
    SLO."""
    max_backoffs: NonNegInt
    """Most back-offs before the search gives up."""
    start_concurrency: PosInt = Field(
        default=1,
        description="Closed-loop clients of the search's first probe "
        "(measurement.profile: concurrency).",
    )
    concurrencies: list[PosInt] | None = Field(
        default=None,
        description="Client counts to walk instead of growing (closed loop), strictly "
        "increasing; the counterpart of 'rates'.",
    )
    fixed: bool = Field(
        default=False,
        description="True: no SLO search. One window of measurement.window_s is measured "
        "at each of 'rates' (or 'concurrencies' for the closed loop), every one of them, in "
        "order, with no bisection, repeats or back-off; the result is the load with the "
        "highest goodput among those whose window met the SLO. What `tokenwatt collect "
        "--rate/--rates/--concurrency` writes.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        if self.start_rps > self.max_rps:
            raise FieldValueError(
                "start_rps",
                f"start_rps ({self.start_rps:g}) exceeds max_rps ({self.max_rps:g}); "
                "the search would start above its ceiling",
            )
        if self.min_rps is not None and self.min_rps > self.start_rps:
            raise FieldValueError(
                "min_rps",
                f"min_rps ({self.min_rps:g}) exceeds start_rps ({self.start_rps:g}); the floor "
                "of the search must lie below its start",
            )
        if self.rates is not None:
            if not self.rates:
                raise FieldValueError("rates", "when given, must list at least one rate")
            for i, (a, b) in enumerate(zip(self.rates, self.rates[1:], strict=False)):
                if b <= a:
                    raise FieldValueError(
                        f"rates[{i + 1}]",
                        f"rates must be strictly increasing ({b:g} follows {a:g})",
                    )
        if self.concurrencies is not None:
            if not self.concurrencies:
                raise FieldValueError("concurrencies", "when given, must list at least one")
            for i, (a, b) in enumerate(
                zip(self.concurrencies, self.concurrencies[1:], strict=False)
            ):
                if b <= a:
                    raise FieldValueError(
                        f"concurrencies[{i + 1}]",
                        f"concurrencies must be strictly increasing ({b} follows {a})",
                    )
        return self


class AccuracySpec(StrictModel):
    """The accuracy suite and the gate's threshold (points)."""

    suite: str | None = None
    """Path of the accuracy suite (JSON Lines, e.g. from tokenwatt suites build), relative to the
    spec's folder; null: no accuracy run, and no capacity credit."""
    name: PlainName = "gsm8k-5shot"
    """The suite's name for readers (e.g. gsm8k-5shot)."""
    scorer: Literal["numeric"] = "numeric"
    """How an answer is scored: numeric (the last number in the completion against the gold
    answer)."""
    max_drop_pts: NonNegFloat = 1.0
    """The gate: a configuration whose score drops more than this many points below the baseline's
    fails and earns no capacity credit."""
    seeds: PosInt = 1
    """Times the suite is run with different seeds; the spread over seeds is recorded."""
    max_tokens: PosInt = 384
    """Most tokens generated per item."""
    stop: list[str] = Field(default_factory=list)
    """Stop strings sent with each item (e.g. the next few-shot question's start)."""
    concurrency: PosInt = 32
    """Items in flight at once while scoring."""
    limit: PosInt | None = None
    """Score only the first this many items; null: all."""
    temperature: NonNegFloat = 0.0
    """Sampling temperature of the accuracy requests (0: greedy)."""
