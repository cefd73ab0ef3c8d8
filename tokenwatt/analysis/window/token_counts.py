"""Output tokens counted honestly, and how many tokens each streamed chunk carried (pure).

A server that sends ``usage`` is taken at its word. Without it the stream reader counts
text chunks — one token per chunk, which halves the tokens (and doubles TPOT) of a server
that sends two tokens per chunk — and keeps the text. Given the model's tokenizer as a
callable (text → token count), :func:`recount` counts that text instead, as vLLM's
``bench serve`` does (``len(tokenizer(generated_text, add_special_tokens=False).input_ids)``
when usage is missing). The window says which it was (``token_count_source``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

from tokenwatt.records import RequestResult, TokenCountSource

CountTokens = Callable[[str], int]
"""Counts the tokens of a text with the model's tokenizer (no special tokens added)."""

USAGE: Final = "usage"
TOKENIZER: Final = "tokenizer"
CHUNKS_ESTIMATE: Final = "chunks-estimate"


def recount(
    requests: Sequence[RequestResult], count_tokens: CountTokens | None
) -> tuple[list[RequestResult], TokenCountSource, int]:
    """Requests with usage-less output tokens recounted by ``count_tokens`` where possible.

    Returns:
        The requests (copies where recounted; the inputs are not changed), the window's
        token-count source — ``usage`` when every completed request had usage,
        ``tokenizer`` when every one without it was recounted, else ``chunks-estimate`` —
        and the number of completed requests without usage.

    Raises:
        Whatever ``count_tokens`` raises, and ValueError when it returns a negative count.
    """
    out: list[RequestResult] = []
    missing = estimated = 0
    for r in requests:
        if not (r.ok and r.usage_missing):
            out.append(r)
            continue
        missing += 1
        if count_tokens is None or r.output_text is None:
            estimated += 1
            out.append(r)
            continue
        n = count_tokens("".join(r.output_text))
        if n < 0:
            raise ValueError(f"count_tokens returned a negative count ({n})")
        out.append(dataclasses.replace(r, output_tokens=n))
    source: TokenCountSource = (
        "usage" if not missing else "chunks-estimate" if estimated else "tokenizer"
    )
    return out, source, missing


def token_warning(source: TokenCountSource, missing: int, completed: int) -> str | None:
    """The window's warning about client-counted tokens, or None when usage counted all."""
    if source == "usage":
        return None
    if source == "tokenizer":
        return (
            f"{missing} of {completed} requests had no usage from the server: their output "
            "tokens were counted by the client's tokenizer"
        )
    return (
        f"estimate: {missing} of {completed} requests had no usage from the server and no "
        "tokenizer was given, so their output tokens (and TPOT, goodput) are estimates "
        "counted as one token per text chunk"
    )


def tokens_per_chunk(r: RequestResult) -> float | None:
    """Mean output tokens per text chunk of a completed request (None without chunks)."""
    if not r.ok or not r.chunk_s:
        return None
    return r.output_tokens / len(r.chunk_s)
