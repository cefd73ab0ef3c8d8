"""The one sentence that says why a result rate is where it is: every case, exact words."""

from __future__ import annotations

from typing import Any

import pytest

from tests.runs_factory import make_run, tuned_run, window
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.analysis.window.search_story import (
    SearchStory,
    explain_config,
    explain_result,
    explain_run,
)
from tokenwatt.analysis.window.search_windows import search_windows
from tokenwatt.records.report.report_v3 import SearchWindowV3
from tokenwatt.records.run.run import Repeat
from tokenwatt.records.run.run_input import RunInput

STORY = SearchStory(ttft_limit_ms=500.0, tpot_limit_ms=50.0, repeats_planned=2)
STOPPED = SearchStory(
    ttft_limit_ms=500.0,
    tpot_limit_ms=50.0,
    repeats_planned=2,
    complete=False,
    incomplete_reason="interrupted (Ctrl-C); everything measured so far is kept",
)
MIGRATED = SearchStory(ttft_limit_ms=500.0, tpot_limit_ms=50.0, whole=False)


def probe(rate: float, ok: bool, **kw: Any) -> SearchWindowV3:
    kw.setdefault("ttft_p99_ms", 300.0 if ok else 812.0)
    kw.setdefault("tpot_p99_ms", 40.0)
    kw.setdefault("failure_reason", None if ok else "queueing/KV-bound (ttft)")
    return SearchWindowV3(step="probe", phase="grow", rate_rps=rate, slo_pass=ok, **kw)


def repeat(rate: float, ok: bool, backoff: int | None = 0, **kw: Any) -> SearchWindowV3:
    kw.setdefault("ttft_p99_ms", 320.0 if ok else 530.0)
    kw.setdefault("tpot_p99_ms", 41.0)
    kw.setdefault("failure_reason", None if ok else "ttft")
    return SearchWindowV3(step="repeat", backoff=backoff, rate_rps=rate, slo_pass=ok, **kw)


SEARCH_45 = [probe(30.0, True), probe(45.0, True), probe(60.0, False), probe(48.0, False)]


