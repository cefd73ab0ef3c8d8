"""``tokenwatt init``: a commented starting spec from what a running server reports.

Reads the served model (``/v1/models``), the context length, the KV-cache size (the
workload's lengths shrink to fit both, :func:`length_limit`) and the engine's name and
version as :func:`~tokenwatt.collect.engine.probes.probe_engine` reads them for ``collect``'s
preflight, and the metric names at ``/metrics``; optionally the model's Hugging Face
``config.json`` (vocabulary size, and the path MBU reads the geometry from). The limits
and windows written are starting points, said so in the comments: an interactive chat SLO
(p99 TTFT 2 s, p99 TPOT 50 ms, the seed lab note's) and full-mode windows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tokenwatt.collect.engine.endpoints import api_base_url, server_root_url
from tokenwatt.collect.engine.engine_metrics import parse_metrics_text
from tokenwatt.collect.engine.probes import EngineInfo, get_metrics_text, probe_engine
from tokenwatt.errors import EngineError
from tokenwatt.netpath import network_path
from tokenwatt.records import PORT_PLACEHOLDER, SIM_ENGINE_NAME
from tokenwatt.redact import scrub, scrub_capped
from tokenwatt.text import control_characters, one_line

SCHEMA_COMMENT = "# yaml-language-server: $schema={schema}"
DEFAULT_VOCAB = 32000
"""Vocabulary size written when no config.json is given: prompts are token ids below it,
and every current model's vocabulary is at least this large."""
ENGINE_NAMES = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "llama.cpp": "llama.cpp",
    "tgi": "TGI",
    SIM_ENGINE_NAME: SIM_ENGINE_NAME,
}
METRIC_PREFIXES = ("vllm:", "sglang:", "llamacpp:", "tgi_")
CHAT_MIX_TOKENS = 1024 * 4 + 1024
"""Longest request of chat-mix-v1 at its p90s (4,096 in + 1,024 out, tokens)."""


@dataclass
class ServerFacts:
    """What ``init`` learnt from the server and the model's config."""

    info: EngineInfo
    metric_names: list[str] = field(default_factory=list)
    vocab_size: int | None = None
    config_path: str | None = None
    board: Literal["nvidia", "amd"] | None = "nvidia"
    """The board library that opened on this machine (:func:`board_facts`); None: neither
    NVML nor AMD SMI did, so the spec measures no power."""
    board_reasons: list[str] = field(default_factory=list)
    """Why no board library opened, one line per library."""


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
"""A Prometheus metric name (the exposition format's ``metric_name``); a family whose name
is not one is left out: its name would go into the spec's comments."""


def board_facts(facts: ServerFacts) -> None:
    """Fill ``facts.board`` from the GPU libraries that open here
    (:func:`tokenwatt.telemetry.detect_board`): ``power.source: board`` needs one on the
    machine that runs ``collect``."""
    from tokenwatt.telemetry import detect_board

    facts.board, facts.board_reasons = detect_board()


def _hardware_power(facts: ServerFacts) -> tuple[str, str, str]:
    """The ``hardware.adapter`` line, the ``power`` section and the closing comment on
    power (empty when the board library opened)."""
    if facts.board is not None:
        adapter = (
            f"  adapter: {facts.board}  # nvidia | amd | none (no GPU read: no board power "
            "or clocks)"
        )
        power = "power:\n  source: board  # board | redfish | ipmi | command | prometheus | none\n"
        return adapter, power, ""
    adapter = (
        "  adapter: none  # nvidia | amd | none: no GPU library opened where `tokenwatt init` "
        "ran (below); set it on the GPU box"
    )
    power = (
        "power:  # not measured: no tokens per joule\n"
        "  source: none  # board (with hardware.adapter nvidia or amd) | redfish | ipmi | "
        "command | prometheus | none\n"
    )
    why = "".join(f"# Power: {one_line(r)}\n" for r in facts.board_reasons)
    return adapter, power, why


def metric_names(text: str | None) -> list[str]:
    """The engine's own metric families in a /metrics text (vLLM ``vllm:``, SGLang,
    llama.cpp, TGI prefixes), sorted; none for no text or text that does not parse."""
    if not text:
        return []
    try:
        families = parse_metrics_text(text)
    except ValueError:
        return []
    return sorted(
        k for k in families if k.startswith(METRIC_PREFIXES) and _METRIC_NAME.fullmatch(k)
    )


