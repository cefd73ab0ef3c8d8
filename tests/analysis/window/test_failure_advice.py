"""Advice that fits the cause: a lower rate only for failures the load explains.

The pure functions of :mod:`tokenwatt.analysis.window.failure_advice` over windows built in
Python, one per cause; and the search's own warning, as :func:`slo_search` and
:func:`concurrency_search` write it, fitted to the cause (so a change of their wording
that the fitting no longer recognises fails here).
"""

from __future__ import annotations

import pytest

from tests.runs_factory import window
from tokenwatt.analysis.window.failure_advice import (
    cause_notes,
    fit_search_warning,
    kind_cause,
    run_cause,
    window_cause,
)
from tokenwatt.collect.measure.load_search import concurrency_search
from tokenwatt.collect.measure.search import ProbeOutcome, slo_search
from tokenwatt.records import WindowSummary
from tokenwatt.records.spec.spec_load import SweepSpec

ENDPOINT = "http://10.0.0.7:8000/v1"


def failed(kind: str | None, errors: int = 48, requests: int = 48) -> WindowSummary:
    """A missed window whose errors are all ``kind`` (None: no error, a latency miss)."""
    w = window(4.0, 0.0, ttft_p99=900.0, tpot_p99=20.0, slo_pass=False)
    if kind is None:
        return w
    return w.model_copy(
        update={"requests": requests, "errors": errors, "error_kinds": {kind: errors}}
    )


@pytest.mark.parametrize(
    ("kind", "cause"),
    [
        ("http_400", "refused"),
        ("http_404", "refused"),
        ("http_413", "refused"),
        ("http_401", "auth"),
        ("http_403", "auth"),
        ("http_429", "rate_limited"),
        ("http_500", "server_error"),
        ("http_503", "server_error"),
        ("protocol", "protocol"),
        ("stream_error", "protocol"),
        ("empty", "protocol"),
        ("connect", "connection"),
        ("disconnect", "connection"),
        ("timeout", "timeout"),
    ],
)
def test_each_error_kind_has_its_cause(kind: str, cause: str) -> None:
    assert kind_cause(kind) == cause
    assert window_cause(failed(kind)) == cause


def test_a_miss_without_errors_or_with_few_is_latency_and_a_pass_has_no_cause() -> None:
    assert window_cause(failed(None)) == "latency"
    # 1 error in 200 requests is within the 1% a p99 may miss: not what failed the window.
    assert window_cause(failed("http_400", errors=1, requests=200)) == "latency"
    assert window_cause(failed("http_400", errors=3, requests=200)) == "refused"
    passed = window(4.0, 100.0, ttft_p99=100.0, tpot_p99=20.0, slo_pass=True)
    assert window_cause(passed) is None
    only_cancelled = failed("cancelled")
    assert window_cause(only_cancelled) == "latency"  # our own cancellations: no cause


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("http_400", ["refused the requests (HTTP 400)", "engine.model", "vocab", "context"]),
        ("http_401", ["refused the credentials (HTTP 401)", "engine.api_key_env"]),
        ("http_500", ["failed the requests (HTTP 500)", "engine's log"]),
        ("protocol", ["not an OpenAI completion stream", "/v1", "proxy"]),
        ("connect", ["could not be reached", ENDPOINT, "engine.endpoint"]),
    ],
)
def test_a_cause_the_load_does_not_explain_gets_its_fix_not_the_rate_advice(
    kind: str, words: list[str]
) -> None:
    (note,) = cause_notes([failed(kind), failed(kind)], ENDPOINT)
    assert note.startswith("how to fix: ")
    for word in words:
        assert word in note
    assert "relax the SLO" not in note


def test_load_causes_leave_the_advice_to_the_search() -> None:
    assert cause_notes([failed(None), failed("timeout"), failed("http_429")], ENDPOINT) == []
    assert run_cause([failed("timeout")]) == ("timeout", "timeout")


def _sweep(**kw: object) -> SweepSpec:
    base: dict[str, object] = {
        "start_rps": 2.0, "growth": 2.0, "max_rps": 64.0, "bisect_steps": 3, "backoff": 0.9,
        "max_backoffs": 2,
    }  # fmt: skip
    return SweepSpec.model_validate({**base, **kw})


def _search_warnings() -> list[str]:
    """The "every probe missed" warnings the two searches write."""
    rate = slo_search(lambda _r, _p: ProbeOutcome(False), _sweep()).warnings
    clients = concurrency_search(
        lambda _r, _p: ProbeOutcome(False), _sweep(start_concurrency=1), 8
    ).warnings
    return [*rate, *clients]


@pytest.mark.parametrize("index", [0, 1])
def test_the_searchs_rate_advice_is_replaced_after_http_400_and_kept_for_latency(
    index: int,
) -> None:
    warning = _search_warnings()[index]
    assert warning.startswith("every probe missed the SLO") and "relax the SLO" in warning
    refused = fit_search_warning(warning, [failed("http_400")] * 2, ENDPOINT)
    assert "relax the SLO" not in refused and "lower sweep.start" not in refused
    assert refused.startswith(warning.split(";")[0] + "; the server refused the requests")
    assert fit_search_warning(warning, [failed(None)], ENDPOINT) == warning
    assert fit_search_warning(warning, [failed("timeout")], ENDPOINT) == warning
