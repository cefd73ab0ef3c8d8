"""``tokenwatt init`` end to end: a real subprocess against the simulated engine and a
scripted server on 127.0.0.1; the written spec loads and validates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.collect.engine.test_probes import SGLANG_METRICS, _json, _models, _text
from tests.scripted_http import ScriptedServer
from tests.sim.sim_process import REPO, start_sim
from tokenwatt.records import Spec
from tokenwatt.records.reading.load import load_spec

LLAMA = REPO / "tests" / "fixtures" / "llama-2-7b.config.json"


def init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "tokenwatt", "init", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_init_against_the_simulator_writes_a_spec_that_loads(tmp_path: Path) -> None:
    sim = start_sim("--profile", "bf16-kv")
    try:
        out = tmp_path / "specs" / "sim.spec.yaml"
        done = init(
            "--endpoint", sim.url, "--out", str(out), "--model-config", str(LLAMA), cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        again = init("--endpoint", sim.url, "--out", str(out), cwd=tmp_path)
        forced = init("--endpoint", sim.url, "--out", str(out), "--force", cwd=tmp_path)
    finally:
        sim.stop()
    assert again.returncode == 2
    assert "already exists; pass --force" in again.stderr
    assert forced.returncode == 0, forced.stderr
    text = out.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=../schemas/spec.schema.json"
    spec = load_spec(out)
    assert spec.engine.model == "tokenwatt-sim"
    # The simulator speaks vLLM's metric names but says what it is: never named vLLM.
    assert spec.engine.name == "tokenwatt-sim" and "vLLM" not in text
    assert spec.engine.endpoint == sim.url.rstrip("/").removesuffix("/v1") + "/v1"
    # The simulator's KV cache (1,280 tokens for bf16-kv, as its context length) is below
    # what 16 requests at chat-mix-v1's p90s need, so the lengths shrink to an eighth /
    # a sixteenth of L = 1,280 x 8 / (3 x 16) = 213: 16 x (52 + 26) tokens fit in 1,280.
    assert "exceed what lets 16 requests fit in the KV cache (1,280 tokens) at once" in text
    assert (spec.workload.input_tokens.median, spec.workload.input_tokens.p90) == (26, 52)  # type: ignore[union-attr]
    assert (spec.workload.output_tokens.median, spec.workload.output_tokens.p90) == (13, 26)  # type: ignore[union-attr]
    assert "# KV cache 1,280 tokens (vllm:cache_config_info" in text
    assert "vllm:num_requests_running" in text
    assert spec.slo.ttft_p99_ms == 2000 and spec.slo.tpot_p99_ms == 50


@pytest.mark.parametrize(
    ("context", "kv", "limit"),
    [
        (None, None, None),  # nothing known: chat-mix-v1 as it is
        (8192, 10**6, None),  # both hold chat-mix-v1's p90s (5,120 tokens) many times over
        (2048, 10**6, 2048),  # the context length limits
        (None, 12_000, 2000),  # 12,000 x 8 / 48: 16 requests of 2000 x 3/8 = 750 fit
        (32_768, 12_000, 2000),  # the KV cache limits below the context length
    ],
)
def test_init_shrinks_lengths_to_the_context_and_the_kv_cache(
    context: int | None, kv: int | None, limit: int | None
) -> None:
    from tokenwatt.collect.plan.init_spec import length_limit

    assert length_limit(context, kv)[0] == limit


def test_init_with_the_model_config_names_it_from_where_collect_runs(tmp_path: Path) -> None:
    routes = {"/v1/models": _models("sglang", 32768), "/metrics": _text(SGLANG_METRICS)}
    config = tmp_path / "models" / "config.json"
    config.parent.mkdir()
    config.write_text('{"vocab_size": 151936, "num_hidden_layers": 48}', encoding="utf-8")
    with ScriptedServer(routes) as srv:
        done = init("--endpoint", srv.url, "--model-config", "models/config.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "specs" / "qwen3-30b-a3b-fp8.spec.yaml"
    spec = load_spec(out)
    assert spec.name == "qwen3-30b-a3b-fp8"
    assert spec.model.config == "models/config.json"
    assert spec.model.vocab_size == 151936
    assert spec.engine.name == "SGLang"
    assert spec.workload.input_tokens is None  # 32,768 tokens fit chat-mix-v1
    text = out.read_text(encoding="utf-8")
    assert "# Context length 32,768 tokens (/v1/models max_model_len)." in text
    assert "sglang:num_running_reqs" in text
    assert yaml.safe_load(text)["accuracy"] == {"name": "gsm8k-5shot", "max_drop_pts": 1.0}


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ({"/v1/models": _json({"object": "list", "data": []})}, "lists no model"),
        ({"/v1/models": _json({"object": "list"})}, "without a 'data' list"),
    ],
)
def test_init_refuses_a_server_without_models(
    tmp_path: Path, routes: dict[str, object], message: str
) -> None:
    with ScriptedServer(routes) as srv:  # type: ignore[arg-type]
        done = init("--endpoint", srv.url, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "specs").exists()


def test_init_refuses_credentials_in_the_url_before_any_request(tmp_path: Path) -> None:
    hits: list[str] = []

    def models(query: dict[str, list[str]]) -> tuple[int, object]:
        hits.append("models")
        return 200, {"object": "list", "data": [{"id": "m"}]}

    with ScriptedServer({"/v1/models": models}) as srv:
        url = srv.url.replace("http://", "http://user:pw-SECRET@")
        done = init("--endpoint", url, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "error: --endpoint: must not carry a user name or password (user:password@host): "
        "records keep this URL; give secrets through an environment variable (api_key_env, "
        "password_env)\n"
    )
    assert hits == [] and "SECRET" not in done.stdout + done.stderr
    assert not (tmp_path / "specs").exists()


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (lambda q: (200, "not json {"), "/v1/models did not answer with JSON"),
        (lambda q: (302, {}), "/v1/models answered HTTP 302"),
    ],
)
def test_probe_errors_never_show_the_urls_password(route: object, message: str) -> None:
    from tokenwatt.collect.engine.probes import probe_engine
    from tokenwatt.errors import EngineError

    with ScriptedServer({"/v1/models": route}) as srv:  # type: ignore[dict-item]
        url = srv.url.replace("http://", "http://user:pw-SECRET@")
        with pytest.raises(EngineError) as caught:
            probe_engine(url, None, timeout_s=5.0)
    root = srv.url.rstrip("/").removesuffix("/v1").replace("http://", "http://user:[redacted]@")
    assert str(caught.value) == f"{root}{message}"
    # Nothing answers on port 9: the connection error names the URL, scrubbed.
    with pytest.raises(EngineError) as refused:
        probe_engine("http://user:pw-SECRET@127.0.0.1:9/v1", None, timeout_s=5.0)
    assert str(refused.value).startswith(
        "cannot reach the engine at http://user:[redacted]@127.0.0.1:9/v1/models: "
    )
    assert "SECRET" not in str(refused.value)


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (
            {"object": "list", "data": [{"id": "llama\u001b[2J\u001b]0;pwned\u0007"}]},
            "/v1/models: model id 'llama\\x1b[2J\\x1b]0;pwned\\x07' holds a control "
            "character (\\x1b); no spec written",
        ),
        (
            {"object": "list", "data": [{"id": "m\nname: evil"}]},
            "holds a control character (\\x0a); no spec written",
        ),
        (
            {"object": "list", "data": [{"id": "m", "max_model_len": 0}]},
            "/v1/models max_model_len is 0, not a positive whole number of tokens; no spec written",
        ),
        (
            {"object": "list", "data": [{"id": "m", "max_model_len": -4096}]},
            "/v1/models max_model_len is -4096, not a positive whole number of tokens",
        ),
    ],
)
def test_init_refuses_hostile_server_text(
    tmp_path: Path, models: dict[str, object], message: str
) -> None:
    """Control characters and escape sequences from the server reach neither the terminal
    nor the spec; a context length that is not positive is refused; no file is written."""
    with ScriptedServer({"/v1/models": lambda q: (200, models)}) as srv:
        done = init("--endpoint", srv.url, "--out", "s.spec.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "\x1b" not in done.stderr + done.stdout and "\x07" not in done.stderr
    assert not (tmp_path / "s.spec.yaml").exists()


def test_init_reads_at_most_a_megabyte_of_model_list(tmp_path: Path) -> None:
    huge = {"object": "list", "data": [{"id": "m", "pad": "x" * (2 << 20)}]}
    with ScriptedServer({"/v1/models": lambda q: (200, huge)}) as srv:
        done = init("--endpoint", srv.url, "--out", "s.spec.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "more than a model list (1,048,576 bytes at most); not read" in done.stderr
    assert not (tmp_path / "s.spec.yaml").exists()


def test_init_keeps_a_lone_surrogate_out_of_the_spec(tmp_path: Path) -> None:
    """A model id with a JSON "\\ud800" escape is read with U+FFFD in its place (server
    text is replaced, not refused): the spec is written and loads."""
    body = '{"object": "list", "data": [{"id": "m\\ud800x"}]}'
    with ScriptedServer({"/v1/models": lambda q: (200, json.loads(body))}) as srv:
        done = init("--endpoint", srv.url, "--out", "s.spec.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert load_spec(tmp_path / "s.spec.yaml").engine.model == "m\ufffdx"


def test_init_quotes_a_model_id_with_a_newline_on_one_line(tmp_path: Path) -> None:
    models = {"object": "list", "data": [{"id": "m\nname: evil"}]}
    with ScriptedServer({"/v1/models": lambda q: (200, models)}) as srv:
        done = init("--endpoint", srv.url, "--out", "s.spec.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    root = srv.url.rstrip("/").removesuffix("/v1")
    assert done.stderr == (
        f"error: {root}/v1/models: model id 'm\\x0aname: evil' holds a control character"
        " (\\x0a); no spec written\n"
    )


def test_init_refuses_a_model_id_too_long_for_a_file_name(tmp_path: Path) -> None:
    models = {"object": "list", "data": [{"id": "x" * 5000}]}
    with ScriptedServer({"/v1/models": lambda q: (200, models)}) as srv:
        done = init("--endpoint", srv.url, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    shown = "specs/" + "x" * 54 + "…" + "x" * 30 + ".spec.yaml"
    assert done.stderr == (
        f"error: {shown}: cannot write: File name too long; pass --name or --out\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_init_leaves_out_metric_names_that_are_not_prometheus_names(tmp_path: Path) -> None:
    metrics = 'vllm:evil\x1b[2J{a="\x1b]0;x\x07"} 1\nvllm:num_requests_running 0\n'
    routes = {"/v1/models": _models("vllm", 4096), "/metrics": _text(metrics)}
    with ScriptedServer(routes) as srv:
        done = init("--endpoint", srv.url, "--out", "s.spec.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.spec.yaml").read_text(encoding="utf-8")
    assert "# /metrics exposes 1 engine metrics: vllm:num_requests_running\n" in text
    assert "\x1b" not in text


def _spec_for(board: str | None, reasons: list[str]) -> tuple[str, Spec]:
    from tokenwatt.collect.engine.probes import EngineInfo
    from tokenwatt.collect.plan.init_spec import ServerFacts, spec_text

    info = EngineInfo(endpoint="http://127.0.0.1:8000/v1", served_models=["m"])
    facts = ServerFacts(info=info, board=board, board_reasons=reasons)  # type: ignore[arg-type]
    text = spec_text(facts, endpoint=info.endpoint, name="m", schema="s.json")
    return text, Spec.model_validate(yaml.safe_load(text))


def test_without_a_gpu_library_the_spec_measures_no_power_and_says_why() -> None:
    reasons = ["NVIDIA: NVML did not initialise (NVML Shared Library Not Found)", "AMD: \x1b[2J"]
    text, spec = _spec_for(None, reasons)
    assert (spec.hardware.adapter, spec.power.source) == ("none", "none")
    lines = text.splitlines()
    assert "# Power: NVIDIA: NVML did not initialise (NVML Shared Library Not Found)" in lines
    assert "# Power: AMD: \\x1b[2J" in lines  # a comment line, escaped
    text, spec = _spec_for("nvidia", [])
    assert (spec.hardware.adapter, spec.power.source) == ("nvidia", "board")
    assert "# Power:" not in text
    _, spec = _spec_for("amd", [])
    assert (spec.hardware.adapter, spec.power.source) == ("amd", "board")


def test_the_board_library_that_opens_is_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake NVML (the GPU library is the one thing faked): one GPU, it opens; its
    initialisation failing as on a machine without the driver: no adapter, NVML's words."""
    import pynvml as real

    from tests.telemetry.fake_nvml import FakeGpu, FakeNvml
    from tokenwatt.telemetry import detect_board

    fake = FakeNvml([FakeGpu()], now=lambda: 0.0)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)
    assert detect_board({}) == ("nvidia", [])
    assert fake.initialised == 0  # opened and shut down again

    def no_library() -> None:
        raise real.NVMLError(real.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(fake.module, "nvmlInit", no_library)
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # not installed
    board, reasons = detect_board({})
    assert board is None
    assert reasons[0] == (
        "NVIDIA: NVML did not initialise (NVML Shared Library Not Found); is the NVIDIA "
        "driver loaded?"
    )
    assert reasons[1].startswith("AMD: power.source 'board' on AMD needs AMD SMI's Python")


def test_init_takes_the_servers_vocabulary_and_unquantized_weight_type() -> None:
    from tokenwatt.collect.engine.probes import EngineInfo
    from tokenwatt.collect.plan.init_spec import ServerFacts, vocab_line, weight_line

    served = EngineInfo(endpoint="e", vocab_size=2048, vocab_source="/v1/models meta.n_vocab")
    assert vocab_line(ServerFacts(info=served)) == (
        "  vocab_size: 2048  # from the server (/v1/models meta.n_vocab)"
    )
    # the server's vocabulary (what it accepts) wins over config.json's, and the gap is said
    assert vocab_line(ServerFacts(info=served, vocab_size=2050)).endswith("; config.json says 2050")
    plain = EngineInfo(endpoint="e")
    assert vocab_line(ServerFacts(info=plain, vocab_size=151936)) == "  vocab_size: 151936"
    assert "not read" in vocab_line(ServerFacts(info=plain))
    for reported, dtype in [("all F32", "fp32"), ("F16", "fp16"), ("BF16 (guessed)", "bf16")]:
        line = weight_line(EngineInfo(endpoint="e", weight_format=reported))
        assert line.startswith(f"  weight_dtype: {dtype}  # the server reports"), line
    quantized = weight_line(EngineInfo(endpoint="e", weight_format="Q4_K - Medium"))
    assert quantized.startswith("  weight_dtype: bf16  #") and "set the nearest" in quantized
    assert weight_line(plain) == "  weight_dtype: bf16  # set to the served weights' dtype"
