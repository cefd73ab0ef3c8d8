"""The words for what went wrong in a run (tokenwatt.analysis.report.run_warnings): the server's
message out of an error body, the client-bound warning and the advice that follows it."""

from __future__ import annotations

import pytest

from tests.runs_factory import make_run, seed_spec
from tokenwatt.analysis import (
    client_bound_advice,
    client_bound_warning,
    error_notes,
    server_said,
    window_warnings,
)
from tokenwatt.records import RETRIED_PREFIX, ErrorSample, RunRecord, WorkerLag
from tokenwatt.text import terminal_safe


def _sample(body: str | None, message: str | None = "HTTP 400 Bad Request") -> ErrorSample:
    return ErrorSample(kind="http_400", status=400, message=message, body=body)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        # llama.cpp's server, OpenAI and newer vLLM
        (
            '{"error":{"code":400,"message":"Prompt contains invalid tokens",'
            '"type":"invalid_request_error"}}',
            "Prompt contains invalid tokens",
        ),
        # older vLLM
        (
            '{"object":"error","message":"max_tokens is too large","type":"BadRequestError"}',
            "max_tokens is too large",
        ),
        ('{"detail":"Not Found"}', "Not Found"),  # FastAPI
        ('{"error":"model not loaded"}', "model not loaded"),
        # a body the record cut at 512 characters: not JSON any more, its message still read
        ('{"error":{"message":"context \\"too\\" long","pad":"' + "x" * 600, 'context "too" long'),
        # ... and a message cut inside itself: what is left of it, not the client's words
        ('{"error":{"message":"' + "A" * 600 + "…", "A" * 199 + "…"),
        # FastAPI's validation errors: the first one's msg
        (
            '{"detail":[{"loc":["body","n"],"msg":"field required","type":"missing"}]}',
            "field required",
        ),
        ('[{"message":"in an array"}]', "in an array"),
        ("[ERROR] model not loaded\ntrace", "[ERROR] model not loaded"),  # text, not JSON
        ("<html>\n<h1>502 Bad Gateway</h1>", "<html>"),
        ("upstream timed out\nmore", "upstream timed out"),
        # JSON without a message: the client's words
        ('{"code":400}', "HTTP 400 Bad Request"),
        ("[1, 2]", "HTTP 400 Bad Request"),
        (None, "HTTP 400 Bad Request"),
    ],
)
def test_what_the_server_said_comes_out_of_its_error_body(body: str | None, said: str) -> None:
    assert server_said(_sample(body)) == said


def test_what_the_server_said_is_one_capped_line_escaped_where_it_is_printed() -> None:
    body = '{"error":{"message":"bad \\u001b[2J token\\n\\tnext ' + "y" * 300 + '"}}'
    said = server_said(_sample(body))
    assert said.startswith("bad \x1b[2J token next yyy")
    assert len(said) == 200 and said.endswith("…")
    assert terminal_safe(said).startswith("bad \\x1b[2J token next")
    assert server_said(_sample(None, message=None)) == "http_400"


def _run(*, lag: float, bound: bool, workers: int = 1, engine_local: bool = True) -> RunRecord:
    endpoint = "http://127.0.0.1:8000/v1" if engine_local else "http://gpu-box:8000/v1"
    spec = seed_spec(engine={"endpoint": endpoint})
    run = make_run(spec=spec)
    w = run.repeats[0].window
    w.send_lag_p99_ms, w.client_bound, w.workers = lag, bound, workers
    if workers > 1:
        w.worker_lag = [
            WorkerLag(worker=k, requests=10, send_lag_p99_ms=lag if k else 1.0, client_bound=k > 0)
            for k in range(workers)
        ]
    return run


def test_the_client_bound_warning_names_the_lag_and_the_late_workers() -> None:
    run = _run(lag=13.83, bound=True, workers=3)
    warning = client_bound_warning(run.repeats[0].window)
    assert warning is not None
    assert warning.startswith(
        "client-bound: send-lag p99 13.8 ms, above the 10 ms mark (workers 1, 2 over the mark): "
    )
    assert client_bound_warning(_run(lag=9.0, bound=False).repeats[0].window) is None


