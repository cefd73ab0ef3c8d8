"""The meter and ``open_meter``: window lifecycle, spec wiring, the seed run end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pynvml as real_pynvml
import pytest
import yaml

from tests.scripted_http import ScriptedServer, fixed
from tests.telemetry.conftest import run_window
from tests.telemetry.fake_nvml import FakeGpu, FakeNvml, SineTrace
from tokenwatt.analysis.power.power import sum_throttle_counts, window_tokens_per_joule
from tokenwatt.errors import TelemetryError
from tokenwatt.records.run.power import PowerSample
from tokenwatt.records.run.run import Repeat
from tokenwatt.records.spec.spec import Spec
from tokenwatt.telemetry import ManualClock, PowerMeter, open_meter
from tokenwatt.telemetry.base import ReadError
from tokenwatt.telemetry.null import NullSource

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "seed.report.json"


def _spec(**power: Any) -> Spec:
    data = yaml.safe_load(
        (ROOT / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml").read_text()
    )
    data["power"].update(power)
    return Spec.model_validate(data)


@pytest.fixture
def fake_pynvml(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> FakeNvml:
    """Inject a fake pynvml through sys.modules, as the adapter imports it lazily."""
    fake = FakeNvml([FakeGpu()], now=clock.now)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake.module)
    return fake


def test_open_meter_board_nvidia_through_sys_modules(
    fake_pynvml: FakeNvml, clock: ManualClock
) -> None:
    with open_meter(_spec(), clock=clock, environ={}) as meter:
        ident = meter.identity()
        assert (ident.vendor, ident.accelerator, ident.count) == (
            "NVIDIA",
            "NVIDIA H100 80GB HBM3",
            1,
        )
        assert ident.rated_bw_tbs_per_gpu == 3.35 and ident.table_key == "h100-sxm"
        w = run_window(meter, clock, 5.0)
    assert w.source == "nvml" and w.valid
    assert fake_pynvml.initialised == 0  # closed by the context manager


def test_spec_rated_bandwidth_overrides_table(fake_pynvml: FakeNvml, clock: ManualClock) -> None:
    spec = _spec()
    spec.hardware.rated_bw_tbs_per_gpu = 3.0
    with open_meter(spec, clock=clock, environ={}) as meter:
        assert meter.identity().rated_bw_tbs_per_gpu == 3.0
        assert meter.identity().rated_bw_source == "spec: hardware.rated_bw_tbs_per_gpu"


def test_node_source_takes_gpu_identity_from_nvml(
    fake_pynvml: FakeNvml, clock: ManualClock
) -> None:
    routes = {
        "/redfish/v1/Chassis": fixed({"Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]}),
        "/redfish/v1/Chassis/1": fixed(
            {"Id": "1", "Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}}
        ),
        "/redfish/v1/Chassis/1/Power": fixed({"PowerControl": [{"PowerConsumedWatts": 1200}]}),
    }
    with (
        ScriptedServer(routes) as server,
        open_meter(_spec(source="redfish", url=server.url), clock=clock, environ={}) as meter,
    ):
        assert meter.identity().accelerator == "NVIDIA H100 80GB HBM3"
        w = run_window(meter, clock, 2.0)
    assert w.scope == "node" and w.energy_j == pytest.approx(2400.0)


def test_power_source_none_gives_invalid_windows(clock: ManualClock) -> None:
    with open_meter(_spec(source="none"), clock=clock, environ={}) as meter:
        w = run_window(meter, clock, 3.0)
    assert not w.valid and w.source == "none" and w.samples == 0
    assert "no power samples in the window" in w.invalid_reasons


def test_board_without_a_gpu_adapter_is_refused() -> None:
    spec = _spec()
    spec.hardware.adapter = "none"
    with pytest.raises(TelemetryError, match=r"hardware\.adapter"):
        open_meter(spec, environ={})


def test_window_lifecycle_errors(clock: ManualClock) -> None:
    meter = PowerMeter(NullSource(), 1.0, clock=clock)
    with pytest.raises(TelemetryError, match="no power window is open"):
        meter.stop_window()
    meter.start_window()
    with pytest.raises(TelemetryError, match="already open"):
        meter.start_window()
    meter.close()
    meter.close()
    with pytest.raises(TelemetryError, match="closed"):
        meter.start_window()
    with pytest.raises(TelemetryError, match="sampling_hz"):
        PowerMeter(NullSource(), 0.0)


class Flaky(NullSource):
    """Fails every third read; a failed read is a skipped sample, not an invalid window."""

    name = "flaky"

    def __init__(self) -> None:
        super().__init__()
        self.notes = []
        self.n = 0

    def read(self) -> PowerSample:
        self.n += 1
        if self.n % 3 == 0:
            raise ReadError("HTTP 503")
        return PowerSample(power_w=100.0)


def test_failed_reads_are_noted_not_patched(clock: ManualClock) -> None:
    meter = PowerMeter(Flaky(), 1.0, clock=clock)
    w = run_window(meter, clock, 30.0)
    assert w.valid  # gaps of 2 s stay under the 3 s limit
    assert w.notes == ["10 readings failed (last: HTTP 503)"]
    assert w.energy_j == pytest.approx(3000.0)
    assert len(w.timeline) == 21


def test_windows_can_repeat_and_fit_the_run_record(
    clock: ManualClock, fake_pynvml: FakeNvml
) -> None:
    with open_meter(_spec(), clock=clock, environ={}) as meter:
        first = run_window(meter, clock, 10.0)
        clock.advance(5.0)
        second = run_window(meter, clock, 10.0)
    assert first.energy_j == pytest.approx(6000.0, abs=0.01)
    assert second.energy_j == pytest.approx(6000.0, abs=0.01)
    Repeat.model_validate(
        {
            "window": {"rate_rps": 1, "duration_s": 10, "requests": 1, "completed": 1, "errors": 0},
            "power": json.loads(second.model_dump_json()),
        }
    )


def test_seed_run_reproduced_through_the_meter(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> None:
    """Two 120 s repeats at 1 Hz on a fake H100 shaped like the seed's default configuration:
    mean 637 W, power cap active in 100 and 99 samples → 199 of 240, 7.18 tokens per joule."""
    seed = {c["key"]: c for c in json.loads(SEED.read_text())["configs"]}["baseline"]
    capped_until = {0: 100.0, 1: 99.0}
    state = {"repeat": 0, "start": 0.0}

    def reasons(t: float) -> int:
        since = t - state["start"]
        on = 0 < since <= capped_until[state["repeat"]]
        return real_pynvml.nvmlClocksEventReasonSwPowerCap if on else 0

    # Period 24 s: the swing integrates to zero over each 120 s window.
    gpu = FakeGpu(trace=SineTrace(637.0, 40.0, 24.0), reasons=reasons)
    fake = FakeNvml([gpu], now=clock.now)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake.module)
    windows = []
    with open_meter(_spec(), clock=clock, environ={}) as meter:
        for repeat in (0, 1):
            state["repeat"], state["start"] = repeat, clock.now()
            windows.append(run_window(meter, clock, 120.0))
            clock.advance(30.0)
    counts, samples = sum_throttle_counts(windows)
    assert (counts, samples) == (seed["throttle_counts"], 240)
    for w in windows:
        assert round((w.mean_power_w or 0) / 1000, 3) == seed["node_power_kw"]
        tpj = window_tokens_per_joule(w, seed["goodput_tok_s"] * w.duration_s)
        assert tpj is not None and round(tpj, 2) == 7.18
