"""The benchmark spec: ``specs/*.spec.yaml``, and the ``spec`` object inside records.

The shape is the seed report's ``spec`` object. Secrets never appear in a spec: only the
*name* of an environment variable (``engine.api_key_env``, ``power.password_env``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, model_validator

from tokenwatt.netpath import ProxyChoice
from tokenwatt.records.base import (
    MAX_QUANTITY,
    ArrivalProcess,
    FieldValueError,
    LoadProfile,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    PlainName,
    PosFloat,
    PosInt,
    PrintableText,
    StrictModel,
)
from tokenwatt.records.launch import PORT_PLACEHOLDER, EngineLaunch
from tokenwatt.redact import scrub

KvDtype = Literal["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]

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

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_QUERY = re.compile(r"key|token|secret|passw|auth|sig|credential", re.IGNORECASE)


def _check_env_name(field: str, value: str | None) -> None:
    """An ``*_env`` field holds a variable's name; a pasted secret must not reach a record.

    The value is never repeated in the message: it may be the secret itself.
    """
    if value is not None and not _ENV_NAME.fullmatch(value):
        raise FieldValueError(
            field,
            "must be the name of an environment variable (letters, digits and '_', not "
            "starting with a digit), not the secret itself; the value is not shown here",
        )


def _check_url_has_no_secret(field: str, url: str) -> None:
    """Refuse ``user:password@`` and ``?api_key=…`` in a URL that records will carry, and a
    port that is no TCP port (outside 1..65535: the run would fail only at connect).

    The URL is never repeated in the message: it holds the secret. Whitespace is refused
    too (a stray space from copying the URL would reach every request).
    """
    if any(ch.isspace() for ch in url):
        raise FieldValueError(
            field,
            "must not contain spaces or other whitespace (check for a stray space at its "
            "start or end)",
        )
    parts = urlsplit(url)
    try:
        has_user = parts.username is not None or parts.password is not None
    except ValueError:
        has_user = "@" in parts.netloc
    if has_user or "@" in parts.netloc:
        raise FieldValueError(
            field,
            "must not carry a user name or password (user:password@host): records keep this "
            "URL; give secrets through an environment variable (api_key_env, password_env)",
        )
    query_keys = [kv.split("=", 1)[0] for kv in parts.query.split("&") if kv]
    if any(_SECRET_QUERY.search(k) for k in query_keys) or _SECRET_QUERY.search(parts.fragment):
        raise FieldValueError(
            field,
            "must not carry a key or token in its query (?api_key=...): records keep this "
            "URL; give secrets through an environment variable (api_key_env, password_env)",
        )
    if scrub(parts.path) != parts.path:
        raise FieldValueError(
            field,
            "has a path that looks like it holds a key or token (sk-…, hf_…, token=…): records "
            "keep this URL; give secrets through an environment variable (api_key_env)",
        )
    if parts.scheme in ("http", "https") and not parts.hostname:
        raise FieldValueError(field, "must name a host (http://HOST:PORT/...)")
    if parts.netloc.endswith(f":{PORT_PLACEHOLDER}"):
        return  # a launched engine's free port, filled in before any request
    try:
        port = parts.port  # raises for a port outside 0..65535 or not a number
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        shown = parts.netloc.rsplit(":", 1)[-1]
        raise FieldValueError(field, f"has port {shown!r}: a port is a number from 1 to 65535")


class HardwareSpec(StrictModel):
    """Which accelerators to watch. ``rated_bw_tbs_per_gpu`` null means: look it up."""

    adapter: Literal["nvidia", "amd", "sim", "none"] = "nvidia"
    """How accelerators are read: nvidia (NVML), amd (AMD SMI), sim (the simulated engine's modelled
    power) or none (no accelerator is read: no GPU name, clocks or board power)."""
    rated_bw_tbs_per_gpu: PosFloat | None = None
    """Rated memory bandwidth per GPU (TB/s, 10^12 bytes/s) for MBU; null: looked up from the GPU's
    name."""
    gpus: list[NonNegInt] | None = None
    """Indices of the GPUs serving the model (as NVML, AMD SMI or DCGM's gpu label number them);
    null: every GPU the adapter sees."""
    host: str | None = None
    """A name for the machine, shown on the page (e.g. 'Lambda Cloud 1x H100'); null: the host name
    read at run time. Outside the fingerprint."""


def _yaml_off(value: Any) -> Any:
    """``off`` as YAML 1.1 reads a bare ``off`` (false), so that ``proxy: off`` means off."""
    return "off" if value is False else value


MIN_VOCAB = 11
"""The smallest vocabulary a spec takes: synthetic prompts draw token ids from 10 up, below
the vocabulary (ids 0–9 are where tokenizers put their special tokens)."""


class EngineSpec(StrictModel):
    """The OpenAI-compatible server under test."""

    endpoint: NonEmptyStr
    """Base URL of the OpenAI-compatible API, ending in /v1 (http:// or https://, no credentials in
    it); collect --endpoint overrides it."""
    name: PlainName
    """The engine's name for readers (vLLM, SGLang, llama.cpp, ...); the name the engine reports at
    run time is recorded beside it."""
    version: PrintableText | None = None
    """The engine's version, when the engine does not report one itself."""
    kernels: str | None = None
    """Kernel build or container image (e.g. vllm/vllm-openai:v0.31.0), for readers."""
    api: Literal["completions", "chat"] = "completions"
    """Which endpoint requests go to: completions (/v1/completions, token-id prompts) or chat
    (/v1/chat/completions, text prompts)."""
    model: PlainName
    """The model name requests ask for; it must be one the server lists at /v1/models (collect
    stops before the first request otherwise, unless model_alias_ok)."""
    model_alias_ok: bool = False
    """Measure even when /v1/models does not list engine.model: for a gateway that maps
    (aliases) names to the served model; the record gets a warning. Off by default, because
    llama.cpp and TGI answer any name with their one model, so a wrong name would be measured
    and recorded under the wrong model; collect --allow-model-alias sets it."""
    ignore_eos: bool = True
    """Ask the engine to generate every requested output token (ignore_eos), so output lengths
    follow the workload."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key, if the server needs one; the key itself
    never enters a record."""
    proxy: Annotated[ProxyChoice, BeforeValidator(_yaml_off)] = "auto"
    """Whether a proxy from the environment (http_proxy, HTTPS_PROXY, all_proxy; no_proxy
    honoured) carries the probes, /metrics, the load and the accuracy suite: auto (the
    default) uses it except for a loopback or link-local endpoint (127.0.0.1, localhost, ::1,
    169.254.x.x), which always goes direct; environment uses it for every host; off never
    does. The record names a proxy that was used (environment.proxy)."""
    flags: list[str] = Field(default_factory=list)
    """The engine's command-line flags for this configuration, for readers and the configuration
    comparison (e.g. ['--kv-cache-dtype', 'fp8']). Outside the fingerprint."""
    launch: EngineLaunch | None = Field(
        default=None,
        description="Start the engine from collect (and stop it afterwards) instead of "
        "measuring one that is already running; --engine-cmd sets its command. Outside the "
        "fingerprint, like everything under engine.",
    )

    @model_validator(mode="after")
    def _endpoint_is_http(self) -> EngineSpec:
        if not self.endpoint.startswith(("http://", "https://")):
            # Shown scrubbed: ftp://user:password@host carries its secret like any URL.
            raise FieldValueError(
                "endpoint", f"must start with http:// or https://, got {scrub(self.endpoint)!r}"
            )
        _check_url_has_no_secret("endpoint", self.endpoint)
        _check_env_name("api_key_env", self.api_key_env)
        for i, flag in enumerate(self.flags):
            if flag == "--api-key" or flag.startswith("--api-key="):
                raise FieldValueError(
                    f"flags[{i}]",
                    "--api-key would put the engine's key in every record; start the engine "
                    "with it yourself and give the key to tokenwatt through api_key_env",
                )
        return self


class ModelSpec(StrictModel):
    """The model served. ``kv_dtype`` is per configuration and outside the fingerprint.

    ``tokenizer`` names the model's ``tokenizer.json`` file, or a Hugging Face model folder
    holding one (relative paths from the spec file's folder). When set, output that arrives
    without the server's ``usage`` counts is counted with it (client-counted tokens); it is
    a path on this machine, so it is outside the fingerprint.
    """

    name: PlainName
    """The model's name for readers."""
    config: str | None = None
    """Path of the model's Hugging Face config.json (absolute, or relative to the folder
    collect runs in), from which the geometry for MBU is read when geometry is empty."""
    weight_dtype: NonEmptyStr = "bf16"
    """Data type of the weights (bf16, fp8, ...), for MBU's bytes per parameter and for readers."""
    kv_dtype: KvDtype = "bf16"
    """Data type of the KV cache; per configuration (collect --kv-dtype overrides it) and outside
    the fingerprint."""
    quantization: str = ""
    """The quantization scheme in words (e.g. 'FP8 weights, dynamic'); empty: none beyond
    weight_dtype."""
    replicas: PosInt = 1
    """Data-parallel replicas of the model."""
    tensor_parallel: PosInt = 1
    """Tensor-parallel degree of each replica (GPUs per replica)."""
    vocab_size: Annotated[int, Field(ge=MIN_VOCAB, le=int(MAX_QUANTITY))]
    """The tokenizer's vocabulary size: prompts are drawn as token ids below it (at least
    11: ids 0–9 are left out, where special tokens sit)."""
    geometry: dict[str, int | float | str] = Field(default_factory=dict)
    """The model's geometry as config.json names it (num_hidden_layers, hidden_size,
    num_key_value_heads, ...), when config is not given; empty: MBU is not computed. Outside the
    fingerprint."""
    tokenizer: NonEmptyStr | None = None
    """Path of a tokenizer.json, or a Hugging Face model folder holding one, to count output tokens
    the server sends without usage (relative to the spec's folder). Outside the fingerprint."""


class SloSpec(StrictModel):
    """Latency limits, both on the 99th percentile over a window (ms)."""

    ttft_p99_ms: PosFloat
    """Limit on the window's 99th-percentile time to first token (ms), measured from each request's
    scheduled send time."""
    tpot_p99_ms: PosFloat
    """Limit on the window's 99th-percentile time per output token after the first (ms)."""


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


PowerSourceKind = Literal["board", "redfish", "ipmi", "command", "prometheus", "sim", "none"]


_SECRET_OPTIONS = frozenset({"-P", "--password", "--pass", "--passwd", "--token", "--api-key"})
_URL_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
_SECRET_ASSIGN = re.compile(r"(?i)(pass(word|wd)?|token|secret|api[_-]?key)=")


def _check_power_command(command: str) -> None:
    """``power.command`` must split like a shell line and carry no secret.

    The command line is kept in the record, so a password after ``-P`` (``ipmitool -P …``) or
    in a ``password=…`` argument would be published; the value is never repeated here.
    """
    try:
        args = shlex.split(command)
    except ValueError as exc:
        raise FieldValueError("command", f"cannot be split into arguments: {exc}") from None
    if not args:
        raise FieldValueError("command", "is empty")
    program = args[0].rsplit("/", 1)[-1]
    for i, arg in enumerate(args):
        option = arg.split("=", 1)[0]
        following = args[i + 1] if i + 1 < len(args) else ""
        attached = arg.startswith("-P") and len(arg) > 2 and not arg.startswith("--")
        if program == "sshpass" and arg.startswith("-p"):
            attached = True  # sshpass -p PASSWORD / -pPASSWORD
        user_pass = (arg in ("-u", "--user") and ":" in following) or (
            arg.startswith(("-u", "--user=")) and not arg.startswith("--") and ":" in arg
        )
        user_pass = user_pass or (arg.startswith("--user=") and ":" in arg)
        if _URL_PASSWORD.search(arg):
            user_pass = True
        if (
            (arg in _SECRET_OPTIONS and i + 1 < len(args))
            or (option in _SECRET_OPTIONS and "=" in arg)
            or attached
            or user_pass
        ):
            # Name the option when it holds no secret itself; else only its position.
            where = f"{option} …" if option in _SECRET_OPTIONS else f"argument {i + 1}"
            raise FieldValueError(
                "command",
                f"passes a secret on the command line ({where}), which the record "
                "would keep; let the command read it from the environment instead (e.g. "
                "ipmitool -E reads IPMI_PASSWORD, curl --netrc-file); the value is not shown "
                "here",
            )
        if _SECRET_ASSIGN.search(arg):
            raise FieldValueError(
                "command",
                "has an argument that looks like a secret (password=…, token=…), which the "
                "record would keep; pass it through the environment; the value is not shown here",
            )


def _check_power_field(field: str) -> None:
    """A ``re:`` pattern must compile and have a group to read (``watts`` or group 1)."""
    if not field.startswith("re:"):
        return
    try:
        pattern = re.compile(field[3:])
    except re.error as exc:
        raise FieldValueError("field", f"is not a valid regular expression: {exc}") from None
    if "watts" not in pattern.groupindex and pattern.groups < 1:
        raise FieldValueError(
            "field", "needs a group to read the number from: (?P<watts>...) or (...)"
        )


class PowerSpec(StrictModel):
    """Where power comes from. Passwords only through ``password_env`` (a variable's name)."""

    source: PowerSourceKind = "board"
    """Where power is read: board (the GPUs' own counters via the hardware adapter), redfish, ipmi,
    command, prometheus, sim, or none (no power: no tokens per joule)."""
    sampling_hz: PosFloat = 1.0
    """Power samples per second."""
    url: str | None = None
    """URL of the Redfish service or Prometheus server (redfish and prometheus sources); no
    credentials in it."""
    username: str | None = None
    """User name for Redfish or IPMI."""
    password_env: str | None = None
    """Name of the environment variable holding the Redfish or IPMI password; the password never
    enters a record."""
    verify_tls: bool = True
    """Check the Redfish service's TLS certificate."""
    chassis: str | None = None
    """Redfish chassis Id whose power is read; null: the first member of /redfish/v1/Chassis."""
    host: str | None = None
    """IPMI host (ipmi source)."""
    command: str | None = None
    """Command printing a power reading (command source), split like a shell line; it must carry no
    secret."""
    field: str | None = None
    """Command source: which number of the output is the power (W): a dotted JSON key path, or
    re:PATTERN with a group (unset: the whole output is one number). Prometheus source: a PromQL
    label matcher added to the series, e.g. {Hostname="a"}."""
    idle_s: NonNegFloat | None = Field(
        default=None,
        description="Seconds of idle power measured before the first window (the engine "
        "idle, no request in flight), so the report can show tokens per joule above idle; "
        "0 turns it off; None: the mode's default (30 s in full mode, off in quick and smoke).",
    )

    @model_validator(mode="after")
    def _source_needs(self) -> PowerSpec:
        _check_env_name("password_env", self.password_env)
        if self.url is not None:
            _check_url_has_no_secret("url", self.url)
        if self.source in ("redfish", "prometheus") and not self.url:
            raise FieldValueError("url", f"power.source {self.source!r} needs power.url")
        if self.source == "command" and not self.command:
            raise FieldValueError("command", "power.source 'command' needs power.command")
        if self.command is not None:
            _check_power_command(self.command)
        if self.field is not None:
            _check_power_field(self.field)
        return self


class Spec(StrictModel):
    """A benchmark spec: one hardware × engine × model × workload."""

    name: PlainName
    """The spec's name; by convention the file is specs/NAME.spec.yaml."""
    hardware: HardwareSpec
    """Which accelerators are measured."""
    engine: EngineSpec
    """The server under test."""
    model: ModelSpec
    """The model served."""
    slo: SloSpec
    """The latency limits goodput is measured against."""
    workload: WorkloadSpec
    """What the requests ask for."""
    measurement: MeasurementSpec
    """Windows, repeats and the client's limits."""
    sweep: SweepSpec
    """How the SLO search walks the arrival rate."""
    accuracy: AccuracySpec
    """The accuracy suite and its gate."""
    power: PowerSpec
    """Where power is read."""
    not_covered: list[str] = Field(default_factory=list)
    """What this measurement does not cover, in words; shown on the page under Not covered."""

    @model_validator(mode="after")
    def _load_fits_profile(self) -> Spec:
        closed = self.measurement.profile == "concurrency"
        sweep, cap = self.sweep, self.measurement.max_concurrency
        if closed:
            top = max(sweep.concurrencies or [sweep.start_concurrency])
            if top > cap:
                field = "sweep.concurrencies" if sweep.concurrencies else "sweep.start_concurrency"
                raise FieldValueError(
                    field,
                    f"{top} clients exceed measurement.max_concurrency ({cap}), the most "
                    "requests the client holds in flight",
                )
        else:
            self._check_schedule_size()
        if sweep.fixed:
            listed = sweep.concurrencies if closed else sweep.rates
            if listed is None:
                name = "sweep.concurrencies" if closed else "sweep.rates"
                raise FieldValueError(
                    name, f"sweep.fixed measures the listed loads: {name} must be given"
                )
        return self

    def _check_schedule_size(self) -> None:
        """Refuse an open-loop load whose schedule would exceed :data:`MAX_SCHEDULE_ARRIVALS`."""
        sweep, limit = self.sweep, max_schedule_rate(self.measurement)
        top = max(sweep.rates) if sweep.rates else sweep.max_rps
        if top > limit:
            field = "sweep.rates" if sweep.rates else "sweep.max_rps"
            raise FieldValueError(
                field,
                f"{top:g} req/s over warm-up + window + request timeout would schedule more "
                f"than {MAX_SCHEDULE_ARRIVALS:,} arrivals in one window; the largest rate "
                f"accepted with these measurement lengths is {limit:g} req/s",
            )


_WORKLOAD_DEFAULTS_OUTSIDE_FINGERPRINT: dict[str, Any] = {
    "shared_prefix_tokens": 0,
    "prompt_pool": None,
    "dataset": None,
}


_MEASUREMENT_DEFAULTS_OUTSIDE_FINGERPRINT: dict[str, Any] = {"profile": "poisson"}


def fingerprint_fields(spec: Spec) -> dict[str, Any]:
    """The parts of a spec that must be equal for two runs to be compared.

    Hardware, model identity, workload, SLO and measurement windows (the guide's commands).
    Per-configuration settings -- KV-cache dtype, engine flags, label, role -- are left out,
    and so is the arrival process (``measurement.arrivals``: the same mean load; each window
    records which it used),
    so that a BF16-vs-FP8 KV comparison is allowed (seed lab note, change 1). The model's
    tokenizer path is left out too (a path on one machine), and so is a dataset's path (its
    content hash counts); the workload's ``shared_prefix_tokens`` and ``prompt_pool`` count
    only when set, and so does the load profile (``measurement.profile``: constant-rate and
    closed-loop runs measure something else than Poisson ones; Poisson, the default, leaves
    older fingerprints unchanged).

    Returns:
        A flat mapping ``dotted.path -> value``.
    """
    model = spec.model.model_dump(exclude={"kv_dtype", "config", "geometry", "tokenizer"})
    # The arrival process changes a window's sampling noise, not the load it measures (the
    # same mean rate), and records made before it existed cannot say which they used in
    # their spec: it is outside the fingerprint, and each window records it instead. How
    # many client processes drive the load is not what is measured either.
    measurement = spec.measurement.model_dump(exclude={"arrivals", "workers", "ray_address"})
    for key, default in _MEASUREMENT_DEFAULTS_OUTSIDE_FINGERPRINT.items():
        if measurement.get(key) == default:
            del measurement[key]
    workload = spec.workload.model_dump()
    for key, default in _WORKLOAD_DEFAULTS_OUTSIDE_FINGERPRINT.items():
        # Options added later count only when used, so that older records' fingerprints
        # stay what they were.
        if workload.get(key) == default:
            del workload[key]
    if workload.get("dataset") is not None:
        # The content identifies a dataset; its path on one machine does not.
        del workload["dataset"]["path"]
    parts: dict[str, Any] = {
        "hardware": spec.hardware.model_dump(exclude={"host"}),
        "model": model,
        "workload": workload,
        "slo": spec.slo.model_dump(),
        "measurement": measurement,
    }
    flat: dict[str, Any] = {}
    for section, values in parts.items():
        for key, value in values.items():
            flat[f"{section}.{key}"] = value
    return flat


def fingerprint(spec: Spec) -> str:
    """SHA-256 (hex, first 16 chars) of :func:`fingerprint_fields` in canonical JSON."""
    canonical = json.dumps(fingerprint_fields(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def fingerprint_diff(a: Spec, b: Spec) -> list[str]:
    """Dotted names of the fingerprint fields that differ between two specs (sorted)."""
    fa, fb = fingerprint_fields(a), fingerprint_fields(b)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
