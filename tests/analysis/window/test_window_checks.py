"""Per-window checks (pure): cancellations and error samples, served vs asked and its
threshold, the sustained rule, first content token, E2E of timeouts, tokens per chunk."""

from __future__ import annotations

import numpy as np
import pytest

from tokenwatt.analysis.window.errors import error_samples
from tokenwatt.analysis.window.latency import e2e_ms, summarise_window, ttfc_ms
from tokenwatt.analysis.window.window_checks import sustained_check
from tokenwatt.records.run.request import RequestResult
from tokenwatt.records.spec.spec import SloSpec

SLO = SloSpec(ttft_p99_ms=100, tpot_p99_ms=20)
LENIENT = SloSpec(ttft_p99_ms=1e6, tpot_p99_ms=1e6)


def done(
    at: float, latency: float = 0.05, tokens: int = 4, wait: float = 0.0, **kw: object
) -> RequestResult:
    """A finished request scheduled at ``at`` s, first token 10 ms after a ``wait`` (s),
    ending ``latency`` s after ``at``, its tokens one per chunk."""
    first = at + wait + 0.01
    chunks = list(np.linspace(first, at + latency, tokens))
    fields: dict[str, object] = {
        "scheduled_s": at,
        "sent_s": at,
        "dispatched_s": at,
        "first_token_s": first,
        "chunk_s": chunks,
        "last_token_s": chunks[-1],
        "prompt_tokens": 3,
        "output_tokens": tokens,
        "status": 200,
        "finished_s": at + latency,
        "max_tokens": tokens,
        "ignore_eos": True,
        "prompt_ids_sent": 3,
    }
    fields.update(kw)
    return RequestResult(**fields)  # type: ignore[arg-type]


def test_cancelled_requests_are_not_errors_but_misses_in_percentiles() -> None:
    requests = [done(i * 0.01) for i in range(10)]
    requests += [RequestResult(scheduled_s=0.2, sent_s=0.2, error="cancelled", finished_s=0.3)]
    requests += [
        RequestResult(
            scheduled_s=0.21,
            sent_s=0.21,
            error="http_503",
            status=503,
            error_class="ClientResponseError",
            error_message="Service Unavailable",
            error_body='{"error": "overloaded"}',
            transport_retries=1,
            finished_s=0.22,
        )
    ]
    s = summarise_window(requests, rate_rps=10, duration_s=1, slo=LENIENT, stopped_early=True)
    assert (s.requests, s.completed, s.errors, s.cancelled_by_client) == (12, 10, 1, 1)
    assert s.error_kinds == {"http_503": 1}
    assert list(s.error_samples) == ["http_503"]
    sample = s.error_samples["http_503"][0]
    assert (sample.exception, sample.message, sample.status, sample.body) == (
        "ClientResponseError",
        "Service Unavailable",
        503,
        '{"error": "overloaded"}',
    )
    assert s.transport_retries == 1
    # All 12 count in the percentiles: the failure and the cancelled one are the slowest.
    assert s.ttft_ms.p99 == "inf" and s.ttft_ms.p50 == pytest.approx(10.0)
    assert s.slo_attainment_pct == pytest.approx(100 * 10 / 12, abs=1e-3)
    assert s.cancelled_policy == "miss"


def test_an_early_stopped_window_agrees_with_itself() -> None:
    """49 requests, 2 finished within the 400 ms TTFT limit and 47 cancelled by the early
    stop: the percentiles and attainment count the 47 as misses, not as absent."""
    slo = SloSpec(ttft_p99_ms=400, tpot_p99_ms=1e6)
    requests = [done(0.0, wait=0.0735), done(0.1, wait=0.0935)]  # TTFT 83.5 and 103.5 ms
    requests += [
        RequestResult(scheduled_s=0.2 + 0.01 * i, sent_s=0.2 + 0.01 * i, error="cancelled")
        for i in range(47)
    ]
    s = summarise_window(requests, rate_rps=10, duration_s=1, slo=slo, stopped_early=True)
    assert (s.requests, s.completed, s.errors, s.cancelled_by_client) == (49, 2, 0, 47)
    assert s.slo_attainment_pct == pytest.approx(100 * 2 / 49, abs=1e-4)
    # 47 of 49 infinite: from rank 2 of 0..48 on every percentile is infinite.
    assert (s.ttft_ms.p50, s.ttft_ms.p90, s.ttft_ms.p99) == ("inf", "inf", "inf")
    assert (s.e2e_ms.p50, s.tpot_ms.p99) == ("inf", "inf")
    # Which limit the evidence missed is the collector's reading, not the cancellations'.
    assert not s.slo_pass and s.failure_reason == "stopped_early"
    assert s.errors == 0 and s.error_kinds == {}


