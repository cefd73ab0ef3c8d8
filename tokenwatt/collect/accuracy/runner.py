"""The accuracy suite runner: ask the engine every suite item, score, store per item.

Follows the spec's ``accuracy`` section: ``concurrency`` requests in flight at most,
``max_tokens``, ``stop``, ``temperature`` (0 = greedy unless the spec says otherwise),
``seeds`` full passes (each request carries its pass's ``seed``) and ``limit`` (the first
N items of the suite, which is already a seeded sample). Requests go to ``/v1/completions``
or ``/v1/chat/completions`` per ``engine.api``, non-streaming. An item that errors or times
out counts as wrong, with ``error`` set, and stays in the record: never skipped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenwatt.analysis import score_completion, spread_pts
from tokenwatt.collect.engine.endpoints import api_base_url
from tokenwatt.errors import InputError, Problem
from tokenwatt.files import file_sha256
from tokenwatt.netpath import network_path
from tokenwatt.records import AccuracyResult, ItemResult, SeedResult, Spec, SuiteItem, load_suite
from tokenwatt.redact import scrub, scrub_capped

_ERROR_BODY_CHARS = 200


def api_url(endpoint: str, api: str) -> str:
    """The request URL for ``engine.api`` under ``endpoint`` (with or without ``/v1``)."""
    base = api_base_url(endpoint)
    return f"{base}/chat/completions" if api == "chat" else f"{base}/completions"


def request_body(spec: Spec, item: SuiteItem, seed: int) -> dict[str, Any]:
    """The JSON body for one item: the prompt, the spec's sampling settings and ``seed``.

    No ``ignore_eos`` here (unlike the load generator): the model must be free to stop.
    """
    acc = spec.accuracy
    body: dict[str, Any] = {
        "model": spec.engine.model,
        "max_tokens": acc.max_tokens,
        "temperature": acc.temperature,
        "seed": seed,
        "stream": False,
    }
    if acc.stop:
        body["stop"] = list(acc.stop)
    if spec.engine.api == "chat":
        body["messages"] = [{"role": "user", "content": item.prompt}]
    else:
        body["prompt"] = item.prompt
    return body


def completion_text(data: Any, api: str) -> str:
    """The generated text of a non-streaming OpenAI-style response.

    Raises:
        ValueError: the response does not have the expected shape.
    """
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"] if api == "chat" else choice["text"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"malformed response: no choices[0].{exc}") from exc
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValueError(f"malformed response: text is {type(text).__name__}, not a string")
    return text


def format_number(value: float) -> str:
    """A number as text without a needless ``.0`` ("18", "-3", "1234.5")."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


async def _ask(
    client: Any,
    url: str,
    spec: Spec,
    item: SuiteItem,
    seed: int,
    timeout_s: float,
    gate: asyncio.Semaphore,
    keep_completions: bool,
    secrets: tuple[str, ...] = (),
) -> ItemResult:
    """One item, one seed: request, score, and turn every failure into a wrong item (its
    error text scrubbed of ``secrets``, the run's API key, and of credentials)."""
    import httpx

    async with gate:
        try:
            async with asyncio.timeout(timeout_s):
                response = await client.post(url, json=request_body(spec, item, seed))
                if response.status_code != 200:
                    # Scrubbed before it is cut, so that no half key survives the cut.
                    body = scrub_capped(response.text, _ERROR_BODY_CHARS, secrets)
                    return ItemResult(
                        id=item.id,
                        correct=False,
                        gold=item.gold,
                        error=f"HTTP {response.status_code}: {body}",
                    )
                text = completion_text(response.json(), spec.engine.api)
        except TimeoutError:
            error = f"timeout after {timeout_s:g} s"
        except httpx.TimeoutException as exc:
            error = f"timeout after {timeout_s:g} s ({type(exc).__name__})"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:_ERROR_BODY_CHARS]
        except (ValueError, json.JSONDecodeError) as exc:
            error = str(exc)[:_ERROR_BODY_CHARS]
        else:
            scored = score_completion(text, item.gold)
            return ItemResult(
                id=item.id,
                correct=scored.correct,
                answer=None if scored.value is None else format_number(scored.value),
                gold=item.gold,
                completion=text if keep_completions else None,
            )
    return ItemResult(id=item.id, correct=False, gold=item.gold, error=scrub(error, secrets))


async def run_items_async(
    spec: Spec,
    endpoint: str,
    api_key: str | None,
    items: Sequence[SuiteItem],
    seeds: Sequence[int],
    *,
    timeout_s: float,
    keep_completions: bool = True,
) -> list[SeedResult]:
    """Run every item once per seed (a full pass each) with bounded concurrency.

    Returns one :class:`SeedResult` per seed, items in suite order, score in %.
    """
    import httpx

    concurrency = spec.accuracy.concurrency
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    secrets = (api_key,) if api_key else ()
    url = api_url(endpoint, spec.engine.api)
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    results: list[SeedResult] = []
    options = network_path(url, spec.engine.proxy).httpx_options()
    async with httpx.AsyncClient(
        headers=headers, limits=limits, timeout=httpx.Timeout(timeout_s), **options
    ) as client:
        for seed in seeds:
            outcomes = await asyncio.gather(
                *(
                    _ask(client, url, spec, item, seed, timeout_s, gate, keep_completions, secrets)
                    for item in items
                )
            )
            right = sum(1 for o in outcomes if o.correct)
            results.append(
                SeedResult(
                    seed=seed,
                    score_pct=100.0 * right / len(outcomes),
                    items=list(outcomes),
                    errors=sum(1 for o in outcomes if o.error is not None),
                )
            )
    return results