def test_a_miss_already_retried_for_the_clients_lag_is_not_warned_twice() -> None:
    run = _run(lag=80.0, bound=True)
    w = run.repeats[0].window
    w.slo_pass, w.failure_reason = False, f"{RETRIED_PREFIX} (send-lag p99 80 ms), measured again"
    assert client_bound_warning(w) is None
    assert not [x for _, x in window_warnings(run) if x.startswith("client-bound")]


def test_an_old_record_without_the_warning_gets_it_once() -> None:
    run = _run(lag=13.83, bound=True)
    labelled = [(label, x) for label, x in window_warnings(run) if x.startswith("client-bound")]
    assert len(labelled) == 1 and labelled[0][0] == "#6 repeat 1 of 2 at 9 req/s"
    run.repeats[0].window.warnings.append(labelled[0][1])
    assert len([x for _, x in window_warnings(run) if x.startswith("client-bound")]) == 1


HEAD = "1 of 7 windows were client-bound (send-lag p99 up to 13.8 ms, "


@pytest.mark.parametrize(
    ("workers", "cores", "local", "tail"),
    [
        # 8 cores, engine here: 8 - 1 (the parent) - 1 (the engine) = 6 workers fit
        (
            1,
            8,
            True,
            "1 load-generator process): give it more processes (--workers 6: the cores free "
            "beside the engine) or measure fewer or lower rates",
        ),
        (
            2,
            8,
            False,
            "2 load-generator processes): give it more processes (--workers 7: the cores free) "
            "or measure fewer or lower rates",
        ),
        # 2 cores, engine here: the one process and the engine fill them
        (
            1,
            2,
            True,
            "1 load-generator process): no core is free beside the engine for another worker "
            "(2 cores); measure fewer or lower rates, or send from another host (--ray-address)",
        ),
        # 2 workers + their parent + the engine on 2 cores
        (
            2,
            2,
            True,
            "2 load-generator processes): this machine is oversubscribed: 2 workers, the "
            "collector and the engine share 2 cores, so more workers cannot help; use "
            "--workers 1 or fewer, measure fewer or lower rates, or send from another host "
            "(--ray-address)",
        ),
        # one worker and the engine on one core (taskset -c 0): no fewer workers to suggest
        (
            1,
            1,
            True,
            "1 load-generator process): this machine is oversubscribed: 1 worker, the "
            "collector and the engine share 1 core, so more workers cannot help; measure "
            "fewer or lower rates, or send from another host (--ray-address)",
        ),
        # show on another machine: the cores are not known
        (
            1,
            None,
            True,
            "1 load-generator process): give the load generator more processes (--workers N) "
            "or measure fewer or lower rates",
        ),
    ],
)
def test_the_advice_counts_the_cores_beside_a_local_engine(
    workers: int, cores: int | None, local: bool, tail: str
) -> None:
    run = _run(lag=13.83, bound=True, workers=workers, engine_local=local)
    assert client_bound_advice(run, cores) == HEAD + tail
    assert client_bound_advice(_run(lag=3.0, bound=False), cores) is None


def test_error_notes_say_whose_words_they_quote() -> None:
    # A body came: the server's words. None came (a stall): the client's own.
    run = make_run()
    refused, stalled = run.repeats[0].window, run.repeats[1].window
    refused.errors, refused.error_kinds = 2, {"http_400": 2}
    refused.error_samples = {
        "http_400": [ErrorSample(kind="http_400", status=400, body='{"message": "bad ids"}')]
    }
    stalled.errors, stalled.error_kinds = 3, {"timeout": 3}
    words = "no end of stream within the 3 s request timeout"
    stalled.error_samples = {"timeout": [ErrorSample(kind="timeout", message=words)]}
    notes = error_notes(run)
    assert len(notes) == 2
    assert notes[0].endswith("http_400 in 2 of 1080 requests; the server said: bad ids")
    assert notes[1].endswith(f"timeout in 3 of 1080 requests; the client saw: {words}")
