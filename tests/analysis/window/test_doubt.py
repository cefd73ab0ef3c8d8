"""A window's p99 intervals and whether its SLO verdict holds across them."""

from __future__ import annotations

import pytest

from tests.analysis.request_builders import ok
from tokenwatt.analysis.window.doubt import beyond_doubt, ci_text, p99_ci, verdict_words
from tokenwatt.analysis.window.latency import summarise_window
from tokenwatt.records.shared.interval import QuantileCI
from tokenwatt.records.spec.spec import SloSpec


def _window(n: int, ttft_limit_ms: float, *, stopped_early: bool = False) -> object:
    """n requests, 10 ms apart, TTFT 0.1, 0.2, …, n/10 ms, TPOT 10 ms (limit 20 ms)."""
    requests = [ok(at=i * 0.01, ttft_ms=(i + 1) * 0.1) for i in range(n)]
    return summarise_window(
        requests,
        rate_rps=100.0,
        duration_s=n * 0.01,
        slo=SloSpec(ttft_p99_ms=ttft_limit_ms, tpot_p99_ms=20.0),
        stopped_early=stopped_early,
    )


@pytest.mark.parametrize(
    ("limit", "slo_pass", "doubt_free", "words"),
    [
        # 1000 TTFTs 0.1..100 ms: p99 = 99.0 + 0.01 · 0.1 = 99.001 ms; its interval is the
        # 983rd and 997th values, 98.3 to 99.7 ms.
        (100.0, True, True, "pass"),
        (99.5, True, False, "pass, but not beyond doubt"),
        (99.0, False, False, "miss, but not beyond doubt"),
        (98.0, False, True, "miss"),
    ],
)
def test_verdict_against_the_interval(
    limit: float, slo_pass: bool, doubt_free: bool, words: str
) -> None:
    w = _window(1000, limit)
    assert w.ttft_ms.p99 == pytest.approx(99.001)
    ci = w.ttft_p99_ci_ms
    assert ci is not None
    assert (ci.n, ci.low_rank, ci.high_rank) == (1000, 983, 997)
    assert (ci.low_ms, ci.high_ms) == (98.3, 99.7)
    assert w.tpot_p99_ci_ms is not None and w.tpot_p99_ci_ms.high_ms == 10.0
    assert w.slo_pass is slo_pass
    assert w.slo_beyond_doubt is doubt_free
    assert verdict_words(w.slo_pass, w.slo_beyond_doubt) == words


def test_a_small_window_passes_but_never_beyond_doubt() -> None:
    w = _window(100, 1000.0)  # every TTFT far below the limit, but n = 100 < 368
    assert w.slo_pass
    ci = w.ttft_p99_ci_ms
    assert ci is not None and (ci.low_rank, ci.high_rank, ci.high_ms) == (97, None, None)
    assert w.slo_beyond_doubt is False
    assert ci_text(ci) == "9.7 ms to beyond the sample"


def test_stopped_early_keeps_no_interval_and_no_qualifier() -> None:
    w = _window(400, 1000.0, stopped_early=True)
    assert not w.slo_pass
    assert w.ttft_p99_ci_ms is None and w.tpot_p99_ci_ms is None
    assert w.slo_beyond_doubt is None
    assert verdict_words(False, None) == "miss"


def _ci(low: float | str, high: float | str | None) -> QuantileCI:
    return QuantileCI(n=1000, low_rank=983, high_rank=997, low_ms=low, high_ms=high)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("ttft", False),  # the TTFT interval reaches down to the limit
        ("ttft,errors", False),
        ("ttft_p99", False),
        ("ttft,served_mismatch", None),  # an invalid window: not a p99 question
        ("not_sustained", None),
        ("stopped_early", None),
        (None, None),
    ],
)
def test_miss_qualifier_only_for_latency_reasons(reason: str | None, expected: bool | None) -> None:
    got = beyond_doubt(
        slo_pass=False,
        failure_reason=reason,
        ttft_ci=_ci(480.0, 530.0),
        tpot_ci=_ci(10.0, 11.0),
        ttft_limit_ms=500.0,
        tpot_limit_ms=50.0,
    )
    assert got is expected


def test_a_miss_beyond_doubt_on_one_limit_is_beyond_doubt() -> None:
    got = beyond_doubt(
        slo_pass=False,
        failure_reason="ttft,tpot",
        ttft_ci=_ci(480.0, 530.0),  # straddles 500
        tpot_ci=_ci(55.0, "inf"),  # wholly above 50
        ttft_limit_ms=500.0,
        tpot_limit_ms=50.0,
    )
    assert got is True
    assert ci_text(_ci(480.0, 530.0)) == "480–530 ms"
    assert ci_text(_ci("inf", "inf")) == "∞ (failed requests)"
    assert ci_text(_ci(55.0, "inf")) == "55 ms to ∞ (a failed request)"


def test_p99_ci_of_no_values_is_none() -> None:
    assert p99_ci([]) is None


def _w(rate: float, backoff: int, slo_pass: bool, doubt: bool | None, **kw: object) -> object:
    from tokenwatt.records.report.report_v3 import SearchWindowV3

    return SearchWindowV3(
        step="repeat",
        backoff=backoff,
        rate_rps=rate,
        slo_pass=slo_pass,
        slo_beyond_doubt=doubt,
        **kw,
    )  # type: ignore[arg-type]


