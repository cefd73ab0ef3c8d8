"""Scrape an engine's Prometheus ``/metrics`` during a window and reduce it to EngineMetrics.

Parsing is ``prometheus_client``'s own text parser. The names each quantity is read from,
first present wins (checked against the servers named in :mod:`tokenwatt.collect.engine.probes`):

=================  ================================================================
running requests   ``vllm:num_requests_running``, ``sglang:num_running_reqs``,
                   ``llamacpp:requests_processing``, ``tgi_batch_current_size``
waiting requests   ``vllm:num_requests_waiting``, ``sglang:num_queue_reqs``,
                   ``llamacpp:requests_deferred``, ``tgi_queue_size``
KV-cache usage     ``vllm:kv_cache_usage_perc`` (a fraction, 1 = full, despite the name),
                   ``vllm:gpu_cache_usage_perc`` (its name before vLLM 0.10),
                   ``sglang:token_usage`` (fraction), ``llamacpp:kv_cache_usage_ratio``
                   (fraction; older llama.cpp servers only)
preemptions        ``vllm:num_preemptions_total`` (counter),
                   ``sglang:num_retracted_requests_total`` (counter)
prefix cache       counters of prompt tokens looked up and found (a pair):
                   ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total``
                   (vLLM v1), ``vllm:gpu_prefix_cache_queries_total`` /
                   ``vllm:gpu_prefix_cache_hits_total`` (their older, deprecated names),
                   ``sglang:prompt_tokens_total`` / ``sglang:cached_tokens_total``
                   (SGLang, counted when a request finishes); else a hit-rate gauge
                   (fraction): ``sglang:cache_hit_rate`` (of the latest prefill batch),
                   ``vllm:gpu_prefix_cache_hit_rate`` (vLLM v0)
=================  ================================================================

Gauges are summed over their label sets (one series per data-parallel engine or model),
except KV usage, where the fullest series counts, and the hit-rate gauges, which are
averaged. Counters are differenced between the first and the last scrape of the window (a
reset counts from zero). The window's prefix-cache hit rate is hits / queries of the
counters' differences, in percent of the prompt tokens looked up; only without counters is
it the mean of the sampled gauge.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tokenwatt.collect.engine.endpoints import server_root_url
from tokenwatt.netpath import ProxyChoice, network_path
from tokenwatt.records import EngineMetrics
from tokenwatt.redact import scrub

# sample name -> list of (labels, value)
Families = dict[str, list[tuple[dict[str, str], float]]]

RUNNING_NAMES = (
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
    "llamacpp:requests_processing",
    "tgi_batch_current_size",
)
WAITING_NAMES = (
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "llamacpp:requests_deferred",
    "tgi_queue_size",
)
KV_USAGE_FRACTION_NAMES = (
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "llamacpp:kv_cache_usage_ratio",
)
PREEMPTION_COUNTER_NAMES = (
    "vllm:num_preemptions_total",
    "sglang:num_retracted_requests_total",
)
PREFIX_CACHE_COUNTER_PAIRS = (
    ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"),
    ("vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total"),
    ("sglang:prompt_tokens_total", "sglang:cached_tokens_total"),
)
"""(queries, hits) counter pairs, in prompt tokens; the first pair with both present wins.
Names from vLLM ``v1/metrics/loggers.py`` (``Counter(name="vllm:prefix_cache_queries")``;
prometheus_client exposes a counter with ``_total``) and SGLang ``metrics/collector.py``."""
PREFIX_CACHE_HIT_FRACTION_NAMES = ("sglang:cache_hit_rate", "vllm:gpu_prefix_cache_hit_rate")


def parse_metrics_text(text: str) -> Families:
    """Parse Prometheus text exposition into ``{sample name: [(labels, value), …]}``.

    Sample names are as exposed (counters keep their ``_total``). Samples whose value is
    NaN are dropped.

    Raises:
        ValueError: the text is not Prometheus exposition format (from prometheus_client).
    """
    out: Families = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            value = float(sample.value)
            if value != value:  # NaN
                continue
            out.setdefault(sample.name, []).append((dict(sample.labels), value))
    return out


def _first_present(families: Families, names: tuple[str, ...]) -> list[float] | None:
    for name in names:
        if name in families:
            return [v for _, v in families[name]]
    return None


@dataclass(frozen=True)
class Scrape:
    """The quantities read from one scrape (None: the engine exposes no such metric).

    ``t_s`` is a monotonic time in seconds; ``kv_usage_frac`` is 0–1.
    """

    t_s: float
    running: float | None
    waiting: float | None
    kv_usage_frac: float | None
    preemptions_total: float | None
    prefix_queries_total: float | None = None
    prefix_hits_total: float | None = None
    prefix_counters: str | None = None
    prefix_hit_frac: float | None = None
    prefix_hit_gauge: str | None = None


def _prefix_cache(families: Families) -> dict[str, float | str | None]:
    out: dict[str, float | str | None] = {}
    for queries, hits in PREFIX_CACHE_COUNTER_PAIRS:
        if queries in families and hits in families:
            out["prefix_queries_total"] = sum(v for _, v in families[queries])
            out["prefix_hits_total"] = sum(v for _, v in families[hits])
            out["prefix_counters"] = f"{hits} / {queries}"
            break
    for name in PREFIX_CACHE_HIT_FRACTION_NAMES:
        values = [v for _, v in families.get(name, [])]
        if values:
            out["prefix_hit_frac"] = sum(values) / len(values)
            out["prefix_hit_gauge"] = name
            break
    return out


def reduce_families(families: Families, t_s: float) -> Scrape:
    """The quantities of one parsed scrape (module docstring for the names)."""
    running = _first_present(families, RUNNING_NAMES)
    waiting = _first_present(families, WAITING_NAMES)
    kv = _first_present(families, KV_USAGE_FRACTION_NAMES)
    pre = _first_present(families, PREEMPTION_COUNTER_NAMES)
    return Scrape(
        t_s=t_s,
        running=sum(running) if running is not None else None,
        waiting=sum(waiting) if waiting is not None else None,
        kv_usage_frac=max(kv) if kv else None,
        preemptions_total=sum(pre) if pre is not None else None,
        **_prefix_cache(families),  # type: ignore[arg-type]
    )


def counter_delta(values: list[float]) -> float:
    """A counter's increase over consecutive readings; a reading below the one before
    means the counter was reset (engine restart) and counts from zero."""
    delta = 0.0
    for prev, cur in itertools.pairwise(values):
        delta += cur - prev if cur >= prev else cur
    return delta


def prefix_cache_summary(scrapes: list[Scrape]) -> dict[str, int | float | str | None]:
    """The window's prefix-cache fields of :class:`EngineMetrics` (module docstring).

    Counters: queried and hit prompt tokens (differences over the scrapes that carry the
    first pair seen) and hit % = 100 × hits / queries (None when nothing was looked up).
    Without counters: hit % = 100 × the gauge's mean over the scrapes.
    """
    out: dict[str, int | float | str | None] = {}
    source = next((s.prefix_counters for s in scrapes if s.prefix_counters), None)
    if source is not None:
        pairs = [
            (s.prefix_queries_total, s.prefix_hits_total)
            for s in scrapes
            if s.prefix_counters == source
        ]
        queries = round(counter_delta([q for q, _ in pairs if q is not None]))
        hits = round(counter_delta([h for _, h in pairs if h is not None]))
        out["prefix_cache_queries_tokens"] = queries
        out["prefix_cache_hits_tokens"] = hits
        out["prefix_cache_source"] = source
        if queries > 0:
            out["prefix_cache_hit_pct"] = min(100.0, max(0.0, 100.0 * hits / queries))
        return out
    gauge = [s.prefix_hit_frac for s in scrapes if s.prefix_hit_frac is not None]
    if gauge:
        out["prefix_cache_hit_pct"] = min(100.0, max(0.0, 100.0 * sum(gauge) / len(gauge)))
        out["prefix_cache_source"] = next(s.prefix_hit_gauge for s in scrapes if s.prefix_hit_gauge)
    return out


def summarize_scrapes(scrapes: list[Scrape]) -> EngineMetrics:
    """Reduce a window's scrapes: mean running/waiting, max waiting, max KV usage (%),
    preemptions (counter difference, last − first; a counter that went down was reset and
    counts from zero), prefix-cache tokens and hit % (:func:`prefix_cache_summary`).
    Quantities no scrape had stay None."""
    running = [s.running for s in scrapes if s.running is not None]
    waiting = [s.waiting for s in scrapes if s.waiting is not None]
    kv = [s.kv_usage_frac for s in scrapes if s.kv_usage_frac is not None]
    pre = [s.preemptions_total for s in scrapes if s.preemptions_total is not None]
    preemptions = round(counter_delta(pre)) if pre else None
    return EngineMetrics(
        running_mean=sum(running) / len(running) if running else None,
        waiting_mean=sum(waiting) / len(waiting) if waiting else None,
        waiting_max=max(waiting) if waiting else None,
        kv_usage_max_pct=min(100.0, max(0.0, max(kv) * 100.0)) if kv else None,
        preemptions=preemptions,
        scrapes=len(scrapes),
        **prefix_cache_summary(scrapes),
    )


SCRAPE_DEADLINE_S = 2.0
"""Longest one ``/metrics`` scrape may take (s), from the request to the last byte parsed.

