"""The benchmark spec: ``specs/*.spec.yaml``, and the ``spec`` object inside records.

The shape is the seed report's ``spec`` object. Secrets never appear in a spec: only the
*name* of an environment variable (``engine.api_key_env``, ``power.password_env``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from tokenwatt.netpath import ProxyChoice
from tokenwatt.records.shared.base import (
    MAX_QUANTITY,
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    PlainName,
    PosFloat,
    PosInt,
    PrintableText,
    StrictModel,
)
from tokenwatt.records.spec.launch import EngineLaunch
from tokenwatt.records.spec.spec_checks import (
    check_env_name,
    check_power_command,
    check_power_field,
    check_url_has_no_secret,
)
from tokenwatt.records.spec.spec_load import (
    MAX_SCHEDULE_ARRIVALS,
    AccuracySpec,
    MeasurementSpec,
    SweepSpec,
    WorkloadSpec,
    max_schedule_rate,
)
from tokenwatt.redact import scrub

KvDtype = Literal["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]


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
        check_url_has_no_secret("endpoint", self.endpoint)
        check_env_name("api_key_env", self.api_key_env)
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


PowerSourceKind = Literal["board", "redfish", "ipmi", "command", "prometheus", "sim", "none"]


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
        check_env_name("password_env", self.password_env)
        if self.url is not None:
            check_url_has_no_secret("url", self.url)
        if self.source in ("redfish", "prometheus") and not self.url:
            raise FieldValueError("url", f"power.source {self.source!r} needs power.url")
        if self.source == "command" and not self.command:
            raise FieldValueError("command", "power.source 'command' needs power.command")
        if self.command is not None:
            check_power_command(self.command)
        if self.field is not None:
            check_power_field(self.field)
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
