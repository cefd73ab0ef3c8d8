"""Engine probes against scripted HTTP servers on 127.0.0.1 (SGLang-, vLLM-, TGI-shaped).

The scripted servers answer with the field and metric names of the engines' sources
(SGLang ``http_server.py`` and ``metrics/collector.py``, TGI's router ``/info``); the real
llama.cpp and vLLM servers are tested in ``tests/engines``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scripted_http import Route, ScriptedServer, fixed
from tokenwatt.collect.engine.engine_metrics import (
    Scrape,
    parse_metrics_text,
    reduce_families,
    summarize_scrapes,
)
from tokenwatt.collect.engine.probes import (
    MetricsScraper,
    api_base_url,
    probe_engine,
    scan_engine_log,
    server_root_url,
)
from tokenwatt.errors import EngineError, InputError


def _json(obj: object) -> Route:
    return fixed(obj)


def _text(body: str) -> Route:
    return fixed(body)  # a str is served as Prometheus text


def _models(owner: str, max_len: int | None = None) -> Route:
    entry: dict[str, object] = {"id": "Qwen/Qwen3-30B-A3B-FP8", "object": "model"}
    entry["owned_by"] = owner
    if max_len is not None:
        entry["max_model_len"] = max_len
    return _json({"object": "list", "data": [entry]})


# SGLang-shaped /metrics (names from sglang/srt/metrics/collector.py), two DP ranks.
SGLANG_METRICS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="q",dp_rank="0"} 40.0
sglang:num_running_reqs{model_name="q",dp_rank="1"} 24.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="q",dp_rank="0"} 3.0
sglang:num_queue_reqs{model_name="q",dp_rank="1"} 0.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="q",dp_rank="0"} 0.97
sglang:token_usage{model_name="q",dp_rank="1"} 0.41
# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{model_name="q",dp_rank="0"} 445008.0
# HELP sglang:num_retracted_requests_total Total number of retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{model_name="q",dp_rank="0"} 7.0
"""


def test_sglang_probe_reads_server_info_and_kv_pool() -> None:
    server_info = {
        "model_path": "Qwen/Qwen3-30B-A3B-FP8",
        "context_length": 32768,
        "kv_cache_dtype": "auto",
        "max_total_num_tokens": 445008,
        "max_req_input_len": 32762,
        "internal_states": [{"last_gen_throughput": 0.0}],
        "version": "0.5.4",
    }
    routes = {
        "/v1/models": _models("sglang", 32768),
        "/get_server_info": _json(server_info),
        "/metrics": _text(SGLANG_METRICS),
    }
    with ScriptedServer(routes) as srv:
        info = probe_engine(srv.url + "/v1", None)
    assert info.engine_name == "sglang"
    assert info.engine_version == "0.5.4"
    assert info.served_models == ["Qwen/Qwen3-30B-A3B-FP8"]
    assert info.max_model_len == 32768
    assert info.kv_capacity_tokens == 445008
    assert info.kv_capacity_source is not None and "max_total_num_tokens" in info.kv_capacity_source
    assert info.metrics_available
    # The newer /server_info was tried first, then the older /get_server_info.
    assert srv.requests.index("/server_info") < srv.requests.index("/get_server_info")


def test_sglang_kv_pool_falls_back_to_the_metrics_gauge() -> None:
    routes = {
        "/v1/models": _models("sglang"),
        "/server_info": _json({"model_path": "m", "version": "0.5.9", "internal_states": []}),
        "/metrics": _text(SGLANG_METRICS),
    }
    with ScriptedServer(routes) as srv:
        info = probe_engine(srv.url, None)
    assert (info.engine_name, info.engine_version) == ("sglang", "0.5.9")
    assert info.kv_capacity_tokens == 445008
    assert info.kv_capacity_source == "sglang:max_total_num_tokens"


def test_sglang_gauges_reduce_to_sums_and_the_fullest_kv_rank() -> None:
    s = reduce_families(parse_metrics_text(SGLANG_METRICS), t_s=0.0)
    assert s.running == 64
    assert s.waiting == 3
    assert s.kv_usage_frac == pytest.approx(0.97)
    assert s.preemptions_total == 7


def test_vllm_shaped_cache_config_gives_blocks_times_block_size() -> None:
    metrics = (
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="16",cache_dtype="fp8",engine="0",'
        'num_gpu_blocks="55632",kv_cache_size_tokens="890112"} 1.0\n'
    )
    routes = {
        "/v1/models": _models("vllm", 40960),
        "/version": _json({"version": "0.31.0"}),
        "/metrics": _text(metrics),
    }
    with ScriptedServer(routes) as srv:
        info = probe_engine(srv.url + "/v1/", None)
    assert (info.engine_name, info.engine_version) == ("vllm", "0.31.0")
    assert info.kv_capacity_tokens == 55632 * 16
    assert info.notes == []


