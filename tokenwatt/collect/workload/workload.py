"""Workloads: what each request asks for (prompt and exact output length), for a whole run.

:func:`workload_for` gives a run ONE :class:`WorkloadStream`, and every window of the run
(warm-up, probes, repeats, back-offs) draws from it, so that no prompt is sent twice in a
run unless the workload asks for it (``workload.prompt_pool``, or a trace shorter than
the run); the stream counts what it gave out. ``chat-mix-v1`` is in :mod:`.prompts`,
JSON Lines traces in :mod:`.trace`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tokenwatt.collect.workload.dataset import DatasetLoad, dataset_path, load_sharegpt
from tokenwatt.collect.workload.prompts import (
    CHAT_MIX_V1,
    DEFAULT_INPUT_TOKENS,
    DEFAULT_OUTPUT_TOKENS,
    ChatMix,
    RequestSpec,
    SharedPrefix,
    lognormal_params,
    random_ids,
)
from tokenwatt.collect.workload.trace import MAX_TRACE_TOKENS, load_trace
from tokenwatt.errors import InputError, Problem
from tokenwatt.records import DatasetStats, LengthDist

if TYPE_CHECKING:
    from tokenwatt.records import Spec

__all__ = [
    "CHAT_MIX_V1",
    "DEFAULT_INPUT_TOKENS",
    "DEFAULT_OUTPUT_TOKENS",
    "MAX_REDRAWS",
    "MAX_TRACE_TOKENS",
    "TEXT_CONTEXT_SHARE",
    "RequestSpec",
    "SharedPrefix",
    "WorkloadStream",
    "chat_mix_v1",
    "context_budget",
    "load_trace",
    "lognormal_params",
    "workload_for",
]

MAX_REDRAWS = 8
"""A ``chat-mix-v1`` draw whose prompt was already given out is drawn again, at most this
many times; then it is sent as it is and counted as repeated. Only prompts of a few tokens
from a small vocabulary ever collide (1-token prompts from 1,000 ids: one in 990)."""

TEXT_CONTEXT_SHARE = 0.9
"""Text prompts (``engine.api: chat``) are bounded by this share of the engine's context:
their words are about one token each in common vocabularies but not exactly, and the chat
template adds tokens of its own (a tenth of the context is kept free for both)."""

TRACE_REDRAW_STREAM = 2
"""Second word of the seed (``[workload.seed, 2]``) of the new ids a trace's length-only
entries get on a second and later pass."""


def chat_mix_v1(
    seed: int,
    vocab_size: int,
    input_tokens: LengthDist | None = None,
    output_tokens: LengthDist | None = None,
    *,
    max_total_tokens: int | None = None,
    text: bool = False,
    shared_prefix_tokens: int = 0,
) -> Iterator[RequestSpec]:
    """The ``chat-mix-v1`` workload: an endless, seeded stream of requests.

    Input and output lengths come from lognormals fitted to the given median and p90 (tokens;
    defaults from the seed lab note), rounded, at least 1. Prompts are token ids drawn uniformly
    from ``[10, vocab_size)`` (the lowest ids are usually control tokens).

    Args:
        seed: seed of ``numpy.random.default_rng``; equal seeds give equal streams.
        vocab_size: the model's vocabulary size (``model.vocab_size``).
        input_tokens: prompt length distribution; default median 1,024 / p90 4,096.
        output_tokens: output length distribution; default median 256 / p90 1,024.
        max_total_tokens: the server's context length, when known: the output, then the
            prompt is cut so that prefix + prompt + output fits (this trims the far tail
            only when the medians fit).
        text: send text prompts of that many common words (about one token each) instead
            of token ids, for the chat API, which takes no token ids.
        shared_prefix_tokens: a seeded prefix of this many tokens in front of every prompt
            (see :class:`~tokenwatt.collect.workload.prompts.SharedPrefix`); 0 for none.

    Raises:
        ValueError: when ``vocab_size`` leaves no ids to draw from.
    """
    prefix = SharedPrefix.seeded(seed, vocab_size, shared_prefix_tokens)
    mix = ChatMix(
        seed,
        vocab_size,
        input_tokens,
        output_tokens,
        max_total_tokens=max_total_tokens,
        text=text,
        prefix=prefix,
    )
    while True:
        yield mix.draw()


class _Source(Protocol):
    clipped: int

    def draw(self) -> RequestSpec: ...


class _TraceSource:
    """A trace replayed in order; a second pass draws new ids for length-only entries."""

    def __init__(
        self, entries: list[RequestSpec], seed: int, vocab_size: int, prefix: SharedPrefix
    ) -> None:
        self.entries = entries
        self.prefix = prefix
        self.vocab_size = vocab_size
        self.rng = np.random.default_rng([seed, TRACE_REDRAW_STREAM])
        self.index = 0
        self.passes = 0
        self.clipped = 0

    def draw(self) -> RequestSpec:
        if self.index == len(self.entries):
            self.index = 0
            self.passes += 1
        entry = self.entries[self.index]
        self.index += 1
        prompt = entry.prompt
        if self.passes and entry.synthetic and isinstance(prompt, list):
            prompt = random_ids(self.rng, self.vocab_size, len(prompt))
        return RequestSpec(
            prompt=self.prefix.apply(prompt),
            max_tokens=entry.max_tokens,
            id=entry.id,
            synthetic=entry.synthetic,
            # A prefix in front changes the length the tokenizer measured.
            text_tokens=entry.text_tokens if not self.prefix.text else None,
        )


def _prompt_key(prompt: list[int] | str) -> int:
    # A 64-bit hash: equal prompts always match; two different prompts of one run collide
    # with probability ~n²/2⁶⁵ (10⁻⁹ for 200,000 prompts), which would only count a repeat.
    return hash(tuple(prompt)) if isinstance(prompt, list) else hash(prompt)


class WorkloadStream(Iterator[RequestSpec]):
    """A run's requests, drawn once for the whole run: no prompt is given out twice unless
    the workload asks for it.

    * ``chat-mix-v1``: every draw is new; a draw equal to an earlier prompt is drawn again
      (at most :data:`MAX_REDRAWS` times; :attr:`redrawn` counts them).
    * A trace is replayed in order; one shorter than the run starts again from its first
      line, and the prompts it sends again are counted in :attr:`repeated_prompts` and
      said in :meth:`notes` (length-only entries get new ids on each pass, so they are new).
    * ``prompt_pool`` N: the first N requests, then the same N again in order, on purpose.

    Counts (requests the load generator took from the stream, whether or not they were
    sent before their window ended): :attr:`drawn`, :attr:`distinct_prompts`,
    :attr:`repeated_prompts`, :attr:`clipped` (shortened to fit the engine's context).
    Drawing is cheap (a hash of the prompt) and never blocks.

    Attributes:
        kind: ``chat-mix-v1`` or the trace's path.
        trace_entries: the trace's requests as read (None for ``chat-mix-v1``).
        context_length: the context bound the lengths were fitted to (tokens), or None.
        prefix: the shared prefix (empty when none was asked for).
    """

    def __init__(
        self,
        source: _Source,
        *,
        kind: str,
        redraw: bool,
        prompt_pool: int | None = None,
        trace_entries: list[RequestSpec] | None = None,
        context_length: int | None = None,
        prefix: SharedPrefix | None = None,
    ) -> None:
        self._source = source
        self._redraw = redraw
        self._pool_size = prompt_pool
        self._pool: list[RequestSpec] = []
        self._seen: set[int] = set()
        self.kind = kind
        self.trace_entries = trace_entries
        self.context_length = context_length
        self.prefix = prefix or SharedPrefix(ids=[], text="")
        self.dataset: DatasetLoad | None = None
        self.drawn = 0
        self.repeated_prompts = 0
        self.redrawn = 0
        self.unavoidable_repeats = 0

    @property
    def distinct_prompts(self) -> int:
        """Different prompts given out so far."""
        return len(self._seen)

    @property
    def clipped(self) -> int:
        """Requests shortened to fit the engine's context (drawn once, re-sent or not)."""
        return self._source.clipped

    def __iter__(self) -> WorkloadStream:
        return self

    def __next__(self) -> RequestSpec:
        if self._pool_size is not None and len(self._pool) == self._pool_size:
            spec = self._pool[self.drawn % self._pool_size]
            self.repeated_prompts += 1
        else:
            spec = self._fresh()
            if self._pool_size is not None:
                self._pool.append(spec)
        self.drawn += 1
        return spec

    def _fresh(self) -> RequestSpec:
        for attempt in range(MAX_REDRAWS + 1):
            spec = self._source.draw()
            key = _prompt_key(spec.prompt)
            if key not in self._seen:
                self._seen.add(key)
                return spec
            if not self._redraw:
                break
            if attempt < MAX_REDRAWS:
                self.redrawn += 1
            else:
                self.unavoidable_repeats += 1
        self.repeated_prompts += 1
        return spec

    def counts(self) -> dict[str, int]:
        """The stream's counts by name, for the run record."""
        return {
            "drawn": self.drawn,
            "distinct_prompts": self.distinct_prompts,
            "repeated_prompts": self.repeated_prompts,
            "redrawn": self.redrawn,
            "clipped": self.clipped,
        }

    def dataset_stats(self) -> DatasetStats | None:
        """The dataset replayed and what it used, for the run record (None without one)."""
        ds = self.dataset
        if ds is None:
            return None
        return DatasetStats(
            kind="sharegpt",
            sha256=ds.sha256,
            entries=ds.total,
            used=len(ds.entries),
            skipped=ds.skipped,
            prompt_tokens=sum(e.text_tokens or 0 for e in ds.entries),
            output_tokens=sum(e.max_tokens for e in ds.entries),
        )

    def notes(self) -> list[str]:
        """What a reader of the record must know about the prompts sent, in words."""
        out: list[str] = []
        if self._pool_size is not None and self.repeated_prompts:
            out.append(
                f"workload.prompt_pool {self._pool_size}: {self.repeated_prompts} of "
                f"{self.drawn} requests re-sent an earlier prompt on purpose (prefix cache warm)"
            )
        elif self.trace_entries is not None and self.repeated_prompts:
            what = "dataset" if self.dataset is not None else "trace"
            out.append(
                f"the {what} has {len(self.trace_entries)} requests and the run drew "
                f"{self.drawn}: {self.repeated_prompts} prompts were sent again, so the "
                "engine's prefix cache may have served them"
            )
        if self.unavoidable_repeats:
            out.append(
                f"{self.unavoidable_repeats} prompts repeat an earlier one even after "
                f"{MAX_REDRAWS} new draws (prompts of a few tokens from a small vocabulary)"
            )
        if self.clipped:
            out.append(
                f"{self.clipped} of {self.drawn} requests were shortened to fit the context "
                f"of {self.context_length} tokens (output first, then prompt)"
            )
        return out


def context_budget(context_length: int | None, *, text: bool) -> int | None:
    """Tokens a request (prefix + prompt + output) may use: the engine's context length,
    less a tenth for text prompts (:data:`TEXT_CONTEXT_SHARE`); None when unknown."""
    if context_length is None:
        return None
    return int(context_length * TEXT_CONTEXT_SHARE) if text else context_length


def workload_for(
    spec: Spec,
    *,
    base_dir: str | Path | None = None,
    context_length: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
    spec_file: str | Path | None = None,
) -> WorkloadStream:
    """The run's request stream, as the spec asks for: create it once per run.

    ``workload.trace`` is ``chat-mix-v1`` (seeded with ``workload.seed``; text prompts when
    ``engine.api`` is ``chat``) or the path of a JSON Lines trace (relative to ``base_dir``,
    usually the spec file's folder), replayed in order and cycled when the run outlasts it.

    Args:
        spec: the run's spec (``workload`` and ``model.vocab_size``, ``engine.api``).
        base_dir: folder a relative trace path is read from.
        context_length: the engine's context length (tokens, from the probe); when None,
            ``model.geometry.max_model_len`` if the spec gives it. ``chat-mix-v1``
            lengths are fitted to it (:class:`~tokenwatt.collect.workload.prompts.ChatMix`);
            dataset entries that do not fit it are skipped.
        count_tokens: the model's tokenizer (``model.tokenizer``); a dataset needs it.
        spec_file: the spec's path, named in errors (a dataset is read relative to
            ``base_dir`` all the same).

    ``workload.dataset`` replays a ShareGPT file (:mod:`tokenwatt.collect.workload.dataset`) as
    text prompts, in file order, cycled like a trace.

    Raises:
        InputError: from :func:`load_trace` or
            :func:`~tokenwatt.collect.workload.dataset.load_sharegpt`;
            a dataset without ``model.tokenizer``, or whose content is not the SHA-256
            the spec (pinned by ``collect``) gives.
    """
    workload = spec.workload
    if context_length is None:
        geometry_len = spec.model.geometry.get("max_model_len")
        context_length = geometry_len if isinstance(geometry_len, int) else None
    text = spec.engine.api == "chat"
    prefix = SharedPrefix.seeded(
        workload.seed, spec.model.vocab_size, workload.shared_prefix_tokens
    )
    if workload.dataset is not None:
        return _dataset_stream(
            spec,
            base_dir=base_dir,
            context_length=context_length,
            count_tokens=count_tokens,
            spec_file=spec_file,
            prefix=prefix,
        )
    if workload.trace == CHAT_MIX_V1:
        mix = ChatMix(
            workload.seed,
            spec.model.vocab_size,
            workload.input_tokens,
            workload.output_tokens,
            max_total_tokens=context_budget(context_length, text=text),
            text=text,
            prefix=prefix,
        )
        return WorkloadStream(
            mix,
            kind=CHAT_MIX_V1,
            redraw=True,
            prompt_pool=workload.prompt_pool,
            context_length=context_length,
            prefix=prefix,
        )
    trace = Path(workload.trace)
    if base_dir is not None and not trace.is_absolute():
        trace = Path(base_dir) / trace
    entries = load_trace(trace, vocab_size=spec.model.vocab_size, seed=workload.seed)
    source = _TraceSource(entries, workload.seed, spec.model.vocab_size, prefix)
    return WorkloadStream(
        source,
        kind=str(trace),
        redraw=False,
        prompt_pool=workload.prompt_pool,
        trace_entries=entries,
        context_length=context_length,
        prefix=prefix,
    )


def _dataset_stream(
    spec: Spec,
    *,
    base_dir: str | Path | None,
    context_length: int | None,
    count_tokens: Callable[[str], int] | None,
    spec_file: str | Path | None,
    prefix: SharedPrefix,
) -> WorkloadStream:
    """The stream of ``workload.dataset`` (see :func:`workload_for`)."""
    ds = spec.workload.dataset
    assert ds is not None
    file = str(spec_file) if spec_file is not None else "<spec>"
    if count_tokens is None:
        message = "a dataset needs model.tokenizer to measure prompt and reply lengths"
        raise InputError([Problem(file, "workload.dataset", message)])
    path = dataset_path(spec, base_dir)
    budget = context_budget(context_length, text=True)
    if budget is not None:
        budget -= len(prefix.ids)
    loaded = load_sharegpt(path, count_tokens, max_total_tokens=budget, file=file)
    if ds.sha256 is not None and ds.sha256 != loaded.sha256:
        message = f"{path} changed since the run started (SHA-256 {loaded.sha256})"
        raise InputError([Problem(file, "workload.dataset.sha256", message)])
    source = _TraceSource(loaded.entries, spec.workload.seed, spec.model.vocab_size, prefix)
    stream = WorkloadStream(
        source,
        kind=f"{ds.kind} dataset",
        redraw=False,
        prompt_pool=spec.workload.prompt_pool,
        trace_entries=loaded.entries,
        context_length=context_length,
        prefix=prefix,
    )
    stream.dataset = loaded
    return stream
