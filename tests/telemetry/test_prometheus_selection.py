"""A DCGM exposition with more GPUs than the engine uses: exactly the selected ones are read,
and a selection the series cannot honour is an error naming the source."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.scripted_http import ScriptedServer
from tests.telemetry.conftest import run_window
from tokenwatt.errors import TelemetryError
from tokenwatt.records.spec.spec import PowerSpec
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.prometheus import PrometheusSource

GPUS = [  # four H100s on one node, 100 W apart so that any wrong sum shows
    {"gpu": str(i), "UUID": f"GPU-{c * 8}", "modelName": "NVIDIA H100 80GB HBM3",
     "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0", "Hostname": "node1", "watts": 300.0 + 100 * i}
    for i, c in enumerate("abcd")
]  # fmt: skip


class Exporter:
    """Prometheus' instant query over the four GPUs, applying ``label=~"a|b"`` matchers the
    way Prometheus does (anchored regex), so a selection that is not sent is not applied."""

    def __init__(self, *, with_uuid: bool = True) -> None:
        self.with_uuid = with_uuid
        self.t = 0.0

    def __call__(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        q = query["query"][0]
        name = q.split("{", 1)[0]
        matchers = dict(re.findall(r'(\w+)=~"([^"]*)"', q))
        result = []
        for gpu in GPUS:
            labels = {k: str(v) for k, v in gpu.items() if k != "watts"}
            if not self.with_uuid:
                del labels["UUID"]
            if any(not re.fullmatch(rx, labels.get(k, "")) for k, rx in matchers.items()):
                continue
            value = float(gpu["watts"])  # type: ignore[arg-type]
            if name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
                value = 1000.0 * (1e6 + value * self.t)
            result.append({"metric": {"__name__": name, **labels}, "value": [self.t, str(value)]})
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_only_the_engines_two_gpus_of_four_are_summed(clock: ManualClock) -> None:
    exporter = Exporter()

    def route(query: dict[str, list[str]]) -> tuple[int, Any]:
        exporter.t = clock.now()
        return exporter(query)

    with ScriptedServer({"/api/v1/query": route}) as server:
        spec = PowerSpec(source="prometheus", url=server.url)
        source = PrometheusSource(spec, uuids=["GPU-bbbbbbbb", "GPU-dddddddd"])
        meter = PowerMeter(source, 1.0, clock=clock)
        w = run_window(meter, clock, 10.0)
        meter.close()
    assert w.valid, w.invalid_reasons
    assert w.devices == 2 and w.mean_power_w == pytest.approx(400.0 + 600.0)
    assert [d.uuid for d in w.measured_devices] == ["GPU-bbbbbbbb", "GPU-dddddddd"]
    assert w.device_selection == "engine processes (by UUID)"


@pytest.mark.parametrize(
    ("kw", "with_uuid", "message"),
    [
        ({"uuids": ["GPU-bbbbbbbb", "GPU-eeeeeeee"]}, True, "no .* series for selected GPU"),
        ({"uuids": ["GPU-bbbbbbbb"]}, False, "prometheus cannot apply .* 'UUID' label"),
        ({"gpus": [1, 7]}, True, "selected GPU\\(s\\) 7 \\(gpu label\\)"),
    ],
)
def test_a_selection_the_series_cannot_honour_is_an_error(
    kw: dict[str, Any], with_uuid: bool, message: str
) -> None:
    with ScriptedServer({"/api/v1/query": Exporter(with_uuid=with_uuid)}) as server:
        spec = PowerSpec(source="prometheus", url=server.url)
        with pytest.raises(TelemetryError, match=message):
            PrometheusSource(spec, **kw)
