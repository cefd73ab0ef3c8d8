"""JSON Lines traces: requests replayed as written, one per line.

Each line is ``{"prompt": "text" | [ids], "max_tokens": n}`` or
``{"input_tokens": n, "output_tokens": m}`` (random ids drawn within the vocabulary with the
workload's seed), optionally with a string ``"id"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tokenwatt.collect.workload.prompts import RequestSpec, random_ids
from tokenwatt.errors import InputError, Problem
from tokenwatt.files import check_regular_file

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
        ids = random_ids(rng, vocab_size, n_in)
        return RequestSpec(prompt=ids, max_tokens=n_out, id=entry_id, synthetic=True)
    raise _bad(
        path,
        line,
        'expected {"prompt": ..., "max_tokens": n} or {"input_tokens": n, "output_tokens": m}'
        f' (optionally "id"), got keys {sorted(obj)}',
    )


MAX_TRACE_BYTES = 1 << 30
"""Largest trace file read (1 GiB): it is read whole, before the first request."""


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
    check_regular_file(path, what="trace", max_bytes=MAX_TRACE_BYTES)
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
