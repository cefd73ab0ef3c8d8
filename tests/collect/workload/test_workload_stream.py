"""One workload stream per run: fresh prompts, counted repeats, shared prefix, context fit."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from aiohttp import web
from streaming_server import ScriptedServer, stream, tokens_stream

from tokenwatt.collect.load.loadgen import LoadConfig, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.prompts import SharedPrefix
from tokenwatt.collect.workload.workload import MAX_REDRAWS, chat_mix_v1, workload_for
from tokenwatt.records.spec.spec import SloSpec, Spec, fingerprint, fingerprint_fields

SEED_SPEC = Path(__file__).resolve().parents[2] / "fixtures" / "seed.report.json"


def spec_with(api: str = "completions", vocab: int = 2048, **workload: object) -> Spec:
    data = json.loads(SEED_SPEC.read_text())["spec"]
    data["workload"].update(workload)
    data["engine"]["api"] = api
    data["model"]["vocab_size"] = vocab
    return Spec.model_validate(data)


def small(**workload: object) -> Spec:
    return spec_with(
        input_tokens={"median": 24, "p90": 64}, output_tokens={"median": 8, "p90": 16}, **workload
    )


def key(prompt: list[int] | str) -> tuple[int, ...] | str:
    return tuple(prompt) if isinstance(prompt, list) else prompt


def test_two_windows_from_one_stream_share_no_prompt() -> None:
    stream_ = workload_for(small(seed=5))
    window_1 = [r.prompt for r in itertools.islice(stream_, 300)]
    window_2 = [r.prompt for r in itertools.islice(stream_, 300)]
    assert len({key(p) for p in window_1 + window_2}) == 600
    assert stream_.counts() == {
        "drawn": 600,
        "distinct_prompts": 600,
        "repeated_prompts": 0,
        "redrawn": 0,
        "clipped": 0,
    }
    assert stream_.notes() == []


def test_same_seed_same_sequence_other_seed_other_sequence() -> None:
    a = list(itertools.islice(workload_for(small(seed=5)), 50))
    b = list(itertools.islice(workload_for(small(seed=5)), 50))
    c = list(itertools.islice(workload_for(small(seed=6)), 50))
    assert a == b and a != c
    # The stream draws what chat_mix_v1 draws: the old seeded sequence, now run-long.
    spec = small(seed=5)
    plain = chat_mix_v1(5, 2048, spec.workload.input_tokens, spec.workload.output_tokens)
    assert a == list(itertools.islice(plain, 50))


def test_random_id_prompts_share_no_first_block_by_accident() -> None:
    # vLLM caches whole 16-token blocks: no two prompts may share their first block.
    prompts = [r.prompt for r in itertools.islice(workload_for(small(seed=1)), 2000)]
    firsts = [tuple(p[:16]) for p in prompts if isinstance(p, list) and len(p) >= 16]
    assert len(firsts) > 1300 and len(set(firsts)) == len(firsts)


def test_a_tiny_prompt_space_is_redrawn_then_repeats_are_counted() -> None:
    # 1-token prompts from ids 10..19: only ten different prompts exist.
    spec = spec_with(
        vocab=20, input_tokens={"median": 1, "p90": 1}, output_tokens={"median": 2, "p90": 2}
    )
    stream_ = workload_for(spec)
    prompts = [r.prompt[0] for r in itertools.islice(stream_, 15)]  # type: ignore[index]
    # Seeded: the ninth draw (18) found no new id in 1 + MAX_REDRAWS tries, the tenth did.
    assert prompts == [13, 10, 19, 17, 18, 15, 16, 11, 18, 14, 19, 12, 18, 10, 12]
    counts = stream_.counts()
    assert (counts["drawn"], counts["distinct_prompts"], counts["repeated_prompts"]) == (15, 10, 5)
    assert stream_.unavoidable_repeats == 5
    assert counts["redrawn"] == 54 and counts["redrawn"] >= 5 * MAX_REDRAWS
    assert any("repeat an earlier one" in n for n in stream_.notes())


def test_prompt_pool_resends_on_purpose_and_says_so() -> None:
    stream_ = workload_for(small(prompt_pool=3))
    prompts = [key(r.prompt) for r in itertools.islice(stream_, 7)]
    assert prompts[3:] == prompts[:3] + prompts[:1] and len(set(prompts)) == 3
    assert (stream_.distinct_prompts, stream_.repeated_prompts, stream_.drawn) == (3, 4, 7)
    assert stream_.notes() == [
        "workload.prompt_pool 3: 4 of 7 requests re-sent an earlier prompt on purpose "
        "(prefix cache warm)"
    ]


def test_a_short_trace_is_cycled_and_its_repeats_flagged(tmp_path: Path) -> None:
    lines = [{"prompt": "a", "max_tokens": 1}, {"prompt": "b", "max_tokens": 2}]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    stream_ = workload_for(small(trace="t.jsonl"), base_dir=tmp_path)
    assert [r.prompt for r in itertools.islice(stream_, 5)] == ["a", "b", "a", "b", "a"]
    assert (stream_.distinct_prompts, stream_.repeated_prompts) == (2, 3)
    assert stream_.notes() == [
        "the trace has 2 requests and the run drew 5: 3 prompts were sent again, so the "
        "engine's prefix cache may have served them"
    ]


def test_length_only_trace_entries_get_new_ids_on_each_pass(tmp_path: Path) -> None:
    lines = [{"input_tokens": 20, "output_tokens": 3}, {"input_tokens": 30, "output_tokens": 4}]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    stream_ = workload_for(small(trace="t.jsonl"), base_dir=tmp_path)
    drawn = list(itertools.islice(stream_, 6))
    assert [len(r.prompt) for r in drawn] == [20, 30] * 3
    assert [r.max_tokens for r in drawn] == [3, 4] * 3
    assert len({key(r.prompt) for r in drawn}) == 6 and stream_.repeated_prompts == 0


def test_shared_prefix_is_seeded_the_same_for_every_request_and_leaves_the_rest() -> None:
    plain = list(itertools.islice(workload_for(small(seed=2)), 20))
    stream_ = workload_for(small(seed=2, shared_prefix_tokens=40))
    prefixed = list(itertools.islice(stream_, 20))
    head = stream_.prefix.ids
    assert len(head) == 40 and head == SharedPrefix.seeded(2, 2048, 40).ids
    assert head != SharedPrefix.seeded(3, 2048, 40).ids
    for p, q in zip(plain, prefixed, strict=True):
        assert q.prompt == head + p.prompt  # type: ignore[operator]
        assert q.max_tokens == p.max_tokens
    assert stream_.distinct_prompts == 20


def test_text_prefix_for_the_chat_api_is_about_n_words() -> None:
    stream_ = workload_for(spec_with(api="chat", seed=2, shared_prefix_tokens=50))
    a, b = itertools.islice(stream_, 2)
    assert isinstance(a.prompt, str) and isinstance(b.prompt, str)
    text = stream_.prefix.text
    assert len(text.split()) == 50
    assert a.prompt.startswith(text) and b.prompt.startswith(text) and a.prompt != b.prompt


def test_new_workload_options_enter_the_fingerprint_only_when_set() -> None:
    plain = small()
    fields = fingerprint_fields(plain)
    assert "workload.shared_prefix_tokens" not in fields and "workload.prompt_pool" not in fields
    with_prefix = small(shared_prefix_tokens=64)
    assert fingerprint_fields(with_prefix)["workload.shared_prefix_tokens"] == 64
    assert fingerprint(with_prefix) != fingerprint(plain)
    assert fingerprint(small(prompt_pool=10)) != fingerprint(plain)
    data = plain.model_dump()
    data["model"]["tokenizer"] = "/somewhere/tokenizer.json"
    assert fingerprint(Spec.model_validate(data)) == fingerprint(plain)


def test_lengths_are_clipped_to_the_context_and_counted() -> None:
    stream_ = workload_for(small(shared_prefix_tokens=8), context_length=64)
    drawn = list(itertools.islice(stream_, 400))
    assert all(len(r.prompt) + r.max_tokens <= 64 for r in drawn)
    assert 0 < stream_.clipped < 100  # only the tail: medians 8 + 24 + 8 fit in 64
    assert any("shortened to fit the context of 64 tokens" in n for n in stream_.notes())


def test_text_prompts_keep_a_tenth_of_the_context_free() -> None:
    spec = spec_with(
        api="chat", input_tokens={"median": 500, "p90": 900}, output_tokens={"median": 8, "p90": 9}
    )
    drawn = list(itertools.islice(workload_for(spec, context_length=600), 200))
    assert max(len(str(r.prompt).split()) + r.max_tokens for r in drawn) == 540


async def test_two_windows_send_no_prompt_twice_over_http(server: ScriptedServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, tokens_stream(2))

    server.handler = handler
    cfg = LoadConfig(
        endpoint=server.base,
        model="tiny",
        slo=SloSpec(ttft_p99_ms=2000, tpot_p99_ms=1000),
        max_concurrency=16,
        request_timeout_s=5.0,
    )
    stream_ = workload_for(small(seed=4))
    for seed in (3, 3):  # the same arrival seed twice, as the search's probes do
        await run_window(
            cfg, WindowPlan(rate_rps=40.0, duration_s=0.25, warmup_s=0.0, seed=seed), stream_
        )
    sent = [key(b["prompt"]) for b in server.bodies]
    assert len(sent) >= 10 and len(set(sent)) == len(sent)
    assert stream_.drawn >= len(sent) and stream_.repeated_prompts == 0
