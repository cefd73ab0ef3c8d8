"""A window whose load ends while the ``/metrics`` scraper is still finishing.

Seen once in a collect run: ``RuntimeError: Cannot send a request, as the client has been
closed``, when the load generator returned while the scraper, then on the load's own event
loop, was closing its client. The scraper now runs on the instruments' thread with one
client for the run; here its last step is slowed down (it awaits the real ``stop``, then
sleeps) so that the load generator always returns first, and the window must still get
its metrics. The engine is the real simulator over HTTP.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from sim_process import REPO, SimProcess, start_sim

from tokenwatt.collect.engine.engine_metrics import MetricsScraper
from tokenwatt.collect.measure.instruments import INSTRUMENT_DEADLINE_S, Instruments
from tokenwatt.collect.measure.progress import NullReporter
from tokenwatt.collect.measure.window import WindowPlan, WindowRunner
from tokenwatt.collect.plan.runfile import load_run_spec
from tokenwatt.collect.workload.workload import workload_for
from tokenwatt.records.run.environment import EngineMetrics

SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"
STOP_S = 1.0
"""How long the slowed ``stop`` lingers: far longer than the load's drain after the window,
well inside the instruments' hand-over deadline."""


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    s = start_sim("--profile", "bf16-kv")
    try:
        yield s
    finally:
        s.stop()


def test_load_ending_while_the_scraper_finishes_keeps_the_window(
    sim: SimProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert STOP_S < INSTRUMENT_DEADLINE_S
    real_stop = MetricsScraper.stop
    stopped: list[float] = []

    async def slow_stop(self: MetricsScraper) -> EngineMetrics:
        metrics = await real_stop(self)
        await asyncio.sleep(STOP_S)
        stopped.append(time.perf_counter())
        return metrics

    monkeypatch.setattr(MetricsScraper, "stop", slow_stop)
    spec = load_run_spec(SPEC, "quick", sim.endpoint)
    with Instruments(sim.endpoint) as instruments:
        runner = WindowRunner(
            spec,
            api_key=None,
            workload=workload_for(spec),
            instruments=instruments,
            progress=NullReporter(),
        )
        outcome = runner.run(WindowPlan(rate_rps=5.0, duration_s=0.4, warmup_s=0.0, seed=0))
    assert stopped, "the scraper never stopped"
    assert outcome.summary.completed > 0
    assert outcome.metrics is not None and outcome.metrics.valid
    assert outcome.metrics.scrapes >= 2
    assert outcome.power is None
