"""Before the first request: the served model and the engine's context length.

Scripted servers on 127.0.0.1 answer with each engine's own shape (vLLM and SGLang
``/v1/models``, SGLang ``/server_info``, TGI ``/info``, llama.cpp ``/props``); the real
llama.cpp server is checked in ``tests/engines/test_llamacpp_preflight.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripted_http import ScriptedServer, fixed
from tokenwatt.collect.engine.probes import EngineInfo, probe_engine
from tokenwatt.collect.plan.preflight import check_served_model, check_workload_fits
from tokenwatt.collect.plan.runfile import environment_from
from tokenwatt.collect.workload.workload import workload_for
from tokenwatt.errors import InputError
from tokenwatt.records.spec.spec import Spec

SEED_SPEC = Path(__file__).resolve().parents[2] / "fixtures" / "seed.report.json"
SPEC_FILE = "specs/x.spec.yaml"


def spec_with(model: str = "m", api: str = "completions", **workload: object) -> Spec:
    data = json.loads(SEED_SPEC.read_text())["spec"]
    data["engine"].update(model=model, api=api)
    data["workload"].update(workload)
    return Spec.model_validate(data)


def models(*names: str, owner: str = "vllm", max_len: int | None = None) -> object:
    entries = []
    for name in names:
        entry: dict[str, object] = {"id": name, "object": "model", "owned_by": owner}
        if max_len is not None:
            entry["max_model_len"] = max_len
        entries.append(entry)
    return fixed({"object": "list", "data": entries})


ENGINES = {
    "vllm": (
        {"/v1/models": models("m", max_len=4096), "/version": fixed({"version": "0.32.0"})},
        "/v1/models max_model_len",
    ),
    "sglang": (
        {
            "/v1/models": models("m", owner="sglang"),
            "/server_info": fixed(
                {
                    "model_path": "m",
                    "context_length": 4096,
                    "version": "0.5.4",
                    "internal_states": [],
                }
            ),
        },
        "SGLang server_info context_length",
    ),
    "tgi": (
        {
            "/v1/models": models("m", owner="tgi"),
            "/info": fixed({"model_id": "m", "version": "3.3.6", "max_total_tokens": 4096}),
        },
        "TGI /info max_total_tokens",
    ),
    "llama.cpp": (
        {
            "/v1/models": models("m", owner="llamacpp"),
            "/props": fixed(
                {
                    "total_slots": 4,
                    "build_info": "b1",
                    "default_generation_settings": {"n_ctx": 4096},
                }
            ),
        },
        "llama.cpp /props default_generation_settings.n_ctx",
    ),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_each_engines_context_length_is_read_and_recorded(engine: str) -> None:
    routes, source = ENGINES[engine]
    with ScriptedServer(routes) as srv:  # type: ignore[arg-type]
        info = probe_engine(srv.url, None)
    assert (info.engine_name, info.max_model_len, info.context_length_source) == (
        engine,
        4096,
        source,
    )
    env = environment_from(info, None, spec_with())
    assert (env.context_length_tokens, env.context_length_source) == (4096, source)
    # The median chat-mix-v1 request (1,024 + 256) fits 4,096 tokens; its tail does not:
    # P(prompt + output > 4,096) = 13.05% by numerical integration of the two lognormals.
    stream = workload_for(spec_with(), context_length=info.max_model_len)
    notes = check_workload_fits(spec_with(), stream, info, SPEC_FILE)
    assert notes == [
        f"13.0% of chat-mix-v1 requests are longer than the engine's context of 4,096 tokens, "
        f"{source} and are shortened to fit (output first, then prompt) (more than a tenth: "
        "the p90 lengths sent are below the spec's)"
    ]


def info(
    max_len: int | None = 4096, engine: str = "vllm", served: list[str] | None = None
) -> EngineInfo:
    return EngineInfo(
        endpoint="http://127.0.0.1:9/v1",
        engine_name=engine,
        served_models=["m"] if served is None else served,
        max_model_len=max_len,
        context_length_source="/v1/models max_model_len" if max_len else None,
    )


def test_a_median_that_does_not_fit_is_refused_naming_the_fields() -> None:
    spec = spec_with(
        input_tokens={"median": 3000, "p90": 6000},
        output_tokens={"median": 1000, "p90": 2000},
        shared_prefix_tokens=200,
    )
    with pytest.raises(InputError) as err:
        check_workload_fits(spec, workload_for(spec), info(4096), SPEC_FILE)
    problem = err.value.problems[0]
    assert (problem.file, problem.field) == (SPEC_FILE, "workload")
    assert problem.message == (
        "the median request does not fit the engine's context of 4,096 tokens, /v1/models "
        "max_model_len: workload.shared_prefix_tokens 200 + workload.input_tokens.median 3000 + "
        "workload.output_tokens.median 1000 = 4,200 tokens. Lower them, or serve the model "
        "with a longer context"
    )


def test_text_prompts_keep_a_tenth_for_the_template_and_a_fat_tail_is_flagged() -> None:
    spec = spec_with(api="chat")
    notes = check_workload_fits(spec, workload_for(spec), info(2048), SPEC_FILE)
    # 1,843 tokens for text: 1,024 + 256 fits; P(prompt + output > 1,843) = 40.5% by
    # numerical integration (the seeded estimate: 40.7%).
    assert notes == [
        "40.7% of chat-mix-v1 requests are longer than the engine's context of 2,048 tokens, "
        "/v1/models max_model_len (1,843 tokens for text prompts, a tenth kept for the chat "
        "template) and are shortened to fit (output first, then prompt) (more than a tenth: "
        "the p90 lengths sent are below the spec's)"
    ]


def test_a_workload_well_inside_the_context_has_no_note() -> None:
    spec = spec_with(input_tokens={"median": 20, "p90": 40}, output_tokens={"median": 5, "p90": 9})
    assert check_workload_fits(spec, workload_for(spec), info(4096), SPEC_FILE) == []
    assert check_workload_fits(spec, workload_for(spec), info(None), SPEC_FILE) == [
        "the engine did not report its context length: request lengths not checked"
    ]


def test_a_trace_with_a_request_too_long_is_refused(tmp_path: Path) -> None:
    lines = [
        {"input_tokens": 100, "output_tokens": 10},
        {"prompt": [11] * 4000, "max_tokens": 200, "id": "big"},
        {"prompt": "some text", "max_tokens": 5},
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    spec = spec_with(trace="t.jsonl")
    stream = workload_for(spec, base_dir=tmp_path)
    with pytest.raises(InputError) as err:
        check_workload_fits(spec, stream, info(4096), SPEC_FILE)
    problem = err.value.problems[0]
    assert problem.field == "workload.trace"
    assert problem.message.startswith(
        f"1 of 3 requests of {tmp_path / 't.jsonl'} are longer than the engine's context of "
        "4,096 tokens"
    )
    assert problem.message.endswith("request 2 (id 'big'): 4,000 + 200 tokens")
    assert check_workload_fits(spec, stream, info(8192), SPEC_FILE) == [
        f"1 text prompts of {tmp_path / 't.jsonl'} were not checked against the context length "
        "(set model.tokenizer to count them)"
    ]
    words = lambda text: len(text.split())  # noqa: E731
    assert check_workload_fits(spec, stream, info(8192), SPEC_FILE, count_tokens=words) == []


def test_a_served_model_passes_an_unserved_one_is_refused_listing_what_is_served() -> None:
    assert check_served_model(spec_with("m"), info(served=["m", "m-lora"]), SPEC_FILE) == []
    with pytest.raises(InputError) as err:
        check_served_model(spec_with("Qwen/Qwen3-8B"), info(served=["m", "m-lora"]), SPEC_FILE)
    problem = err.value.problems[0]
    assert (problem.file, problem.field) == (SPEC_FILE, "engine.model")
    assert problem.message.startswith(
        "'Qwen/Qwen3-8B' is requested but not served at http://127.0.0.1:9/v1: /v1/models "
        "lists 'm', 'm-lora'."
    )
    with pytest.raises(InputError, match="/v1/models lists no model"):
        check_served_model(spec_with("m"), info(served=[], engine="llama.cpp"), SPEC_FILE)


@pytest.mark.parametrize("engine", ["llama.cpp", "tgi", "vllm"])
def test_an_unlisted_name_is_refused_even_by_engines_that_answer_any_name(engine: str) -> None:
    """llama.cpp and TGI answer any name with their one model: measured under another name,
    the record would hold a name the server does not serve."""
    with pytest.raises(InputError) as err:
        check_served_model(spec_with("other"), info(engine=engine), SPEC_FILE)
    message = err.value.problems[0].message
    assert "'other' is requested" in message and "/v1/models lists 'm'" in message
    assert "engine.model_alias_ok (--allow-model-alias)" in message


def test_a_gateway_that_maps_names_is_let_through_with_a_warning() -> None:
    spec = spec_with("other")
    engine = spec.engine.model_copy(update={"model_alias_ok": True})
    spec = spec.model_copy(update={"engine": engine})
    assert check_served_model(spec, info(engine="llama.cpp"), SPEC_FILE) == [
        "engine.model 'other' is not among the served models ('m'); measured anyway because "
        "engine.model_alias_ok is set (the server maps the name)"
    ]
    with pytest.raises(InputError, match="lists no model"):  # nothing listed: no alias to trust
        check_served_model(spec, info(served=[]), SPEC_FILE)


def test_a_tail_that_rounds_to_no_request_gets_no_note() -> None:
    """42 in 100,000 seeded draws exceed 40,000 tokens: "0.0% ... are shortened" would
    say nothing, so no note is made; 51 in 100,000 (36,000 tokens) still print as 0.1%."""
    from tokenwatt.collect.plan.preflight import (
        DEFAULT_INPUT_TOKENS,
        DEFAULT_OUTPUT_TOKENS,
        _share_longer_than,
    )

    spec = spec_with()
    assert _share_longer_than(40_000, DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS) == 0.00042
    assert check_workload_fits(spec, workload_for(spec), info(40_000), SPEC_FILE) == []
    (note,) = check_workload_fits(spec, workload_for(spec), info(36_000), SPEC_FILE)
    assert note.startswith("0.1% of chat-mix-v1 requests are longer than")
