"""The NVML adapter against a fake pynvml with the real binding's names and error classes."""

from __future__ import annotations

import inspect

import pynvml as real_pynvml
import pytest

from tests.telemetry.conftest import run_window
from tests.telemetry.fake_nvml import FakeGpu, FakeNvml, SineTrace
from tokenwatt.errors import TelemetryError
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.board_nvidia import NvmlSource, parse_visible_devices, throttle_names

SW_POWER_CAP = real_pynvml.nvmlClocksEventReasonSwPowerCap
HW_SLOWDOWN = real_pynvml.nvmlClocksEventReasonHwSlowdown


def _gpu(i: int, **kw: object) -> FakeGpu:
    return FakeGpu(uuid=f"GPU-{i:08x}-aaaa", bus_id=f"00000000:{0x18 + i:02X}:00.0", **kw)  # type: ignore[arg-type]


def _meter(
    clock: ManualClock, gpus: list[FakeGpu], env: dict[str, str] | None = None, hz: float = 1.0
) -> tuple[PowerMeter, FakeNvml]:
    fake = FakeNvml(gpus, now=clock.now)
    source = NvmlSource(environ=env or {}, nvml=fake.module)
    return PowerMeter(source, hz, clock=clock), fake


def test_fake_matches_real_nvml() -> None:
    fake = FakeNvml([FakeGpu()], now=lambda: 0.0)
    for name in fake.module.FAKE_FUNCTIONS:
        real_fn = getattr(real_pynvml, name)
        fake_params = list(inspect.signature(getattr(fake.module, name)).parameters)
        real_params = list(inspect.signature(real_fn).parameters)
        assert fake_params == real_params, name
    assert fake.module.NVMLError_GpuIsLost is real_pynvml.NVMLError_GpuIsLost


def test_counter_energy_and_instant_power(clock: ManualClock) -> None:
    trace = SineTrace(mean_w=637.0, amp_w=40.0, period_s=20.0)
    meter, _ = _meter(clock, [_gpu(0, trace=trace)])
    w = run_window(meter, clock, 120.0)
    assert w.valid, w.invalid_reasons
    assert w.energy_method == "counter"
    assert w.power_method == "instant"
    assert w.samples == 120
    assert w.duration_s == pytest.approx(120.0)
    # The counter is the exact integral: within the fake's 1 mJ truncation.
    assert w.energy_j == pytest.approx(trace.energy_j(0, 120), abs=0.01)
    assert w.mean_power_w == pytest.approx(trace.energy_j(0, 120) / 120, rel=1e-6)
    assert len(w.timeline) == 121 and w.timeline[0][0] == 0.0 and w.timeline[-1][0] == 120.0
    assert w.sm_clock_mhz_mean == 1980 and w.mem_clock_mhz_mean == 2619
    assert w.temperature_c_max == 60
    meter.close()


def test_no_counter_integrates_and_flags(clock: ManualClock) -> None:
    trace = SineTrace(mean_w=500.0, amp_w=30.0, period_s=40.0)
    meter, _ = _meter(clock, [_gpu(0, trace=trace, energy_supported=False)])
    w = run_window(meter, clock, 60.0)
    assert w.valid
    assert w.energy_method == "integrated"
    assert any("TotalEnergyConsumption" in n for n in w.notes)
    assert w.energy_j == pytest.approx(trace.energy_j(0, 60), rel=0.005)
    meter.close()


def test_average_power_fallback_is_flagged(clock: ManualClock) -> None:
    meter, _ = _meter(clock, [_gpu(0, instant_supported=False)])
    w = run_window(meter, clock, 10.0)
    assert w.power_method == "average"
    assert any("nvmlDeviceGetPowerUsage" in n for n in w.notes)
    assert w.mean_power_w == pytest.approx(600.0)
    meter.close()


def test_counter_reset_invalidates_energy(clock: ManualClock) -> None:
    meter, _ = _meter(clock, [_gpu(0, counter_reset_at=30.5)])
    w = run_window(meter, clock, 60.0)
    assert not w.valid
    assert w.energy_j is None
    assert any("went backwards" in r for r in w.invalid_reasons)
    meter.close()