A scrape past it is cancelled and counted as missed. vLLM and llama.cpp answer in tens of
milliseconds even when loaded; two seconds is room for a busy engine, short enough that a
hung endpoint costs a window at most two of them (the baseline and the last scrape)."""


class ScrapeError(Exception):
    """One scrape failed: no answer within the deadline, a non-200, or text that does not
    parse. The message says which (at most 300 characters)."""


@dataclass
class MetricsScraper:
    """Scrape ``<server root>/metrics`` every ``interval_s`` seconds between start and stop.

    ``await start()`` takes a first scrape at once (the counters' baseline) and then one per
    interval in a background task; ``await stop()`` takes a last scrape and returns the
    window's :class:`EngineMetrics`. Every scrape has a deadline (``timeout_s``, from the
    request to the parsed text); one that fails (no answer in time, connection error,
    non-200, text that does not parse) is counted in ``failed`` (``last_error`` keeps the
    latest reason) and otherwise skipped. Fewer than two scrapes answered make the window's
    metrics invalid (``valid`` false, ``invalid_reason`` says why), so a missing or hung
    ``/metrics`` gives invalid metrics rather than an error.

    The collector runs it on the instruments' own event loop
    (:mod:`tokenwatt.collect.measure.instruments`), never on the load generator's.

    Args:
        endpoint: the engine's URL, with or without ``/v1``.
        interval_s: seconds between scrapes (vLLM updates its gauges about every second).
        api_key: sent as a bearer token when given.
        timeout_s: deadline of one scrape, seconds.
        client: an HTTP client to use (and leave open); by default one is opened by
            ``start`` and closed by ``stop``.
        proxy: the spec's ``engine.proxy``: the client takes the path
            :func:`tokenwatt.netpath.network_path` gives, as the load does.
    """

    endpoint: str
    interval_s: float = 1.0
    api_key: str | None = None
    timeout_s: float = SCRAPE_DEADLINE_S
    client: httpx.AsyncClient | None = field(default=None, repr=False)
    proxy: ProxyChoice = "auto"
    scrapes: list[Scrape] = field(default_factory=list)
    failed: int = 0
    last_error: str | None = None
    names_seen: set[str] = field(default_factory=set)
    _own_client: httpx.AsyncClient | None = field(default=None, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The ``/metrics`` URL scraped."""
        return server_root_url(self.endpoint) + "/metrics"

    def open_client(self) -> httpx.AsyncClient:
        """A client with this scraper's bearer token (the caller closes it)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        options = network_path(self.url, self.proxy).httpx_options()
        return httpx.AsyncClient(timeout=self.timeout_s, headers=headers, **options)

    async def read(self) -> Scrape:
        """One scrape within ``timeout_s``, not recorded.

        A transport error (typically a kept-alive connection the server closed just as it
        was reused) is retried once on a new connection, within the same deadline: a scrape
        is a plain GET.

        Raises:
            ScrapeError: no answer within the deadline, a transport error, a non-200, or
                text that is not Prometheus exposition format.
            RuntimeError: no client (neither given nor opened by ``start``).
        """
        client = self.client or self._own_client
        if client is None:
            raise RuntimeError("MetricsScraper.read() without a client: call start() first")
        t = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                try:
                    r = await client.get(self.url)
                except httpx.TransportError:
                    r = await client.get(self.url)
                if r.status_code != 200:
                    raise ValueError(f"HTTP {r.status_code}")
                families = parse_metrics_text(r.text)
        except TimeoutError as exc:
            raise ScrapeError(f"no answer within {self.timeout_s:g} s") from exc
        except (httpx.HTTPError, ValueError) as exc:
            path = network_path(self.url, self.proxy)
            text = f"{type(exc).__name__}: {exc}"[:300] + path.error_note
            raise ScrapeError(scrub(text, [self.api_key or "", *path.secrets])) from exc
        self.names_seen.update(families)
        return reduce_families(families, t)

    async def scrape_once(self) -> Scrape | None:
        """One scrape, appended to ``scrapes``; None when it failed (``last_error`` says why)."""
        try:
            s = await self.read()
        except ScrapeError as exc:
            self.failed += 1
            self.last_error = str(exc)
            return None
        self.scrapes.append(s)
        return s

    async def _loop(self) -> None:
        next_t = time.monotonic() + self.interval_s
        while True:
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))
            await self.scrape_once()
            # A scrape slower than the interval (a busy engine) skips the missed ticks
            # instead of firing them all at once.
            next_t = max(next_t + self.interval_s, time.monotonic())

    async def start(self) -> None:
        """Open the client (unless given), scrape once, and keep scraping in the background."""
        if self._task is not None:
            raise RuntimeError("MetricsScraper already started")
        if self.client is None and self._own_client is None:
            self._own_client = self.open_client()
        await self.scrape_once()
        self._task = asyncio.create_task(self._loop(), name="tokenwatt-metrics-scraper")

    async def stop(self) -> EngineMetrics:
        """Stop scraping (an in-flight periodic scrape is abandoned, not counted), take a
        last scrape, close the client it opened, and summarize the window."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.client is not None or self._own_client is not None:
            await self.scrape_once()
        if self._own_client is not None:
            await self._own_client.aclose()
            self._own_client = None
        return self.metrics()

    def metrics(self) -> EngineMetrics:
        """The scrapes so far as :class:`EngineMetrics`, with the missed count and validity."""
        reason = None
        if len(self.scrapes) < 2:
            tried = len(self.scrapes) + self.failed
            reason = f"/metrics answered {len(self.scrapes)} of {tried} scrapes"
            if self.last_error:
                reason += f" (last: {self.last_error})"
        return summarize_scrapes(self.scrapes).model_copy(
            update={
                "missed_scrapes": self.failed,
                "valid": reason is None,
                "invalid_reason": reason,
            }
        )
