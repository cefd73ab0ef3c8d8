"""Workloads: what each request asks for (prompt and exact output length).

``chat-mix-v1`` draws input and output lengths from seeded lognormal distributions whose
median and 90th percentile match the spec (defaults from DESIGN.md: input median 1,024 /
p90 4,096 tokens, output median 256 / p90 1,024 tokens) and sends random token ids, so
lengths are exact without a tokenizer. A JSON Lines trace can be replayed instead.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenwatt.errors import InputError, Problem
from tokenwatt.records.spec import LengthDist

if TYPE_CHECKING:
    from tokenwatt.records.spec import Spec

CHAT_MIX_V1 = "chat-mix-v1"
DEFAULT_INPUT_TOKENS = LengthDist(median=1024, p90=4096)
DEFAULT_OUTPUT_TOKENS = LengthDist(median=256, p90=1024)

# z such that P(N(0,1) <= z) = 0.9, i.e. scipy.stats.norm.ppf(0.9).
_Z90 = 1.2815515655446004
# Token ids below this are left out: most vocabularies keep control tokens (BOS, EOS, pad,
# unk) among the first few ids.
_LOWEST_TOKEN_ID = 10
# Words for text prompts (chat API, which has no token-id prompts); each is one token in
# the common BPE vocabularies, so a prompt of n words is about n tokens.
_WORD_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there one all we their has been if more when "
    "will would who so no out up into do any your what some can time could them see other"
)
_WORDS = tuple(_WORD_TEXT.split())


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of a workload.

    Attributes:
        prompt: token ids (for ``/v1/completions``) or text.
        max_tokens: exact output length asked for (tokens; sent with ``ignore_eos``).
        id: optional name from a trace, kept for the per-request record.
    """

    prompt: list[int] | str
    max_tokens: int
    id: str | None = None

    @property
    def prompt_tokens(self) -> int | None:
        """Prompt length in tokens when the prompt is token ids, else None (unknown)."""
        return len(self.prompt) if isinstance(self.prompt, list) else None


def lognormal_params(dist: LengthDist) -> tuple[float, float]:
    """(mu, sigma) of the lognormal whose median and 90th percentile are ``dist``'s.

    median = exp(mu); p90 = exp(mu + z90 · sigma), with z90 the standard normal's 0.9 quantile.
    """
    mu = math.log(dist.median)
    sigma = math.log(dist.p90 / dist.median) / _Z90
    return mu, sigma


def chat_mix_v1(
    seed: int,
    vocab_size: int,
    input_tokens: LengthDist | None = None,
    output_tokens: LengthDist | None = None,
    *,
    max_total_tokens: int | None = None,
    text: bool = False,
) -> Iterator[RequestSpec]:
    """The ``chat-mix-v1`` workload: an endless, seeded stream of requests.

    Input and output lengths come from lognormals fitted to the given median and p90 (tokens;
    defaults from DESIGN.md), rounded, at least 1. Prompts are token ids drawn uniformly from
    ``[10, vocab_size)`` (the lowest ids are usually control tokens).

    Args:
        seed: seed of ``numpy.random.default_rng``; equal seeds give equal streams.
        vocab_size: the model's vocabulary size (``model.vocab_size``).
        input_tokens: prompt length distribution; default median 1,024 / p90 4,096.
        output_tokens: output length distribution; default median 256 / p90 1,024.
        max_total_tokens: the server's context length, when known: the prompt is cut so that
            prompt + output fits (this trims the far tail only; medians and p90s stay).
        text: send text prompts of that many common words (about one token each) instead
            of token ids, for the chat API, which takes no token ids.

    Raises:
        ValueError: when ``vocab_size`` leaves no ids to draw from.
    """
    if vocab_size <= _LOWEST_TOKEN_ID:
        raise ValueError(f"vocab_size must exceed {_LOWEST_TOKEN_ID}, got {vocab_size}")
    mu_in, sigma_in = lognormal_params(input_tokens or DEFAULT_INPUT_TOKENS)
    mu_out, sigma_out = lognormal_params(output_tokens or DEFAULT_OUTPUT_TOKENS)
    rng = np.random.default_rng(seed)
    words = np.array(_WORDS)
    while True:
        n_in = max(1, round(float(rng.lognormal(mu_in, sigma_in))))
        n_out = max(1, round(float(rng.lognormal(mu_out, sigma_out))))
        if max_total_tokens is not None:
            n_out = min(n_out, max(1, max_total_tokens - 1))
            n_in = max(1, min(n_in, max_total_tokens - n_out))
        prompt: list[int] | str
        if text:
            prompt = " ".join(words[rng.integers(0, len(words), n_in)].tolist())
        else:
            prompt = rng.integers(_LOWEST_TOKEN_ID, vocab_size, n_in).tolist()
        yield RequestSpec(prompt=prompt, max_tokens=n_out)