def read_server(endpoint: str, api_key: str | None, timeout_s: float = 10.0) -> ServerFacts:
    """Probe the server (see :func:`probe_engine`) and read its metric names, on the
    default network path (:func:`tokenwatt.netpath.network_path`: a proxy from the
    environment, never for a loopback server).

    Raises:
        EngineError: the server cannot be reached or lists no models, or sends text that
            is not one line (:func:`check_server_text`).
    """
    import httpx

    if PORT_PLACEHOLDER in endpoint:  # init starts no engine: nothing fills it in
        raise EngineError(
            f"--endpoint: has {PORT_PLACEHOLDER}, which only an engine that collect starts "
            "fills in; give the running server's port"
        )
    info = probe_engine(endpoint, api_key, timeout_s=timeout_s)
    check_server_text(info, endpoint)
    text = None
    if info.metrics_available:
        root = server_root_url(endpoint)
        with httpx.Client(timeout=timeout_s, **network_path(root).httpx_options()) as client:
            text = get_metrics_text(client, f"{root}/metrics")
    return ServerFacts(info=info, metric_names=metric_names(text))


def check_server_text(info: EngineInfo, endpoint: str) -> None:
    """Refuse what ``init`` would write into a spec or print from the server when it is not
    one line of text: a model id or engine version holding a control character or an escape
    sequence (it would rewrite the user's terminal and the spec file's lines), and a context
    length that is not a positive whole number.

    Raises:
        EngineError: naming the endpoint, the field and the character (escaped).
    """
    root = scrub(server_root_url(endpoint))
    fields = [(f"{root}/v1/models: model id", m) for m in info.served_models]
    if info.engine_version is not None:
        fields.append((f"{root}: engine version", info.engine_version))
    for where, value in fields:
        bad = control_characters(value)
        if bad is not None:
            shown = scrub_capped(one_line(value), 80)
            raise EngineError(
                f"{where} '{shown}' holds a control character ({bad}); no spec written"
            )
    if info.context_length_problem is not None:
        raise EngineError(f"{root}: {info.context_length_problem}; no spec written")


def model_config_facts(config: Path, out: Path) -> tuple[int | None, str]:
    """The vocabulary size in a Hugging Face config.json and the file's path as the spec
    should name it (relative to the current folder, as ``collect`` resolves it, when the
    file is below it; else absolute).

    Raises:
        ValueError: the file is not a JSON object (message names the file).
    """
    try:
        data: Any = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{config}: cannot read a JSON config: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{config}: a model config.json must be a JSON object")
    text_config = data.get("text_config")
    vocab = data.get("vocab_size")
    if vocab is None and isinstance(text_config, dict):
        vocab = text_config.get("vocab_size")
    del out
    here, path = Path.cwd().resolve(), config.resolve()
    named = path.relative_to(here) if path.is_relative_to(here) else path
    return (vocab if isinstance(vocab, int) and vocab > 0 else None), named.as_posix()


KV_FIT_REQUESTS = 16
"""Requests at the workload's p90 lengths that must fit in the engine's KV cache together
before ``init`` keeps the lengths: with fewer, the server can run only a handful at once
and the search finds a rate set by the cache's size alone (1 req/s on the simulator's
1,280-token cache with lengths fitted to its 1,280-token context)."""


def length_limit(context: int | None, kv_tokens: int | None) -> tuple[int | None, str]:
    """The token length the workload is shrunk to fit, and why (words for the comment).

    The context length itself, or, when less, the length L at which
    :data:`KV_FIT_REQUESTS` requests at the shrunk p90s (L/4 in + L/8 out, see
    :func:`_lengths`) fit in a KV cache of ``kv_tokens``: L = kv × 8 / (3 × 16). None when
    neither limits chat-mix-v1's p90s.
    """
    limit, why = context, f"the context length ({context:,})" if context else ""
    if kv_tokens:
        by_kv = kv_tokens * 8 // (3 * KV_FIT_REQUESTS)
        if limit is None or by_kv < limit:
            limit = max(1, by_kv)
            why = (
                f"what lets {KV_FIT_REQUESTS} requests fit in the KV cache "
                f"({kv_tokens:,} tokens) at once"
            )
    if limit is None or limit >= CHAT_MIX_TOKENS:
        return None, ""
    return limit, why


