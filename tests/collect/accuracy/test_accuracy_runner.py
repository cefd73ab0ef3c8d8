"""The accuracy runner against a scripted engine on 127.0.0.1 (real HTTP, aiohttp)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenwatt.analysis.accuracy.paired import NEEDS_FULL_SUITE, accuracy_summary
from tokenwatt.collect.accuracy.runner import (
    api_url,
    completion_text,
    errored_items,
    run_suite,
    run_suite_async,
)
from tokenwatt.collect.accuracy.suites import SuiteItem, load_suite, suite_bytes
from tokenwatt.errors import InputError
from tokenwatt.records import Spec, load_spec
from tokenwatt.records.run.accuracy import AccuracyResult

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"

# What the scripted engine does with an item: answer right, answer wrong, answer right and
# run on into an invented next question (stop not applied), fail with HTTP 500, never
# answer (the client must time out), or send JSON without choices.
Behaviour = str


def make_suite(path: Path, n: int) -> list[SuiteItem]:
    """A small suite with distinct prompts and golds 10, 11, 12, ..."""
    items = [
        SuiteItem(
            id=f"gsm8k-test-{i:04d}",
            question=f"Item {i}: how many?",
            prompt=f"Question: Ann has 2 pens.\nAnswer: #### 2\n\nQuestion: Item {i}: how many?"
            "\nAnswer:",
            gold=str(10 + i),
        )
        for i in range(n)
    ]
    path.write_bytes(suite_bytes(items))
    return items


@dataclass
class ScriptedEngine:
    """An OpenAI-compatible engine whose answers are scripted per item id."""

    items: dict[str, SuiteItem]
    script: Callable[[str, int], Behaviour]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def item_for(self, body: dict[str, Any]) -> SuiteItem:
        prompt = body["messages"][0]["content"] if "messages" in body else body["prompt"]
        return next(it for it in self.items.values() if it.prompt == prompt)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            item = self.item_for(body)
            behaviour = self.script(item.id, body.get("seed", 0))
            if behaviour == "500":
                return web.Response(status=500, text="engine exploded")
            if behaviour == "echo":  # a proxy's error page that shows the request's header
                key = request.headers["Authorization"].removeprefix("Bearer ")
                return web.Response(status=401, text=f"bad key {key} = {key.encode().hex()}")
            if behaviour == "hang":
                await self.release.wait()
                return web.Response(status=503)
            if behaviour == "malformed":
                return web.json_response({"id": "x", "object": "text_completion"})
            gold = int(item.gold)
            text = {
                "right": f" {gold - 1} + 1 = {gold}\n#### {gold}",
                "wrong": f" {gold} + 1 = {gold + 1}\n#### {gold + 1}",
                "run-on": f" So {gold}.\n#### {gold}\n\nQuestion: Bo has 99 hats.\nAnswer: #### 99",
            }[behaviour]
            if "messages" in body:
                choice: dict[str, Any] = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                }
            else:
                choice = {"index": 0, "text": text, "finish_reason": "stop"}
            return web.json_response({"id": "cmpl-1", "choices": [choice]})
        finally:
            self.in_flight -= 1


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[ScriptedEngine], Any]]:
    """Start scripted engines on 127.0.0.1 (free ports); yields an async starter."""
    servers: list[tuple[TestServer, ScriptedEngine]] = []

    async def start(engine: ScriptedEngine) -> str:
        app = web.Application()
        app.router.add_post("/v1/completions", engine.handle)
        app.router.add_post("/v1/chat/completions", engine.handle)
        http = TestServer(app, host="127.0.0.1", port=0)
        await http.start_server()
        servers.append((http, engine))
        return str(http.make_url("/v1"))

    yield start
    for http, engine in servers:
        engine.release.set()
        await http.close()


def spec_with(**accuracy: Any) -> Spec:
    spec = load_spec(SPEC)
    acc = spec.accuracy.model_copy(update={"limit": None, "concurrency": 4, **accuracy})
    return spec.model_copy(update={"accuracy": acc})


SCRIPT = {
    0: "right",
    1: "wrong",
    2: "500",
    3: "right",
    4: "hang",
    5: "run-on",
    6: "malformed",
    7: "right",
    8: "wrong",
    9: "right",
}


async def test_errors_and_timeouts_count_as_wrong_and_are_listed(
    serve: Callable[[ScriptedEngine], Any], tmp_path: Path
) -> None:
    suite = tmp_path / "suite.jsonl"
    items = make_suite(suite, 10)
    engine = ScriptedEngine({it.id: it for it in items}, lambda i, s: SCRIPT[int(i[-4:])])
    url = await serve(engine)
    spec = spec_with(seeds=2, concurrency=3, temperature=0.0, max_tokens=256)
    result = await asyncio.to_thread(run_suite, spec, url, "sk-secret-key", suite, timeout_s=0.5)

    assert [s.seed for s in result.seeds] == [0, 1]
    for seed in result.seeds:
        assert [it.id for it in seed.items] == [it.id for it in items]  # none skipped
        by_id = {it.id: it for it in seed.items}
        right = [i for i, b in SCRIPT.items() if b in ("right", "run-on")]
        for i, it in enumerate(seed.items):
            assert it.correct is (i in right), (i, it)
        assert by_id["gsm8k-test-0001"].answer == "12" and by_id["gsm8k-test-0001"].error is None
        assert by_id["gsm8k-test-0002"].error == "HTTP 500: engine exploded"
        assert by_id["gsm8k-test-0004"].error == "timeout after 0.5 s"
        assert "malformed response" in (by_id["gsm8k-test-0006"].error or "")
        assert by_id["gsm8k-test-0005"].answer == "15"  # the run-on "#### 99" is ignored
        assert by_id["gsm8k-test-0000"].completion == " 9 + 1 = 10\n#### 10"
        assert seed.errors == 3
        assert seed.score_pct == pytest.approx(50.0)
    assert result.score_pct == pytest.approx(50.0)
    assert result.spread_pts == 0.0
    listed = [(seed, it.id) for seed, it in errored_items(result)]
    assert listed == [(s, f"gsm8k-test-000{i}") for s in (0, 1) for i in (2, 4, 6)]
    assert result.temperature == 0.0
    assert result.suite_sha256 is not None and len(result.suite_sha256) == 64

    # What the engine was asked: every item once per seed, the spec's sampling settings.
    assert len(engine.requests) == 20
    assert sorted((r["seed"], r["prompt"]) for r in engine.requests) == sorted(
        (s, it.prompt) for s in (0, 1) for it in items
    )
    for body in engine.requests:
        assert body["model"] == "Qwen/Qwen3-30B-A3B-FP8"
        assert body["max_tokens"] == 256
        assert body["temperature"] == 0.0
        assert body["stop"] == ["\n\nQuestion:"]
        assert body["stream"] is False
        assert "ignore_eos" not in body
    assert engine.max_in_flight <= 3
    assert all(h.get("Authorization") == "Bearer sk-secret-key" for h in engine.headers)
    assert "sk-secret-key" not in result.model_dump_json()


async def test_an_error_that_echoes_the_key_in_any_form_keeps_none_of_it(
    serve: Callable[[ScriptedEngine], Any], tmp_path: Path
) -> None:
    suite = tmp_path / "suite.jsonl"
    items = make_suite(suite, 2)
    engine = ScriptedEngine({it.id: it for it in items}, lambda i, s: "echo")
    url = await serve(engine)
    key = "tw-own-key-0042"
    result = await asyncio.to_thread(run_suite, spec_with(), url, key, suite, timeout_s=5)
    errors = [it.error for it in result.seeds[0].items]
    assert errors == ["HTTP 401: bad key [redacted] = [redacted]"] * 2
    dumped = result.model_dump_json()
    assert key not in dumped and key.encode().hex() not in dumped


async def test_chat_api_limit_and_no_key(
    serve: Callable[[ScriptedEngine], Any], tmp_path: Path
) -> None:
    suite = tmp_path / "suite.jsonl"
    items = make_suite(suite, 8)
    engine = ScriptedEngine({it.id: it for it in items}, lambda i, s: "right")
    url = await serve(engine)
    spec = spec_with(limit=6)
    spec = spec.model_copy(
        update={"engine": spec.engine.model_copy(update={"api": "chat", "endpoint": url})}
    )
    result = await run_suite_async(
        spec, url.removesuffix("/v1"), None, suite, keep_completions=False
    )
    assert len(result.seeds) == 1
    assert [it.id for it in result.seeds[0].items] == [it.id for it in items[:6]]
    assert result.score_pct == 100.0
    assert all(it.completion is None for it in result.seeds[0].items)
    assert all("messages" in r and "prompt" not in r for r in engine.requests)
    assert all("Authorization" not in h for h in engine.headers)
    # limit and seeds arguments override the spec.
    more = await run_suite_async(spec, url, None, suite, limit=8, seeds=3)
    assert [len(s.items) for s in more.seeds] == [8, 8, 8]


async def test_unreachable_engine_gives_a_record_of_errors(
    tmp_path: Path, unused_tcp_port: int
) -> None:
    suite = tmp_path / "suite.jsonl"
    make_suite(suite, 3)
    result = await run_suite_async(
        spec_with(), f"http://127.0.0.1:{unused_tcp_port}", None, suite, timeout_s=2
    )
    items = result.seeds[0].items
    assert [it.correct for it in items] == [False, False, False]
    assert all((it.error or "").startswith("ConnectError") for it in items)
    assert result.score_pct == 0.0 and result.seeds[0].errors == 3


async def test_bad_limit_and_bad_suite_are_input_errors(tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    make_suite(suite, 2)
    with pytest.raises(InputError, match=r"accuracy\.limit"):
        await run_suite_async(spec_with(), "http://127.0.0.1:9", None, suite, limit=0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 1\.question"):
        await run_suite_async(spec_with(), "http://127.0.0.1:9", None, bad)


def test_urls_and_response_shapes() -> None:
    assert api_url("http://h:8000/v1", "completions") == "http://h:8000/v1/completions"
    assert api_url("http://h:8000/", "chat") == "http://h:8000/v1/chat/completions"
    assert completion_text({"choices": [{"text": " #### 5"}]}, "completions") == " #### 5"
    assert completion_text({"choices": [{"message": {"content": None}}]}, "chat") == ""
    with pytest.raises(ValueError, match="malformed"):
        completion_text({"choices": []}, "completions")


# --- End to end: two configurations, the gate and the paired statistics -----------------


Script = Callable[[str, int], Behaviour]


def discordant_script(
    base_only: set[int], tuned_only: set[int], wrong_both: set[int]
) -> tuple[Script, Script]:
    """Scripts for a baseline and a tuned engine with a chosen 2×2 table on 50 items."""

    def baseline(item_id: str, seed: int) -> Behaviour:
        i = int(item_id[-4:])
        return "wrong" if i in tuned_only or i in wrong_both else "right"

    def tuned(item_id: str, seed: int) -> Behaviour:
        i = int(item_id[-4:])
        return "wrong" if i in base_only or i in wrong_both else "right"

    return baseline, tuned


async def run_pair(
    serve: Callable[[ScriptedEngine], Any],
    suite: Path,
    items: list[SuiteItem],
    scripts: tuple[Callable[[str, int], Behaviour], Callable[[str, int], Behaviour]],
) -> tuple[AccuracyResult, AccuracyResult]:
    results = []
    for script in scripts:
        engine = ScriptedEngine({it.id: it for it in items}, script)
        url = await serve(engine)
        results.append(await run_suite_async(spec_with(concurrency=8), url, None, suite))
    return results[0], results[1]


async def test_seed_case_fails_the_gate_with_hand_computed_statistics(
    serve: Callable[[ScriptedEngine], Any], tmp_path: Path
) -> None:
    # The seed lab note's shape: 50 items, baseline 48 right (96%), tuned 44 right (88%).
    # Table: both right 43, baseline only 5, tuned only 1, both wrong 1.
    # McNemar exact: 2 * (C(6,0) + C(6,1)) / 2^6 = 14/64 = 0.21875.
    suite = tmp_path / "suite.jsonl"
    items = make_suite(suite, 50)
    scripts = discordant_script({0, 1, 2, 3, 4}, {5}, {6})
    baseline, tuned = await run_pair(serve, suite, items, scripts)
    assert baseline.score_pct == pytest.approx(96.0)
    assert tuned.score_pct == pytest.approx(88.0)
    summary = accuracy_summary(baseline, tuned, 1.0)
    assert summary.record.delta_pts == pytest.approx(-8.0)
    assert not summary.verdict.passed
    assert summary.record.mcnemar_p == pytest.approx(0.21875)
    assert summary.table is not None
    assert (summary.table.baseline_only, summary.table.tuned_only) == (5, 1)
    assert summary.note == NEEDS_FULL_SUITE  # the interval reaches up to -1 or beyond
    assert summary.record.ci_high_pts is not None and summary.record.ci_high_pts >= -1.0


async def test_equal_engines_pass_the_gate(
    serve: Callable[[ScriptedEngine], Any], tmp_path: Path
) -> None:
    # Both answer items 0..1 wrong (96%): Δ = 0, no discordant items, p = 1.
    suite = tmp_path / "suite.jsonl"
    items = make_suite(suite, 50)
    scripts = discordant_script(set(), set(), {0, 1})
    baseline, tuned = await run_pair(serve, suite, items, scripts)
    summary = accuracy_summary(baseline, tuned, 1.0)
    assert summary.verdict.passed
    assert summary.record.delta_pts == 0.0
    assert summary.record.mcnemar_p == 1.0
    assert (summary.record.ci_low_pts, summary.record.ci_high_pts) == (0.0, 0.0)
    assert summary.note is None
    assert json.loads(summary.record.model_dump_json())["items"] == 50


def test_suite_items_match_their_prompts(tmp_path: Path) -> None:
    items = make_suite(tmp_path / "s.jsonl", 3)
    assert load_suite(tmp_path / "s.jsonl") == items