def test_error_samples_keep_a_few_per_kind_in_order() -> None:
    requests = [
        RequestResult(scheduled_s=i, error="timeout" if i % 2 else "connect", error_message=str(i))
        for i in range(10)
    ]
    samples = error_samples(requests, per_kind=2)
    assert {k: [x.message for x in v] for k, v in samples.items()} == {
        "connect": ["0", "2"],
        "timeout": ["1", "3"],
    }
    with pytest.raises(ValueError, match="per_kind"):
        error_samples(requests, per_kind=0)


def test_one_mismatch_in_101_is_absorbed_two_are_not() -> None:
    good = [done(i * 0.01) for i in range(99)]
    one = [*good, done(1.0), done(1.01, output_tokens=3)]  # served 3 of 4 asked
    s = summarise_window(one, rate_rps=100, duration_s=1.01, slo=LENIENT)
    assert (s.short_outputs, s.valid, s.slo_pass) == (1, True, True)
    assert any("ignore_eos" in w for w in s.warnings)
    two = [*good, done(1.0, prompt_tokens=2), done(1.01, output_tokens=5)]
    s = summarise_window(two, rate_rps=100, duration_s=1.01, slo=LENIENT)
    assert (s.prompt_mismatches, s.long_outputs, s.valid, s.slo_pass) == (1, 1, False, False)
    assert s.failure_reason == "served_mismatch"


def test_short_outputs_are_only_judged_under_ignore_eos_and_with_usage() -> None:
    requests = [
        done(0.0, output_tokens=2, ignore_eos=False),  # stopping early was allowed
        done(0.01, output_tokens=2, usage_missing=True),  # client-counted: not judged
    ]
    s = summarise_window(requests, rate_rps=2, duration_s=1, slo=LENIENT)
    assert (s.short_outputs, s.long_outputs, s.valid) == (0, 0, True)


def test_client_counted_outputs_far_short_of_an_exact_max_tokens_are_warned_not_judged() -> None:
    # A server that streams 2 chunks for max_tokens 16 under ignore_eos, with no usage.
    def asked_16(at: float, got: int, **kw: object) -> RequestResult:
        return done(at, tokens=got, max_tokens=16, usage_missing=True, **kw)

    requests = [
        asked_16(0.0, 2),
        asked_16(0.01, 7),
        asked_16(0.02, 8),
        asked_16(0.03, 2, ignore_eos=False),
    ]
    s = summarise_window(requests, rate_rps=4, duration_s=1, slo=LENIENT)
    assert (s.short_outputs, s.valid, s.slo_pass) == (0, True, True)  # not judged
    (said,) = [w for w in s.warnings if "may stop early" in w]
    # 2 and 7 are under half of 16; 8 is not; the one without ignore_eos may stop.
    assert said.startswith("2 of 4 requests without usage got, by the client's count, under 50%")


def test_sustained_rule_on_a_growing_queue_and_a_steady_one() -> None:
    rng = np.random.default_rng(1)
    arrivals = np.sort(rng.uniform(0, 10, 200))  # 20 req/s for 10 s
    # Steady: latency varies 0.1-2 s (long and short outputs) but does not grow.
    steady = [done(float(a), latency=float(rng.uniform(0.1, 2.0))) for a in arrivals]
    check = sustained_check(steady, stopped_early=False)
    assert check.sustained is True and check.start_ratio == pytest.approx(1.0, abs=0.05)
    # A batch filling after the warm-up: decode slows through the window, first tokens
    # stay on time. Completions lag (a transient), but the server keeps up.
    filling = [done(float(a), latency=0.5 + 0.1 * float(a)) for a in arrivals]
    check = sustained_check(filling, stopped_early=False)
    assert check.completion_ratio is not None and check.completion_ratio < 0.95
    assert check.sustained is True and check.start_ratio == pytest.approx(1.0)
    # A server that completes 5 req/s, first come first served: the queue grows throughout.
    finish, backlog = 0.0, []
    for a in arrivals:
        start = max(finish, float(a))
        finish = start + 0.2
        backlog.append(done(float(a), latency=finish - float(a), wait=start - float(a)))
    check = sustained_check(backlog, stopped_early=False)
    assert check.sustained is False and check.start_ratio == pytest.approx(0.25, abs=0.03)
    assert check.completion_ratio == pytest.approx(0.25, abs=0.03)
    assert check.drain_s == pytest.approx(finish - float(arrivals[-1]), abs=1e-3)
    s = summarise_window(backlog, rate_rps=20, duration_s=10, slo=LENIENT)
    assert s.failure_reason == "not_sustained" and not s.valid and s.sustained is False


def test_too_few_or_stopped_windows_are_not_judged() -> None:
    few = [done(i * 0.1, latency=0.05 + i, wait=float(i)) for i in range(19)]
    assert sustained_check(few, stopped_early=False).sustained is None
    many = [done(i * 0.1, latency=0.05 + 0.08 * i, wait=0.08 * i) for i in range(40)]
    assert sustained_check(many, stopped_early=True).sustained is None
    assert sustained_check(many, stopped_early=False).sustained is False


