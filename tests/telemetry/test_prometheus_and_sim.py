"""Prometheus query API (DCGM exporter series, several nodes) and the simulator's /metrics,
both served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_http import ScriptedServer, fixed
from tests.telemetry.conftest import run_window
from tests.telemetry.fake_nvml import SineTrace
from tokenwatt.errors import TelemetryError
from tokenwatt.records.spec.spec import PowerSpec
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.prometheus import PrometheusSource, parse_vector, series_id
from tokenwatt.telemetry.sim import SimSource, metrics_url, parse_sim_metrics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus"
TRACES = [SineTrace(633.0, 25.0, 20.0), SineTrace(641.0, 35.0, 12.0)]


def _power_body() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "query-power.json").read_text())
    return data


class Dcgm:
    """Answers instant queries from two nodes whose GPUs follow TRACES on the manual clock."""

    def __init__(self, clock: ManualClock, reset_node2_at: float | None = None) -> None:
        self.clock = clock
        self.reset_node2_at = reset_node2_at
        self.queries: list[str] = []

    def __call__(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        q = query["query"][0]
        self.queries.append(q)
        t = self.clock.now()
        body = _power_body()
        results = body["data"]["result"]
        if q.startswith("DCGM_FI_DEV_POWER_USAGE"):
            for item, trace in zip(results, TRACES, strict=True):
                item["value"] = [1764477667.0 + t, f"{trace.power_w(t):.3f}"]
            return 200, body
        if q.startswith("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"):
            energy = copy.deepcopy(results)
            for i, (item, trace) in enumerate(zip(energy, TRACES, strict=True)):
                item["metric"]["__name__"] = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
                start = 0.0
                offset = 7.0e9
                if i == 1 and self.reset_node2_at is not None and t >= self.reset_node2_at:
                    start, offset = self.reset_node2_at, 0.0
                mj = offset + 1000.0 * trace.energy_j(start, t)
                item["value"] = [1764477667.0 + t, f"{mj:.0f}"]
            return 200, {"status": "success", "data": {"resultType": "vector", "result": energy}}
        return 400, {"status": "error", "errorType": "bad_data", "error": f"unknown {q}"}


def range_route(clock: ManualClock) -> Any:
    """``/api/v1/query_range`` for ``sum(DCGM_FI_DEV_POWER_USAGE…)`` over the two traces."""

    def route(query: dict[str, list[str]]) -> tuple[int, Any]:
        assert query["query"][0].startswith(
            "sum(max by (Hostname, instance, UUID, gpu) (DCGM_FI_DEV_POWER_USAGE"
        )
        start, end, step = (float(query[k][0]) for k in ("start", "end", "step"))
        values = []
        ts = start
        while ts <= end + 1e-9:
            t = ts - clock.wall_offset
            values.append([ts, f"{sum(tr.power_w(t) for tr in TRACES):.3f}"])
            ts += step
        result = [{"metric": {}, "values": values}]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}

    return route


def _spec(url: str, field: str | None = None) -> PowerSpec:
    return PowerSpec(source="prometheus", url=url, field=field)


def test_two_nodes_summed_with_counter_energy(clock: ManualClock) -> None:
    dcgm = Dcgm(clock)
    routes = {"/api/v1/query": dcgm, "/api/v1/query_range": range_route(clock)}
    with ScriptedServer(routes) as server:
        source = PrometheusSource(_spec(server.url, '{job="dcgm-exporter"}'))
        ident = source.identity()
        meter = PowerMeter(source, 1.0, clock=clock)
        w = run_window(meter, clock, 40.0)
        meter.close()
    assert ident.count == 2 and ident.rated_bw_tbs_per_gpu == 3.35
    assert ident.driver == "580.105.08"
    assert ident.device_ids == (
        "gpu-node-01/GPU-1a2b3c4d-0000-0000-0000-000000000001",
        "gpu-node-02/GPU-1a2b3c4d-0000-0000-0000-000000000002",
    )
    assert w.valid and w.devices == 2 and w.scope == "board"
    assert w.energy_method == "counter"
    expected = sum(tr.energy_j(0, 40) for tr in TRACES)
    assert w.energy_j == pytest.approx(expected, abs=1.0)  # counters are whole mJ
    assert dcgm.queries[0] == 'DCGM_FI_DEV_POWER_USAGE{job="dcgm-exporter"}'
    # The timeline comes from query_range over the window, at the 1 s step.
    assert "timeline from the source's range query" in w.notes
    assert len(w.timeline) == 41 and w.timeline[0][0] == 0.0 and w.timeline[-1][0] == 40.0
    t, watts = w.timeline[13]
    assert watts == pytest.approx(sum(tr.power_w(t) for tr in TRACES), abs=0.01)


def test_counter_reset_on_one_node_invalidates(clock: ManualClock) -> None:
    with ScriptedServer({"/api/v1/query": Dcgm(clock, reset_node2_at=20.5)}) as server:
        meter = PowerMeter(PrometheusSource(_spec(server.url)), 1.0, clock=clock)
        w = run_window(meter, clock, 30.0)
        meter.close()
    assert not w.valid and w.energy_j is None
    assert any("gpu-node-02" in r and "went backwards" in r for r in w.invalid_reasons)
    # No query_range route here: the live timeline stays and the failure is noted.
    assert len(w.timeline) == 31
    assert any(n.startswith("range query for the timeline failed") for n in w.notes)


def test_no_series_and_bad_selector() -> None:
    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}
    with ScriptedServer({"/api/v1/query": fixed(empty)}) as server:
        with pytest.raises(TelemetryError, match="no DCGM_FI_DEV_POWER_USAGE"):
            PrometheusSource(_spec(server.url))
        with pytest.raises(TelemetryError, match="label matcher"):
            PrometheusSource(_spec(server.url, "job=dcgm"))


def _mig_series(name: str, value_for: Any) -> list[dict[str, Any]]:
    """One node: GPU 0 split into three MIG instances (same UUID, GPU_I_ID 1..3), GPU 1 whole."""
    out = []
    for gpu, instances in (("0", ["1", "2", "3"]), ("1", [None])):
        for gi in instances:
            labels = {
                "__name__": name,
                "Hostname": "gpu-node-01",
                "UUID": f"GPU-mig-000{gpu}",
                "gpu": gpu,
                "modelName": "NVIDIA A100-SXM4-40GB",
            }
            if gi is not None:
                labels |= {"GPU_I_ID": gi, "GPU_I_PROFILE": "2g.10gb"}
            out.append({"metric": labels, "value": [1764477667.0, value_for(gpu)]})
    return out


class MigDcgm:
    """A DCGM exporter behind Prometheus, filtering on ``gpu=~"…"`` as PromQL would."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def __call__(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        q = query["query"][0]
        self.queries.append(q)
        name = q.split("{", 1)[0]
        watts = {"0": "250", "1": "300"}
        mj = {"0": "1000000", "1": "2000000"}
        series = _mig_series(name, (watts if name == "DCGM_FI_DEV_POWER_USAGE" else mj).get)
        if 'gpu=~"' in q:
            wanted = q.split('gpu=~"', 1)[1].split('"', 1)[0].split("|")
            series = [x for x in series if x["metric"]["gpu"] in wanted]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": series}}