def test_a_version_that_echoes_the_key_keeps_none_of_it() -> None:
    """A server (or the proxy before it) that puts the request's key in its version string
    or a model id: the probe's answer, printed and kept in the record, holds no form of it."""
    key = "tw-own-key-0042"
    routes = {
        "/v1/models": _models("vllm"),
        "/version": _json({"version": f"0.31.0+{key.encode().hex()} ({key})"}),
        "/metrics": _text(""),
    }
    with ScriptedServer(routes, bearer=key) as srv:
        info = probe_engine(srv.url + "/v1/", key)
    assert (info.engine_name, info.engine_version) == ("vllm", "0.31.0+[redacted] ([redacted])")


def test_tgi_info_gives_version_and_batch_token_budget() -> None:
    tgi_info = {
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "max_total_tokens": 8192,
        "max_batch_total_tokens": 310000,
        "version": "3.3.6",
        "router": "text-generation-router",
    }
    routes = {"/v1/models": _models("tgi"), "/info": _json(tgi_info)}
    with ScriptedServer(routes) as srv:
        info = probe_engine(srv.url, None)
    assert (info.engine_name, info.engine_version) == ("tgi", "3.3.6")
    assert info.kv_capacity_tokens == 310000
    assert info.max_model_len == 8192
    assert not info.metrics_available


def test_unknown_server_keeps_what_it_can_and_says_what_it_lacked() -> None:
    with ScriptedServer({"/v1/models": _models("someone")}) as srv:
        info = probe_engine(srv.url, None)
    assert info.engine_name is None and info.engine_version is None
    assert info.served_models == ["Qwen/Qwen3-30B-A3B-FP8"]
    assert info.kv_capacity_tokens is None
    assert any("version endpoint" in n for n in info.notes)
    assert any("KV-cache capacity" in n for n in info.notes)


def test_api_key_is_sent_as_bearer_and_a_wrong_one_is_named() -> None:
    routes = {"/v1/models": _models("vllm"), "/version": _json({"version": "0.32.0"})}
    with ScriptedServer(routes, bearer="s3cret") as srv:
        assert probe_engine(srv.url, "s3cret").engine_version == "0.32.0"
        with pytest.raises(EngineError, match=r"HTTP 401.*API key") as err:
            probe_engine(srv.url, "wrong")
    assert "s3cret" not in str(err.value) and "wrong" not in str(err.value)


def test_unreachable_engine_is_an_engine_error() -> None:
    with ScriptedServer({}) as srv:
        url = srv.url
    with pytest.raises(EngineError, match="cannot reach"):
        probe_engine(url, None, timeout_s=2.0)


def test_metrics_page_that_is_not_prometheus_is_noted_not_fatal() -> None:
    routes = {
        "/v1/models": _models("vllm"),
        "/version": _json({"version": "0.32.0"}),
        "/metrics": _json({"not": "prometheus {"}),
    }
    with ScriptedServer(routes) as srv:
        info = probe_engine(srv.url, None)
    assert info.engine_name == "vllm" and not info.metrics_available
    assert any("not in Prometheus text format" in n for n in info.notes)


def test_models_without_a_data_list_is_an_engine_error() -> None:
    with ScriptedServer({"/v1/models": _json({"models": []})}) as srv, pytest.raises(EngineError):
        probe_engine(srv.url, None)


def test_endpoint_urls() -> None:
    assert server_root_url("http://h:8000/v1/") == "http://h:8000"
    assert server_root_url("http://h:8000") == "http://h:8000"
    assert api_base_url("http://h:8000/") == "http://h:8000/v1"


@pytest.fixture
def changing_metrics() -> Iterator[tuple[ScriptedServer, list[str]]]:
    pages: list[str] = []

    def page(_query: object) -> tuple[int, str]:
        return 200, pages[0] if len(pages) == 1 else pages.pop(0)

    with ScriptedServer({"/metrics": page}) as srv:
        yield srv, pages


def _vllm_page(running: int, waiting: int, kv: float, preempted: int) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}\n'
        "# TYPE vllm:num_preemptions counter\n"
        f'vllm:num_preemptions_total{{engine="0",model_name="m"}} {preempted}\n'
    )