MAX_TRACE_TOKENS = 1_048_576
"""Cap on a trace entry's token counts (input, output, prompt ids), in tokens: 2**20, above
any served context window of today's models (1M tokens); larger values are typos, and
drawing that many random ids would need gigabytes (10**10 ids: 74.5 GiB)."""


def _bad(path: Path, line: int, message: str) -> InputError:
    return InputError([Problem(str(path), f"line {line}", message)])


def _trace_entry(
    path: Path, line: int, obj: Any, rng: np.random.Generator, vocab_size: int | None
) -> RequestSpec:
    if not isinstance(obj, dict):
        raise _bad(path, line, "each line must be a JSON object")
    keys = set(obj)
    entry_id = obj.get("id")
    if entry_id is not None and not isinstance(entry_id, str):
        raise _bad(path, line, "id must be a string")
    keys.discard("id")

    def positive_int(key: str) -> int:
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _bad(path, line, f"{key} must be a positive integer, got {value!r}")
        if value > MAX_TRACE_TOKENS:
            raise _bad(path, line, f"{key} must be at most {MAX_TRACE_TOKENS:,}, got {value:,}")
        return value

    if keys == {"prompt", "max_tokens"}:
        prompt = obj["prompt"]
        ids_ok = isinstance(prompt, list) and all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt
        )
        if not (isinstance(prompt, str) or ids_ok) or not prompt:
            raise _bad(path, line, "prompt must be a non-empty string or list of token ids")
        if isinstance(prompt, list) and len(prompt) > MAX_TRACE_TOKENS:
            raise _bad(
                path, line, f"prompt has {len(prompt):,} token ids, more than {MAX_TRACE_TOKENS:,}"
            )
        return RequestSpec(prompt=prompt, max_tokens=positive_int("max_tokens"), id=entry_id)
    if keys == {"input_tokens", "output_tokens"}:
        n_in = positive_int("input_tokens")
        n_out = positive_int("output_tokens")
        if vocab_size is None:
            raise _bad(path, line, "input_tokens needs the model's vocab_size to draw ids")
        ids = rng.integers(_LOWEST_TOKEN_ID, vocab_size, n_in).tolist()
        return RequestSpec(prompt=ids, max_tokens=n_out, id=entry_id)
    raise _bad(
        path,
        line,
        'expected {"prompt": ..., "max_tokens": n} or {"input_tokens": n, "output_tokens": m}'
        f' (optionally "id"), got keys {sorted(obj)}',
    )


def load_trace(
    path: str | Path, *, vocab_size: int | None = None, seed: int = 0
) -> list[RequestSpec]:
    """Read a JSON Lines trace: one request per line, blank lines skipped.

    Each line is ``{"prompt": "text" | [ids], "max_tokens": n}`` or
    ``{"input_tokens": n, "output_tokens": m}`` (random ids drawn within ``vocab_size`` with
    ``seed``), optionally with a string ``"id"``.

    Raises:
        InputError: unreadable file, bad or too deeply nested JSON, a bad entry or a token
            count above :data:`MAX_TRACE_TOKENS` (naming file and line), or an empty trace.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem(str(path), "", f"cannot read the trace: {exc}")]) from exc
    rng = np.random.default_rng(seed)
    entries: list[RequestSpec] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _bad(path, number, f"not valid JSON: {exc.msg}") from exc
        except RecursionError as exc:
            raise _bad(path, number, "JSON nested too deeply") from exc
        entries.append(_trace_entry(path, number, obj, rng, vocab_size))
    if not entries:
        raise InputError([Problem(str(path), "", "the trace has no requests")])
    return entries


def workload_for(spec: Spec, *, base_dir: str | Path | None = None) -> Iterator[RequestSpec]:
    """The endless request stream a spec asks for.

    ``workload.trace`` is ``chat-mix-v1`` (seeded with ``workload.seed``; text prompts when
    ``engine.api`` is ``chat``) or the path of a JSON Lines trace (relative to ``base_dir``,
    usually the spec file's folder), replayed in order and cycled.

    Raises:
        InputError: from :func:`load_trace`.
    """
    workload = spec.workload
    if workload.trace == CHAT_MIX_V1:
        max_len = spec.model.geometry.get("max_model_len")
        return chat_mix_v1(
            workload.seed,
            spec.model.vocab_size,
            workload.input_tokens,
            workload.output_tokens,
            max_total_tokens=max_len if isinstance(max_len, int) else None,
            text=spec.engine.api == "chat",
        )
    trace = Path(workload.trace)
    if base_dir is not None and not trace.is_absolute():
        trace = Path(base_dir) / trace
    entries = load_trace(trace, vocab_size=spec.model.vocab_size, seed=workload.seed)
    return itertools.cycle(entries)