def test_gpu_lost_mid_window(clock: ManualClock) -> None:
    meter, _ = _meter(clock, [_gpu(0), _gpu(1, lost_at=20.0)])
    w = run_window(meter, clock, 60.0)
    assert not w.valid
    assert any("device lost" in r and "GPU-00000001" in r for r in w.invalid_reasons)
    assert any("gap of" in r for r in w.invalid_reasons)
    assert w.samples == 19  # t = 1 … 19 s, then the GPU was gone
    meter.close()


def test_mig_enabled_is_refused(clock: ManualClock) -> None:
    fake = FakeNvml([_gpu(0, mig_enabled=True)], now=clock.now)
    with pytest.raises(TelemetryError, match="MIG enabled"):
        NvmlSource(environ={}, nvml=fake.module)
    assert fake.initialised == 0  # NVML shut down again


def test_mig_uuid_in_visible_devices_is_refused(clock: ManualClock) -> None:
    fake = FakeNvml([_gpu(0)], now=clock.now)
    with pytest.raises(TelemetryError, match="MIG slice"):
        NvmlSource(environ={"CUDA_VISIBLE_DEVICES": "MIG-1234"}, nvml=fake.module)


def test_gpu_without_mig_support_is_accepted(clock: ManualClock) -> None:
    """NotSupported from nvmlDeviceGetMigMode (a GPU without MIG) is no reason to refuse."""
    fake = FakeNvml([_gpu(0, mig_supported=False)], now=clock.now)
    source = NvmlSource(environ={}, nvml=fake.module)
    assert source.devices == 1
    assert fake.initialised == 1
    source.close()
    assert fake.initialised == 0


def test_visible_devices_in_pci_order(clock: ManualClock) -> None:
    # NVML index order here is not bus order: index 0 sits on bus 0x1A.
    gpus = [
        FakeGpu(uuid="GPU-cc", bus_id="00000000:1A:00.0", trace=SineTrace(300.0)),
        FakeGpu(uuid="GPU-aa", bus_id="00000000:18:00.0", trace=SineTrace(100.0)),
        FakeGpu(uuid="GPU-bb", bus_id="00000000:19:00.0", trace=SineTrace(200.0)),
    ]
    fake = FakeNvml(gpus, now=clock.now)
    src = NvmlSource(environ={"CUDA_VISIBLE_DEVICES": "2,0"}, nvml=fake.module)
    assert src.identity().device_ids == ("GPU-cc", "GPU-aa")
    assert src.read().power_w == pytest.approx(400.0)
    src.close()
    src = NvmlSource(environ={"CUDA_VISIBLE_DEVICES": "GPU-bb"}, nvml=fake.module)
    assert src.identity().device_ids == ("GPU-bb",)
    src.close()
    src = NvmlSource(environ={}, nvml=fake.module, gpus=[1])
    assert src.identity().device_ids == ("GPU-bb",)
    src.close()


