"""A window whose load ends while the metrics scraper is closing its client.

Seen once in a collect run: ``RuntimeError: Cannot send a request, as the client has been
closed``. The window's watcher task closes the scraper when the window's time is up; when
the load generator returned during that close, ``_window`` cancelled the watcher inside
``httpx.AsyncClient.aclose`` (client already marked closed, ``MetricsScraper._client`` not
yet cleared), then called ``scraper.stop()`` again, whose last scrape used the closed
client. Here ``aclose`` is slowed down (it awaits the real one, then sleeps) so that the
load generator always returns inside it; the engine is the real simulator over HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sim_process import REPO, SimProcess, start_sim

from tokenwatt.collect.options import CollectOptions
from tokenwatt.collect.run import _Run
from tokenwatt.collect.runfile import load_run_spec

SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"
CLOSE_S = 1.0
"""How long the slowed ``aclose`` takes: far longer than the load's drain after the window."""


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    s = start_sim("--profile", "bf16-kv")
    try:
        yield s
    finally:
        s.stop()


def test_load_ending_while_the_scraper_closes_keeps_the_window(
    sim: SimProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_aclose = httpx.AsyncClient.aclose
    closes: list[float] = []

    async def slow_aclose(self: httpx.AsyncClient) -> None:
        await real_aclose(self)
        closes.append(asyncio.get_running_loop().time())
        await asyncio.sleep(CLOSE_S)

    monkeypatch.setattr(httpx.AsyncClient, "aclose", slow_aclose)
    spec = load_run_spec(SPEC, "quick", sim.endpoint)
    opts = CollectOptions(
        spec_path=SPEC, label="race", role="baseline", out=tmp_path / "r.json", progress=False
    )
    run = _Run(opts, spec, None)
    window: Any = run._window(5.0, 0.4, 0.0, seed=0, early_stop=False)
    loop_end: list[float] = []

    async def timed() -> Any:
        result = await window
        loop_end.append(asyncio.get_running_loop().time())
        return result

    summary, metrics, power = asyncio.run(timed())
    assert closes, "the scraper never closed its client"
    # The load generator had long returned when the close finished: the race was hit.
    assert loop_end[0] - closes[0] >= CLOSE_S * 0.9
    assert summary.completed > 0
    assert metrics is not None and metrics.scrapes >= 2
    assert power is None