CASES = [
    pytest.param(
        [*SEARCH_45, repeat(45.0, True), repeat(45.0, True)],
        STORY,
        "The search found 45 req/s, below a probe at 48 req/s (#4) that missed p99 TTFT "
        "(812 ms > 500 ms), and both repeats there met the SLO.",
        id="found-and-both-repeats-met",
    ),
    pytest.param(
        [probe(1.0, True), probe(2.0, True), repeat(2.0, True), repeat(2.0, True), repeat(2, True)],
        SearchStory(ttft_limit_ms=500.0, tpot_limit_ms=50.0, repeats_planned=3),
        "The search found 2 req/s, the highest rate it probed (no probe missed, so the SLO "
        "boundary lies higher and this goodput is a lower bound), and all 3 repeats there met "
        "the SLO.",
        id="nothing-above-missed-three-repeats",
    ),
    pytest.param(
        [
            probe(1.0, True),
            probe(
                2.0, False, failure_reason="tpot", tpot_p99_ms=55.25
            ),  # half up: 55.3, as the table
            repeat(1.0, True),
        ],
        SearchStory(ttft_limit_ms=500.0, tpot_limit_ms=50.0, repeats_planned=1),
        "The search found 1 req/s, below a probe at 2 req/s (#2) that missed p99 TPOT "
        "(55.3 ms > 50 ms), and the one repeat there met the SLO.",
        id="one-repeat",
    ),
    pytest.param(
        [*SEARCH_45, repeat(45.0, False), repeat(38.25, True, 1), repeat(38.25, True, 1)],
        STORY,
        "The search found 45 req/s, but the first repeat there (#5) missed p99 TTFT "
        "(530 ms > 500 ms); backed off to 38.25 req/s, which met the SLO in 2 of 2 repeats.",
        id="one-back-off",
    ),
    pytest.param(
        [
            *SEARCH_45,
            repeat(45.0, True),
            repeat(45.0, False),
            repeat(
                38.25,
                False,
                1,
                failure_reason="errors",
                requests=4590,
                errors=3,
                error_kinds={"timeout": 1, "connect": 2},
            ),
            repeat(32.5125, True, 2),
            repeat(32.5125, True, 2),
        ],
        STORY,
        "The search found 45 req/s, but the second repeat there (#6) missed p99 TTFT "
        "(530 ms > 500 ms); backed off to 38.25 req/s, where the first repeat (#7) had errors in "
        "3 of 4,590 requests (connect 2, timeout 1); backed off to 32.51 req/s, which met the "
        "SLO in 2 of 2 repeats.",
        id="two-back-offs-errors",
    ),
    pytest.param(
        [
            *SEARCH_45,
            repeat(45.0, False),
            repeat(38.25, False, 1, failure_reason="tpot", tpot_p99_ms=55.2, ttft_p99_ms=300.0),
        ],
        STORY,
        "The search found 45 req/s, but the first repeat there (#5) missed p99 TTFT "
        "(530 ms > 500 ms); backed off to 38.25 req/s, where the first repeat (#6) missed p99 TPOT "
        "(55.2 ms > 50 ms); no rate met the SLO in every repeat, so the result is inconclusive: "
        "the boundary did not repeat.",
        id="back-offs-ran-out",
    ),
    pytest.param(
        [
            *SEARCH_45,
            repeat(45.0, False, failure_reason="ttft,tpot", tpot_p99_ms=62.0, ttft_p99_ms=1250.0),
        ],
        STORY,
        "The search found 45 req/s, but the first repeat there (#5) missed p99 TTFT "
        "(1,250 ms > 500 ms) and p99 TPOT (62 ms > 50 ms); no rate met the SLO in every "
        "repeat, so the result is inconclusive: the boundary did not repeat.",
        id="no-back-off-allowed-both-limits",
    ),
    pytest.param(
        [
            probe(4.0, False, failure_reason="tpot", tpot_p99_ms=70.0),
            probe(1.0, False, failure_reason="per-token-latency-bound (tpot)", tpot_p99_ms=62.4),
        ],
        STORY,
        "No rate met the SLO: the lowest probe, at 1 req/s (#2), missed p99 TPOT "
        "(62.4 ms > 50 ms).",
        id="no-probe-met",
    ),
    pytest.param(
        [
            probe(
                1.0,
                False,
                failure_reason="ttft,errors",
                ttft_p99_ms="inf",
                requests=120,
                errors=5,
                error_kinds={"timeout": 5},
            )
        ],
        STORY,
        "No rate met the SLO: the lowest probe, at 1 req/s (#1), missed p99 TTFT (failed requests "
        "reached the 99th percentile) and had errors in 5 of 120 requests (timeout 5).",
        id="infinite-p99-and-errors",
    ),
    pytest.param(
        [
            probe(8.0, True),
            probe(
                16.0,
                False,
                failure_reason="queueing/KV-bound (ttft,stopped_early)",
                stopped_early=True,
                ttft_p99_ms="inf",
                tpot_p99_ms="inf",
            ),
            repeat(8.0, True),
            repeat(8.0, True),
        ],
        STORY,
        "The search found 8 req/s, below a probe at 16 req/s (#2) that missed p99 TTFT (stopped "
        "early), and both repeats there met the SLO.",
        id="early-stopped-probe-above",
    ),
    pytest.param(
        [
            *SEARCH_45,
            repeat(
                45.0,
                False,
                failure_reason="not_sustained",
                ttft_p99_ms=400.0,
                valid=False,
                invalid_reason="not sustained: 41.2 of 45 req/s completed",
            ),
            repeat(38.25, True, 1),
            repeat(38.25, True, 1),
        ],
        STORY,
        "The search found 45 req/s, but the first repeat there (#5) was invalid (not sustained: "
        "41.2 of 45 req/s completed); backed off to 38.25 req/s, which met the SLO in 2 of 2 "
        "repeats.",
        id="invalid-window",
    ),
    pytest.param(
        [probe(1.0, False, failure_reason="no_requests", ttft_p99_ms=None, tpot_p99_ms=None)],
        STORY,
        "No rate met the SLO: the lowest probe, at 1 req/s (#1), missed the SLO (no_requests).",
        id="unknown-reason",
    ),
    pytest.param(
        [
            *SEARCH_45,
            repeat(
                45.0,
                False,
                failure_reason="client-bound (send-lag p99 80 ms), measured again: ttft",
                remeasured=True,
            ),
            repeat(45.0, True),
            repeat(45.0, True),
        ],
        STORY,
        "The search found 45 req/s, below a probe at 48 req/s (#4) that missed p99 TTFT "
        "(812 ms > 500 ms), and both repeats there met the SLO.",
        id="client-lag-remeasure-left-out",
    ),
    pytest.param([], STORY, "No window of the SLO search was measured.", id="nothing"),
    pytest.param(
        [],
        STOPPED,
        "The run stopped before any window was measured (interrupted (Ctrl-C)).",
        id="stopped-before-any-window",
    ),
    pytest.param(
        [probe(2.0, False)],
        STOPPED,
        "The run stopped during the SLO search (interrupted (Ctrl-C)) before any probe met "
        "the SLO.",
        id="stopped-in-search-without-a-pass",
    ),
    pytest.param(
        [probe(2.0, True), probe(4.0, True)],
        STOPPED,
        "The run stopped during the SLO search (interrupted (Ctrl-C)); the highest probe that "
        "met the SLO was at 4 req/s (#2), and no repeat was measured.",
        id="stopped-in-search-after-a-pass",
    ),
    pytest.param(
        [*SEARCH_45, repeat(45.0, True)],
        STOPPED,
        "The search found 45 req/s, where the run stopped after 1 of 2 repeats "
        "(interrupted (Ctrl-C)), so there is no result.",
        id="stopped-during-repeats",
    ),
    pytest.param(
        [*SEARCH_45, repeat(45.0, False)],
        STOPPED,
        "The search found 45 req/s, but the first repeat there (#5) missed p99 TTFT "
        "(530 ms > 500 ms); the run stopped before backing off (interrupted (Ctrl-C)), so "
        "goodput is 0.",
        id="stopped-before-a-back-off",
    ),
    pytest.param(
        [*SEARCH_45, repeat(45.0, False), repeat(38.25, True, 1)],
        STOPPED,
        "The search found 45 req/s, but the first repeat there (#5) missed p99 TTFT "
        "(530 ms > 500 ms); backed off to 38.25 req/s, where the run stopped after 1 of 2 "
        "repeats (interrupted (Ctrl-C)), so there is no result.",
        id="stopped-during-repeats-after-a-back-off",
    ),
    pytest.param(
        [*SEARCH_45, repeat(45.0, True), repeat(45.0, True)],
        STOPPED,
        "The search found 45 req/s, below a probe at 48 req/s (#4) that missed p99 TTFT "
        "(812 ms > 500 ms), and both repeats there met the SLO; the run stopped after that "
        "(interrupted (Ctrl-C)).",
        id="stopped-after-the-result",
    ),
    pytest.param(
        [*SEARCH_45, repeat(38.25, True, None), repeat(38.25, True, None)],
        MIGRATED,
        "The search found 45 req/s; this record keeps only the repeats at 38.25 req/s "
        "(report schema 2 kept no repeat before the last back-off), which met the SLO in 2 of "
        "2 repeats.",
        id="migrated-v2-after-back-offs",
    ),
    pytest.param(
        [*SEARCH_45, repeat(45.0, True, None), repeat(45.0, True, None)],
        MIGRATED,
        "The search found 45 req/s, below a probe at 48 req/s (#4) that missed p99 TTFT "
        "(812 ms > 500 ms), and both repeats there met the SLO.",
        id="migrated-v2-at-the-found-rate",
    ),
    pytest.param(
        SEARCH_45,
        MIGRATED,
        "The search found 45 req/s, below a probe at 48 req/s (#4) that missed p99 TTFT "
        "(812 ms > 500 ms); this record keeps no repeat window.",
        id="migrated-v2-probes-only",
    ),
    pytest.param(
        [repeat(9.0, True, None), repeat(9.0, False, None)],
        MIGRATED,
        "This record keeps no probe of the SLO search; its repeats at 9 req/s met the SLO in "
        "1 of 2.",
        id="migrated-v2-repeats-only",
    ),
    pytest.param([], MIGRATED, "This record keeps no window of the SLO search.", id="seed"),
    pytest.param(
        [
            probe(3.9, True, concurrency=8, profile="concurrency"),
            probe(4.4, False, concurrency=16, profile="concurrency"),
            probe(4.2, True, concurrency=12, profile="concurrency"),
            repeat(4.21, True, concurrency=12, profile="concurrency"),
            repeat(4.19, True, concurrency=12, profile="concurrency"),
        ],
        STORY,
        # The measured rate of the 16-client probe (4.4) is not what the search varied: the
        # sentence is in clients, with each window's measured rate in brackets.
        "The search found 12 clients (4.21 req/s), below a probe at 16 clients (4.4 req/s, #2) "
        "that missed p99 TTFT (812 ms > 500 ms), and both repeats there met the SLO.",
        id="closed-loop-search-in-clients",
    ),
    pytest.param(
        [probe(3.9, False, concurrency=8, profile="concurrency")],
        STORY,
        "No load met the SLO: the lowest probe, at 8 clients (3.9 req/s, #1), missed p99 TTFT "
        "(812 ms > 500 ms).",
        id="closed-loop-none-met",
    ),
]