def test_mig_instances_count_their_board_once() -> None:
    with ScriptedServer({"/api/v1/query": MigDcgm()}) as server:
        source = PrometheusSource(_spec(server.url))
        reading = source.read()
        ident = source.identity()
        source.close()
    # Four series, two boards: 250 W + 300 W, not 3 x 250 W + 300 W.
    assert source.devices == 2 and ident.count == 2
    assert reading.power_w == 550.0
    assert reading.counters_j == {
        "gpu-node-01/GPU-mig-0000": 1000.0,
        "gpu-node-01/GPU-mig-0001": 2000.0,
    }
    assert any("4 power series are 2 physical GPUs" in n for n in source.notes)


def test_hardware_gpus_selects_series_by_device_index() -> None:
    dcgm = MigDcgm()
    with ScriptedServer({"/api/v1/query": dcgm}) as server:
        source = PrometheusSource(_spec(server.url, '{job="dcgm"}'), gpus=[1])
        reading = source.read()
        source.close()
    assert dcgm.queries[0] == 'DCGM_FI_DEV_POWER_USAGE{job="dcgm",gpu=~"1"}'
    assert source.devices == 1 and reading.power_w == 300.0


def test_query_errors_are_read_errors() -> None:
    with pytest.raises(ValueError, match="bad_data: parse error"):
        parse_vector({"status": "error", "errorType": "bad_data", "error": "parse error"})
    with pytest.raises(ValueError, match="vector"):
        parse_vector({"status": "success", "data": {"resultType": "matrix", "result": []}})
    assert series_id({"instance": "h:9400", "gpu": "3"}) == "h:9400/3"


