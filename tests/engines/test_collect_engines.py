"""The collector end to end against both real engines: one load-generator window, then
``tokenwatt collect --mode smoke`` writing a run record.

Smoke-sized: seconds of load at a few requests per second on the generated tiny model.
The numbers are checked for consistency (token counts from ``usage``, latencies present and
plausible), never for speed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_servers import EngineServer
from tiny_model import TinyModel

from tokenwatt.analysis.window.latency import tpot_ms, ttft_ms
from tokenwatt.collect.load.loadgen import LoadConfig, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records import RunRecord
from tokenwatt.records.run.window import WindowSummary
from tokenwatt.records.spec.spec import SloSpec

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests" / "fixtures" / "tiny-engine.spec.yaml"

# Under CPU contention llama.cpp's server now and then closes a pooled connection as the
# client writes the next request (aiohttp: "Can not write request body", no response), seen
# here about once in 25 requests with three busy processes on the two cores. The collector
# rightly counts it as a failed request; these tests allow one such transport failure per
# window and no other error.
TRANSPORT_ERRORS = {"connect", "disconnect"}


def assert_clean(w: WindowSummary) -> None:
    """No error but at most one transport failure; every answered request complete."""
    assert set(w.error_kinds) <= TRANSPORT_ERRORS and w.errors <= 1, w.error_kinds
    assert w.completed == w.requests - w.errors
    assert w.usage_missing == 0


ENGINES = [
    pytest.param("llamacpp_server", "llama.cpp", marks=pytest.mark.engine, id="llama.cpp"),
    pytest.param("vllm_server", "vllm", marks=[pytest.mark.engine, pytest.mark.vllm], id="vllm"),
]


@pytest.mark.parametrize(("fixture", "engine_name"), ENGINES)
def test_one_window_of_token_id_requests(
    fixture: str, engine_name: str, request: pytest.FixtureRequest, tiny_model: TinyModel
) -> None:
    server: EngineServer = request.getfixturevalue(fixture)
    ids = tiny_model.printable_ids
    specs = [
        RequestSpec(prompt=[ids[(13 * i + k) % len(ids)] for k in range(12 + i % 5)], max_tokens=32)
        for i in range(50)
    ]
    cfg = LoadConfig(
        endpoint=server.endpoint,
        model="tiny",
        slo=SloSpec(ttft_p99_ms=5000, tpot_p99_ms=500),
        max_concurrency=16,
        request_timeout_s=30,
    )
    result = asyncio.run(
        run_window(
            cfg,
            WindowPlan(rate_rps=4.0, duration_s=2.0, warmup_s=0.5, seed=7),
            itertools.cycle(specs),
        )
    )
    s = result.summary
    inside = [r for r in result.requests if r.in_window]
    assert s.requests == len(inside) >= 2  # Poisson at 4 req/s over 2 s (seed 7)
    assert_clean(s)
    answered = [r for r in inside if r.error is None]
    # Exact lengths: every request asked for 32 tokens with ignore_eos; usage says 32.
    assert all(r.output_tokens == 32 for r in answered)
    assert s.output_tokens == 32 * s.completed
    # Token-id prompts of 12–16 ids: the engine counts exactly those (no BOS added).
    assert all(12 <= r.prompt_tokens <= 16 for r in answered)
    ttfts = [ttft_ms(r) for r in answered]
    tpots = [t for t in (tpot_ms(r) for r in answered) if t is not None]
    assert all(0 < t < 5000 for t in ttfts)
    # A decode step of this model takes about a millisecond: when the client is held up,
    # a whole stream can land in one read and its TPOT reads 0. Not every stream does.
    assert all(0 <= t < 500 for t in tpots) and max(tpots) > 0
    if s.errors == 0:
        assert s.slo_pass


@pytest.mark.parametrize(("fixture", "engine_name"), ENGINES)
def test_collect_smoke_writes_a_run_record(
    fixture: str, engine_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server: EngineServer = request.getfixturevalue(fixture)
    out = tmp_path / f"{engine_name}.json"
    cmd = [
        sys.executable,
        "-m",
        "tokenwatt",
        "collect",
        "--spec",
        str(SPEC),
        "--label",
        f"tiny-{engine_name}",
        "--role",
        "baseline",
        "--mode",
        "smoke",
        "--endpoint",
        server.endpoint,
        "--engine-log",
        str(server.log_path),
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = RunRecord.model_validate(json.loads(out.read_text()))

    assert record.mode == "smoke" and record.complete and not record.simulated
    env = record.environment
    assert env.engine_name == engine_name
    assert env.served_models == ["tiny"]
    assert env.kv_capacity_tokens is not None and env.kv_capacity_tokens > 0
    assert record.probes, "the SLO search ran no probe"
    for probe in record.probes:
        assert_clean(probe.window)
        assert probe.metrics is not None and probe.metrics.scrapes >= 1
        assert probe.metrics.running_mean is not None
    assert record.repeats
    rep = record.repeats[0].window
    assert_clean(rep)
    assert rep.completed > 0
    assert rep.output_tokens >= rep.requests  # at least one token each, counted by usage
    assert rep.goodput_tok_s == pytest.approx(rep.output_tokens / rep.duration_s, rel=1e-6)
    assert record.result is not None and record.result.rate_rps > 0