def test_doubt_sentence_names_the_result_repeats_in_doubt() -> None:
    from tokenwatt.analysis.window.doubt import doubt_sentence

    windows = [
        # a repeat before the back-off, in doubt: not the result's, so not named
        _w(9.0, 0, False, False, ttft_p99_ci_ms=_ci(480.0, 530.0)),
        _w(7.65, 1, True, True, ttft_p99_ci_ms=_ci(300.0, 400.0)),
        _w(7.65, 1, True, False, ttft_p99_ci_ms=_ci(450.0, None), tpot_p99_ci_ms=_ci(40.0, 52.0)),
    ]
    assert doubt_sentence(windows, 500.0, 50.0) == (  # type: ignore[arg-type]
        "Not beyond doubt: #3 repeat 2 at 7.65 req/s (back-off 1) met the SLO, but its p99 "
        "TTFT's 95% interval (450 ms to beyond the sample) reaches past the 500 ms limit and "
        "its p99 TPOT's 95% interval (40–52 ms) reaches past the 50 ms limit."
    )
    assert doubt_sentence(windows[:2], 500.0, 50.0) is None  # type: ignore[arg-type]
    missed = [_w(9.0, 0, False, False, ttft_p99_ci_ms=_ci(480.0, 530.0))]
    assert doubt_sentence(missed, 500.0, 50.0) == (  # type: ignore[arg-type]
        "Not beyond doubt: #1 repeat 1 at 9 req/s missed the SLO, but its p99 TTFT's 95% "
        "interval (480–530 ms) reaches down to the 500 ms limit."
    )


def test_short_windows_are_said_once_with_their_count_and_a_near_limit_in_full() -> None:
    """The terminal's words (``short_once``): passes in doubt only because their p99
    intervals have no upper end are one clause with their count; a bounded interval that
    straddles its limit keeps its own clause (a verdict turns on it)."""
    from tokenwatt.analysis.window.doubt import doubt_sentence

    windows = [
        _w(7.65, 0, True, False, ttft_p99_ci_ms=_ci(150.0, None), tpot_p99_ci_ms=_ci(70.0, None)),
        _w(7.65, 0, True, False, ttft_p99_ci_ms=_ci(140.0, None)),
        _w(7.65, 0, True, True, ttft_p99_ci_ms=_ci(100.0, 200.0)),
    ]
    assert doubt_sentence(windows, 400.0, 100.0, short_once=True) == (  # type: ignore[arg-type]
        "Not beyond doubt: 2 of 3 result windows (#1, #2) met the SLO, but had too few "
        "requests for their p99s' 95% intervals to have an upper end, so those reach past the "
        "limits; longer windows make these verdicts beyond doubt."
    )
    near = [*windows[:2], _w(7.65, 0, True, False, tpot_p99_ci_ms=_ci(90.0, 104.0))]
    assert doubt_sentence(near, 400.0, 100.0, short_once=True) == (  # type: ignore[arg-type]
        "Not beyond doubt: #3 repeat 3 at 7.65 req/s met the SLO, but its p99 TPOT's 95% "
        "interval (90–104 ms) reaches past the 100 ms limit; 2 of 3 result windows (#1, #2) "
        "met the SLO, but had too few requests for their p99s' 95% intervals to have an "
        "upper end, so those reach past the limits; longer windows make these verdicts "
        "beyond doubt."
    )
    # Without short_once (the page's words) each window keeps its clause.
    assert doubt_sentence(windows, 400.0, 100.0).count("beyond the sample") == 3  # type: ignore[arg-type]


def test_doubt_sentence_of_a_fixed_load_run_names_each_load() -> None:
    """A fixed-load run (``collect --rates`` / ``--concurrency``): every window is one listed
    load, stored as a repeat with back-off 0; the sentence names the load, not "repeat N"."""
    from tokenwatt.analysis.window.doubt import doubt_sentence

    open_loop = [
        _w(4.0, 0, True, True, ttft_p99_ci_ms=_ci(100.0, 200.0)),
        _w(8.0, 0, False, False, ttft_p99_ci_ms=_ci(480.0, 530.0), profile="constant"),
    ]
    assert doubt_sentence(open_loop, 500.0, 50.0, fixed=True) == (  # type: ignore[arg-type]
        "Not beyond doubt: #2 load 2: 8 req/s missed the SLO, but its p99 "
        "TTFT's 95% interval (480–530 ms) reaches down to the 500 ms limit."
    )
    closed = [
        _w(3.2, 0, True, False, concurrency=4, tpot_p99_ci_ms=_ci(45.0, 55.0)),
        _w(5.9, 0, True, True, concurrency=8, tpot_p99_ci_ms=_ci(30.0, 40.0)),
    ]
    assert doubt_sentence(closed, 500.0, 50.0, fixed=True) == (  # type: ignore[arg-type]
        "Not beyond doubt: #1 load 1: 4 clients met the SLO, but its p99 TPOT's "
        "95% interval (45–55 ms) reaches past the 50 ms limit."
    )


def test_an_invalid_window_is_not_called_an_slo_miss_in_doubt() -> None:
    """A window a dead load-generator worker cut (recorded before its doubt flag was
    cleared, as in a --workers 2 run with a worker SIGKILLed) is invalid: the story sentence
    names why; the doubt sentence must not say it "missed the SLO"."""
    from tokenwatt.analysis.window.doubt import doubt_sentence

    died = "load-generator worker 0 died mid-window (exit status -9)"
    windows = [
        _w(20.0, 0, True, False, ttft_p99_ci_ms=_ci(5.7, None)),
        _w(30.0, 0, False, False, ttft_p99_ci_ms=_ci(8.8, None), valid=False, invalid_reason=died),
    ]
    sentence = doubt_sentence(windows, 450.0, 40.0, fixed=True)  # type: ignore[arg-type]
    assert sentence == (
        "Not beyond doubt: #1 load 1: 20 req/s met the SLO, but its p99 TTFT's 95% interval "
        "(5.7 ms to beyond the sample) reaches past the 450 ms limit."
    )
