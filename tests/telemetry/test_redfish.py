"""Redfish over real HTTP(S) on 127.0.0.1, from recorded-shape JSON of both generations."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_http import Route, ScriptedServer, fixed, make_self_signed
from tests.telemetry.conftest import run_window
from tests.telemetry.fake_nvml import SineTrace
from tokenwatt.errors import TelemetryError
from tokenwatt.records.spec.spec import PowerSpec
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.redfish import (
    RedfishSource,
    parse_environment_metrics,
    parse_power_resource,
    service_root,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "redfish"
PASSWORD = "s3cret-Pa55"
ENV = {"BMC_PASSWORD": PASSWORD}


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def _routes(generation: str, metrics: Route | None = None) -> dict[str, Route]:
    routes: dict[str, Route] = {
        "/redfish/v1": fixed(_load("service-root.json")),
        "/redfish/v1/Chassis": fixed(_load("chassis-collection.json")),
    }
    if generation == "new":
        routes["/redfish/v1/Chassis/1U"] = fixed(_load("chassis-new.json"))
        routes["/redfish/v1/Chassis/1U/EnvironmentMetrics"] = metrics or fixed(
            _load("environment-metrics.json")
        )
    else:
        routes["/redfish/v1/Chassis/1U"] = fixed(_load("chassis-old.json"))
        routes["/redfish/v1/Chassis/1U/Power"] = metrics or fixed(_load("power-old.json"))
    return routes


def _spec(url: str, **kw: Any) -> PowerSpec:
    base: dict[str, Any] = {
        "source": "redfish",
        "url": url,
        "username": "admin",
        "password_env": "BMC_PASSWORD",
        "verify_tls": False,
    }
    base.update(kw)
    return PowerSpec(**base)


def test_parsers_on_recorded_shapes() -> None:
    watts, joules, unit = parse_environment_metrics(_load("environment-metrics.json"))
    assert (watts, joules, unit) == (374.0, 8123456.0, "J")
    only_kwh = _load("environment-metrics.json")
    del only_kwh["EnergyJoules"]
    assert parse_environment_metrics(only_kwh)[1:] == (pytest.approx(2.256 * 3.6e6), "kWh")
    assert parse_power_resource(_load("power-old.json")) == 344.0
    assert parse_power_resource({"PowerControl": [{"PowerConsumedWatts": None}]}) is None
    assert service_root("https://bmc/") == "https://bmc/redfish/v1"
    assert service_root("https://bmc/redfish/v1") == "https://bmc/redfish/v1"


def test_environment_metrics_energy_counter(clock: ManualClock) -> None:
    trace = SineTrace(mean_w=900.0, amp_w=60.0, period_s=25.0)
    body = _load("environment-metrics.json")

    def metrics(_q: dict[str, list[str]]) -> tuple[int, Any]:
        doc = copy.deepcopy(body)
        t = clock.now()
        doc["PowerWatts"]["Reading"] = round(trace.power_w(t), 1)
        doc["EnergyJoules"]["Reading"] = 1.0e6 + trace.energy_j(0, t)
        return 200, doc

    with ScriptedServer(_routes("new", metrics), auth=("admin", PASSWORD)) as server:
        source = RedfishSource(_spec(server.url), environ=ENV)
        meter = PowerMeter(source, 1.0, clock=clock)
        w = run_window(meter, clock, 60.0)
        meter.close()
    assert w.valid and w.scope == "node" and w.source == "redfish"
    assert w.energy_method == "counter"
    assert w.energy_j == pytest.approx(trace.energy_j(0, 60), rel=1e-9)
    assert w.samples == 60


def test_older_power_resource_integrates(clock: ManualClock) -> None:
    with ScriptedServer(_routes("old"), auth=("admin", PASSWORD)) as server:
        source = RedfishSource(_spec(server.url), environ=ENV)
        meter = PowerMeter(source, 1.0, clock=clock)
        w = run_window(meter, clock, 10.0)
        meter.close()
    assert w.valid
    assert w.energy_method == "integrated"
    assert w.energy_j == pytest.approx(3440.0)
    assert any("older Redfish Power" in n for n in w.notes)


def test_wrong_password_is_refused_without_leaking_it() -> None:
    with (
        ScriptedServer(_routes("new"), auth=("admin", PASSWORD)) as server,
        pytest.raises(TelemetryError, match="refused the credentials") as info,
    ):
        RedfishSource(_spec(server.url), environ={"BMC_PASSWORD": "wrong-one"})
    assert "wrong-one" not in str(info.value)
    assert PASSWORD not in str(info.value)


def test_password_only_from_the_named_variable() -> None:
    with ScriptedServer(_routes("new"), auth=("admin", PASSWORD)) as server:
        with pytest.raises(TelemetryError, match=r"BMC_PASSWORD.*not set"):
            RedfishSource(_spec(server.url), environ={})
        RedfishSource(_spec(server.url), environ=ENV).close()
        assert all(h and h.startswith("Basic ") for h in server.auth_headers)


def test_tls_verification_on_and_off(tmp_path: Path) -> None:
    cert = make_self_signed(tmp_path)
    with ScriptedServer(_routes("new"), auth=("admin", PASSWORD), tls=cert) as server:
        assert server.url.startswith("https://")
        with pytest.raises(TelemetryError, match="verify_tls"):
            RedfishSource(_spec(server.url, verify_tls=True), environ=ENV)
        source = RedfishSource(_spec(server.url, verify_tls=False), environ=ENV)
        assert source.read().power_w == 374.0
        source.close()


def test_timeout_is_reported() -> None:
    with (
        ScriptedServer(
            _routes("new"), hang={"/redfish/v1/Chassis/1U/EnvironmentMetrics"}
        ) as server,
        pytest.raises(TelemetryError, match="timed out"),
    ):
        RedfishSource(
            _spec(server.url, username=None, password_env=None), environ={}, timeout_s=0.2
        )


def test_chassis_selection() -> None:
    routes = _routes("old")
    gpu_chassis = _load("chassis-new.json") | {"Id": "GPU_Baseboard"}
    gpu_chassis["EnvironmentMetrics"] = {
        "@odata.id": "/redfish/v1/Chassis/GPU_Baseboard/EnvironmentMetrics"
    }
    routes["/redfish/v1/Chassis/GPU_Baseboard"] = fixed(gpu_chassis)
    routes["/redfish/v1/Chassis/GPU_Baseboard/EnvironmentMetrics"] = fixed(
        {"PowerWatts": {"Reading": 2800.0}}
    )
    with ScriptedServer(routes) as server:
        src = RedfishSource(
            _spec(server.url, chassis="GPU_Baseboard", username=None, password_env=None), environ={}
        )
        assert src.read().power_w == 2800.0
        assert src.identity().accelerator == "Redfish chassis GPU_Baseboard"
        src.close()
        with pytest.raises(TelemetryError, match=r"'Nope' not found.*GPU_Baseboard"):
            RedfishSource(
                _spec(server.url, chassis="Nope", username=None, password_env=None), environ={}
            )


def test_a_frozen_redfish_energy_counter_invalidates_the_window(clock: ManualClock) -> None:
    """A BMC whose EnergyJoules stops moving while PowerWatts reads 900 W: 0 J is no figure."""
    body = _load("environment-metrics.json")

    def metrics(_q: dict[str, list[str]]) -> tuple[int, Any]:
        doc = copy.deepcopy(body)
        doc["PowerWatts"]["Reading"] = 900.0
        doc["EnergyJoules"]["Reading"] = 1.0e6  # stuck
        return 200, doc

    with ScriptedServer(_routes("new", metrics), auth=("admin", PASSWORD)) as server:
        meter = PowerMeter(RedfishSource(_spec(server.url), environ=ENV), 1.0, clock=clock)
        w = run_window(meter, clock, 10.0)
        meter.close()
    assert not w.valid and w.scope == "node"
    assert any("did not move over 10.0 s while power read 900 W" in r for r in w.invalid_reasons)
