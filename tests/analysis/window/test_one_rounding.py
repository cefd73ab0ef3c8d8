"""One window's p99 is one number wherever it is quoted: the page's table and the
sentence round the same way (half away from zero on the decimal value)."""

from __future__ import annotations

from tokenwatt.analysis import change_pct, fixed, signed, trimmed, value_text
from tokenwatt.analysis.window.search_story import SearchStory, miss_text
from tokenwatt.records.report.report_v3 import SearchWindowV3
from tokenwatt.site.format.fmt import num, pct, span

STORY = SearchStory(ttft_limit_ms=450.0, tpot_limit_ms=50.0, repeats_planned=1)


def test_fixed_rounds_the_decimal_value_half_up() -> None:
    # f"{50.55:.1f}" is "50.5": the binary value is just below 50.55
    assert f"{50.55:.1f}" == "50.5"
    assert fixed(50.55, 1) == "50.6"
    assert fixed(0.125, 2) == "0.13" and fixed(-0.25, 1) == "-0.3"
    assert fixed(1234.45, 1, commas=True) == "1,234.5"
    assert fixed(float("inf"), 1) == "inf"
    assert trimmed(2.675, 2) == "2.68"
    assert signed(-0.04, 1, "%") == "0.0%" and signed(0.05, 1, "%") == "+0.1%"
    assert signed(-2.25, 1) == "\N{MINUS SIGN}2.3"


def test_a_window_p99_reads_the_same_in_the_table_and_the_sentence() -> None:
    # the report keeps p99s to 0.01 ms: 50.5536 ms is kept as 50.55
    w = SearchWindowV3(
        step="repeat",
        backoff=0,
        rate_rps=4.0,
        slo_pass=False,
        ttft_p99_ms=120.0,
        tpot_p99_ms=50.55,
        failure_reason="tpot",
    )
    assert str(num(w.tpot_p99_ms, 1)) == "50.6"
    assert miss_text(w, STORY) == "missed p99 TPOT (50.6 ms > 50 ms)"
    assert value_text(50.55, 50.0, 1) == "50.6"


def test_page_formatters_round_alike() -> None:
    assert str(pct(12.25)) == "12.3%"
    assert str(span(4220.25, 4924.35)) == "4,220.3–4,924.4"


def test_a_change_that_rounds_to_zero_reads_as_a_change() -> None:
    assert change_pct(0.04) == change_pct(-0.04) == "±0.0%"
    assert change_pct(10.55) == "+10.6%" and change_pct(-3.0) == "\N{MINUS SIGN}3.0%"
