"""The goodput methods page says how send lag and TTFT are measured, as the code does."""

from __future__ import annotations

from pathlib import Path

from tokenwatt.analysis.window.latency import send_lag_ms, ttft_ms
from tokenwatt.records.run.request import RequestResult
from tokenwatt.records.run.window import WindowSummary

PAGE = Path(__file__).resolve().parents[1] / "site_templates" / "methods" / "goodput.md"


def test_send_lag_leaves_out_the_slot_wait_and_ttft_keeps_it() -> None:
    # scheduled at 0, picked up 2 ms late, waited 300 ms for a concurrency slot
    r = RequestResult(scheduled_s=0.0, dispatched_s=0.002, sent_s=0.302, chunk_s=[0.5])
    r.first_token_s = r.last_token_s = 0.5
    r.output_tokens = 1
    assert round(send_lag_ms(r), 6) == 2.0
    assert round(ttft_ms(r), 6) == 500.0  # from the scheduled time, slot wait included


def test_the_page_and_the_record_document_that_choice() -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "**Send lag**" in text
    assert "`max_concurrency` slots is not late on the client's part" in text
    assert "stays inside TTFT, which counts from the scheduled time" in text
    assert "measured again" in text
    doc = " ".join((WindowSummary.__doc__ or "").split())
    assert "dispatched − scheduled" in doc and "concurrency slot" in doc


def test_the_page_states_the_arrival_processes_and_their_noise_as_the_code_does() -> None:
    import math

    from tokenwatt.collect.load.arrivals import arrival_count
    from tokenwatt.records.spec.spec_load import MeasurementSpec

    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "`measurement.arrivals`" in text
    assert MeasurementSpec.model_fields["arrivals"].default == "conditioned"
    assert "**`conditioned`** (the default)" in text and "**`poisson`**" in text
    # The figures the page quotes.
    assert arrival_count(6.0, 60.0) == 360 and "(360 arrivals expected)" in text
    assert f"±{100 / math.sqrt(360):.1f}% at 6 req/s over 60 s" in text
    assert f"±{100 / math.sqrt(3000):.1f}% at 3,000" in text
    assert arrival_count(2.5, 1.0) == 3 and "(halves rounded up)" in text
    assert "`--num-prompts` N requests at `--request-rate` R" in text