async def test_scraper_summarizes_a_window(
    changing_metrics: tuple[ScriptedServer, list[str]],
) -> None:
    srv, pages = changing_metrics
    pages.extend(
        [
            _vllm_page(10, 0, 0.40, 5),
            _vllm_page(20, 4, 0.90, 5),
            _vllm_page(30, 8, 0.99, 9),
            _vllm_page(30, 0, 0.95, 12),
        ]
    )
    scraper = MetricsScraper(srv.url + "/v1", interval_s=3600)  # only start and stop scrape
    await scraper.start()
    await scraper.scrape_once()
    await scraper.scrape_once()
    metrics = await scraper.stop()
    assert metrics.scrapes == 4
    assert metrics.running_mean == pytest.approx(22.5)
    assert metrics.waiting_mean == pytest.approx(3.0)
    assert metrics.waiting_max == 8
    assert metrics.kv_usage_max_pct == pytest.approx(99.0)
    assert metrics.preemptions == 7  # 12 − 5 over the window, not the counter's total


async def test_scraper_without_metrics_endpoint_records_no_scrapes() -> None:
    with ScriptedServer({}) as srv:
        scraper = MetricsScraper(srv.url, interval_s=3600)
        await scraper.start()
        metrics = await scraper.stop()
    assert metrics.scrapes == 0 and scraper.failed == 2
    assert scraper.last_error == "ValueError: HTTP 404"
    assert metrics.running_mean is None and metrics.preemptions is None


def test_counter_reset_counts_from_zero() -> None:
    scrapes = [
        Scrape(float(i), None, None, None, v) for i, v in enumerate([100.0, 104.0, 3.0, 5.0])
    ]
    assert summarize_scrapes(scrapes).preemptions == 4 + 3 + 2


def test_older_vllm_gpu_cache_usage_name_is_read() -> None:
    text = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.5\n"
    assert reduce_families(parse_metrics_text(text), 0.0).kv_usage_frac == 0.5


def test_garbage_metrics_text_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_metrics_text("this is { not prometheus\n")


SEED_LOG = """\
INFO 09-30 12:00:01 [core.py:75] Initializing a V1 LLM engine (v0.31.0)
WARNING 09-30 12:00:09 [kv_cache.py:164] Using KV cache scaling factor 1.0 for fp8_e4m3. \
If this is unintended, verify that k/v_scale scaling factors are properly set in the checkpoint.
WARNING 09-30 12:00:09 [kv_cache.py:202] Using uncalibrated q_scale 1.0 and/or prob_scale 1.0 \
with fp8 attention. This may cause accuracy issues.
INFO 09-30 12:05:00 [loggers.py:310] Engine 000: Avg prompt throughput: 1.0 tokens/s, \
Running: 145 reqs, Waiting: 0 reqs, Preemptions: 0, GPU KV cache usage: 51.0%
INFO 09-30 12:05:10 [loggers.py:310] Engine 000: Avg prompt throughput: 1.0 tokens/s, \
Running: 160 reqs, Waiting: 12 reqs, Preemptions: 3, GPU KV cache usage: 99.6%
INFO 09-30 12:05:20 [loggers.py:310] Engine 000: Running: 160 reqs, Preemptions: 14
[2026-09-13 16:06:07] KV cache pool is full. Retract requests. #retracted_reqs: 1
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB
"""


