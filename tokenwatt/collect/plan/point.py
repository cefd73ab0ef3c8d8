"""Point-and-shoot: a spec built from ``tokenwatt collect`` flags, or flags laid over a spec.

``tokenwatt collect --endpoint URL --model NAME --rate 5 --out runs/x.json`` needs no spec
file: :func:`point_spec` builds one from the flags and the explicit defaults below, and
that spec — printed at the start and stored in the run record — is what the run measured,
so a second run with the same flags has the same fingerprint and compares with it.
With ``--spec``, the same flags override the corresponding spec fields
(:func:`override_spec`); the record stores the spec as overridden.

Defaults, and where they come from:

* SLO: p99 TTFT ≤ 450 ms and p99 TPOT ≤ 40 ms, MLPerf Inference's Llama-2-70B *Interactive*
  limits (MLCommons, "MLPerf Inference v5.0 Advances Language Model Capabilities for
  GenAI", April 2025), the stricter of its two LLM server scenarios (Server: 2,000 ms and
  200 ms). ``--ttft-p99-ms`` and ``--tpot-p99-ms`` change them.
* Workload: ``chat-mix-v1``'s synthetic token ids with *fixed* lengths, every prompt
  ``--input-tokens`` (default 1,024) and every output ``--output-tokens`` (default 256),
  the lab note's medians; a length distribution whose median and p90 are equal is that
  length exactly.
* ``model.vocab_size``: token ids are drawn below it. 32,000 unless ``--vocab-size`` says
  otherwise: Llama 2's and Mistral 7B's vocabulary, the smallest of common current models,
  so the ids are real tokens of any model with at least that many (ids above a model's
  vocabulary would be refused or misread).
* Hardware: ``adapter: none``, no bandwidth, no GPUs listed — not stated, never guessed;
  power ``source: none`` (the record's "not covered" says so). MBU is therefore not
  computed. Write a spec for either.
* Windows: 10 s warm-up (``--warmup``), ``--duration`` (default 60 s) measured, 120 s
  request timeout, at most 1,024 requests in flight; the search (``--sweep``) grows from
  1 req/s (or 1 client) by 2× up to 1,000 req/s (or 1,024 clients), bisects 4 times, 2
  repeats, back-off 0.85 up to 3 times. ``--mode`` still caps the windows
  (``quick``: 120 s windows).

Flags and what they set: ``--rate R`` / ``--rates R1,R2,…``: fixed windows at those
rates (``sweep.fixed``, ``sweep.rates``); ``--concurrency C[,C…]``: fixed closed-loop
windows (``measurement.profile: concurrency``, ``sweep.concurrencies``); ``--sweep``: the
SLO search (over rate, or over clients with ``--profile concurrency``); ``--profile``:
``poisson``, ``constant`` or ``concurrency``. Exactly one of ``--rate``, ``--rates``,
``--concurrency`` and ``--sweep`` without a spec; at most one with one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tokenwatt.errors import InputError, Problem
from tokenwatt.records import (
    MAX_CONCURRENCY,
    MAX_SCHEDULE_ARRIVALS,
    EngineSpec,
    Spec,
    unstated_fields,
    validate,
)

DEFAULT_TTFT_P99_MS = 450.0
"""MLPerf Inference v5.0 Llama-2-70B Interactive: p99 TTFT ≤ 450 ms (module docstring)."""
DEFAULT_TPOT_P99_MS = 40.0
"""MLPerf Inference v5.0 Llama-2-70B Interactive: p99 TPOT ≤ 40 ms (module docstring)."""
DEFAULT_INPUT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
DEFAULT_VOCAB_SIZE = 32000
DEFAULT_DURATION_S = 60.0
FLAGS_SPEC = Path("<flags>")
"""The ``spec_path`` of a run whose spec was built from flags: errors name it as the file."""
RAY_FIELD = "measurement.ray_address"
"""The spec field of the Ray cluster address (``--ray-address``)."""
NOT_STATED = "Hardware: not stated (a spec built from flags; no accelerator or power source named)"


@dataclass(frozen=True)
class PointFlags:
    """The point-and-shoot flags of ``tokenwatt collect`` (None: not given).

    Attributes:
        model: the served model's name (``engine.model`` and ``model.name``).
        rates: ``--rate`` (one) or ``--rates`` (several), req/s.
        concurrencies: ``--concurrency``, clients.
        sweep: ``--sweep``: run the SLO search.
        profile: ``--profile``: poisson, constant or concurrency.
        input_tokens, output_tokens: fixed prompt and output lengths (tokens).
        duration_s: ``--duration``: the measured window (s).
        warmup_s: ``--warmup``: load before each window, not measured (s).
        ttft_p99_ms, tpot_p99_ms: SLO limits (ms).
        vocab_size: token ids are drawn below it.
        allow_model_alias: ``--allow-model-alias``: ``engine.model_alias_ok`` (a gateway
            that maps names).
    """

    model: str | None = None
    rates: tuple[float, ...] | None = None
    concurrencies: tuple[int, ...] | None = None
    sweep: bool = False
    profile: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_s: float | None = None
    warmup_s: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    vocab_size: int | None = None
    allow_model_alias: bool = False

    @property
    def loads_given(self) -> list[str]:
        """Which of the load flags were given (for error messages)."""
        out = []
        if self.rates is not None:
            out.append("--rate/--rates")
        if self.concurrencies is not None:
            out.append("--concurrency")
        if self.sweep:
            out.append("--sweep")
        return out

    @property
    def any_given(self) -> bool:
        """Whether any point-and-shoot flag was given."""
        return any(v not in (None, False) for v in self.__dict__.values())


def parse_list(flag: str, text: str, kind: type[int] | type[float]) -> tuple[Any, ...]:
    """``"1,2.5,4"`` as a tuple of positive numbers, strictly increasing.

    Raises:
        InputError: named ``flag``: empty, not a number, not positive, or not increasing.
    """
    parts = [p.strip() for p in text.split(",")]
    values: list[Any] = []
    for part in parts:
        try:
            value = kind(part)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise InputError([Problem(flag, "", f"{part!r} is not {what}")]) from None
        if not value > 0 or value != value or value in (float("inf"),):
            raise InputError([Problem(flag, "", f"{part!r} must be a positive number")])
        values.append(value)
    for a, b in itertools.pairwise(values):
        if b <= a:
            raise InputError(
                [Problem(flag, "", f"loads must be strictly increasing ({b} after {a})")]
            )
    return tuple(values)


def _refuse(flag: str, message: str) -> InputError:
    return InputError([Problem(flag, "", message)])


def check_flags(flags: PointFlags, *, has_spec: bool) -> None:
    """Refuse combinations that cannot mean one thing.

    Raises:
        InputError: naming the flag: two load flags at once; none without ``--spec``;
            ``--model`` missing without ``--spec``; ``--profile`` contradicting the load flag.
    """
    loads = flags.loads_given
    if len(loads) > 1:
        both = " and ".join(loads)
        raise _refuse(loads[1], f"give one of --rate, --rates, --concurrency, --sweep; not {both}")
    if not has_spec:
        if flags.model is None:
            raise _refuse("--model", "is needed without --spec (the served model's name)")
        if not loads:
            raise _refuse(
                "--rate", "without --spec, give the load: --rate, --rates, --concurrency or --sweep"
            )
    if flags.concurrencies is not None and flags.profile not in (None, "concurrency"):
        raise _refuse(
            "--profile",
            f"--concurrency runs a closed loop; --profile {flags.profile} is an open-loop "
            "profile (give it --rate or --rates)",
        )
    if flags.rates is not None and flags.profile == "concurrency":
        raise _refuse(
            "--profile", "concurrency is a closed loop: give --concurrency C, not --rate/--rates"
        )


def _base(flags: PointFlags, endpoint: str) -> dict[str, Any]:
    """The spec built from the defaults of the module docstring, before the load flags."""
    model = flags.model or ""
    return {
        "name": "point-" + re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-")[:80],
        "hardware": {"adapter": "none"},
        "engine": {"endpoint": endpoint, "name": "unknown", "model": model},
        "model": {"name": model, "vocab_size": DEFAULT_VOCAB_SIZE},
        "slo": {"ttft_p99_ms": DEFAULT_TTFT_P99_MS, "tpot_p99_ms": DEFAULT_TPOT_P99_MS},
        "workload": {"trace": "chat-mix-v1", "seed": 0},
        "measurement": {
            "warmup_s": 10.0,
            "window_s": DEFAULT_DURATION_S,
            "search_window_s": DEFAULT_DURATION_S,
            "repeats": 2,
            "request_timeout_s": 120.0,
            "max_concurrency": 1024,
        },
        "sweep": {
            "start_rps": 1.0,
            "growth": 2.0,
            "max_rps": 1000.0,
            "bisect_steps": 4,
            "backoff": 0.85,
            "max_backoffs": 3,
        },
        "accuracy": {},
        "power": {"source": "none"},
        "not_covered": [NOT_STATED],
    }


def _lengths(n: int) -> dict[str, int]:
    return {"median": n, "p90": n}


def _apply(data: dict[str, Any], flags: PointFlags, *, fresh: bool) -> None:
    """Lay the flags over a spec's data (in place). ``fresh``: a spec built from flags, whose
    unset lengths take the defaults."""
    workload, m, sweep = data["workload"], data["measurement"], data["sweep"]
    if flags.model is not None:
        data["engine"]["model"] = flags.model
        data["model"]["name"] = flags.model
    if flags.vocab_size is not None:
        data["model"]["vocab_size"] = flags.vocab_size
    if flags.allow_model_alias:
        data["engine"]["model_alias_ok"] = True
    n_in = flags.input_tokens or (DEFAULT_INPUT_TOKENS if fresh else None)
    n_out = flags.output_tokens or (DEFAULT_OUTPUT_TOKENS if fresh else None)
    if n_in is not None:
        workload["input_tokens"] = _lengths(n_in)
    if n_out is not None:
        workload["output_tokens"] = _lengths(n_out)
    if flags.duration_s is not None:
        m["window_s"] = m["search_window_s"] = flags.duration_s
    if flags.warmup_s is not None:
        m["warmup_s"] = flags.warmup_s
    if flags.ttft_p99_ms is not None:
        data["slo"]["ttft_p99_ms"] = flags.ttft_p99_ms
    if flags.tpot_p99_ms is not None:
        data["slo"]["tpot_p99_ms"] = flags.tpot_p99_ms
    if flags.profile is not None:
        m["profile"] = flags.profile
    if flags.rates is not None:
        sweep.update(fixed=True, rates=list(flags.rates))
        if flags.profile is None and m.get("profile") == "concurrency":
            m["profile"] = "poisson"
    elif flags.concurrencies is not None:
        m["profile"] = "concurrency"
        sweep.update(fixed=True, concurrencies=list(flags.concurrencies))
        m["max_concurrency"] = max(m["max_concurrency"], max(flags.concurrencies))
    elif flags.sweep:
        sweep["fixed"] = False


def check_endpoint_flag(url: str, flag: str = "--endpoint") -> None:
    """Refuse an endpoint flag the spec's ``engine.endpoint`` would refuse (credentials in
    it — ``user:password@``, ``?api_key=`` —, whitespace, not http(s)), before any request
    is sent; the message names ``flag`` and never repeats the URL.

    Raises:
        InputError: named ``flag``.
    """
    try:
        validate(EngineSpec, {"endpoint": url, "name": "unknown", "model": "m"}, flag, InputError)
    except InputError as exc:
        raise InputError([Problem(flag, "", p.message) for p in exc.problems]) from None


def _check_ceilings(data: dict[str, Any], flags: PointFlags) -> None:
    """Refuse a load flag past the spec's ceilings, naming the flag and the largest value
    accepted (``records.MAX_CONCURRENCY``, ``records.MAX_SCHEDULE_ARRIVALS``), before the
    spec is validated, so the message speaks of the flag rather than of a spec field.

    Raises:
        InputError: named ``--concurrency`` or ``--rate/--rates``.
    """
    if flags.concurrencies is not None and max(flags.concurrencies) > MAX_CONCURRENCY:
        raise _refuse(
            "--concurrency",
            f"{max(flags.concurrencies)} clients is more than one load generator holds; "
            f"the largest accepted is {MAX_CONCURRENCY:,}",
        )
    if flags.rates is None:
        return
    m = data["measurement"]
    span_s = m["warmup_s"] + max(m["window_s"], m["search_window_s"]) + m["request_timeout_s"]
    limit = MAX_SCHEDULE_ARRIVALS / span_s
    if max(flags.rates) > limit:
        raise _refuse(
            "--rate/--rates",
            f"{max(flags.rates):g} req/s over {span_s:g} s (warm-up + window + request "
            f"timeout) would schedule more than {MAX_SCHEDULE_ARRIVALS:,} arrivals; the "
            f"largest rate accepted with these lengths is {limit:g} req/s",
        )


def point_spec(flags: PointFlags, endpoint: str) -> Spec:
    """The spec of a run given by flags alone (module docstring).

    Raises:
        InputError: the flags do not make a valid spec (named ``<flags>``), e.g. an
            endpoint that is not an http(s) URL; a load past the ceilings (named by flag).
    """
    data = _base(flags, endpoint)
    _apply(data, flags, fresh=True)
    _check_ceilings(data, flags)
    return validate(Spec, data, "<flags>", InputError)


def override_spec(spec: Spec, flags: PointFlags) -> Spec:
    """``spec`` with the given flags laid over its fields (module docstring).

    Raises:
        InputError: the result is not a valid spec (named ``<flags>``).
    """
    data = spec.model_dump()
    for path in unstated_fields(spec):  # left unset, so the record still says "not stated"
        section, name = path.split(".")
        del data[section][name]
    _apply(data, flags, fresh=False)
    _check_ceilings(data, flags)
    return validate(Spec, data, "<flags>", InputError)


def spec_yaml(spec: Spec, unused: Collection[str] = ()) -> str:
    """The effective spec as short YAML (defaults left out), for printing at the start.

    ``unused`` names fields the run does not use (``section.field``, or a whole section;
    :func:`tokenwatt.collect.plan.modes.not_applying`): they are left out of the YAML and
    named in a last comment line, since the record's spec keeps them.
    """
    data = spec.model_dump(mode="json", exclude_defaults=True)
    dropped = []
    for name in sorted(unused):
        section, _, field = name.partition(".")
        holder = data.get(section)
        if not field:
            if data.pop(section, None) is not None:
                dropped.append(name)
        elif isinstance(holder, dict) and holder.pop(field, None) is not None:
            dropped.append(name)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    if spec.engine.name == "unknown":
        text += "# engine.name unknown: no flag names the engine; the server is asked next\n"
    if dropped:
        text += f"# not used by this run (kept in the record): {', '.join(dropped)}\n"
    return text


LLAMACPP_NO_BUILD_INFO = "b0-unknown"
"""llama.cpp's ``build_info`` (``b<build number>-<commit>``) of a build made without its git
history, as Python wheels such as xllamacpp's are: build number 0, commit unknown."""


def reported_engine_line(name: str | None, version: str | None) -> str:
    """One line saying what the server reported about itself (``name`` and ``version`` as
    probed, None when it did not say), and why a part is unknown."""
    if name is None:
        return (
            "engine: the server did not say which engine it is (none of the vLLM, SGLang, "
            "llama.cpp or TGI endpoints answered as theirs); the record keeps it as unknown"
        )
    if version is None:
        return f"engine: {name} as the server reports it; it reports no version"
    why = ""
    if name == "llama.cpp" and version == LLAMACPP_NO_BUILD_INFO:
        why = (
            " (/props build_info: a build made without llama.cpp's git history, such as "
            "the xllamacpp wheel, has no build number or commit to report)"
        )
    what = version if version.startswith(name) else f"{name} {version}"
    return f"engine: {what} as the server reports it{why}"


__all__ = [
    "DEFAULT_TPOT_P99_MS",
    "DEFAULT_TTFT_P99_MS",
    "FLAGS_SPEC",
    "PointFlags",
    "check_endpoint_flag",
    "check_flags",
    "override_spec",
    "parse_list",
    "point_spec",
    "reported_engine_line",
    "spec_yaml",
]
