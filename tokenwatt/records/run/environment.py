"""Where and against what a run measured: the tool (``tool``), the host, engine and GPUs
(``environment``), the idle proof before a window (``IdleStart``) and the engine's own
``/metrics`` over it (``EngineMetrics``); :mod:`tokenwatt.records.run.run` holds them in the run
record."""

from __future__ import annotations

from pydantic import Field

from tokenwatt.records.shared.base import (
    NonNegFloat,
    NonNegInt,
    Percent,
    PosFloat,
    StrictModel,
)


class ToolInfo(StrictModel):
    """Which TokenWatt Bench made the record."""

    name: str = "tokenwatt-bench"
    """The tool's name (tokenwatt-bench)."""
    version: str
    """The TokenWatt Bench version that wrote the record."""
    git_commit: str | None = None
    """The git commit of the TokenWatt Bench checkout that wrote the record, when run from one; null
    otherwise."""


class Environment(StrictModel):
    """What was read at run time from the machine and the engine.

    ``kv_capacity_source`` says where ``kv_capacity_tokens`` came from (e.g. vLLM's
    ``vllm:cache_config_info`` blocks × block size, or llama.cpp's /props, an upper bound).
    ``context_length_tokens`` is the longest request (prompt + output, tokens) the engine
    accepts, as it reported before the first request; ``context_length_source`` names where
    it was read (vLLM ``max_model_len``, llama.cpp ``n_ctx``, ...).
    """

    gpu_name: str | None = None
    """Accelerator name as the power source reports it (e.g. NVIDIA H100 80GB HBM3); null without a
    power source that knows."""
    gpu_count: NonNegInt | None = None
    """Accelerators the power source reads; null when unknown."""
    driver: str | None = None
    """Accelerator driver version as the power source reports it; null when unknown."""
    rated_bw_tbs_per_gpu: PosFloat | None = None
    """Rated memory bandwidth per accelerator (TB/s, 10^12 bytes/s) used for MBU: from the
    accelerator table by name, or the spec's hardware.rated_bw_tbs_per_gpu."""
    engine_name: str | None = None
    """The engine as probed (vllm, sglang, llama.cpp, tgi, tokenwatt-sim); null when it could not be
    told."""
    engine_version: str | None = None
    """The version string the engine reports (e.g. vLLM's /version); null when it has no endpoint
    for it."""
    engine_flags: list[str] = Field(default_factory=list)
    """The engine flags the spec records (engine.flags), as given."""
    served_models: list[str] = Field(default_factory=list)
    """Model ids the engine listed at /v1/models before the run."""
    kv_capacity_tokens: NonNegInt | None = None
    """Tokens the engine's KV cache holds across all sequences, where the engine reports its cache
    configuration; null otherwise."""
    kv_capacity_source: str | None = None
    """How kv_capacity_tokens was derived (e.g. vllm:cache_config_info blocks × block size)."""
    context_length_tokens: NonNegInt | None = None
    """The longest request (prompt + output, tokens) the engine accepts, as it reported before the
    first request."""
    context_length_source: str | None = None
    """Where context_length_tokens was read (vLLM max_model_len, llama.cpp n_ctx, ...)."""
    hostname: str | None = None
    """Host name of the machine that ran the load generator."""
    proxy: str | None = None
    """The proxy every request to the engine went through, without credentials, and the
    environment variable that named it (e.g. 'http://proxy.corp:3128 (from HTTPS_PROXY)'), as
    engine.proxy decided; null when they went direct."""


class IdleStart(StrictModel):
    """Whether the engine was idle before a window's warm-up (the client's own count of
    open requests at zero, and the running and waiting gauges at zero where /metrics gives
    them), what proved it, and how long the collector waited for it."""

    waited_s: NonNegFloat = Field(
        description="Seconds spent polling /metrics before the warm-up began."
    )
    idle: bool | None = Field(
        description=(
            "True: both gauges read zero; False: the bounded wait ran out with requests "
            "still running or waiting (the window started anyway: invalid in records with "
            "proven_by, with a warning before); None: not read (no such gauges, or "
            "/metrics did not answer; see note and proven_by)."
        )
    )
    running: NonNegFloat | None = Field(
        default=None, description="Running requests at the last read (summed gauge)."
    )
    waiting: NonNegFloat | None = Field(
        default=None, description="Waiting (queued) requests at the last read (summed gauge)."
    )
    note: str | None = Field(
        default=None, description="Why the gauges were not read, or the warning when not idle."
    )
    proven_by: str | None = Field(
        default=None,
        description=(
            "What proved the engine idle before the window: 'client+metrics' (no request of "
            "the collector still open, and /metrics running + waiting at zero); 'client "
            "only: <why>' (no request open; this engine's /metrics has given no "
            "running/waiting gauges in the run, so it proves nothing); 'not proven: <why>' "
            "(/metrics, which answered before, did not answer within the bound, its gauges "
            "stayed above zero, or the client still had requests open: the window is "
            "invalid, with no verdict, and was measured again). Null in records made "
            "before this field existed."
        ),
    )
    client_open: NonNegInt | None = Field(
        default=None,
        description=(
            "Requests of the collector not yet ended when the check began (the load "
            "generator's own count, from the previous window's requests: 0 once every "
            "task has ended). Null in records made before this field existed."
        ),
    )
    max_wait_s: NonNegFloat | None = Field(
        default=None,
        description=(
            "The bound of the wait (s): min(request_timeout_s, 30 s), doubled after an "
            "overloaded window and for each window in a row not proven idle, at most "
            "120 s. Null in records made before this field existed."
        ),
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
    """Mean over the window's scrapes of the requests the engine was running (gauge, e.g.
    vllm:num_requests_running, summed over series)."""
    waiting_mean: NonNegFloat | None = None
    """Mean over the window's scrapes of the requests waiting in the engine's queue (gauge)."""
    waiting_max: NonNegFloat | None = None
    """Highest queue length (waiting requests) any scrape of the window read."""
    kv_usage_max_pct: Percent | None = None
    """Highest KV-cache usage any scrape of the window read (%)."""
    preemptions: NonNegInt | None = None
    """Requests the engine preempted during the window (counter difference); null where it has no
    such counter."""
    scrapes: NonNegInt = 0
    """Scrapes of /metrics in the window that answered within their deadline."""
    prefix_cache_hit_pct: Percent | None = None
    """Prefix-cache hit rate over the window (%): 100 × hits / queries, or the mean of a sampled
    hit-rate gauge where the engine has no counters; null where it exposes none."""
    prefix_cache_queries_tokens: NonNegInt | None = None
    """Prompt tokens the engine looked up in its prefix cache during the window (counter
    difference)."""
    prefix_cache_hits_tokens: NonNegInt | None = None
    """Prompt tokens of those lookups found in the cache (counter difference)."""
    prefix_cache_source: str | None = None
    """The metrics the prefix-cache figures were read from."""
    missed_scrapes: NonNegInt = Field(
        default=0,
        description=(
            "Scrapes that failed or did not answer within their deadline "
            "(collect.measure.instruments.SCRAPE_DEADLINE_S); they are left out of the figures."
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