def test_unreachable_server() -> None:
    with ScriptedServer({}) as server:
        url = server.url
    with pytest.raises(TelemetryError, match="Prometheus at"):
        PrometheusSource(_spec(url), timeout_s=0.5)


SIM_METRICS = """# HELP tokenwatt_sim_power_watts Modelled board power of the simulated engine.
# TYPE tokenwatt_sim_power_watts gauge
tokenwatt_sim_power_watts{{gpu="0"}} {p0}
tokenwatt_sim_power_watts{{gpu="1"}} {p1}
# HELP vllm:num_requests_running Running requests.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running 12.0
"""


def test_sim_power_scraped_from_metrics(clock: ManualClock) -> None:
    def metrics(_q: dict[str, list[str]]) -> tuple[int, Any]:
        t = clock.now()
        return 200, SIM_METRICS.format(p0=300 + t, p1=200.0)

    with ScriptedServer({"/metrics": metrics}) as server:
        source = SimSource(server.url + "/v1")
        meter = PowerMeter(source, 2.0, clock=clock)
        w = run_window(meter, clock, 10.0)
        meter.close()
    assert w.scope == "sim" and w.energy_method == "integrated"
    # 500 W + t over 10 s: integral 5000 + 50 J, exact for a linear trace.
    assert w.energy_j == pytest.approx(5050.0)
    assert w.samples == 20


def test_sim_parsing_and_errors() -> None:
    assert metrics_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/metrics"
    text = (
        "# TYPE tokenwatt_sim_energy_joules counter\n"
        "tokenwatt_sim_energy_joules_total 1234.5\n"
        "# TYPE tokenwatt_sim_power_watts gauge\n"
        "tokenwatt_sim_power_watts 410.0\n"
    )
    assert parse_sim_metrics(text) == (410.0, 1234.5)
    with (
        ScriptedServer({"/metrics": fixed("other_metric 1\n")}) as server,
        pytest.raises(TelemetryError, match="no tokenwatt_sim_power_watts"),
    ):
        SimSource(server.url)


def test_against_the_real_simulated_engine(clock: ManualClock) -> None:
    """The sim source reads the metric names the real ``tokenwatt sim`` server exports."""
    import asyncio
    import threading

    from tokenwatt.sim.engine import PROFILES
    from tokenwatt.sim.server import SimServer, start_server

    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    async def up() -> None:
        sim = SimServer(next(iter(PROFILES.values())))
        box["runner"], box["port"] = await start_server(sim, "127.0.0.1", 0)
        box["idle_w"] = sim.profile.idle_power_w
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(up()), loop.run_forever()))
    thread.start()
    try:
        assert started.wait(10)
        spec = _spec_sim()
        from tokenwatt.telemetry import open_meter

        endpoint = f"http://127.0.0.1:{box['port']}/v1"
        with open_meter(spec, sim_endpoint=endpoint, clock=clock, environ={}) as meter:
            assert meter.identity().vendor == "sim"
            w = run_window(meter, clock, 3.0)
        assert w.scope == "sim" and w.source == "sim" and w.energy_method == "counter"
        assert w.timeline[0][1] == pytest.approx(box["idle_w"])
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _spec_sim() -> Any:
    import yaml

    from tokenwatt.records.spec.spec import Spec

    root = Path(__file__).resolve().parents[2]
    data = yaml.safe_load(
        (root / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml").read_text()
    )
    data["power"]["source"] = "sim"
    return Spec.model_validate(data)