def test_several_gpus_sum_power_and_energy(clock: ManualClock) -> None:
    gpus = [_gpu(i, trace=SineTrace(300.0 + 10 * i, 20.0, 15.0)) for i in range(4)]
    meter, _ = _meter(clock, gpus, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    w = run_window(meter, clock, 30.0)
    assert w.devices == 4
    expected = sum(g.trace.energy_j(0, 30) for g in gpus)
    assert w.energy_j == pytest.approx(expected, abs=0.05)
    ident = meter.identity()
    assert ident.count == 4 and ident.rated_bw_tbs_per_gpu == 3.35
    assert ident.driver == "580.105.08" and ident.table_key == "h100-sxm"
    meter.close()


def test_visible_devices_errors(clock: ManualClock) -> None:
    fake = FakeNvml([_gpu(0)], now=clock.now)
    with pytest.raises(TelemetryError, match="NVML sees 1"):
        NvmlSource(environ={"CUDA_VISIBLE_DEVICES": "3"}, nvml=fake.module)
    with pytest.raises(TelemetryError, match="NVML: no GPU to measure"):
        NvmlSource(environ={"CUDA_VISIBLE_DEVICES": ""}, nvml=fake.module)


def test_throttle_reasons_counted_per_reason(clock: ManualClock) -> None:
    def reasons(t: float) -> int:
        return (SW_POWER_CAP if int(t) % 4 else 0) | (HW_SLOWDOWN if int(t) == 7 else 0)

    meter, _ = _meter(clock, [_gpu(0, reasons=reasons)])
    w = run_window(meter, clock, 40.0)
    # Samples at t = 1 … 40: t % 4 != 0 for 30 of them; hw_slowdown only at t = 7.
    assert w.throttle_counts == {"hw_slowdown": 1, "sw_power_cap": 30}
    assert len(w.timeline_throttle) == len(w.timeline)
    assert w.timeline_throttle[7] == ["hw_slowdown", "sw_power_cap"]
    meter.close()


def test_old_driver_falls_back_to_throttle_reasons_call(clock: ManualClock) -> None:
    meter, _ = _meter(
        clock, [_gpu(0, event_reasons_supported=False, reasons=lambda t: SW_POWER_CAP)]
    )
    w = run_window(meter, clock, 5.0)
    assert w.throttle_counts == {"sw_power_cap": 5}
    meter.close()


def test_throttle_names_and_visible_parsing() -> None:
    assert throttle_names(0) == frozenset()
    assert throttle_names(0x4 | 0x80) == {"sw_power_cap", "hw_power_brake_slowdown"}
    assert throttle_names(0x1000) == {"other_0x1000"}
    assert parse_visible_devices(None) is None
    assert parse_visible_devices("1, 0,x,2") == ["1", "0"]
    assert parse_visible_devices("GPU-ab,MIG-cd") == ["GPU-ab", "MIG-cd"]


def test_ten_hz_sampling_counts(clock: ManualClock) -> None:
    meter, fake = _meter(clock, [_gpu(0)], hz=10.0)
    w = run_window(meter, clock, 3.0)
    assert w.samples == 30
    assert fake.gpus[0].reads >= 31
    meter.close()


def test_gpu_lost_before_opening_is_a_telemetry_error(clock: ManualClock) -> None:
    fake = FakeNvml([_gpu(0, lost_at=0.0)], now=clock.now)
    with pytest.raises(TelemetryError, match="NVMLError_GpuIsLost"):
        NvmlSource(environ={}, nvml=fake.module)
    assert fake.initialised == 0


def test_unsupported_clock_does_not_cost_the_sample(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    meter, fake = _meter(clock, [_gpu(0)])

    def no_clocks(handle: object, type: int) -> int:
        raise real_pynvml.NVMLError(real_pynvml.NVML_ERROR_NOT_SUPPORTED)

    monkeypatch.setattr(fake.module, "nvmlDeviceGetClockInfo", no_clocks)
    w = run_window(meter, clock, 5.0)
    meter.close()
    assert w.valid and w.samples == 5 and w.sm_clock_mhz_mean is None
    assert w.temperature_c_max == 60


def test_board_power_above_1_3x_the_enforced_limit_invalidates_the_window(
    clock: ManualClock,
) -> None:
    """NVML's enforced power limit (mW) bounds plausible readings: 1,000 W on a board limited
    to 700 W is not physical; 900 W on it is."""
    hot, _ = _meter(clock, [_gpu(0, trace=SineTrace(mean_w=1000.0), power_limit_w=700.0)])
    assert hot.identity().power_limit_w == 700.0
    w = run_window(hot, clock, 10.0)
    assert not w.valid
    assert any("1.3× the power limit of 700 W" in r for r in w.invalid_reasons)
    hot.close()
    warm, _ = _meter(clock, [_gpu(0, trace=SineTrace(mean_w=900.0), power_limit_w=700.0)])
    assert run_window(warm, clock, 10.0).valid
    warm.close()
