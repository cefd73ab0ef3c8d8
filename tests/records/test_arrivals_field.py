"""``measurement.arrivals`` in specs and ``arrivals`` in window summaries: defaults, old
records, and the spec fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tokenwatt.records.reading.load import load_spec
from tokenwatt.records.run.window import WindowSummary
from tokenwatt.records.spec.spec import fingerprint, fingerprint_diff

SPECS = Path(__file__).resolve().parents[2] / "specs"


def test_a_spec_without_the_field_is_conditioned_and_keeps_its_old_fingerprint() -> None:
    spec = load_spec(SPECS / "sim-demo.spec.yaml")
    assert spec.measurement.arrivals == "conditioned"
    # The fingerprint of this spec before measurement.arrivals existed, when its windows
    # were 1 s (they are in the fingerprint; the demo's are longer now).
    m = spec.measurement.model_copy(update={"window_s": 1.0, "search_window_s": 1.0})
    assert fingerprint(spec.model_copy(update={"measurement": m})) == "beff71cf26e0ed83"


def test_the_arrival_process_is_outside_the_fingerprint() -> None:
    spec = load_spec(SPECS / "sim-demo.spec.yaml")
    poisson = spec.model_copy(
        update={"measurement": spec.measurement.model_copy(update={"arrivals": "poisson"})}
    )
    assert poisson.measurement.arrivals == "poisson"
    assert fingerprint(poisson) == fingerprint(spec)
    assert fingerprint_diff(poisson, spec) == []


def test_an_unknown_process_is_refused() -> None:
    spec = load_spec(SPECS / "sim-demo.spec.yaml")
    data = spec.model_dump()
    data["measurement"]["arrivals"] = "uniform"
    with pytest.raises(ValidationError, match="arrivals"):
        type(spec).model_validate(data)


def test_a_window_recorded_before_the_field_reads_as_poisson() -> None:
    old = {"rate_rps": 6.0, "duration_s": 60.0, "requests": 372, "completed": 372, "errors": 0}
    assert WindowSummary.model_validate(old).arrivals == "poisson"
    new = WindowSummary.model_validate({**old, "requests": 360, "arrivals": "conditioned"})
    assert new.arrivals == "conditioned"
    assert "round(rate_rps × duration_s)" in (
        WindowSummary.model_fields["arrivals"].description or ""
    )