def test_log_scan_finds_the_seed_warnings(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(SEED_LOG)
    found = scan_engine_log(log)
    assert [f.split(" (")[0] for f in found] == [
        "uncalibrated FP8 KV-cache scale",
        "uncalibrated FP8 attention scales",
        "requests preempted",
        "requests retracted: KV cache full",
        "out of memory",
    ]
    assert "(2×)" in found[2]  # "Preemptions: 0" is no warning
    assert "Using KV cache scaling factor 1.0 for fp8_e4m3" in found[0]


def test_log_scan_finds_llamacpp_warnings(tmp_path: Path) -> None:
    log = tmp_path / "llama.log"
    log.write_text(
        "srv  update_slots: failed to find free space in the KV cache, retrying with "
        "smaller batch size, off = 0, n_batch = 512, ret = 1\n"
        "slot launch_slot_: request (9000 tokens) exceeds the available context size "
        "(2048 tokens), try increasing it\n"
    )
    found = scan_engine_log(log)
    assert [f.split(" (")[0] for f in found] == ["KV cache full", "request longer than the context"]


def test_log_scan_of_a_clean_log_is_empty(tmp_path: Path) -> None:
    log = tmp_path / "clean.log"
    log.write_text("INFO all good\nPreemptions: 0\n")
    assert scan_engine_log(log) == []


def test_log_scan_of_a_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    with pytest.raises(InputError, match=r"nope\.log: cannot read the engine log"):
        scan_engine_log(missing)


def test_a_key_in_a_matching_log_line_is_scrubbed(tmp_path: Path) -> None:
    """An engine may log its own command line, key included, on the line a rule matches."""
    log = tmp_path / "vllm.log"
    log.write_text(
        "WARNING 09-30 12:00:01 args: --api-key sk-live-0123456789abcdefXYZ "
        "torch.OutOfMemoryError: CUDA out of memory (Authorization: Bearer abcdef123456)\n"
    )
    (found,) = scan_engine_log(log)
    assert found.startswith("out of memory (1×): ")
    assert "sk-live-0123456789abcdefXYZ" not in found and "abcdef123456" not in found
    assert "[redacted]" in found


def test_the_runs_own_key_is_scrubbed_from_a_log_line_of_any_shape(tmp_path: Path) -> None:
    """A key of no known shape after no secret-like name is removed as the exact value."""
    log = tmp_path / "engine.log"
    log.write_text("ERROR CUDA out of memory while serving client q7Wz-plainlooking-2291\n")
    (found,) = scan_engine_log(log, ["q7Wz-plainlooking-2291"])
    assert found == "out of memory (1×): ERROR CUDA out of memory while serving client [redacted]"


def test_a_version_answer_alone_does_not_name_vllm() -> None:
    # Any server may answer /version with {"version": ...}; without vLLM's owner or its
    # metric names the engine stays unknown.
    routes = {"/v1/models": _models("someone"), "/version": _json({"version": "1.2.3"})}
    with ScriptedServer(routes) as srv:
        info = probe_engine(srv.url, None)
    assert info.engine_name is None and info.engine_version is None


def test_the_simulated_engine_is_named_as_itself_not_vllm() -> None:
    # The simulator's own answers: owner tokenwatt-sim, vLLM-shaped /version and metrics.
    metrics = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
    routes = {
        "/v1/models": _models("tokenwatt-sim", 1280),
        "/version": _json({"version": "tokenwatt-sim 0.1.0", "profile": "bf16-kv"}),
        "/metrics": _text(metrics),
    }
    with ScriptedServer(routes) as srv:
        info = probe_engine(srv.url, None)
    assert (info.engine_name, info.engine_version) == ("tokenwatt-sim", "tokenwatt-sim 0.1.0")


@pytest.fixture
def dripping_models() -> Iterator[str]:
    """A raw HTTP server whose /v1/models answer comes one byte every 0.2 s (8 s in all):
    every single read is quick, the answer is not."""
    import socket
    import threading

    body = b'{"object":"list","data":[{"id":"m"}]}'
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n"
            try:
                conn.sendall(head.encode())
                for byte in body:
                    if done.wait(0.2):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        done.set()
        listener.close()
        thread.join(timeout=5)
        assert not thread.is_alive()


def test_a_dripping_answer_is_cut_at_the_requests_deadline(dripping_models: str) -> None:
    """Each read comes within 0.2 s, far inside the 1 s limit: only a deadline for the whole
    request stops it (the probe used to wait the 8 s out and succeed)."""
    with pytest.raises(EngineError, match=r"no complete answer within 1 s \(\d+ bytes\)"):
        probe_engine(dripping_models, None, timeout_s=1.0)


@pytest.mark.parametrize(
    ("n_vocab", "ftype", "vocab", "weights"),
    [
        (151936, "BF16", 151936, "BF16"),
        ("32000", "Q4_K - Medium", 32000, "Q4_K - Medium"),
        (0, None, None, None),
        (-5, 7, None, None),
        (True, "", None, None),
        (1 << 30, "F16\x1b[2J", None, "F16\\x1b[2J"),
        (5, None, None, None),  # below the 11 a spec takes
        ("\u00b2", None, None, None),  # a digit to str.isdigit, not to int()
        ("\u0661\u0662\u0663\u0664\u0665", None, None, None),  # Arabic-Indic digits
        ("9" * 5000, None, None, None),
    ],
)
def test_llamacpp_meta_gives_the_vocabulary_and_weight_type_or_a_note(
    n_vocab: object, ftype: object, vocab: int | None, weights: str | None
) -> None:
    meta: dict[str, object] = {"n_vocab": n_vocab, "n_ctx_train": 4096}
    if ftype is not None:
        meta["ftype"] = ftype
    entry = {"id": "m", "object": "model", "owned_by": "llamacpp", "meta": meta}
    with ScriptedServer({"/v1/models": _json({"data": [entry]})}) as srv:
        info = probe_engine(srv.url, None)
    assert info.vocab_size == vocab
    assert info.vocab_source == ("/v1/models meta.n_vocab" if vocab else None)
    assert info.weight_format == weights
    if vocab is None:
        assert any("meta.n_vocab is" in n and "not a vocabulary size" in n for n in info.notes)
