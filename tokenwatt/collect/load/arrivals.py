"""Arrival schedules: every request's send time fixed before the window starts.

Two processes (``measurement.arrivals`` in the spec; the methods page on goodput explains
the choice):

* ``poisson`` (:func:`poisson_schedule`): gaps between arrivals are exponential with mean
  ``1 / rate_rps``, drawn from :func:`numpy.random.default_rng` seeded with the window's
  seed. The number of arrivals in a window of ``T`` s is itself random, Poisson(rate × T),
  so goodput over the window carries about ``1 / sqrt(rate × T)`` relative noise before
  the engine does anything.
* ``conditioned`` (the default, :func:`conditioned_schedule`): the same process
  conditioned on its count. The measured window gets exactly :func:`arrival_count`
  arrivals, placed as sorted uniform times on the window, which is the distribution of a
  Poisson process's arrival times given their number (S. M. Ross, *Stochastic Processes*,
  2nd ed., 1996, Theorem 2.3.1). Its gaps are still close to exponential.

A third, non-random schedule (``measurement.profile: constant``, :func:`constant_schedule`)
sends one request every ``1 / rate`` s. The closed loop (``profile: concurrency``) has no
schedule at all (:mod:`tokenwatt.collect.load.closedloop`).

Because the whole schedule is computed in advance, a client that falls behind does not
stretch it: lateness shows up as send lag (sent − scheduled), never as a lower arrival rate
(methods/goodput.md). Either schedule is one increasing float64 array of offsets (s) from
the start of the warm-up, covering warm-up, window and keep-load tail.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tokenwatt.records import ArrivalProcess, LoadProfile

# Gaps are drawn in blocks of this many, so a schedule for a longer duration starts with
# exactly the schedule for a shorter one (same seed): extending a window never reshuffles it.
_BLOCK = 4096


def _check(rate_rps: float, duration_s: float) -> None:
    if not np.isfinite(rate_rps) or rate_rps <= 0:
        raise ValueError(f"rate_rps must be a positive number, got {rate_rps!r}")
    if not np.isfinite(duration_s) or duration_s < 0:
        raise ValueError(f"duration_s must be a non-negative number, got {duration_s!r}")


def _poisson_offsets(
    rate_rps: float, duration_s: float, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    scale = 1.0 / rate_rps
    blocks: list[npt.NDArray[np.float64]] = []
    last = 0.0
    while last < duration_s:
        offsets = last + np.cumsum(rng.exponential(scale, _BLOCK))
        blocks.append(offsets)
        last = float(offsets[-1])
    if not blocks:
        return np.empty(0, dtype=np.float64)
    everything = np.concatenate(blocks)
    return everything[everything < duration_s]


def poisson_schedule(rate_rps: float, duration_s: float, seed: int) -> npt.NDArray[np.float64]:
    """Send offsets (s from the start) of a Poisson process, all below ``duration_s``.

    The unconditioned process (``measurement.arrivals: poisson``): the number of offsets
    is random, Poisson(rate × duration).

    Args:
        rate_rps: mean arrival rate (requests/s), > 0.
        duration_s: length of the schedule (s), >= 0.
        seed: seed for ``numpy.random.default_rng``; the same seed gives the same offsets,
            and a longer ``duration_s`` gives the same offsets followed by more.

    Returns:
        Increasing float64 offsets (s); the first arrival is one exponential gap after 0.

    Raises:
        ValueError: when ``rate_rps`` <= 0 or ``duration_s`` < 0 or either is not finite.
    """
    _check(rate_rps, duration_s)
    return _poisson_offsets(rate_rps, duration_s, np.random.default_rng(seed))


def arrival_count(rate_rps: float, duration_s: float) -> int:
    """Arrivals a count-conditioned segment of ``duration_s`` s at ``rate_rps`` gets.

    ``rate × duration`` rounded to the nearest integer, halves rounded up (not Python's
    round-half-to-even, so 2.5 gives 3 like 3.5 gives 4). The achieved rate
    ``count / duration`` is then off the target by at most ``0.5 / (rate × duration)``
    relative: within 0.5% from ``rate × duration >= 100``; 5% at 10 arrivals.

    Raises:
        ValueError: as :func:`poisson_schedule`.
    """
    _check(rate_rps, duration_s)
    return int(np.floor(rate_rps * duration_s + 0.5))


def _uniform_offsets(
    count: int, start_s: float, end_s: float, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """``count`` sorted uniform offsets in ``[start_s, end_s)``."""
    offsets = start_s + (end_s - start_s) * np.sort(rng.random(count))
    # start + width × u can round up to end_s itself; the segment is half-open.
    return np.minimum(offsets, np.nextafter(end_s, -np.inf))


def conditioned_schedule(
    rate_rps: float, *, warmup_s: float, duration_s: float, tail_s: float, seed: int
) -> npt.NDArray[np.float64]:
    """Send offsets (s from the start of the warm-up) with an exact count in the window.

    Three segments, each drawn from its own child of ``numpy.random.SeedSequence(seed)``:

    * the window ``[warmup_s, warmup_s + duration_s)`` gets exactly
      ``arrival_count(rate_rps, duration_s)`` arrivals, sorted uniform times on it: a
      Poisson process conditioned on that count (Ross, *Stochastic Processes*, Thm 2.3.1);
    * the warm-up ``[0, warmup_s)`` likewise gets exactly ``arrival_count(rate_rps,
      warmup_s)``, so every window is loaded alike before it is measured;
    * the keep-load tail after the window is the unconditioned process
      (:func:`poisson_schedule`'s gaps from the window's end): it only keeps the server
      loaded while the window drains and is cut off when the window's requests are done,
      so it has no count to hold. A longer ``tail_s`` gives the same tail followed by more.

    Conditioning each segment on its count is the Poisson process conditioned on the counts
    of disjoint intervals; the gap across a segment boundary is the one a Poisson process
    has around a fixed time (a sum of two exponentials), not an artefact.

    Args:
        rate_rps: mean arrival rate (requests/s), > 0.
        warmup_s: warm-up before the window (s), >= 0.
        duration_s: the measured window (s), >= 0.
        tail_s: keep-load tail after the window (s), >= 0.
        seed: non-negative seed; the same seed gives the same offsets.

    Returns:
        Increasing float64 offsets (s).

    Raises:
        ValueError: a rate not positive, a length negative, or either not finite.
    """
    for length in (warmup_s, duration_s, tail_s):
        _check(rate_rps, length)
    warm_ss, window_ss, tail_ss = np.random.SeedSequence(seed).spawn(3)
    end = warmup_s + duration_s  # the same sum the load generator compares against
    warm = _uniform_offsets(
        arrival_count(rate_rps, warmup_s), 0.0, warmup_s, np.random.default_rng(warm_ss)
    )
    window = _uniform_offsets(
        arrival_count(rate_rps, duration_s), warmup_s, end, np.random.default_rng(window_ss)
    )
    tail = end + _poisson_offsets(rate_rps, tail_s, np.random.default_rng(tail_ss))
    return np.concatenate([warm, window, tail])


def window_schedule(
    rate_rps: float,
    *,
    warmup_s: float,
    duration_s: float,
    tail_s: float,
    seed: int,
    arrivals: ArrivalProcess = "conditioned",
) -> npt.NDArray[np.float64]:
    """The load generator's schedule for one window: warm-up, window and keep-load tail.

    ``arrivals`` picks the process: ``conditioned`` (:func:`conditioned_schedule`) or
    ``poisson`` (:func:`poisson_schedule` over ``warmup_s + duration_s + tail_s``, the
    schedule of records made before the choice existed, offset for offset).

    Returns:
        Increasing float64 offsets (s from the start of the warm-up).

    Raises:
        ValueError: as :func:`conditioned_schedule`, or an unknown ``arrivals``.
    """
    if arrivals == "poisson":
        return poisson_schedule(rate_rps, warmup_s + duration_s + tail_s, seed)
    if arrivals == "conditioned":
        return conditioned_schedule(
            rate_rps, warmup_s=warmup_s, duration_s=duration_s, tail_s=tail_s, seed=seed
        )
    raise ValueError(f"arrivals must be 'conditioned' or 'poisson', got {arrivals!r}")


def constant_schedule(rate_rps: float, duration_s: float) -> npt.NDArray[np.float64]:
    """Evenly spaced send offsets: ``k / rate_rps`` for k = 0, 1, … while below ``duration_s``.

    The constant-rate profile (``measurement.profile: constant``): no randomness, so a
    window of ``T`` s holds ``rate × T`` arrivals give or take one, and the gaps are all
    ``1 / rate`` (the "constant" arrival pattern of load testers such as GuideLLM's).

    Raises:
        ValueError: as :func:`poisson_schedule`.
    """
    _check(rate_rps, duration_s)
    count = int(np.ceil(duration_s * rate_rps))
    offsets = np.arange(count + 1, dtype=np.float64) / rate_rps
    return offsets[offsets < duration_s]


def load_schedule(
    rate_rps: float,
    *,
    warmup_s: float,
    duration_s: float,
    tail_s: float,
    seed: int,
    arrivals: ArrivalProcess = "conditioned",
    profile: LoadProfile = "poisson",
) -> npt.NDArray[np.float64]:
    """The open-loop schedule of one window for a load profile: :func:`window_schedule`
    for ``poisson``, :func:`constant_schedule` over warm-up, window and tail for
    ``constant`` (``seed`` and ``arrivals`` unused).

    Raises:
        ValueError: as :func:`window_schedule`, or ``profile`` ``concurrency`` (a closed
            loop has no schedule).
    """
    if profile == "constant":
        for length in (warmup_s, duration_s, tail_s):
            _check(rate_rps, length)
        return constant_schedule(rate_rps, warmup_s + duration_s + tail_s)
    if profile == "poisson":
        return window_schedule(
            rate_rps,
            warmup_s=warmup_s,
            duration_s=duration_s,
            tail_s=tail_s,
            seed=seed,
            arrivals=arrivals,
        )
    raise ValueError(f"profile {profile!r} has no arrival schedule (a closed loop)")


def window_request_count(
    rate_rps: float,
    warmup_s: float,
    duration_s: float,
    seed: int,
    arrivals: ArrivalProcess = "conditioned",
    profile: LoadProfile = "poisson",
) -> int:
    """How many requests of a seeded schedule fall in the window ``[warmup, warmup + duration)``.

    Exact, not the mean ``rate × duration``: the same schedule :func:`load_schedule` gives
    the load generator (for ``conditioned``, :func:`arrival_count`). Useful as
    ``expected_total`` for :func:`tokenwatt.analysis.window.latency.missed_beyond_doubt`.
    """
    if profile == "constant":
        offsets = constant_schedule(rate_rps, warmup_s + duration_s)
        return int(np.count_nonzero(offsets >= warmup_s))
    if arrivals == "conditioned":
        _check(rate_rps, warmup_s)
        return arrival_count(rate_rps, duration_s)
    offsets = window_schedule(
        rate_rps, warmup_s=warmup_s, duration_s=duration_s, tail_s=0.0, seed=seed, arrivals=arrivals
    )
    return int(np.count_nonzero(offsets >= warmup_s))
