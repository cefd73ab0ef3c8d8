"""The load generator against llama.cpp's real server: 2,000 requests, no transport errors.

llama.cpp's server closes the connection about 1 ms after every streamed response while
advertising keep-alive (``tokenwatt.collect.load.http``); reusing such connections made 5–10 of
1,500 requests fail at 20 req/s. With a fresh connection per request, which the probe's
engine name selects, no request fails and none needs a transport retry: nothing is left to
chance, so the expected counts are exact.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from engine_servers import EngineServer, wait_until_idle
from tiny_model import TinyModel

from tokenwatt.collect.engine.probes import probe_engine
from tokenwatt.collect.load.http import keeps_streams_alive
from tokenwatt.collect.load.loadgen import LoadConfig, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.spec.spec import SloSpec

pytestmark = pytest.mark.engine


async def test_two_thousand_requests_without_a_transport_error(
    llamacpp_server: EngineServer, tiny_model: TinyModel
) -> None:
    await wait_until_idle(llamacpp_server)
    info = probe_engine(llamacpp_server.endpoint, None)
    assert info.engine_name == "llama.cpp"
    base = LoadConfig(
        endpoint=llamacpp_server.endpoint,
        model="tiny",
        slo=SloSpec(ttft_p99_ms=60_000, tpot_p99_ms=60_000),
        max_concurrency=64,
        request_timeout_s=60.0,
    )
    cfg = dataclasses.replace(base, keep_alive=keeps_streams_alive(info.engine_name))
    assert not cfg.keep_alive
    ids = tiny_model.printable_ids
    spec = RequestSpec(prompt=[ids[(7 * i + 3) % len(ids)] for i in range(8)], max_tokens=2)
    # About 2,100 requests in 50 s at 42 req/s: moderate for 4 slots and a 2-token output.
    result = await run_window(
        cfg,
        WindowPlan(rate_rps=42.0, duration_s=50.0, warmup_s=0.0, seed=8, keep_load=False),
        itertools.repeat(spec),
    )
    requests = result.requests
    assert len(requests) >= 2000
    failed = [(r.error, r.error_class, r.error_message) for r in requests if r.error is not None]
    assert failed == []
    assert sum(r.transport_retries for r in requests) == 0
    assert all(r.output_tokens == 2 and not r.usage_missing for r in requests)
