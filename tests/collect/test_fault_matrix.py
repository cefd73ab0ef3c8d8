"""The fault matrix: every fault a run meets, and what the collector does about it.

One row per fault, each run for real: scripted servers on 127.0.0.1 for what an engine can
do wrong inside a window, and `python -m tokenwatt collect` in a child process, with real
signals, for what can happen to the run. The README's "Reliability" table states the
guarantees; faults with a module of their own are tested there:

- SIGTERM and SIGHUP in a window, in a warm-up, before the first window; the engine
  SIGKILLed mid-window: tests/collect/test_signals.py;
- a slow, hung or failing power source or /metrics: tests/collect/measure/test_instruments.py;
- a full or read-only disk, a second collect on the same --out: tests/test_files.py;
- a server serving other than asked (max_tokens, ignore_eos, truncated prompts, usage):
  tests/collect/load/test_served.py; transport retries: tests/collect/load/test_transport.py.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from streaming_server import DONE, ScriptedServer, chunk, stream

from tokenwatt.collect.load.loadgen import LoadConfig, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records import RunRecord
from tokenwatt.records.spec.spec import SloSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collect_process import finish, probes, start_collect, wait_for, write_spec
from scripted_engine import EngineProcess

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 1.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def status_storm(status: int) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = {"error": {"message": f"server says {status}", "code": status}}
        return web.json_response(body, status=status)

    return handler


async def stall() -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)  # never answers within the request timeout
        return web.Response()

    return handler


async def no_headers() -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()  # the request was read; no status line ever comes
        return web.Response()

    return handler


async def reset_mid_stream() -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(chunk(" a"))
        assert request.transport is not None
        request.transport.abort()
        return resp

    return handler


async def malformed_json() -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, [chunk(" a"), b"data: {not json\n\n", DONE])

    return handler


async def nonsense_usage() -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        raw = {"prompt_tokens": -5, "completion_tokens": 4, "total_tokens": 0}
        return await stream(request, [chunk(" a"), chunk(usage=raw), DONE])

    return handler


@dataclass(frozen=True)
class WindowFault:
    """A fault inside a window and the error kind every request must end with."""

    name: str
    make: Callable[[], Awaitable[Handler]]
    kind: str
    status: int | None
    message: str


WINDOW_FAULTS = [
    WindowFault("503-storm", lambda: status_storm(503), "http_503", 503, "HTTP 503"),
    WindowFault("429-storm", lambda: status_storm(429), "http_429", 429, "HTTP 429"),
    WindowFault("stalled-stream", stall, "timeout", None, "request timeout"),
    WindowFault("no-response-headers", no_headers, "disconnect", None, "disconnected"),
    WindowFault("reset-mid-stream", reset_mid_stream, "disconnect", 200, "not completed"),
    WindowFault("malformed-sse-json", malformed_json, "protocol", 200, "{not json"),
    WindowFault("nonsense-usage", nonsense_usage, "protocol", 200, "usage.prompt_tokens -5"),
]


@pytest.mark.parametrize("fault", WINDOW_FAULTS, ids=[f.name for f in WINDOW_FAULTS])
async def test_a_fault_in_a_window_is_an_explained_failed_window(
    server: ScriptedServer, fault: WindowFault
) -> None:
    """Every request fails with the fault's kind, keeps a sample with its detail, counts as
    infinitely slow, and the window is summarised and fails: no crash, no retry of a
    request the server may have received, nothing counted as a client cancellation."""
    server.handler = await fault.make()
    cfg = LoadConfig(
        endpoint=server.base,
        model="tiny",
        slo=SloSpec(ttft_p99_ms=2000, tpot_p99_ms=1000),
        max_concurrency=16,
        request_timeout_s=TIMEOUT_S,
    )
    result = await run_window(
        cfg,
        WindowPlan(rate_rps=10, duration_s=0.5, warmup_s=0.0, seed=3, keep_load=False),
        itertools.repeat(RequestSpec(prompt=[11, 12, 13], max_tokens=4)),
    )
    s = result.summary
    assert s.requests > 0 and s.errors == s.requests and s.completed == 0
    assert s.error_kinds == {fault.kind: s.requests}
    assert not s.slo_pass and s.ttft_ms.p99 == "inf"
    assert s.transport_retries == 0 and s.cancelled_by_client == 0
    (sample, *_) = s.error_samples[fault.kind]
    assert sample.kind == fault.kind and sample.status == fault.status
    assert sample.message is not None and fault.message in sample.message
    if fault.kind.startswith("http_"):
        assert sample.body is not None and f"server says {fault.status}" in sample.body
    if fault.kind == "timeout":
        assert s.e2e_ms.p99 == pytest.approx(TIMEOUT_S * 1e3, rel=0.2)  # the timeout's E2E


# -- faults of the run: a real `tokenwatt collect` process -----------------------------


@pytest.mark.parametrize("presses", [1, 2, 3], ids=["ctrl-c-once", "twice", "three-times"])
def test_ctrl_c_once_or_repeatedly_leaves_a_valid_incomplete_record(
    engine: EngineProcess, tmp_path: Path, presses: int
) -> None:
    out = tmp_path / "run.json"
    proc = start_collect(write_spec(tmp_path, engine.endpoint), out)
    wait_for(lambda: probes(out) > 0, proc)
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)
    stderr = finish(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete is False and record.interrupted == "ctrl-c"
    assert record.finished is not None and len(record.probes) >= 1
    # Ctrl-C drops the window in flight: the record must not say everything was kept.
    assert record.incomplete_reason is not None
    assert "the window in flight, if any, is not" in record.incomplete_reason
    assert not list(tmp_path.glob(".run.json*"))


def test_a_failing_power_command_leaves_a_complete_run_without_power(
    engine: EngineProcess, tmp_path: Path
) -> None:
    failing = f"{sys.executable} -c 'import sys; sys.exit(3)'"
    out = tmp_path / "run.json"
    proc = start_collect(
        write_spec(tmp_path, engine.endpoint, power={"source": "command", "command": failing}), out
    )
    stderr = finish(proc)
    assert proc.returncode == 0, stderr
    # Said once, before the first window (not again at the end).
    assert stderr.count("warning: Power: the meter could not be opened") == 1, stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete is True and record.probes
    assert any(
        n.startswith("Power: the meter could not be opened") and "exit status 3" in n
        for n in record.not_covered
    )
    assert all(r.power is None for r in record.repeats)
