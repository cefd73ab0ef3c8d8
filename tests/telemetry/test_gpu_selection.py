"""Which GPUs are measured: the engine's processes first, then the visible-devices variable
read with CUDA_DEVICE_ORDER, then the spec; every window lists them and how."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.telemetry.conftest import run_window
from tests.telemetry.fake_nvml import FakeGpu, FakeNvml
from tokenwatt.errors import TelemetryError
from tokenwatt.telemetry import ManualClock, PowerMeter
from tokenwatt.telemetry.board_nvidia import NvmlSource
from tokenwatt.telemetry.gpu_selection import engine_pids_from, process_group_pids

ENGINE_PID = 4242


def _gpus(
    names: tuple[str, str] = ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
) -> list[FakeGpu]:
    return [
        FakeGpu(name=names[0], uuid="GPU-0000aaaa", bus_id="00000000:18:00.0", processes=(7,)),
        FakeGpu(
            name=names[1], uuid="GPU-1111bbbb", bus_id="00000000:2a:00.0",
            processes=(ENGINE_PID, 9),
        ),
    ]  # fmt: skip


def _source(
    clock: ManualClock, env: dict[str, str], pids: frozenset[int] | None, **kw: object
) -> NvmlSource:
    fake = FakeNvml(_gpus(**kw), now=clock.now)  # type: ignore[arg-type]
    return NvmlSource(environ=env, nvml=fake.module, engine_pids=pids)


def test_the_engines_pid_picks_its_gpu_and_the_window_lists_it(clock: ManualClock) -> None:
    source = _source(clock, {}, frozenset({ENGINE_PID, 1}))
    meter = PowerMeter(source, 1.0, clock=clock)
    w = run_window(meter, clock, 5.0)
    meter.close()
    assert w.device_selection == "engine processes"
    assert [(d.uuid, d.bus_id) for d in w.measured_devices] == [
        ("GPU-1111bbbb", "00000000:2a:00.0")
    ]
    assert w.devices == 1 and w.mean_power_w == pytest.approx(600.0)


def test_processes_beat_a_visible_devices_list_that_disagrees(clock: ManualClock) -> None:
    source = _source(clock, {"CUDA_VISIBLE_DEVICES": "GPU-0000"}, frozenset({ENGINE_PID}))
    assert source.selection is not None and source.selection.method == "engine processes"
    [note] = [n for n in source.notes if "is used" in n]
    assert (
        "CUDA_VISIBLE_DEVICES selects GPU-0000aaaa but engine processes says GPU-1111bbbb" in note
    )
    source.close()


def test_no_engine_process_found_falls_back_and_says_so(clock: ManualClock) -> None:
    source = _source(clock, {"CUDA_VISIBLE_DEVICES": "1"}, frozenset({31337}))
    assert source.selection is not None
    assert source.selection.method == "CUDA_VISIBLE_DEVICES"
    assert [d.uuid for d in source.selection.devices] == ["GPU-1111bbbb"]
    assert any("PID namespace" in n for n in source.notes)
    # Identical models: the index is read in PCI order, and the record says it assumed so.
    assert any("FASTEST_FIRST" in n for n in source.notes)
    source.close()


def test_indices_over_mixed_models_without_pci_order_are_refused(clock: ManualClock) -> None:
    mixed = ("NVIDIA H100 80GB HBM3", "NVIDIA L4")
    with pytest.raises(TelemetryError, match=r"FASTEST_FIRST .* different GPU models"):
        _source(clock, {"CUDA_VISIBLE_DEVICES": "0"}, None, names=mixed)
    ok = _source(
        clock, {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, None, names=mixed
    )
    assert ok.selection is not None and [d.name for d in ok.selection.devices] == ["NVIDIA L4"]
    assert not any("FASTEST_FIRST" in n for n in ok.notes)
    ok.close()


def test_spec_positions_narrow_the_visible_list(clock: ManualClock) -> None:
    fake = FakeNvml(_gpus(), now=clock.now)
    env = {"CUDA_VISIBLE_DEVICES": "1,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    source = NvmlSource(environ=env, gpus=[1], nvml=fake.module)
    assert source.selection is not None
    assert source.selection.method == "CUDA_VISIBLE_DEVICES + spec hardware.gpus"
    assert [d.uuid for d in source.selection.devices] == ["GPU-0000aaaa"]
    source.close()
    with pytest.raises(TelemetryError, match="only 2 are visible to NVML"):
        NvmlSource(environ=env, gpus=[2], nvml=FakeNvml(_gpus(), now=clock.now).module)


def test_a_real_process_group_is_found() -> None:
    """A child started in its own session (as ``collect`` starts an engine) and its own
    child are both in the group that /proc reports."""
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        for _ in range(200):
            pids = process_group_pids(proc.pid)
            if len(pids) >= 2:
                break
            os.sched_yield()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
        assert proc.pid in pids and len(pids) >= 2
        assert engine_pids_from(proc.pid) == pids
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert engine_pids_from(None) is None
