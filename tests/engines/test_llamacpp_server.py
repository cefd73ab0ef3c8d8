"""Against llama.cpp's own HTTP server (xllamacpp wheel) serving the generated tiny model."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from engine_servers import EngineServer, iter_metric_names, stream_completion, wait_until_idle
from tiny_model import TinyModel

from tokenwatt.collect.engine.engine_metrics import parse_metrics_text
from tokenwatt.collect.engine.probes import MetricsScraper, probe_engine

pytestmark = pytest.mark.engine

# llama.cpp names the collector reads, seen on xllamacpp 2026.10.11549's server.
LLAMACPP_NAMES = {
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:prompt_tokens_total",
    "llamacpp:tokens_predicted_total",
}


def _prompt(model: TinyModel, n: int) -> list[int]:
    ids = model.printable_ids
    return [ids[(7 * i + 3) % len(ids)] for i in range(n)]


def test_probe_reads_models_version_and_kv_capacity(llamacpp_server: EngineServer) -> None:
    info = probe_engine(llamacpp_server.endpoint, None)
    assert info.engine_name == "llama.cpp"
    assert info.served_models == ["tiny"]
    # 4 slots share an 8192-token context: /props reports 2048 per slot.
    assert info.max_model_len == 2048
    assert info.kv_capacity_tokens == 8192
    assert info.engine_version  # build_info, whatever this build says
    assert info.metrics_available


def test_streamed_token_id_prompt_has_exact_usage_and_one_chunk_per_token(
    llamacpp_server: EngineServer, tiny_model: TinyModel
) -> None:
    prompt = _prompt(tiny_model, 16)
    res = stream_completion(
        llamacpp_server.base_url,
        {
            "prompt": prompt,
            "max_tokens": 24,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream_options": {"include_usage": True},
            # The server is shared by the session's tests: without this, a slot's cached
            # prefix from an earlier test would shorten prompt_n below.
            "cache_prompt": False,
        },
    )
    assert res.status == 200 and res.done
    assert res.usage is not None
    assert res.usage["prompt_tokens"] == 16
    assert res.usage["completion_tokens"] == 24
    assert len(res.texts) == 24  # one SSE chunk per generated token
    assert res.finish_reason == "length"
    # Plausible on a 2-core CPU for a 0.9M-parameter model: first token within seconds,
    # a decode step under 200 ms. The client's TPOT can read lower than the server's when
    # several chunks land in one read (a held-up client), never higher by much.
    assert 0 < res.ttft_s < 5.0
    assert res.tpot_s is not None and 0 <= res.tpot_s < 0.2
    assert res.last_event is not None
    timings = res.last_event["timings"]  # llama.cpp's own, on the final chunk
    assert timings["predicted_n"] == 24 and timings["prompt_n"] == 16
    assert 0 < timings["predicted_per_token_ms"] < 200
    assert res.tpot_s * 1000 <= timings["predicted_per_token_ms"] * 1.5 + 20


def test_ignore_eos_gives_exactly_max_tokens_when_eos_is_forced(
    llamacpp_server: EngineServer, tiny_model: TinyModel
) -> None:
    forced_eos = {str(tiny_model.eos_id): 100}
    body = {
        "prompt": _prompt(tiny_model, 8),
        "max_tokens": 12,
        "logit_bias": forced_eos,
        "stream_options": {"include_usage": True},
    }
    stopped = stream_completion(llamacpp_server.base_url, body)
    assert stopped.usage is not None
    assert stopped.usage["completion_tokens"] == 1  # the end token is counted
    assert stopped.finish_reason == "stop"
    kept = stream_completion(llamacpp_server.base_url, {**body, "ignore_eos": True})
    assert kept.usage is not None
    assert kept.usage["completion_tokens"] == 12
    assert kept.finish_reason == "length"


def test_metrics_page_has_the_names_the_collector_reads(llamacpp_server: EngineServer) -> None:
    text = httpx.get(llamacpp_server.base_url + "/metrics", timeout=5).text
    names = set(iter_metric_names(text))
    assert names >= LLAMACPP_NAMES
    families = parse_metrics_text(text)
    assert families["llamacpp:requests_processing"][0][1] >= 0


async def _concurrent_streams(base_url: str, n: int, max_tokens: int, prompt: list[int]) -> int:
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(i: int) -> int:
            body = {
                "model": "tiny",
                "prompt": prompt,
                "max_tokens": max_tokens,
                "ignore_eos": True,
                "seed": i,
                "stream": True,
            }
            async with client.stream("POST", base_url + "/v1/completions", json=body) as r:
                assert r.status_code == 200
                async for _ in r.aiter_lines():
                    pass
            return max_tokens

        return sum(await asyncio.gather(*(one(i) for i in range(n))))


async def _predicted_total(base_url: str) -> float:
    async with httpx.AsyncClient(timeout=5) as client:
        text = (await client.get(base_url + "/metrics")).text
    return parse_metrics_text(text)["llamacpp:tokens_predicted_total"][0][1]


async def test_scraper_sees_running_and_deferred_requests(
    llamacpp_server: EngineServer, tiny_model: TinyModel
) -> None:
    await wait_until_idle(llamacpp_server)
    before = await _predicted_total(llamacpp_server.base_url)
    scraper = MetricsScraper(llamacpp_server.endpoint, interval_s=0.05)
    await scraper.start()
    # Twelve requests on four slots: the later ones wait ("deferred") until a slot frees up,
    # even when a busy machine starts the streams some milliseconds apart.
    sent = await _concurrent_streams(llamacpp_server.base_url, 12, 768, _prompt(tiny_model, 8))
    metrics = await scraper.stop()

    assert scraper.failed == 0, scraper.last_error
    assert metrics.scrapes >= 3
    assert max(s.running or 0 for s in scraper.scrapes) >= 1
    assert metrics.waiting_max is not None and metrics.waiting_max >= 1
    assert metrics.running_mean is not None and metrics.running_mean > 0
    # This llama.cpp exports neither a KV-usage gauge nor preemptions.
    assert metrics.kv_usage_max_pct is None
    assert metrics.preemptions is None
    assert await _predicted_total(llamacpp_server.base_url) - before == sent
