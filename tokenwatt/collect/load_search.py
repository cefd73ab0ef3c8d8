"""The SLO search over closed-loop concurrency, and the loads of a fixed-load run (pure).

:func:`concurrency_search` is :func:`tokenwatt.collect.search.slo_search` over whole numbers
of clients (``measurement.profile: concurrency``): grow from ``sweep.start_concurrency`` by
``sweep.growth`` — rounded up, and at least one client more per step — until a probe misses
or the ceiling (``measurement.max_concurrency``) is reached, or walk ``sweep.concurrencies``
until a miss; then bisect between the last pass and the first miss at whole numbers,
``sweep.bisect_steps`` times at most and never once they are adjacent (nothing lies
between). Goodput and the verdict of each window are the open loop's (methods/goodput.md).

The trace is the open loop's :class:`~tokenwatt.collect.search.SearchTrace`, with every
"rate" holding a number of clients; nothing here does I/O.
"""

from __future__ import annotations

import math

from tokenwatt.collect.search import (
    Phase,
    ProbeFn,
    ProbeStep,
    SearchTrace,
    monotonicity_warnings,
)
from tokenwatt.records import LoadProfile, SweepSpec


def next_concurrency(current: int, growth: float, ceiling: int) -> int:
    """The grow phase's next client count: ``ceil(current × growth)``, at least
    ``current + 1``, at most ``ceiling``."""
    return min(max(current + 1, math.ceil(current * growth)), ceiling)


def concurrency_search(probe: ProbeFn, sweep: SweepSpec, ceiling: int) -> SearchTrace:
    """Find the most closed-loop clients whose window meets the SLO (module docstring).

    Args:
        probe: runs one window; called as ``probe(float(clients), phase)``.
        sweep: the spec's ``sweep`` section (``start_concurrency``, ``concurrencies``,
            ``growth``, ``bisect_steps``).
        ceiling: the most clients to try (``measurement.max_concurrency``).

    Returns:
        A :class:`SearchTrace` whose ``last_pass_rps`` / ``first_miss_rps`` hold client
        counts (None as in the open loop), with the all-missed and non-monotonic warnings.
    """
    trace = SearchTrace()

    def run(clients: int, phase: Phase) -> bool:
        outcome = probe(float(clients), phase)
        trace.steps.append(ProbeStep(float(clients), phase, outcome))
        return outcome.passed

    last_pass: int | None = None
    first_miss: int | None = None
    if sweep.concurrencies is not None:
        for clients in sweep.concurrencies:
            if run(clients, "list"):
                last_pass = clients
            else:
                first_miss = clients
                break
    else:
        clients = min(sweep.start_concurrency, ceiling)
        while True:
            if run(clients, "grow"):
                last_pass = clients
                if clients >= ceiling:
                    break
                clients = next_concurrency(clients, sweep.growth, ceiling)
            else:
                first_miss = clients
                break
    if last_pass is not None and first_miss is not None:
        lo, hi, steps = last_pass, first_miss, 0
        while steps < sweep.bisect_steps and hi - lo > 1:
            mid = (lo + hi) // 2
            if run(mid, "bisect"):
                lo = mid
            else:
                hi = mid
            steps += 1
        last_pass, first_miss = lo, hi
    trace.last_pass_rps = None if last_pass is None else float(last_pass)
    trace.first_miss_rps = None if first_miss is None else float(first_miss)
    if trace.steps and not any(s.outcome.passed for s in trace.steps):
        lowest = min(s.rate_rps for s in trace.steps)
        trace.warnings.append(
            f"every probe missed the SLO (fewest clients tried: {lowest:g}); lower "
            "sweep.start_concurrency or relax the SLO"
        )
    else:
        points = [(s.rate_rps, s.outcome.passed) for s in trace.steps]
        trace.warnings.extend(monotonicity_warnings(points, unit="clients"))
    return trace


def backed_off_concurrency(load: float) -> int:
    """Clients of a repeat at ``load`` after back-offs (``found × backoff^k``): the whole
    number below, at least 1 (so a back-off of 0.85 from 10 clients gives 8, then 7)."""
    return max(1, math.floor(load + 1e-9))


def fixed_loads(sweep: SweepSpec, profile: LoadProfile) -> list[float]:
    """The loads a fixed-load run (``sweep.fixed``) measures, in order: ``sweep.rates``
    (req/s) for the open loop, ``sweep.concurrencies`` (clients) for the closed loop.

    Raises:
        ValueError: the list the profile needs is not given (the spec validator refuses
            such a spec first).
    """
    listed = sweep.concurrencies if profile == "concurrency" else sweep.rates
    if listed is None:
        raise ValueError("sweep.fixed needs sweep.rates (or sweep.concurrencies)")
    return [float(x) for x in listed]


__all__ = ["backed_off_concurrency", "concurrency_search", "fixed_loads", "next_concurrency"]