def test_windows_shorter_than_ten_service_times_are_not_judged() -> None:
    """A 2 s window of 2 s requests cannot tell a backlog from a batch still filling up."""
    rng = np.random.default_rng(2)
    arrivals = np.sort(rng.uniform(0, 2, 40))
    growing = [done(float(a), latency=1.5 + 0.3 * float(a), wait=0.2 * float(a)) for a in arrivals]
    check = sustained_check(growing, stopped_early=False)
    assert check.sustained is None and check.start_ratio is None
    # The same growth over 60 s of the same requests is judged, and is a backlog.
    arrivals = np.sort(rng.uniform(0, 60, 400))
    growing = [done(float(a), latency=1.5 + 0.3 * float(a), wait=0.2 * float(a)) for a in arrivals]
    assert sustained_check(growing, stopped_early=False).sustained is False


def test_first_content_token_and_timeouts_e2e() -> None:
    plain = done(0.0)
    assert ttfc_ms(plain) == pytest.approx(10.0)  # no reasoning: the first token
    thinking = done(0.0, reasoning=True, first_content_s=0.04)
    assert ttfc_ms(thinking) == pytest.approx(40.0)
    never = done(0.0, reasoning=True)  # spent its tokens thinking, no content
    assert ttfc_ms(never) == float("inf")
    timed_out = RequestResult(scheduled_s=1.0, sent_s=1.0, error="timeout", finished_s=31.0)
    assert e2e_ms(timed_out) == pytest.approx(30_000.0)
    refused = RequestResult(scheduled_s=1.0, sent_s=1.0, error="http_503", finished_s=1.001)
    assert e2e_ms(refused) == float("inf")
    # E2E ends at the stream's end, not the last token.
    assert e2e_ms(done(0.0, finished_s=0.5)) == pytest.approx(500.0)


def test_tokens_per_chunk_and_per_token_itl() -> None:
    # Four chunks 10 ms apart carrying 8 tokens (usage): 2 tokens a chunk, 5 ms a token.
    r = done(0.0, tokens=4, output_tokens=8, max_tokens=8)
    r.chunk_s = [0.01, 0.02, 0.03, 0.04]
    r.last_token_s = 0.04
    s = summarise_window([r], rate_rps=1, duration_s=1, slo=LENIENT)
    assert s.tokens_per_chunk.p50 == s.tokens_per_chunk.mean == 2.0
    assert s.itl_ms.p50 == pytest.approx(10.0)
    assert s.itl_per_token_ms.p50 == pytest.approx(5.0)
    assert s.tpot_ms.p50 == round(30 / 7, 4)  # (40 − 10) ms over 7 gaps between 8 tokens


def test_slot_wait_is_reported_beside_send_lag() -> None:
    requests = [done(i * 0.01) for i in range(50)]
    for r in requests[-5:]:
        r.sent_s = r.dispatched_s + 0.2  # type: ignore[operator]
    s = summarise_window(requests, rate_rps=50, duration_s=1, slo=LENIENT)
    assert s.concurrency_capped and s.slot_wait_p99_ms == pytest.approx(200.0)
    assert s.send_lag_p99_ms == 0.0
    assert any(w.startswith("concurrency-capped") for w in s.warnings)
    s = summarise_window(requests[:-5], rate_rps=50, duration_s=1, slo=LENIENT)
    assert not s.concurrency_capped and s.slot_wait_p99_ms == 0.0


def test_sustained_note_counts_the_unjudged_windows_and_says_how_long_to_make_them() -> None:
    """On screen after a run: windows whose keep-up check was not judged, by reason; a
    stopped-early window is left out (its verdict is already a miss)."""
    from tests.runs_factory import make_run
    from tokenwatt.analysis import sustained_note
    from tokenwatt.records.run.window import Percentiles

    run = make_run()
    windows = [p.window for p in run.probes] + [r.window for r in run.repeats]
    for w in windows:
        w.sustained = True
    assert sustained_note(run) is None
    # Two spanned too few service times (E2E p50 1.1 s and 1.25 s), one had 12 requests,
    # one stopped early.
    windows[0].sustained = None
    windows[0].e2e_ms = Percentiles(p50=1100.0, p90=1200.0, p99=1300.0)
    windows[1].sustained = None
    windows[1].e2e_ms = Percentiles(p50=1250.0, p90=1400.0, p99=1500.0)
    windows[2].sustained, windows[2].completed = None, 12
    windows[3].sustained, windows[3].stopped_early = None, True
    assert sustained_note(run) == (
        f"keep-up check not judged in 3 of {len(windows)} windows: 2 spanned under 10 service "
        # 10 × 1.25 s × 1.1 = 13.75 s, rounded up
        "times; E2E p50 up to 1.2 s, so windows of about 14 s or more are judged; 1 had fewer "
        "than 20 finished requests (their verdicts rest on the SLO alone)"
    )
