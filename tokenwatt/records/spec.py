"""The benchmark spec: ``specs/*.spec.yaml``, and the ``spec`` object inside records.

The shape is the seed report's ``spec`` object. Secrets never appear in a spec: only the
*name* of an environment variable (``engine.api_key_env``, ``power.password_env``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from tokenwatt.records.base import (
    ArrivalProcess,
    FieldValueError,
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    PosFloat,
    PosInt,
    StrictModel,
)
from tokenwatt.redact import scrub

KvDtype = Literal["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]

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
    """Refuse ``user:password@`` and ``?api_key=…`` in a URL that records will carry.

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


class HardwareSpec(StrictModel):
    """Which accelerators to watch. ``rated_bw_tbs_per_gpu`` null means: look it up."""

    adapter: Literal["nvidia", "amd", "sim", "none"] = "nvidia"
    rated_bw_tbs_per_gpu: PosFloat | None = None
    gpus: list[NonNegInt] | None = None
    host: str | None = None


class EngineSpec(StrictModel):
    """The OpenAI-compatible server under test."""

    endpoint: NonEmptyStr
    name: NonEmptyStr
    version: str | None = None
    kernels: str | None = None
    api: Literal["completions", "chat"] = "completions"
    model: NonEmptyStr
    ignore_eos: bool = True
    api_key_env: str | None = None
    flags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _endpoint_is_http(self) -> EngineSpec:
        if not self.endpoint.startswith(("http://", "https://")):
            raise FieldValueError(
                "endpoint", f"must start with http:// or https://, got {self.endpoint!r}"
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

    name: NonEmptyStr
    config: str | None = None
    weight_dtype: NonEmptyStr = "bf16"
    kv_dtype: KvDtype = "bf16"
    quantization: str = ""
    replicas: PosInt = 1
    tensor_parallel: PosInt = 1
    vocab_size: PosInt
    geometry: dict[str, int | float | str] = Field(default_factory=dict)
    tokenizer: NonEmptyStr | None = None


class SloSpec(StrictModel):
    """Latency limits, both on the 99th percentile over a window (ms)."""

    ttft_p99_ms: PosFloat
    tpot_p99_ms: PosFloat


class LengthDist(StrictModel):
    """A token-length distribution given by its median and 90th percentile (tokens)."""

    median: PosInt
    p90: PosInt

    @model_validator(mode="after")
    def _p90_not_below_median(self) -> LengthDist:
        if self.p90 < self.median:
            raise FieldValueError(
                "p90", f"p90 ({self.p90}) must not be below the median ({self.median})"
            )
        return self


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
    input_tokens: LengthDist | None = None
    output_tokens: LengthDist | None = None
    seed: int = 0
    shared_prefix_tokens: NonNegInt = 0
    prompt_pool: PosInt | None = None


class MeasurementSpec(StrictModel):
    """Window lengths (s), repeats, the client's limits, and how arrivals are drawn."""

    warmup_s: NonNegFloat
    window_s: PosFloat
    search_window_s: PosFloat
    repeats: PosInt
    request_timeout_s: PosFloat
    max_concurrency: PosInt
    workers: PosInt | Literal["auto"] = Field(
        default=1,
        description="Load-generator processes that share each window's one Poisson schedule "
        "(round-robin by arrival); 'auto' picks from the CPU cores and the expected chunk "
        "rate (tokenwatt.collect.workers.auto_workers). 1: one process, one event loop. "
        "How the client drives the load, not what is measured: outside the fingerprint.",
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


class SweepSpec(StrictModel):
    """The SLO search: grow by ``growth`` from ``start_rps`` (or walk ``rates``), then bisect."""

    rates: list[PosFloat] | None = None
    start_rps: PosFloat
    growth: float = Field(gt=1, le=100)
    max_rps: PosFloat
    bisect_steps: NonNegInt
    backoff: float = Field(gt=0, lt=1)
    max_backoffs: NonNegInt

    @model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        if self.start_rps > self.max_rps:
            raise FieldValueError(
                "start_rps",
                f"start_rps ({self.start_rps:g}) exceeds max_rps ({self.max_rps:g}); "
                "the search would start above its ceiling",
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
        return self


class AccuracySpec(StrictModel):
    """The accuracy suite and the gate's threshold (points)."""

    suite: str | None = None
    name: NonEmptyStr = "gsm8k-5shot"
    scorer: Literal["numeric"] = "numeric"
    max_drop_pts: NonNegFloat = 1.0
    seeds: PosInt = 1
    max_tokens: PosInt = 384
    stop: list[str] = Field(default_factory=list)
    concurrency: PosInt = 32
    limit: PosInt | None = None
    temperature: NonNegFloat = 0.0


PowerSource = Literal["board", "redfish", "ipmi", "command", "prometheus", "sim", "none"]


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

    source: PowerSource = "board"
    sampling_hz: PosFloat = 1.0
    url: str | None = None
    username: str | None = None
    password_env: str | None = None
    verify_tls: bool = True
    chassis: str | None = None
    host: str | None = None
    command: str | None = None
    field: str | None = None
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

    name: NonEmptyStr
    hardware: HardwareSpec
    engine: EngineSpec
    model: ModelSpec
    slo: SloSpec
    workload: WorkloadSpec
    measurement: MeasurementSpec
    sweep: SweepSpec
    accuracy: AccuracySpec
    power: PowerSpec
    not_covered: list[str] = Field(default_factory=list)


_WORKLOAD_DEFAULTS_OUTSIDE_FINGERPRINT: dict[str, Any] = {
    "shared_prefix_tokens": 0,
    "prompt_pool": None,
}


def fingerprint_fields(spec: Spec) -> dict[str, Any]:
    """The parts of a spec that must be equal for two runs to be compared.

    Hardware, model identity, workload, SLO and measurement windows (README, Commands).
    Per-configuration settings -- KV-cache dtype, engine flags, label, role -- are left out,
    and so is the arrival process (``measurement.arrivals``: the same mean load; each window
    records which it used),
    so that a BF16-vs-FP8 KV comparison is allowed (seed lab note, change 1). The model's
    tokenizer path is left out too (a path on one machine); the workload's
    ``shared_prefix_tokens`` and ``prompt_pool`` count only when set.

    Returns:
        A flat mapping ``dotted.path -> value``.
    """
    model = spec.model.model_dump(exclude={"kv_dtype", "config", "geometry", "tokenizer"})
    # The arrival process changes a window's sampling noise, not the load it measures (the
    # same mean rate), and records made before it existed cannot say which they used in
    # their spec: it is outside the fingerprint, and each window records it instead. How
    # many client processes drive the load is not what is measured either.
    measurement = spec.measurement.model_dump(exclude={"arrivals", "workers"})
    workload = spec.workload.model_dump()
    for key, default in _WORKLOAD_DEFAULTS_OUTSIDE_FINGERPRINT.items():
        # Options added later count only when used, so that older records' fingerprints
        # stay what they were.
        if workload.get(key) == default:
            del workload[key]
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
