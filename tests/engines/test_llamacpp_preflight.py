"""Preflight against llama.cpp's own server (xllamacpp): its n_ctx bounds the workload, and
a model name it does not list is served anyway (so it only warns)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from engine_servers import EngineServer
from tiny_model import TinyModel

from tokenwatt.collect.engine.probes import probe_engine
from tokenwatt.collect.plan.preflight import check_served_model, check_workload_fits
from tokenwatt.collect.workload.tokens import load_token_counter
from tokenwatt.collect.workload.workload import workload_for
from tokenwatt.errors import InputError
from tokenwatt.records.reading.load import load_spec
from tokenwatt.records.spec.spec import Spec

pytestmark = pytest.mark.engine

SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-engine.spec.yaml"


def tiny_spec(**workload: object) -> Spec:
    data = load_spec(SPEC).model_dump()
    data["workload"].update(workload)
    return Spec.model_validate(data)


def test_n_ctx_bounds_the_workload_before_the_first_request(
    llamacpp_server: EngineServer,
) -> None:
    info = probe_engine(llamacpp_server.endpoint, None)
    # 4 slots share an 8,192-token context: one request may use a slot's 2,048.
    assert info.max_model_len == 2048
    assert info.context_length_source == "llama.cpp /props default_generation_settings.n_ctx"
    fits = tiny_spec()
    assert check_workload_fits(fits, workload_for(fits), info, SPEC) == []
    too_long = tiny_spec(input_tokens={"median": 2040, "p90": 3000})  # 2,040 + 16 > 2,048
    with pytest.raises(InputError, match="does not fit the engine's context of 2,048 tokens"):
        check_workload_fits(too_long, workload_for(too_long), info, SPEC)


def test_the_server_rejects_what_the_check_refuses(llamacpp_server: EngineServer) -> None:
    # What the check protects against: a request longer than n_ctx fails on this server.
    body = {"model": "tiny", "prompt": [11] * 2100, "max_tokens": 8, "ignore_eos": True}
    r = httpx.post(llamacpp_server.base_url + "/v1/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text[:300]


def test_a_name_llamacpp_does_not_list_is_refused_though_it_answers_it(
    llamacpp_server: EngineServer,
) -> None:
    """llama.cpp answers a name it does not list with its one model, so collect refuses the
    name (the run would be recorded under it) unless the spec says the name is an alias."""
    info = probe_engine(llamacpp_server.endpoint, None)
    assert info.served_models == ["tiny"]
    body = {"model": "not-listed", "prompt": [11, 12, 13], "max_tokens": 2, "ignore_eos": True}
    r = httpx.post(llamacpp_server.base_url + "/v1/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text[:300]
    spec = load_spec(SPEC)
    other = spec.model_copy(update={"engine": spec.engine.model_copy(update={"model": "x"})})
    assert check_served_model(spec, info, SPEC) == []
    with pytest.raises(InputError, match="'x' is requested but not served"):
        check_served_model(other, info, SPEC)
    alias = other.model_copy(
        update={"engine": other.engine.model_copy(update={"model_alias_ok": True})}
    )
    assert len(check_served_model(alias, info, SPEC)) == 1


def test_the_tiny_models_own_tokenizer_counts_what_it_streams(
    llamacpp_server: EngineServer, tiny_model: TinyModel
) -> None:
    spec = load_spec(SPEC)
    model = spec.model.model_copy(update={"tokenizer": str(tiny_model.hf_dir)})
    counter = load_token_counter(spec.model_copy(update={"model": model}), SPEC)
    assert counter is not None
    body = {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 1}
    r = httpx.post(llamacpp_server.base_url + "/v1/completions", json=body, timeout=60)
    usage = r.json()["usage"]
    # The server adds a BOS token to a text prompt; the counter adds none.
    assert counter.count("The quick brown fox") in (
        usage["prompt_tokens"],
        usage["prompt_tokens"] - 1,
    )
    assert json.loads((tiny_model.hf_dir / "tokenizer.json").read_text())["model"]["type"] == "BPE"


def test_the_servers_vocabulary_and_weight_type_are_read_and_bound_the_token_ids(
    llamacpp_server: EngineServer, tiny_model: TinyModel
) -> None:
    """llama.cpp's /v1/models gives n_vocab and the weights' ftype: the spec takes the
    vocabulary when nobody stated one, a stated larger one is refused before a request, and
    the server refuses the ids the check protects against."""
    from tokenwatt.collect.plan.init_spec import ServerFacts, spec_text
    from tokenwatt.collect.plan.preflight import check_vocab_fits, model_from_server

    info = probe_engine(llamacpp_server.endpoint, None)
    assert info.vocab_size == tiny_model.vocab_size == 2048
    assert info.vocab_source == "/v1/models meta.n_vocab"
    assert info.weight_format == "all F32"  # tiny_model.py writes float32 weights
    spec = load_spec(SPEC)
    stated = spec.model_copy(update={"model": spec.model.model_copy(update={"vocab_size": 32000})})
    taken, lines = model_from_server(stated, info, stated=False)
    assert taken.model.vocab_size == 2048 and "2,048" in lines[0]
    assert taken.model.weight_dtype == stated.model.weight_dtype  # a spec file states it
    assert model_from_server(stated, info, stated=True) == (stated, [])
    bf16 = stated.model_copy(
        update={"model": stated.model.model_copy(update={"weight_dtype": "bf16"})}
    )
    flags, lines = model_from_server(bf16, info, stated=False, from_flags=True)
    assert flags.model.weight_dtype == "fp32" and lines[1].startswith("weights: fp32")
    with pytest.raises(InputError, match=r"model.vocab_size: is 32,000, but the served model has"):
        check_vocab_fits(stated, workload_for(stated), info, (str(SPEC), "model.vocab_size"))
    check_vocab_fits(taken, workload_for(taken), info, (str(SPEC), "model.vocab_size"))
    body = {"model": "tiny", "prompt": [11, 2048], "max_tokens": 2, "ignore_eos": True}
    r = httpx.post(llamacpp_server.base_url + "/v1/completions", json=body, timeout=60)
    assert r.status_code == 400 and "invalid tokens" in r.text, r.text[:300]
    text = spec_text(
        ServerFacts(info=info), endpoint=llamacpp_server.endpoint, name="t", schema="s"
    )
    assert "  vocab_size: 2048  # from the server (/v1/models meta.n_vocab)" in text
    assert '  weight_dtype: fp32  # the server reports "all F32" (meta.ftype)' in text
    assert "  kv_dtype: fp16  # llama.cpp's default (f16), a guess" in text