def _lengths(context: int | None, kv_tokens: int | None = None) -> str:
    """The workload's token lengths: chat-mix-v1's own when they fit the context length
    and the KV cache (:func:`length_limit`), else shrunk to fit (medians an eighth and a
    sixteenth of the limit, p90s twice those)."""
    limit, why = length_limit(context, kv_tokens)
    if limit is None:
        return ""
    inp, out = max(1, limit // 8), max(1, limit // 16)
    return (
        f"  # chat-mix-v1's p90s (4,096 in, 1,024 out) exceed {why}:\n"
        f"  input_tokens: {{median: {inp}, p90: {2 * inp}}}\n"
        f"  output_tokens: {{median: {out}, p90: {2 * out}}}\n"
    )


def _q(value: str) -> str:
    """A YAML scalar for any text (JSON strings are YAML)."""
    return json.dumps(value, ensure_ascii=False)


def weight_line(info: EngineInfo) -> str:
    """The spec's ``model.weight_dtype`` line: the server's, where it names one this package
    knows (:attr:`EngineInfo.weight_dtype`), else ``bf16`` with a comment saying to set it."""
    reported = info.weight_format
    if reported is None:
        return "  weight_dtype: bf16  # set to the served weights' dtype"
    dtype = info.weight_dtype
    if dtype is not None:
        return f"  weight_dtype: {dtype}  # the server reports {_q(reported)} (meta.ftype)"
    return (
        f"  weight_dtype: bf16  # the server reports {_q(reported)} (meta.ftype), which is "
        "not one of the dtypes: set the nearest"
    )


def kv_line(info: EngineInfo) -> str:
    """The spec's ``model.kv_dtype`` line: llama.cpp's default KV cache type (f16, for
    ``--cache-type-k``/``-v`` unset) for a llama.cpp server, else ``bf16``; a guess the
    comment says to check, since no engine reports it (vLLM's ``auto`` is the model's)."""
    llama = info.engine_name == "llama.cpp"
    guess = "fp16  # llama.cpp's default (f16), a guess" if llama else "bf16  # a guess"
    return f"  kv_dtype: {guess}: set it per configuration; `collect --kv-dtype` overrides it"


def vocab_line(facts: ServerFacts) -> str:
    """The spec's ``model.vocab_size`` line: the server's vocabulary where it reports one
    (the ids it accepts), else the model config's, else :data:`DEFAULT_VOCAB`, commented."""
    served = facts.info.vocab_size
    if served is not None:
        differs = facts.vocab_size is not None and facts.vocab_size != served
        note = f"; config.json says {facts.vocab_size}" if differs else ""
        return f"  vocab_size: {served}  # from the server ({facts.info.vocab_source}){note}"
    if facts.vocab_size is not None:
        return f"  vocab_size: {facts.vocab_size}"
    return f"  vocab_size: {DEFAULT_VOCAB}  # not read: give --model-config for the real one"


def spec_text(facts: ServerFacts, *, endpoint: str, name: str, schema: str) -> str:
    """The commented spec text (YAML). ``schema`` is what the language-server comment
    points at (a path or URL of spec.schema.json)."""
    info = facts.info
    model = info.served_models[0]
    others = ", ".join(info.served_models[1:])
    engine = ENGINE_NAMES.get(info.engine_name or "", info.engine_name or "unknown")
    context = info.max_model_len
    metrics = facts.metric_names
    adapter, power, power_why = _hardware_power(facts)
    lines = [
        SCHEMA_COMMENT.format(schema=schema),
        f"# Written by `tokenwatt init` from {server_root_url(endpoint)}: every field is",
        "# described on the site's spec reference page. Limits and windows are starting points.",
        f"name: {_q(name)}",
        "hardware:",
        adapter,
        "engine:",
        f"  endpoint: {_q(api_base_url(endpoint))}",
        f"  name: {_q(engine)}",
        *([f"  version: {_q(info.engine_version)}"] if info.engine_version else []),
        "  api: completions",
        f"  model: {_q(model)}" + (f"  # the server also serves: {others}" if others else ""),
        "  ignore_eos: true",
        "  # flags: [--kv-cache-dtype, fp8]  # the engine's flags, for readers",
        "model:",
        f"  name: {_q(model)}",
        *([f"  config: {_q(facts.config_path)}"] if facts.config_path else []),
        weight_line(info),
        kv_line(info),
        vocab_line(facts),
        "slo:  # an interactive chat SLO",
        "  ttft_p99_ms: 2000",
        "  tpot_p99_ms: 50",
        "workload:",
        "  trace: chat-mix-v1",
    ]
    text = "\n".join(lines) + "\n" + _lengths(context, info.kv_capacity_tokens)
    text += (
        "  seed: 0\n"
        "measurement:  # full-mode windows; `collect --mode quick` shortens them\n"
        "  warmup_s: 30\n  window_s: 120\n  search_window_s: 60\n  repeats: 3\n"
        "  request_timeout_s: 300\n  max_concurrency: 4096\n"
        "sweep:\n  start_rps: 1\n  growth: 2\n  max_rps: 1000\n  bisect_steps: 3\n"
        "  backoff: 0.9\n  max_backoffs: 4\n"
        "accuracy:  # no suite: no accuracy gate, so no capacity credit\n"
        "  # suite: suites/gsm8k-200.jsonl  # from `tokenwatt suites fetch` and `suites build`\n"
        "  name: gsm8k-5shot\n  max_drop_pts: 1.0\n"
        f"{power}"
        "not_covered: []\n"
    )
    text += power_why
    if context is not None:
        text += f"# Context length {context:,} tokens ({info.context_length_source}).\n"
    if info.kv_capacity_tokens is not None:
        text += f"# KV cache {info.kv_capacity_tokens:,} tokens ({info.kv_capacity_source}).\n"
    if metrics:
        shown = ", ".join(metrics[:12]) + (", ..." if len(metrics) > 12 else "")
        text += f"# /metrics exposes {len(metrics)} engine metrics: {shown}\n"
    else:
        text += "# /metrics exposes no engine metrics: queue and KV-cache figures will be missing\n"
    return text
