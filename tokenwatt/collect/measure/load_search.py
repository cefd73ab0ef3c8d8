"""The SLO search over closed-loop concurrency, and the loads of a fixed-load run (pure).

:func:`concurrency_search` is :func:`tokenwatt.collect.measure.search.slo_search` over whole numbers
of clients (``measurement.profile: concurrency``): grow from ``sweep.start_concurrency`` by
``sweep.growth`` — rounded up, and at least one client more per step — until a probe misses
or the ceiling (``measurement.max_concurrency``) is reached, or walk ``sweep.concurrencies``
until a miss; when the first probe misses, go down (divide by ``sweep.growth``, rounded
down and at least one client fewer a step) until a probe passes or one client misses too;
then bisect between the last pass and the first miss at whole numbers,
``sweep.bisect_steps`` times at most and never once they are adjacent (nothing lies
between). Goodput and the verdict of each window are the open loop's (methods/goodput.md).

The trace is the open loop's :class:`~tokenwatt.collect.measure.search.SearchTrace`, with every
"rate" holding a number of clients; nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tokenwatt.collect.measure.search import (
    ProbeFn,
    SearchTrace,
    bisect,
    bracket,
    conclude,
    descend,
    monotonicity_warnings,
    recorder,
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
    trace = SearchTrace(floor_rps=1.0)

    run = recorder(probe, trace)

    def search() -> tuple[float | None, float | None]:
        last_pass, first_miss = bracket(
            run,
            None if sweep.concurrencies is None else [float(c) for c in sweep.concurrencies],
            float(min(sweep.start_concurrency, ceiling)),
            lambda c: float(next_concurrency(int(c), sweep.growth, ceiling)),
            float(ceiling),
        )
        if last_pass is None and first_miss is not None:
            last_pass, first_miss = descend(run, first_miss, fewer_clients(sweep.growth), 1.0)
        if last_pass is not None and first_miss is not None:
            last_pass, first_miss = bisect(
                run,
                last_pass,
                first_miss,
                lambda lo, hi: float((int(lo) + int(hi)) // 2),
                lambda lo, hi, steps: steps < sweep.bisect_steps and hi - lo > 1,
            )
        return last_pass, first_miss

    conclude(trace, search)
    if trace.inconclusive is not None:
        return trace
    if trace.steps and not any(s.outcome.passed for s in trace.steps):
        lowest = min(s.rate_rps for s in trace.steps)
        trace.warnings.append(
            f"every probe missed the SLO, down to {lowest:g} client"
            f"{'' if lowest == 1 else 's'}: no load meets it; relax the SLO or measure "
            "another configuration"
        )
    else:
        points = [(s.rate_rps, s.outcome.passed) for s in trace.steps]
        trace.warnings.extend(monotonicity_warnings(points, unit="clients"))
    return trace


def fewer_clients(growth: float) -> Callable[[float], float]:
    """The down phase's next client count: ``floor(current / growth)``, at least one fewer,
    at least 1."""

    def down(current: float) -> float:
        return float(max(1, min(int(current) - 1, math.floor(current / growth))))

    return down


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


__all__ = [
    "backed_off_concurrency",
    "concurrency_search",
    "fewer_clients",
    "fixed_loads",
    "next_concurrency",
]
