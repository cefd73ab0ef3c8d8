"""The simulated engine over real HTTP on 127.0.0.1: OpenAI-compatible API, metrics, suite."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenwatt.errors import InputError
from tokenwatt.sim.engine import PROFILES
from tokenwatt.sim.serve import make_server
from tokenwatt.sim.server import SIM_VERSION, SimServer, start_server
from tokenwatt.sim.suite import SuiteAnswers, load_suite

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "sim-suite.jsonl"


async def _serve(sim: SimServer) -> AsyncIterator[str]:
    runner, port = await start_server(sim, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def base() -> AsyncIterator[str]:
    async for url in _serve(make_server("bf16-kv", seed=3)):
        yield url


@pytest.fixture
async def suite_base() -> AsyncIterator[str]:
    async for url in _serve(make_server("bf16-kv", accuracy_suite=SUITE, accuracy_p=1.0)):
        yield url


async def _stream(url: str, body: dict[str, Any]) -> list[Any]:
    events: list[Any] = []
    async with aiohttp.ClientSession() as s, s.post(url, json=body) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        text = await r.text()
    for block in text.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: ")
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


async def test_streamed_completion_has_exact_tokens_usage_chunk_and_done(base: str) -> None:
    body = {
        "model": "tokenwatt-sim",
        "prompt": list(range(40)),
        "max_tokens": 7,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = await _stream(base + "/v1/completions", body)
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}
    text_chunks = events[:-2]
    assert len(text_chunks) == 7
    assert all(c["choices"][0]["text"] for c in text_chunks)
    assert [c["choices"][0]["finish_reason"] for c in text_chunks] == [None] * 6 + ["length"]
    assert all(c["object"] == "text_completion" for c in text_chunks)


async def test_no_usage_chunk_unless_asked(base: str) -> None:
    body = {"prompt": [1, 2, 3], "max_tokens": 2, "stream": True}
    events = await _stream(base + "/v1/completions", body)
    assert len(events) == 3 and events[-1] == "[DONE]"
    assert all("usage" not in e for e in events[:-1])


async def test_non_streamed_completion_and_chat(base: str) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.post(base + "/v1/completions", json={"prompt": "hello", "max_tokens": 4}) as r:
            data = await r.json()
        assert data["usage"]["completion_tokens"] == 4
        assert len(data["choices"][0]["text"].split()) == 4
        chat = {"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 3}
        async with s.post(base + "/v1/chat/completions", json=chat) as r:
            data = await r.json()
        assert data["object"] == "chat.completion"
        assert data["choices"][0]["message"]["role"] == "assistant"
        assert len(data["choices"][0]["message"]["content"].split()) == 3


async def test_streamed_chat_sends_a_role_chunk_then_content(base: str) -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = await _stream(base + "/v1/chat/completions", body)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [e["choices"][0]["delta"]["content"] for e in events[1:-2]]
    assert len(contents) == 3 and all(contents)
    assert events[-2]["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"max_tokens": 3}, "'prompt'"),
        ({"prompt": [], "max_tokens": 3}, "'prompt'"),
        ({"prompt": [1, "x"], "max_tokens": 3}, "'prompt'"),
        ({"prompt": [1], "max_tokens": 0}, "'max_tokens'"),
        ({"prompt": [1], "max_tokens": True}, "'max_tokens'"),
        ({"prompt": [1] * 1000, "max_tokens": 1000}, "exceeds the KV cache"),
    ],
)
async def test_bad_requests_get_400_with_a_reason(
    base: str, body: dict[str, Any], message: str
) -> None:
    async with aiohttp.ClientSession() as s, s.post(base + "/v1/completions", json=body) as r:
        assert r.status == 400
        assert message in (await r.json())["error"]["message"]


async def test_models_version_and_metrics(base: str) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(base + "/v1/models") as r:
            models = await r.json()
        async with s.get(base + "/version") as r:
            version = await r.json()
        await s.post(base + "/v1/completions", json={"prompt": [1, 2], "max_tokens": 2})
        async with s.get(base + "/metrics") as r:
            text = await r.text()
    assert [m["id"] for m in models["data"]] == ["tokenwatt-sim"]
    assert version["version"] == SIM_VERSION
    samples = {s.name: s for family in text_string_to_metric_families(text) for s in family.samples}
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:generation_tokens_total",
        "tokenwatt_sim_power_watts",
        "tokenwatt_sim_energy_joules_total",
    ):
        assert name in samples, name
    info = samples["vllm:cache_config_info"]
    p = PROFILES["bf16-kv"]
    assert int(info.labels["block_size"]) * int(info.labels["num_gpu_blocks"]) == (
        p.kv_capacity_tokens
    )
    assert samples["vllm:generation_tokens_total"].value == 2
    assert samples["tokenwatt_sim_power_watts"].value == p.idle_power_w


async def test_a_client_that_goes_away_frees_its_kv_blocks(base: str) -> None:
    body = {"prompt": [1] * 16, "max_tokens": 500, "stream": True}
    async with aiohttp.ClientSession() as s:
        async with s.post(base + "/v1/completions", json=body) as r:
            await r.content.readline()  # the first token arrived: the request is running
        deadline = time.monotonic() + 5
        usage = None
        while time.monotonic() < deadline:
            async with s.get(base + "/metrics") as m:
                text = await m.text()
            usage = next(
                smp.value
                for fam in text_string_to_metric_families(text)
                for smp in fam.samples
                if smp.name == "vllm:kv_cache_usage_perc"
            )
            if usage == 0:
                break
            await asyncio.sleep(0.05)
    assert usage == 0


async def test_suite_prompts_get_the_gold_answer_with_p_one(suite_base: str) -> None:
    items = load_suite(SUITE)
    async with aiohttp.ClientSession() as s:
        for item in items[:3]:
            body = {"prompt": item.prompt, "max_tokens": 64, "seed": 0}
            async with s.post(suite_base + "/v1/completions", json=body) as r:
                data = await r.json()
            text = data["choices"][0]["text"]
            assert text.rstrip().endswith(f"#### {item.gold}")
            assert f"The answer is {item.gold}." in text
            assert data["choices"][0]["finish_reason"] == "stop"
            assert data["usage"]["completion_tokens"] == len(text.split())


def test_answers_are_right_with_the_set_probability_and_deterministic() -> None:
    items = load_suite(SUITE)
    never = SuiteAnswers(items, 0.0, seed=1)
    for item in items:
        answer = never.answer(item.prompt, 0)
        assert answer is not None and not answer.endswith(f"#### {item.gold}")
    half = [SuiteAnswers(items, 0.5, seed=1).is_right(i, 0) for i in items]
    again = [SuiteAnswers(items, 0.5, seed=1).is_right(i, 0) for i in items]
    other = [SuiteAnswers(items, 0.5, seed=2).is_right(i, 0) for i in items]
    assert half == again
    assert half != other
    assert 0 < sum(half) < len(items)


def test_a_few_shot_prompt_is_matched_by_the_question_asked_last() -> None:
    items = load_suite(SUITE)
    answers = SuiteAnswers(items, 1.0, seed=0)
    prompt = f"Question: {items[0].question}\nAnswer: 1\n\nQuestion: {items[5].question}\nAnswer:"
    assert answers.find(prompt) == items[5]
    assert answers.find("an unrelated prompt") is None


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("not json", "line 1"),
        ("[1, 2]", "line 1"),
        ('{"id": "a", "question": "q", "prompt": "p"}', "line 1.gold"),
        ('{"id": "a", "question": "q", "prompt": "p", "gold": "twelve"}', "line 1.gold"),
    ],
)
def test_bad_suite_lines_name_file_and_line(tmp_path: Path, line: str, field: str) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(InputError) as err:
        load_suite(path)
    assert err.value.problems[0].file == str(path)
    assert err.value.problems[0].field == field


def test_unknown_profile_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown profile"):
        make_server("int4-kv")
