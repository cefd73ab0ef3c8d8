"""Prefix-cache hit rates per window from vLLM- and SGLang-shaped ``/metrics`` over HTTP.

The scripted servers answer each scrape with the next page of a script, in the engines'
exposition (vLLM ``v1/metrics/loggers.py`` counters, which prometheus_client exposes with
``_total``; SGLang ``metrics/collector.py`` counters and its ``cache_hit_rate`` gauge).
"""

from __future__ import annotations

import httpx
import pytest

from tests.scripted_http import ScriptedServer
from tokenwatt.collect.engine.engine_metrics import (
    Scrape,
    parse_metrics_text,
    reduce_families,
    summarize_scrapes,
)
from tokenwatt.records.run.environment import EngineMetrics


def vllm_page(queries: tuple[float, float], hits: tuple[float, float]) -> str:
    """Two data-parallel engines' prefix-cache counters."""
    lines = [
        "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of "
        "queried tokens.",
        "# TYPE vllm:prefix_cache_queries_total counter",
    ]
    for engine, q in enumerate(queries):
        lines.append(f'vllm:prefix_cache_queries_total{{engine="{engine}",model_name="m"}} {q}')
    lines += [
        "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached "
        "tokens.",
        "# TYPE vllm:prefix_cache_hits_total counter",
    ]
    for engine, h in enumerate(hits):
        lines.append(f'vllm:prefix_cache_hits_total{{engine="{engine}",model_name="m"}} {h}')
    lines += [
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
    ]
    return "\n".join(lines) + "\n"


def sglang_page(prompt: float, cached: tuple[float, float], rate: float) -> str:
    return (
        "# TYPE sglang:prompt_tokens_total counter\n"
        f'sglang:prompt_tokens_total{{model_name="q"}} {prompt}\n'
        "# TYPE sglang:cached_tokens_total counter\n"
        f'sglang:cached_tokens_total{{model_name="q",cache_source="device"}} {cached[0]}\n'
        f'sglang:cached_tokens_total{{model_name="q",cache_source="host"}} {cached[1]}\n'
        "# TYPE sglang:cache_hit_rate gauge\n"
        f'sglang:cache_hit_rate{{model_name="q"}} {rate}\n'
    )


def old_sglang_page(rate: float) -> str:
    return f'# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate{{model_name="q"}} {rate}\n'


def scrape_window(pages: list[str]) -> EngineMetrics:
    """Scrape a scripted ``/metrics`` once per page over HTTP and summarise the window."""
    script = iter(pages)
    routes = {"/metrics": lambda _query: (200, next(script))}  # a str: Prometheus text
    scrapes: list[Scrape] = []
    with ScriptedServer(routes) as srv, httpx.Client(timeout=5) as client:
        for t in range(len(pages)):
            text = client.get(srv.url + "/metrics").text
            scrapes.append(reduce_families(parse_metrics_text(text), t_s=float(t)))
    return summarize_scrapes(scrapes)


def test_vllm_counters_give_the_windows_hit_tokens_and_rate() -> None:
    m = scrape_window(
        [
            vllm_page((1000, 500), (100, 100)),  # the baseline of the window
            vllm_page((1400, 700), (300, 150)),
            vllm_page((2000, 1100), (600, 400)),
        ]
    )
    # queries 1500 -> 3100 (+1600); hits 200 -> 1000 (+800): 50%.
    assert (m.prefix_cache_queries_tokens, m.prefix_cache_hits_tokens) == (1600, 800)
    assert m.prefix_cache_hit_pct == pytest.approx(50.0)
    assert m.prefix_cache_source == "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"
    assert m.running_mean == 3.0 and m.scrapes == 3


def test_a_counter_reset_counts_from_zero() -> None:
    # The engine restarted between the 2nd and 3rd scrape: 200 queries, 50 hits after it.
    m = scrape_window(
        [
            vllm_page((1000, 0), (400, 0)),
            vllm_page((1300, 0), (450, 0)),
            vllm_page((200, 0), (50, 0)),
        ]
    )
    assert (m.prefix_cache_queries_tokens, m.prefix_cache_hits_tokens) == (500, 100)
    assert m.prefix_cache_hit_pct == pytest.approx(20.0)


def test_a_window_without_prefill_has_counts_but_no_rate() -> None:
    m = scrape_window([vllm_page((900, 0), (90, 0)), vllm_page((900, 0), (90, 0))])
    assert (m.prefix_cache_queries_tokens, m.prefix_cache_hits_tokens) == (0, 0)
    assert m.prefix_cache_hit_pct is None


def test_sglang_counters_win_over_its_last_batch_gauge() -> None:
    m = scrape_window(
        [sglang_page(10_000, (1_000, 0), 0.9), sglang_page(14_000, (1_600, 400), 0.9)]
    )
    # cached (device + host) 1000 -> 2000 of prompt 10000 -> 14000: 1000 / 4000 = 25%.
    assert (m.prefix_cache_queries_tokens, m.prefix_cache_hits_tokens) == (4000, 1000)
    assert m.prefix_cache_hit_pct == pytest.approx(25.0)
    assert m.prefix_cache_source == "sglang:cached_tokens_total / sglang:prompt_tokens_total"


def test_an_sglang_without_counters_gives_the_mean_of_its_gauge() -> None:
    m = scrape_window([old_sglang_page(0.2), old_sglang_page(0.5), old_sglang_page(0.8)])
    assert m.prefix_cache_hit_pct == pytest.approx(50.0)
    assert m.prefix_cache_queries_tokens is None and m.prefix_cache_hits_tokens is None
    assert m.prefix_cache_source == "sglang:cache_hit_rate"


def test_an_engine_without_prefix_metrics_leaves_the_fields_empty() -> None:
    page = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n"
    m = scrape_window([page, page])
    assert m.prefix_cache_hit_pct is None and m.prefix_cache_source is None
    assert m.prefix_cache_queries_tokens is None
