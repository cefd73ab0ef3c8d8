"""Checks shared by the overload-recovery tests (real llama.cpp in ``tests/engines``, the
simulated engine in ``tests/sim``): a search started far past capacity against one started
below it, each on a freshly started engine."""

from __future__ import annotations

from tokenwatt.records import NOT_IDLE_PREFIX, RunRecord

TAIL_SLACK_S = 1.5
"""What a window's tail may run past its cap (s): the cancellation of its open requests and
the end of its last chunk on a busy 2-core machine."""


def assert_went_down(over: RunRecord, start_rps: float) -> None:
    """The overloaded search's first probe (at ``start_rps``) missed; it went down from
    there (never "0 req/s" at once), then bisected, and some probe below it passed."""
    first = over.probes[0]
    assert (first.window.rate_rps, first.window.slo_pass) == (start_rps, False)
    phases = [p.phase for p in over.probes[1:]]
    assert phases and phases[0] == "down" and set(phases) <= {"down", "bisect"}, phases
    assert any(p.window.slo_pass for p in over.probes), "no probe below the overload passed"


def assert_independent_windows(record: RunRecord) -> None:
    """Every window's tail ended by its cap (within :data:`TAIL_SLACK_S`), and every
    window whose verdict counts began on an engine proven idle by the client's count and
    ``/metrics``. A window the gate could not prove idle within its bound (a backlog that
    outlived the wait on a busy machine) has no verdict: it is invalid, says why, and the
    next window measures the same load again, after a longer wait."""
    steps = [*record.probes, *record.repeats]
    for i, step in enumerate(steps):
        window = step.window
        assert window.tail_s is not None
        cap = window.tail_cap_s if window.tail_cap_s is not None else 0.0
        assert window.tail_s <= cap + TAIL_SLACK_S, (window.rate_rps, window.tail_s, cap)
        idle = step.metrics.idle_start if step.metrics is not None else None
        assert idle is not None, window.rate_rps
        seen = (window.rate_rps, idle.proven_by, idle.note, idle.waited_s, idle.max_wait_s)
        assert idle.client_open == 0, seen
        if idle.proven_by == "client+metrics":
            continue
        assert (idle.proven_by or "").startswith("not proven"), seen
        assert not window.valid and not window.slo_pass, seen
        assert (window.failure_reason or "").startswith(NOT_IDLE_PREFIX), seen
        again = steps[i + 1].window if i + 1 < len(steps) else None
        assert again is not None and again.rate_rps == window.rate_rps, seen


def found_rate(record: RunRecord) -> float | None:
    """The result's rate (req/s), None when inconclusive (which must say why); never
    ``none_met``, as a load the clean search measures exists."""
    assert record.result is not None
    status, reason = record.result.outcome()
    assert status != "none_met", f"a load the clean search measures was called unmet: {reason}"
    if status == "inconclusive":
        assert reason, "an inconclusive result says why"
        return None
    return record.result.rate_rps


def assert_agrees(over: RunRecord, clean: RunRecord, factor: float) -> None:
    """The overloaded search's rate is within ``factor`` of the clean one's either way, or
    inconclusive with its reason; the clean search measured a rate."""
    over_rps, clean_rps = found_rate(over), found_rate(clean)
    assert clean_rps is not None, "the clean search on a fresh engine measured no rate"
    if over_rps is not None:
        assert clean_rps / factor <= over_rps <= clean_rps * factor, (over_rps, clean_rps)
