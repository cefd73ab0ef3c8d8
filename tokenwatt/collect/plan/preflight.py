"""Checks made once the engine is probed and before the first request is sent.

* :func:`check_served_model` — is ``engine.model`` a model the server serves? vLLM answers
  a request for any other name with HTTP 404, so every request of the run would fail; like
  vLLM's ``bench serve``, whose single-prompt test run fails the benchmark before it
  starts, the run is refused. So is a name that an engine serving one model answers
  whatever the request names (llama.cpp's server, TGI): the run would be measured and
  recorded under a name that is not the served model's. A gateway that maps names
  (aliases) is let through with ``engine.model_alias_ok`` (``--allow-model-alias``), with
  a warning in the record.
* :func:`check_workload_fits` — does the workload fit the engine's context length? A
  ``chat-mix-v1`` whose median request (shared prefix + median prompt + median output) does
  not fit is refused: most requests would have to be cut, and the workload measured would
  not be the one the spec names. When the medians fit, the tail that does not is shortened
  to fit (:class:`~tokenwatt.collect.workload.prompts.ChatMix`) and the share is noted, since a
  lognormal's tail has no bound and refusing it would refuse every model with a short
  context. A trace is replayed exactly, so a trace with any request too long is refused.
* :func:`model_from_server` and :func:`check_vocab_fits` — token ids are drawn below
  ``model.vocab_size``; where the server reports its vocabulary (llama.cpp's ``n_vocab``), a
  spec built from flags without ``--vocab-size`` takes it, and a stated one larger than the
  server's is refused: llama.cpp answers a prompt with an id beyond it with HTTP 400
  ("Prompt contains invalid tokens"), every request of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tokenwatt.collect.engine.probes import EngineInfo
from tokenwatt.collect.workload.prompts import (
    CHAT_MIX_V1,
    DEFAULT_INPUT_TOKENS,
    DEFAULT_OUTPUT_TOKENS,
    lognormal_params,
)
from tokenwatt.collect.workload.workload import WorkloadStream, context_budget
from tokenwatt.errors import InputError, Problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from tokenwatt.records import LengthDist, Spec

TAIL_SAMPLE = 100_000
"""Draws used to estimate the share of ``chat-mix-v1`` requests longer than the context
(seeded, so the note is the same on every run; its standard error is under 0.2 points)."""


def check_served_model(spec: Spec, info: EngineInfo, spec_file: str | Path) -> list[str]:
    """Check ``engine.model`` against the models ``/v1/models`` listed.

    Returns:
        Warnings for the record's ``engine_warnings``: empty when the name is served; one
        when it is not but ``engine.model_alias_ok`` lets it through.

    Raises:
        InputError: the server lists no model, or lists models without ``engine.model``
            and ``engine.model_alias_ok`` is false; the message names the requested and
            the served models, the spec field and the opt-out.
    """
    name, served = spec.engine.model, info.served_models
    if name in served:
        return []
    listed = ", ".join(repr(m) for m in served) if served else "no model"
    if served and spec.engine.model_alias_ok:
        return [
            f"engine.model {name!r} is not among the served models ({listed}); measured "
            "anyway because engine.model_alias_ok is set (the server maps the name)"
        ]
    if not served:
        why = "Every request would fail (vLLM answers HTTP 404)"
    else:
        # llama.cpp and TGI answer any name with their one model: the run would go on,
        # recorded under a name the server does not serve.
        why = (
            "Every request would fail (vLLM answers HTTP 404), or be answered by a model "
            "of another name (llama.cpp, TGI) and recorded under the wrong one"
        )
    raise InputError(
        [
            Problem(
                str(spec_file),
                "engine.model",
                f"{name!r} is requested but not served at {info.endpoint}: /v1/models lists "
                f"{listed}. {why}; set engine.model (--model) to a served name (the "
                "server's --served-model-name or --alias, or its model path), or, for a "
                "gateway that maps names, set engine.model_alias_ok (--allow-model-alias)",
            )
        ]
    )


def _engine_limit(info: EngineInfo) -> str:
    source = f", {info.context_length_source}" if info.context_length_source else ""
    return f"the engine's context of {info.max_model_len:,} tokens{source}"


def check_workload_fits(
    spec: Spec,
    stream: WorkloadStream,
    info: EngineInfo,
    spec_file: str | Path,
    *,
    count_tokens: Callable[[str], int] | None = None,
) -> list[str]:
    """Check, before the first request, that the workload fits the engine's context.

    Args:
        spec: the run's spec (``workload`` fields are named in messages).
        stream: the run's stream (from :func:`~tokenwatt.collect.workload.workload.workload_for`).
        info: the probe; ``max_model_len`` is the context length (None: not checked).
        spec_file: named in messages.
        count_tokens: counts a trace's text prompts when given (else they are not checked).

    Returns:
        Notes for the record (tail shortened, requests not checked).

    Raises:
        InputError: the median ``chat-mix-v1`` request, or any trace request, does not fit.
    """
    if info.max_model_len is None:
        return ["the engine did not report its context length: request lengths not checked"]
    if stream.trace_entries is None:
        return _check_chat_mix(spec, info, str(spec_file))
    return _check_trace(stream, info, str(spec_file), count_tokens)


def _check_chat_mix(spec: Spec, info: EngineInfo, spec_file: str) -> list[str]:
    assert info.max_model_len is not None
    w = spec.workload
    text = spec.engine.api == "chat"
    budget = context_budget(info.max_model_len, text=text)
    assert budget is not None
    dist_in = w.input_tokens or DEFAULT_INPUT_TOKENS
    dist_out = w.output_tokens or DEFAULT_OUTPUT_TOKENS
    median = w.shared_prefix_tokens + dist_in.median + dist_out.median
    room = f"{budget:,} tokens for text prompts" if text else None
    limit = _engine_limit(info) + (f" ({room}, a tenth kept for the chat template)" if room else "")
    if median > budget:
        raise InputError(
            [
                Problem(
                    spec_file,
                    "workload",
                    f"the median request does not fit {limit}: workload.shared_prefix_tokens "
                    f"{w.shared_prefix_tokens} + workload.input_tokens.median {dist_in.median} "
                    f"+ workload.output_tokens.median {dist_out.median} = {median:,} tokens. "
                    "Lower them, or serve the model with a longer context",
                )
            ]
        )
    share = _share_longer_than(budget - w.shared_prefix_tokens, dist_in, dist_out)
    if round(100 * share, 1) == 0.0:
        # Under 1 in 2,000 draws: printed as "0.0%", the note would say nothing is shortened.
        return []
    p90_note = " (more than a tenth: the p90 lengths sent are below the spec's)"
    return [
        f"{100 * share:.1f}% of {CHAT_MIX_V1} requests are longer than {limit} and are "
        "shortened to fit (output first, then prompt)" + (p90_note if share > 0.1 else "")
    ]


def _share_longer_than(room: int, dist_in: LengthDist, dist_out: LengthDist) -> float:
    """Share of seeded (prompt, output) draws whose sum exceeds ``room`` tokens."""
    mu_in, s_in = lognormal_params(dist_in)
    mu_out, s_out = lognormal_params(dist_out)
    rng = np.random.default_rng(0)
    n_in = np.maximum(1, np.rint(rng.lognormal(mu_in, s_in, TAIL_SAMPLE)))
    n_out = np.maximum(1, np.rint(rng.lognormal(mu_out, s_out, TAIL_SAMPLE)))
    return float(np.mean(n_in + n_out > room))


def _check_trace(
    stream: WorkloadStream,
    info: EngineInfo,
    spec_file: str,
    count_tokens: Callable[[str], int] | None,
) -> list[str]:
    assert stream.trace_entries is not None and info.max_model_len is not None
    too_long: list[str] = []
    unchecked = 0
    for number, entry in enumerate(stream.trace_entries, start=1):
        if isinstance(entry.prompt, list):
            prompt = stream.prefix.tokens + len(entry.prompt)
        elif count_tokens is not None:
            prompt = count_tokens(stream.prefix.text + entry.prompt)
        else:
            unchecked += 1
            continue
        total = prompt + entry.max_tokens
        if total > info.max_model_len:
            name = f" (id {entry.id!r})" if entry.id else ""
            too_long.append(f"request {number}{name}: {prompt:,} + {entry.max_tokens:,} tokens")
    if too_long:
        shown = "; ".join(too_long[:3]) + ("; ..." if len(too_long) > 3 else "")
        raise InputError(
            [
                Problem(
                    spec_file,
                    "workload.trace",
                    f"{len(too_long)} of {len(stream.trace_entries)} requests of {stream.kind} "
                    f"are longer than {_engine_limit(info)} (prompt + max_tokens): {shown}",
                )
            ]
        )
    if unchecked:
        return [
            f"{unchecked} text prompts of {stream.kind} were not checked against the context "
            "length (set model.tokenizer to count them)"
        ]
    return []


def model_from_server(
    spec: Spec, info: EngineInfo, *, stated: bool, from_flags: bool = False
) -> tuple[Spec, list[str]]:
    """The spec with what the server reports of its model where nobody stated it: the
    vocabulary, and, in a spec built from flags (which has no weight-type flag), the
    weights' type (:attr:`EngineInfo.weight_dtype`: llama.cpp's unquantized ones).

    Args:
        spec: the run's spec.
        info: the probe (``vocab_size``, ``weight_format``: None where it does not say).
        stated: whether ``model.vocab_size`` was stated (a spec file, or ``--vocab-size``);
            a stated one is kept (:func:`check_vocab_fits` checks it).
        from_flags: the spec was built from flags (no spec file states the weight type).

    Returns:
        The spec (changed or not) and one line per value taken, for the user.
    """
    update: dict[str, object] = {}
    lines = []
    served = info.vocab_size
    if not stated and served is not None and served != spec.model.vocab_size:
        update["vocab_size"] = served
        lines.append(
            f"vocabulary: token ids below {served:,}, as the server reports "
            f"({info.vocab_source}); --vocab-size sets another"
        )
    dtype = info.weight_dtype
    if from_flags and dtype is not None and dtype != spec.model.weight_dtype:
        update["weight_dtype"] = dtype
        lines.append(
            f"weights: {dtype}, as the server reports them ({info.weight_format!r}, "
            "/v1/models meta.ftype)"
        )
    if not update:
        return spec, []
    return spec.model_copy(update={"model": spec.model.model_copy(update=update)}), lines


def check_vocab_fits(
    spec: Spec, stream: WorkloadStream, info: EngineInfo, where: tuple[str, str]
) -> None:
    """Refuse, before the first request, token-id prompts the server's vocabulary cannot
    hold: ``model.vocab_size`` larger than the vocabulary the server reports.

    Only prompts of token ids count: the completions API with the synthetic workload or a
    trace with token-id prompts (text prompts and the chat API are tokenized by the server).

    Args:
        where: the file (or flag) and field to name: ``(spec_file, "model.vocab_size")``, or
            ``("--vocab-size", "")``.

    Raises:
        InputError: naming ``where``, both sizes and the value to set.
    """
    served = info.vocab_size
    if served is None or spec.model.vocab_size <= served or spec.engine.api != "completions":
        return
    entries = stream.trace_entries
    if entries is not None and not any(isinstance(e.prompt, list) for e in entries):
        return
    message = (
        f"is {spec.model.vocab_size:,}, but the served model has {served:,} tokens "
        f"({info.vocab_source}): prompts would hold ids it does not have, which llama.cpp "
        f"refuses with HTTP 400 (every request of the run); set it to {served}"
    )
    raise InputError([Problem(where[0], where[1], message)])
