"""Energy figures cross-checked, through the real sources against fakes: the counter against
the samples, wraps and resets, coarse counters, readings in the wrong unit."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_http import Route, ScriptedServer, fixed
from tests.telemetry.conftest import run_window
from tests.telemetry.fake_nvml import FakeGpu, FakeNvml, SineTrace
from tokenwatt.records.spec.spec import PowerSpec
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.board_nvidia import NvmlSource
from tokenwatt.telemetry.command import CommandSource
from tokenwatt.telemetry.redfish import RedfishSource

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "redfish"


def _nvml_meter(clock: ManualClock, gpus: list[FakeGpu]) -> PowerMeter:
    fake = FakeNvml(gpus, now=clock.now)
    return PowerMeter(NvmlSource(environ={}, nvml=fake.module), 1.0, clock=clock)


def test_two_different_gpus_one_with_a_module_counter_disagree(clock: ManualClock) -> None:
    """An H100 board beside a GH200 whose counter also counts the Grace CPU (+250 W): the
    counter says more than the power readings, so the window's power is refused."""
    h100 = FakeGpu(name="NVIDIA H100 80GB HBM3", uuid="GPU-aaaa", bus_id="00000000:18:00.0")
    gh200 = FakeGpu(
        name="NVIDIA GH200 480GB",
        uuid="GPU-bbbb",
        bus_id="00000009:01:00.0",
        trace=SineTrace(mean_w=500.0),
        counter_extra_w=250.0,
    )
    meter = _nvml_meter(clock, [h100, gh200])
    w = run_window(meter, clock, 30.0)
    meter.close()
    assert not w.valid
    [reason] = [r for r in w.invalid_reasons if r.startswith("energy counter says")]
    # Both figures are in the reason: the counter's 1,350 W and the samples' 1,100 W.
    assert "1350.0 W" in reason and "1100.0 W" in reason and "GH200/GB200" in reason


def test_the_same_two_gpus_without_the_module_counter_agree(clock: ManualClock) -> None:
    gpus = [
        FakeGpu(uuid="GPU-aaaa", bus_id="00000000:18:00.0", trace=SineTrace(600, 80, 7)),
        FakeGpu(name="NVIDIA H200", uuid="GPU-bbbb", bus_id="00000000:2a:00.0"),
    ]
    meter = _nvml_meter(clock, gpus)
    w = run_window(meter, clock, 30.0)
    meter.close()
    assert w.valid, w.invalid_reasons


def test_a_counter_that_wraps_is_added_back(clock: ManualClock) -> None:
    """NVML's counter is an unsigned 64-bit mJ count: started 5 kJ below 2^64 mJ it wraps
    after about 8 s at 600 W; the window's energy is still the trace's integral."""
    trace = SineTrace(mean_w=600.0)
    gpu = FakeGpu(trace=trace, counter_offset_mj=2**64 - 5_000_000)
    meter = _nvml_meter(clock, [gpu])
    w = run_window(meter, clock, 30.0)
    meter.close()
    assert w.valid, w.invalid_reasons
    assert w.energy_method == "counter"
    # Float64 near 1.8e16 J resolves about 2 J per reading.
    assert w.energy_j == pytest.approx(trace.energy_j(0, 30), abs=10.0)
    assert any("wrapped around" in n for n in w.notes)


def test_a_counter_that_resets_is_refused_not_read_as_negative(clock: ManualClock) -> None:
    meter = _nvml_meter(clock, [FakeGpu(counter_reset_at=12.0)])
    w = run_window(meter, clock, 30.0)
    meter.close()
    assert not w.valid
    assert any("went backwards" in r and "counter reset" in r for r in w.invalid_reasons)
    assert w.energy_j != w.energy_j or w.energy_j is None or w.energy_j >= 0


def _redfish(metrics: Route) -> dict[str, Route]:
    def load(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
        return data

    return {
        "/redfish/v1": fixed(load("service-root.json")),
        "/redfish/v1/Chassis": fixed(load("chassis-collection.json")),
        "/redfish/v1/Chassis/1U": fixed(load("chassis-new.json")),
        "/redfish/v1/Chassis/1U/EnvironmentMetrics": metrics,
    }


def test_a_whole_kwh_redfish_counter_cannot_measure_a_minute(clock: ManualClock) -> None:
    """EnergykWh in whole kWh (3.6 MJ a step) for a 60 s window at 900 W (54 kJ): refused,
    with the window length that would do (3.6 MJ / (2% × 900 W) = 200,000 s)."""
    body = json.loads((FIXTURES / "environment-metrics.json").read_text())
    del body["EnergyJoules"]
    trace = SineTrace(mean_w=900.0)

    def metrics(_q: dict[str, list[str]]) -> tuple[int, Any]:
        doc = copy.deepcopy(body)
        doc["PowerWatts"]["Reading"] = 900.0
        doc["EnergykWh"]["Reading"] = float(12 + int(trace.energy_j(0, clock.now()) // 3.6e6))
        return 200, doc

    with ScriptedServer(_redfish(metrics)) as server:
        spec = PowerSpec(source="redfish", url=server.url, verify_tls=False)
        source = RedfishSource(spec, environ={})
        meter = PowerMeter(source, 1.0, clock=clock)
        w = run_window(meter, clock, 60.0)
        meter.close()
    assert not w.valid
    [reason] = [r for r in w.invalid_reasons if "counter step" in r]
    assert "3.6e+06 J" in reason and "at least 200000 s" in reason


def _command_meter(tmp_path: Path, clock: ManualClock, printed: str) -> PowerMeter:
    script = tmp_path / "reading.py"
    script.write_text(f"print({printed!r})\n")
    spec = PowerSpec(source="command", command=f"{sys.executable} {script}")
    return PowerMeter(CommandSource(spec), 1.0, clock=clock)


@pytest.mark.parametrize(
    ("printed", "unit", "as_watts"),
    [("450000", "milliwatts", "450.0 W if mW"), ("0.45", "kilowatts", "450 W if kW")],
)
def test_a_command_printing_the_wrong_unit_is_named(
    tmp_path: Path, clock: ManualClock, printed: str, unit: str, as_watts: str
) -> None:
    """A node meter's 450 W printed as mW (450000) or kW (0.45): both are outside the node
    band (30 W .. 1.3 × 8 × 1500 W + host), and a factor of 1,000 brings them in."""
    meter = _command_meter(tmp_path, clock, printed)
    w = run_window(meter, clock, 3.0)
    meter.close()
    assert not w.valid
    assert any(f"likely {unit} read as watts: {as_watts}" in r for r in w.invalid_reasons)


def test_a_command_printing_watts_is_in_the_band(tmp_path: Path, clock: ManualClock) -> None:
    meter = _command_meter(tmp_path, clock, "450")
    w = run_window(meter, clock, 3.0)
    meter.close()
    assert w.valid, w.invalid_reasons
