"""The AMD SMI adapter against a fake amdsmi with the real binding's names."""

from __future__ import annotations

import pytest

from tests.telemetry.conftest import run_window
from tests.telemetry.fake_amdsmi import FakeAmdGpu, FakeAmdSmi
from tests.telemetry.fake_nvml import SineTrace
from tokenwatt.errors import TelemetryError
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.board_amd import AmdSmiSource, violation_names


def _meter(
    clock: ManualClock, gpus: list[FakeAmdGpu], env: dict[str, str] | None = None
) -> PowerMeter:
    fake = FakeAmdSmi(gpus, now=clock.now)
    return PowerMeter(AmdSmiSource(environ=env or {}, amdsmi=fake.module), 1.0, clock=clock)


@pytest.mark.parametrize("old_key", [False, True])
def test_energy_accumulator_times_resolution(clock: ManualClock, old_key: bool) -> None:
    trace = SineTrace(720.0, 50.0, 18.0)
    meter = _meter(clock, [FakeAmdGpu(trace=trace, old_energy_key=old_key)])
    w = run_window(meter, clock, 60.0)
    meter.close()
    assert w.valid and w.energy_method == "counter" and w.power_method == "instant"
    # One tick is 15.259 µJ: the counter is exact to well under a joule.
    assert w.energy_j == pytest.approx(trace.energy_j(0, 60), abs=0.01)
    assert w.sm_clock_mhz_mean == 2100 and w.mem_clock_mhz_mean == 1300
    assert w.temperature_c_max == 71


def test_identity_from_market_name(clock: ManualClock) -> None:
    gpus = [
        FakeAmdGpu(bdf="0000:8c:00.0", market_name="AMD Instinct MI325X"),
        FakeAmdGpu(bdf="0000:0c:00.0", market_name="AMD Instinct MI325X"),
    ]
    meter = _meter(clock, gpus)
    ident = meter.identity()
    meter.close()
    assert ident.vendor == "AMD" and ident.count == 2
    assert ident.rated_bw_tbs_per_gpu == 6.0 and ident.driver == "6.12.12"
    assert ident.device_ids == ("0000:0c:00.0", "0000:8c:00.0")  # PCI order
    assert ident.memory_bytes_per_gpu == 196592 * 1024 * 1024


def test_ppt_violation_counts_as_power_cap_throttle(clock: ManualClock) -> None:
    meter = _meter(clock, [FakeAmdGpu(ppt_active=lambda t: t > 10)])
    w = run_window(meter, clock, 20.0)
    meter.close()
    assert w.throttle_counts == {"ppt_power": 10}
    assert violation_names({"active_ppt_pwr": True, "active_vr_thrm": "N/A"}) == {"ppt_power"}


def test_average_power_and_no_counter_are_flagged(clock: ManualClock) -> None:
    gpu = FakeAmdGpu(power_key="average_socket_power", energy_supported=False)
    meter = _meter(clock, [gpu])
    w = run_window(meter, clock, 10.0)
    meter.close()
    assert w.power_method == "average" and w.energy_method == "integrated"
    assert w.energy_j == pytest.approx(7000.0)
    assert len(w.notes) == 2


def test_gpu_lost_and_visible_devices(clock: ManualClock) -> None:
    meter = _meter(clock, [FakeAmdGpu(lost_at=5.0)])
    w = run_window(meter, clock, 10.0)
    meter.close()
    assert not w.valid and any("device lost" in r for r in w.invalid_reasons)
    fake = FakeAmdSmi([FakeAmdGpu()], now=clock.now)
    with pytest.raises(TelemetryError, match="AMD SMI sees 1"):
        AmdSmiSource(environ={"HIP_VISIBLE_DEVICES": "1"}, amdsmi=fake.module)
    assert fake.initialised == 0


def test_readings_above_1_3x_the_power_cap_are_not_physical(clock: ManualClock) -> None:
    """AMD SMI's power cap (750 W per GPU in the fake, as amdsmi_get_power_info reports it)
    bounds plausible readings: 1,000 W is above 1.3 × 750 W."""
    meter = _meter(clock, [FakeAmdGpu(trace=SineTrace(mean_w=1000.0))])
    assert meter.identity().power_limit_w == 750.0
    w = run_window(meter, clock, 10.0)
    meter.close()
    assert not w.valid
    assert any("1.3× the power limit of 750 W" in r for r in w.invalid_reasons)


def test_a_gpu_in_a_compute_partition_mode_is_refused(clock: ManualClock) -> None:
    """CPX splits one MI300X into eight logical GPUs, each reporting the socket's power."""
    with pytest.raises(TelemetryError, match=r"GPU 0000:0c:00\.0 is in CPX compute-partition mode"):
        _meter(clock, [FakeAmdGpu(compute_partition="CPX")])
    assert _meter(clock, [FakeAmdGpu(compute_partition="SPX")]).identity().count == 1
