"""Run records whose measurements went wrong in ways the collector did not flag: the report
must still say what is missing, never drop a value silently."""

from __future__ import annotations

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis import summarise
from tokenwatt.records.runs_io import RunInput


def test_zero_watt_power_windows_are_said_to_be_missing() -> None:
    """A "valid" window of 0 W (a meter that read nothing) gives no power and a note."""
    runs = [make_run(), tuned_run(powers_w=(0.0, 0.0))]
    inputs = [RunInput(f"runs/{r.label}.json", "a" * 64, r) for r in runs]
    report = summarise(inputs, title="zero watts")
    baseline, tuned = report.configs
    assert baseline.node_power_kw == 0.637
    assert tuned.node_power_kw is None
    assert "Power and tokens per joule for vllm-fp8kv: no valid power measurement" in (
        report.not_covered
    )


def test_one_zero_watt_window_does_not_halve_the_mean() -> None:
    runs = [make_run(), tuned_run(powers_w=(616.0, 0.0))]
    inputs = [RunInput(f"runs/{r.label}.json", "a" * 64, r) for r in runs]
    tuned = summarise(inputs, title="one zero").configs[1]
    assert tuned.node_power_kw == 0.616
