"""The idle proof before each window: no request of ours open, and the engine's own queue empty.

A window measures the engine's service of *its* load only when nothing else is running on
the engine: an overloaded window leaves a backlog (requests the engine still runs or
queues after the client has cancelled or timed out its streams), and a window that starts
on it measures the backlog. Before every window :class:`IdleGate` proves idleness with two
checks:

* **the client's count**: requests of this collector not yet ended (``finished_s`` unset),
  from the previous window's requests. The load generator gathers every task before it
  returns, so this reads 0 unless a request escaped that — always available;
* **the engine's gauges**: ``/metrics`` running + waiting at zero, polled every
  :data:`~tokenwatt.collect.measure.instruments.IDLE_POLL_S` within a bound
  (:class:`IdlePolicy`). Once ``/metrics`` has answered with those gauges in this run, a
  read that fails (an overloaded engine may not answer its ``/metrics`` within the scrape
  deadline) is retried until the bound, never taken as a skipped check.

The record says which proved it (``IdleStart.proven_by``): ``client+metrics``,
``client only: …`` (this engine's ``/metrics`` has never given running/waiting gauges in
this run, so it cannot prove anything; the reason is stated), or ``not proven: …``. A
window that started not proven idle is invalid (failure reason :data:`NOT_IDLE_TAG`, no
SLO verdict) and :class:`~tokenwatt.collect.measure.measurement.Measurement` measures it
again, at most :data:`IDLE_RETRIES` more times, each after a longer wait
(site_templates/methods/goodput.md, "An idle engine before every window").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tokenwatt.records import (
    NOT_IDLE_PREFIX,
    EngineMetrics,
    IdleStart,
    RequestResult,
    WindowSummary,
)

IDLE_WAIT_BASE_MAX_S = 30.0
"""The idle wait's base bound is ``min(request_timeout_s, 30 s)``: an engine that honours
the client's cancellations empties within one request time-out of the last request, and
30 s is long beside a probe of 15–60 s without being a stall."""
IDLE_WAIT_GROWTH = 2.0
"""The bound doubles after an overloaded window (one that missed the SLO, stopped early,
or had requests cancelled by the client or timed out) and again for every window in a row
that started not proven idle: such a backlog is made of requests the client gave up on,
which an engine may still run to their end (llama.cpp finishes a slot's generation), so it
can outlast one time-out."""
IDLE_WAIT_CAP_S = 120.0
"""The longest idle wait (s), however many doublings: four times the 30 s base. A backlog
still there after two minutes is not drained by waiting; the window is marked invalid."""
IDLE_RETRIES = 2
"""Windows measured again, at most, after one that started not proven idle (so at most
three tries); the last try's window, if still not proven, stays invalid."""
NOT_IDLE_TAG = "not_idle"
"""``failure_reason`` of a window that started not proven idle (with ``valid`` false and
an ``invalid_reason`` starting :data:`~tokenwatt.records.NOT_IDLE_PREFIX`): no SLO
verdict. Once it is measured again its failure reason starts with that prefix instead."""

PROVEN_BOTH = "client+metrics"
CLIENT_ONLY = "client only"
NOT_PROVEN = "not proven"


@dataclass(frozen=True)
class IdlePolicy:
    """How long to wait for an idle engine before a window.

    ``bound_s = min(base_s × IDLE_WAIT_GROWTH ** k, max(cap_s, base_s))`` seconds, where
    ``k`` is 1 after an overloaded window (0 otherwise) plus the windows in a row that
    started not proven idle (the constants above give the reasons).

    Attributes:
        base_s: the bound after a clean window (s): ``min(request_timeout_s, 30 s)``.
        cap_s: the most it grows to (s).
        growth: the factor per step.
    """

    base_s: float
    cap_s: float = IDLE_WAIT_CAP_S
    growth: float = IDLE_WAIT_GROWTH

    @classmethod
    def for_timeout(cls, request_timeout_s: float) -> IdlePolicy:
        """The policy of a run whose requests time out after ``request_timeout_s`` (s)."""
        return cls(base_s=min(request_timeout_s, IDLE_WAIT_BASE_MAX_S))

    def bound_s(self, *, overloaded: bool, not_proven_in_a_row: int) -> float:
        """The idle wait's bound (s) before the next window."""
        steps = int(overloaded) + max(0, not_proven_in_a_row)
        return min(self.base_s * self.growth**steps, max(self.cap_s, self.base_s))


def overloaded(summary: WindowSummary) -> bool:
    """Whether a window may have left a backlog on the engine: it missed the SLO, was
    stopped early, or had requests the client cancelled or that timed out."""
    return (
        not summary.slo_pass
        or summary.stopped_early
        or summary.cancelled_by_client > 0
        or bool({"cancelled", "timeout"} & set(summary.error_kinds))
    )


def client_open(requests: Sequence[RequestResult]) -> int:
    """Requests of a window the client has not ended (``finished_s`` unset): 0 when the
    load generator gathered every task, as it does before it returns. (A window in which a
    worker process died is counted as 0 by :meth:`IdleGate.after`: its connections closed
    with it.)"""
    return sum(1 for r in requests if r.finished_s is None)


def has_gauges(metrics: EngineMetrics | None) -> bool:
    """Whether a window's ``/metrics`` gave the running or waiting gauge."""
    return metrics is not None and (
        metrics.running_mean is not None or metrics.waiting_mean is not None
    )


class GaugeReader(Protocol):
    """What the gate needs of the instruments (:class:`~tokenwatt.collect.measure.
    instruments.Instruments`): the bounded ``/metrics`` poll."""

    def wait_idle(self, *, max_wait_s: float, persist: bool = False) -> IdleStart:
        """Poll the gauges until zero, at most ``max_wait_s`` (s); ``persist``: a failed
        read is retried until then instead of ending the check."""
        ...


class IdleGate:
    """Proves each window's engine idle before it (module docstring); one per run.

    Args:
        policy: the wait's bound.
    """

    def __init__(self, policy: IdlePolicy) -> None:
        self.policy = policy
        self.gauges_seen = False
        self.last_overloaded = False
        self.last_client_open = 0
        self.not_proven_in_a_row = 0

    def bound_s(self) -> float:
        """The bound (s) the next check waits at most."""
        return self.policy.bound_s(
            overloaded=self.last_overloaded, not_proven_in_a_row=self.not_proven_in_a_row
        )

    def check(self, gauges: GaugeReader) -> IdleStart:
        """Wait for an idle engine (at most :meth:`bound_s`, plus one scrape deadline) and
        say what proved it (``IdleStart.proven_by``)."""
        bound = self.bound_s()
        read = gauges.wait_idle(max_wait_s=bound, persist=self.gauges_seen)
        if read.idle is not None:
            self.gauges_seen = True
        proven_by = proof(read, self.last_client_open, gauges_seen=self.gauges_seen)
        self.not_proven_in_a_row = (
            self.not_proven_in_a_row + 1 if proven_by.startswith(NOT_PROVEN) else 0
        )
        return read.model_copy(
            update={
                "proven_by": proven_by,
                "client_open": self.last_client_open,
                "max_wait_s": bound,
            }
        )

    def after(
        self,
        summary: WindowSummary,
        requests: Sequence[RequestResult],
        metrics: EngineMetrics | None,
    ) -> None:
        """Remember what a window left for the next one's check."""
        self.last_overloaded = overloaded(summary)
        # A worker process that died took its connections with it (the OS closed them): its
        # requests without an end are no longer the client's to hold open; whether the
        # engine still runs them is the gauges' to say.
        died = any(w.died for w in summary.worker_lag)
        self.last_client_open = 0 if died else client_open(requests)
        self.gauges_seen = self.gauges_seen or has_gauges(metrics)


def proof(read: IdleStart, open_requests: int, *, gauges_seen: bool) -> str:
    """What proved the engine idle (the ``proven_by`` values of the module docstring).

    Args:
        read: the gauges' poll (``idle`` True, False or None with a ``note``).
        open_requests: the client's requests not yet ended.
        gauges_seen: ``/metrics`` has given running/waiting gauges in this run, so a poll
            that got no answer is no proof.
    """
    if open_requests > 0:
        return f"{NOT_PROVEN}: the client had {open_requests} requests not yet ended"
    if read.idle is True:
        return PROVEN_BOTH
    if read.idle is False:
        return f"{NOT_PROVEN}: {read.note or 'the engine was not idle'}"
    if gauges_seen:
        return f"{NOT_PROVEN}: {read.note or '/metrics did not answer'}"
    return f"{CLIENT_ONLY}: {read.note or '/metrics not read'}"


def not_proven_reason(idle: IdleStart) -> str | None:
    """The window's ``invalid_reason`` when it started not proven idle, else None."""
    by = idle.proven_by or ""
    if not by.startswith(NOT_PROVEN):
        return None
    return f"{NOT_IDLE_PREFIX}: {by.removeprefix(NOT_PROVEN + ': ')}"