def errored_items(result: AccuracyResult) -> list[tuple[int, ItemResult]]:
    """Every item that failed (HTTP error, timeout, malformed response), with its seed.

    These count as wrong in the score; this lists them so a summary can name them.
    """
    return [(s.seed, it) for s in result.seeds for it in s.items if it.error is not None]


@dataclass(frozen=True)
class LoadedSuite:
    """A suite file read and validated whole: its path, items and the SHA-256 of its bytes.

    ``collect`` reads the suite with :func:`read_suite` before its first request, so that
    a malformed suite stops the run before anything is measured or written.
    """

    path: Path
    items: list[SuiteItem]
    sha256: str


def read_suite(path: Path) -> LoadedSuite:
    """Read and validate the suite file at ``path`` (every line; see :func:`load_suite`).

    Raises:
        InputError: unreadable file, or a malformed line (each problem naming file and line).
    """
    items = load_suite(path)
    return LoadedSuite(path=path, items=items, sha256=file_sha256(path))


async def run_suite_async(
    spec: Spec,
    endpoint: str,
    api_key: str | None,
    suite_path: Path | LoadedSuite,
    *,
    limit: int | None = None,
    seeds: int | None = None,
    timeout_s: float | None = None,
    keep_completions: bool = True,
) -> AccuracyResult:
    """Async form of :func:`run_suite` (for callers already inside an event loop)."""
    loaded = (
        suite_path
        if isinstance(suite_path, LoadedSuite)
        else await asyncio.to_thread(read_suite, suite_path)
    )
    items, suite_sha256 = loaded.items, loaded.sha256
    n_items = limit if limit is not None else spec.accuracy.limit
    if n_items is not None:
        if n_items < 1:
            raise InputError([Problem("<input>", "accuracy.limit", f"must be ≥ 1, got {n_items}")])
        items = items[:n_items]
    n_seeds = seeds if seeds is not None else spec.accuracy.seeds
    if n_seeds < 1:
        raise InputError([Problem("<input>", "accuracy.seeds", f"must be ≥ 1, got {n_seeds}")])
    per_request_s = timeout_s if timeout_s is not None else spec.measurement.request_timeout_s
    passes = await run_items_async(
        spec,
        endpoint,
        api_key,
        items,
        list(range(n_seeds)),
        timeout_s=per_request_s,
        keep_completions=keep_completions,
    )
    scores = [p.score_pct for p in passes]
    return AccuracyResult(
        suite=str(loaded.path),
        name=spec.accuracy.name,
        seeds=passes,
        score_pct=sum(scores) / len(scores),
        spread_pts=spread_pts(scores),
        suite_sha256=suite_sha256,
        temperature=spec.accuracy.temperature,
    )


def run_suite(
    spec: Spec,
    endpoint: str,
    api_key: str | None,
    suite_path: Path | LoadedSuite,
    *,
    limit: int | None = None,
    seeds: int | None = None,
    timeout_s: float | None = None,
    keep_completions: bool = True,
) -> AccuracyResult:
    """Run the accuracy suite against the engine at ``endpoint`` and score every item.

    Args:
        spec: the benchmark spec; its ``accuracy`` section sets concurrency, max_tokens,
            stop, temperature, seeds and limit, ``engine.api`` the API, ``engine.model``
            the model name, ``measurement.request_timeout_s`` the per-request timeout.
        endpoint: the engine's base URL (``http://host:port`` or ``.../v1``).
        api_key: sent as a Bearer token when given; never stored.
        suite_path: a suite file (:mod:`tokenwatt.records.spec.suite`), or one already read
            by :func:`read_suite` (not read again).
        limit: first N items only (overrides ``accuracy.limit``).
        seeds: number of full passes, seeds 0..N-1 (overrides ``accuracy.seeds``).
        timeout_s: per-request time limit in s, connection to last byte (overrides the spec).
        keep_completions: store each completion's text in the record.

    Returns:
        Per-seed, per-item results; ``score_pct`` the mean of the seeds' scores (%),
        ``spread_pts`` their max − min (points).

    Raises:
        InputError: unreadable or malformed suite file, limit or seeds below 1.
    """
    return asyncio.run(
        run_suite_async(
            spec,
            endpoint,
            api_key,
            suite_path,
            limit=limit,
            seeds=seeds,
            timeout_s=timeout_s,
            keep_completions=keep_completions,
        )
    )
