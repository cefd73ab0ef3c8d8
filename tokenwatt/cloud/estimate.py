"""How long a session will keep the instance, and what that costs: an estimate.

Pure: the effective specs (each run's spec after its mode's caps, computed by the CLI with
``collect``'s ``apply_mode``) in, seconds and dollars out. The session's real length
depends on the engine and on where the SLO search stops, so every figure here is an
estimate and is always shown as one. It assumes:

* the SLO search measures every growth step up to ``max_rps`` (or every listed rate or
  client count) and then every bisection step, each window a warm-up plus
  ``search_window_s``; then ``repeats`` windows of warm-up plus ``window_s``, without
  back-off; a ``fixed`` sweep one warm-up plus window per listed load;
* idle power for ``power.idle_s`` before the first window;
* :data:`ENGINE_START_S` per run for the engine to load the model and answer;
* :data:`ACCURACY_ITEM_S` per accuracy item and seed (``accuracy.limit`` items, or
  :data:`ACCURACY_ITEMS_UNKNOWN` without a limit);
* :data:`BOOT_S` for the instance to become active and :data:`INSTALL_S` to install the
  package on it, once per session.

Lambda bills on-demand instances in one-minute increments from launch to termination
(Lambda's "Billing" guide), so :func:`billed_seconds` rounds up to whole minutes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenwatt.records import Spec

BOOT_S = 300.0
"""Launch to ``active`` (s): Lambda says an instance "might take several minutes"."""
INSTALL_S = 300.0
"""Copying and installing this package and its dependencies on the box (s)."""
ENGINE_START_S = 180.0
"""An engine loading its model and answering its first request (s), per run."""
ACCURACY_ITEM_S = 1.0
"""One accuracy item (s), per seed: a few hundred tokens at batch concurrency."""
ACCURACY_ITEMS_UNKNOWN = 1319
"""Items assumed for a suite without ``accuracy.limit``: GSM8K's test split."""


@dataclass(frozen=True)
class RunPlan:
    """One ``collect`` the session will run: its label, its effective spec, whether it is a
    smoke run, and whether accuracy is scored."""

    label: str
    spec: Spec
    smoke: bool
    accuracy: bool = True


@dataclass(frozen=True)
class Estimate:
    """The session's estimated length and cost.

    Attributes:
        runs_s: each run's estimated length (s), as (label, smoke, seconds).
        total_s: boot, install and every run (s).
        price_usd_per_hour: the instance type's price.
        cost_usd: ``price × billed_seconds(total_s) / 3600``.
    """

    runs_s: tuple[tuple[str, bool, float], ...]
    total_s: float
    price_usd_per_hour: float
    cost_usd: float


def search_windows(spec: Spec) -> int:
    """Windows the SLO search measures before the repeats (see the module docstring)."""
    s, m = spec.sweep, spec.measurement
    closed = m.profile == "concurrency"
    listed = s.concurrencies if closed else s.rates
    if s.fixed:
        return len(listed or [])
    if listed:
        return len(listed) + s.bisect_steps
    start, top = (s.start_concurrency, m.max_concurrency) if closed else (s.start_rps, s.max_rps)
    grow = math.ceil(math.log(top / start) / math.log(s.growth)) if top > start else 0
    return grow + 1 + s.bisect_steps


def run_seconds(plan: RunPlan) -> float:
    """One run's estimated length (s)."""
    spec = plan.spec
    m, a = spec.measurement, spec.accuracy
    total = ENGINE_START_S + (spec.power.idle_s or 0.0)
    total += search_windows(spec) * (m.warmup_s + m.search_window_s)
    if not spec.sweep.fixed:
        total += m.repeats * (m.warmup_s + m.window_s)
    if plan.accuracy and a.suite:
        items = a.limit if a.limit is not None else ACCURACY_ITEMS_UNKNOWN
        total += items * a.seeds * ACCURACY_ITEM_S
    return total


def billed_seconds(seconds: float) -> float:
    """``seconds`` rounded up to whole minutes (Lambda's billing increment)."""
    return 60.0 * math.ceil(max(seconds, 0.0) / 60.0)


def cost_usd(price_usd_per_hour: float, seconds: float) -> float:
    """What ``seconds`` of an instance cost, billed by the minute (USD)."""
    return price_usd_per_hour * billed_seconds(seconds) / 3600.0


def estimate(plans: list[RunPlan], price_usd_per_hour: float) -> Estimate:
    """The session's estimate: boot, install, then every run in order."""
    runs = tuple((p.label, p.smoke, run_seconds(p)) for p in plans)
    total = BOOT_S + INSTALL_S + sum(r[2] for r in runs)
    return Estimate(runs, total, price_usd_per_hour, cost_usd(price_usd_per_hour, total))
