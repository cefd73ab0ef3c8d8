"""GPU time the SLO search spends to land within ±5% of the boundary (a seeded model).

Drives :func:`tokenwatt.collect.measure.search.slo_search` — a pure function of its probe callback —
with a model of noisy pass/fail around a known boundary B (req/s), and prints GPU-minutes
(warm-ups + windows) per search next to the seed's plain schedule.

The model (documented so the figures can be argued with):

* B is drawn log-uniformly between 5 and 200 req/s per trial (seeded).
* A window of ``w`` seconds at rate r passes with probability Φ((B − r) / (σ · B)), where
  σ = 3% × sqrt(60 s / w): a 60 s window resolves the boundary to about ±3%, shorter ones
  less (the p99 of fewer requests).
* A window above the boundary misses by queueing: its TTFT grows by ε = r/B − 1 seconds
  per second, so with a 2 s TTFT limit (the seed's SLO) the early stop sees the miss
  beyond doubt after about 2 s / ε + 1% of the window (the 1% of requests a p99 may lose),
  and never later than the window's end. Misses below B (noise) run the whole window.
* A search "lands" when its result (the last passing rate) is within ±5% of B.

Schedules compared:

* ``seed plain``: the default search (methods/goodput.md) as the seed lab note ran it —
  ×2 from 2 req/s, three bisections, 45 s warm-up and 60 s window per probe, no early stop.
* ``plain to 5%``: the same, bisecting until the bracket is 5% wide (three bisections from
  a ×2 bracket leave 12.5%, so the plain schedule often cannot land within ±5%).
* ``improved``: ×4 growth, 15 s "scout" windows while the verdict is not close (grow
  probes, and bisection while the bracket is wider than 50%), early stop of missed probes,
  10 s warm-ups after a passing probe, geometric bisection until the bracket is 5% wide
  (:class:`SearchOptions` and :class:`ProbePolicy`; the default search of methods/goodput.md
  stays the default).

Run: ``python benchmarks/search_cost.py [--trials 2000] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

from tokenwatt.collect.measure.probe_policy import ProbePolicy
from tokenwatt.collect.measure.search import (
    ProbeOutcome,
    SearchOptions,
    SearchPhase,
    slo_search,
)
from tokenwatt.records.spec.spec_load import SweepSpec

SIGMA_60S = 0.03
TTFT_LIMIT_S = 2.0


@dataclass(frozen=True)
class Schedule:
    name: str
    sweep: SweepSpec
    options: SearchOptions
    policy: ProbePolicy
    early_stop: bool


def _sweep(growth: float, bisect_steps: int) -> SweepSpec:
    return SweepSpec(
        start_rps=2,
        growth=growth,
        max_rps=2000,
        bisect_steps=bisect_steps,
        backoff=0.9,
        max_backoffs=4,
    )


SCHEDULES = (
    Schedule("seed plain", _sweep(2, 3), SearchOptions(), ProbePolicy(45, 60), False),
    Schedule(
        "plain to 5%",
        _sweep(2, 3),
        SearchOptions(bisect_until_rel=0.05),
        ProbePolicy(45, 60),
        False,
    ),
    Schedule(
        "improved",
        _sweep(4, 3),
        SearchOptions(bisect_until_rel=0.05, geometric_bisect=True),
        ProbePolicy(45, 60, warmup_after_pass_s=10, scout_window_s=15, scout_until_rel=0.5),
        True,
    ),
)


class NoisyBoundary:
    """The probe callback: a seeded model of pass/fail around ``boundary`` (req/s)."""

    def __init__(self, boundary: float, rng: np.random.Generator, s: Schedule) -> None:
        self.boundary = boundary
        self.rng = rng
        self.schedule = s
        self.history: list[tuple[float, bool]] = []

    def __call__(self, rate: float, phase: SearchPhase) -> ProbeOutcome:
        warmup, window = self.schedule.policy.plan(phase, self.history)
        sigma = SIGMA_60S * math.sqrt(60.0 / window)
        z = (self.boundary - rate) / (sigma * self.boundary)
        passed = bool(self.rng.random() < 0.5 * (1 + math.erf(z / math.sqrt(2))))
        spent = window
        if not passed and self.schedule.early_stop and rate > self.boundary:
            eps = rate / self.boundary - 1
            spent = min(window, TTFT_LIMIT_S / eps + 0.01 * window)
        self.history.append((rate, passed))
        return ProbeOutcome(
            passed,
            warmup_s=warmup,
            window_s=spent,
            saved_s=window - spent,
            stopped_early=spent < window,
        )


def run(trials: int, seed: int) -> dict[str, tuple[float, float, float, float]]:
    """Per schedule: (mean GPU-min, p90 GPU-min, share landing within ±5%, mean probes)."""
    rng = np.random.default_rng(seed)
    boundaries = np.exp(rng.uniform(math.log(5), math.log(200), trials))
    out: dict[str, tuple[float, float, float, float]] = {}
    for s in SCHEDULES:
        srng = np.random.default_rng(seed + 1)
        cost, landed, probes = [], 0, []
        for b in boundaries:
            trace = slo_search(NoisyBoundary(float(b), srng, s), s.sweep, s.options)
            cost.append(trace.gpu_seconds / 60)
            probes.append(len(trace.steps))
            found = trace.found_rps
            if found is not None and abs(found - b) / b <= 0.05:
                landed += 1
        out[s.name] = (
            float(np.mean(cost)),
            float(np.percentile(cost, 90)),
            landed / trials,
            float(np.mean(probes)),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    results = run(args.trials, args.seed)
    print(f"{args.trials} searches, boundaries log-uniform in 5–200 req/s, seed {args.seed}")
    print(f"{'schedule':<14} {'GPU-min mean':>12} {'p90':>7} {'within ±5%':>11} {'probes':>7}")
    for name, (mean, p90, share, probes) in results.items():
        print(f"{name:<14} {mean:>12.1f} {p90:>7.1f} {share:>10.0%} {probes:>7.1f}")
    base = results["plain to 5%"][0]
    seed_plain = results["seed plain"][0]
    improved = results["improved"][0]
    print(
        f"improved / plain-to-5%: {improved / base:.2f}; "
        f"improved / seed plain: {improved / seed_plain:.2f}"
    )


if __name__ == "__main__":
    main()