@pytest.mark.parametrize(("windows", "story", "expected"), CASES)
def test_sentence(windows: list[SearchWindowV3], story: SearchStory, expected: str) -> None:
    assert explain_result(windows, story) == expected


def _backed_off_run() -> Any:
    """The seed-like run whose first repeat at 9 req/s missed, backed off to 7.65 req/s."""
    run = make_run()
    missed = Repeat(
        window=window(9.0, 4400.0, ttft_p99=2350.0, tpot_p99=44.0, slo_pass=False),
        backoff=0,
    )
    missed.window.failure_reason = "queueing/KV-bound (ttft)"
    for r in run.repeats:
        r.backoff = 1
        r.window.rate_rps = 7.65
    run.repeats.insert(0, missed)
    return run


def test_run_records_tell_the_back_off() -> None:
    assert explain_run(_backed_off_run()) == (
        "The search found 9 req/s, but the first repeat there (#6) missed p99 TTFT "
        "(2,350 ms > 2,000 ms); backed off to 7.65 req/s, which met the SLO in 2 of 2 repeats."
    )
    assert explain_run(make_run()) == (
        "The search found 9 req/s, below a probe at 16 req/s (#4) that missed p99 TTFT "
        "(32,000 ms > 2,000 ms), and both repeats there met the SLO."
    )


def test_run_and_report_tell_the_same_story() -> None:
    runs = [_backed_off_run(), tuned_run()]
    inputs = [RunInput(f"runs/{r.label}.json", "a" * 64, r) for r in runs]
    report = summarise(inputs, title="t")
    for run, cfg in zip(runs, report.configs, strict=True):
        assert explain_config(cfg, report) == explain_run(run)
        assert cfg.search == search_windows(run)
