"""Intervals over repeats in reports: goodput, the deltas, the capacity words, the band."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from scipy import stats

from tests.analysis.report.test_summarise import _report
from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis import analyse_report, conclusion, fixed
from tokenwatt.records import ReportV3

SeedWith = Callable[[Callable[[dict[str, Any]], object]], ReportV3]


def test_report_stores_the_intervals_and_the_measured_band() -> None:
    report = _report(make_run(), tuned_run())
    base, tuned = report.configs
    # Baseline repeats 4600.0 and 4544.6: mean 4572.3, s/√n = 55.4 / 2 = 27.7, and
    # t(0.975, 1) = 12.7062: 4572.3 ± 351.96.
    assert base.goodput_ci_tok_s is not None
    # Stored as computed, not rounded: a page rounds once, where it prints (4,220.3).
    half = stats.t.ppf(0.975, 1) * stats.tstd([4600.0, 4544.6]) / 2**0.5
    assert base.goodput_ci_tok_s.low == pytest.approx(4572.3 - half, rel=1e-12)
    assert base.goodput_ci_tok_s.high == pytest.approx(4572.3 + half, rel=1e-12)
    assert base.goodput_ci_tok_s.low != round(base.goodput_ci_tok_s.low, 1)
    assert base.goodput_ci_tok_s.method == "student-t" and base.goodput_ci_tok_s.repeats == 2
    assert base.goodput_delta_ci_pct is None and base.tokens_per_joule_delta_ci_pct is None
    # Goodput difference: Welch on (5100, 5000) vs (4600, 4544.6), as % of 4572.3.
    welch = stats.ttest_ind([5100, 5000], [4600, 4544.6], equal_var=False).confidence_interval()
    delta = tuned.goodput_delta_ci_pct
    assert delta is not None and delta.method == "welch-t"
    assert delta.low == pytest.approx(100 * welch.low / 4572.3, abs=0.005)
    assert delta.high == pytest.approx(100 * welch.high / 4572.3, abs=0.005)
    assert (fixed(delta.low, 2), fixed(delta.high, 2)) == ("3.32", "17.57")
    # Tokens per joule per repeat = goodput / power (energy = power × 120 s over 120 s).
    base_tpj, tuned_tpj = [4600 / 640, 4544.6 / 634], [5100 / 620, 5000 / 612]
    welch = stats.ttest_ind(tuned_tpj, base_tpj, equal_var=False).confidence_interval()
    tpj = tuned.tokens_per_joule_delta_ci_pct
    mean = sum(base_tpj) / 2
    assert tpj is not None
    assert (tpj.low, tpj.high) == pytest.approx(
        (100 * welch.low / mean, 100 * welch.high / mean), abs=0.005
    )
    # Both bands: tuned (5100 − 5000) / 2 / 5050 = 0.99 %, stated and measured alike.
    assert report.variance_band_measured_pct == pytest.approx(100 * 50 / 5050, rel=1e-12)
    assert report.variance_band_pct == report.variance_band_measured_pct
    analysis = analyse_report(report)
    assert analysis.disagreements == []
    assert not analysis.band_understated
    assert "Its goodput gain's 95% interval over the repeats is +3.3% to +17.6%." in (
        conclusion(analysis, 64)
    )


def test_one_repeat_or_a_missed_repeat_gives_no_interval() -> None:
    one = _report(
        make_run(
            repeat_goodputs=(4600.0,),
            repeat_passes=(True,),
            ttft_p99s=(320.0,),
            tpot_p99s=(44.6,),
            powers_w=(640.0,),
            throttled=(100,),
        )
    )
    assert one.configs[0].goodput_ci_tok_s is None
    assert one.variance_band_measured_pct is None
    missed = _report(make_run(repeat_passes=(True, False)), tuned_run())
    assert missed.configs[0].goodput_ci_tok_s is None
    assert missed.configs[1].goodput_delta_ci_pct is None  # the baseline's mean is no goodput
    assert missed.configs[1].goodput_ci_tok_s is not None


def _repeats(*goodputs: float, power_w: float = 600.0) -> list[dict[str, Any]]:
    return [
        {
            "rate_rps": 9.0,
            "goodput_tok_s": g,
            "slo_pass": True,
            "window_s": 120.0,
            "energy_j": power_w * 120.0,
        }
        for g in goodputs
    ]


def test_capacity_words_when_the_gain_interval_includes_zero(seed_with: SeedWith) -> None:
    def noisy(d: dict[str, Any]) -> None:
        d["configs"][1]["accuracy"]["score"] = 96.0  # passes the gate
        d["configs"][1]["accuracy"]["delta_pts"] = 0.0
        d["configs"][0]["repeats_detail"] = _repeats(4600.0, 4544.6)
        d["configs"][1]["repeats_detail"] = _repeats(4500.0, 5613.8)

    analysis = analyse_report(seed_with(noisy))
    cap = analysis.tuned[0].capacity
    assert cap is not None and cap.gain_ci_pct is not None
    low, high = cap.gain_ci_pct
    assert low < 0 < high and cap.gain_in_doubt
    # The rule still decides: +10.6% is above the stated ±1.0% band, so credit stands.
    assert cap.credited and cap.saved == 6
    text = conclusion(analysis, 64)
    assert "saving 6 cards." in text
    assert "includes zero: the repeats cannot tell it from no gain; credit follows the " in text
    assert "stated variance band (±1.0%) alone." in text
    # The measured band, 100 × 1113.8 / 2 / 5056.9 = 11.01%, is far wider than the stated one.
    assert analysis.variance_band_measured_pct == pytest.approx(11.0127, abs=1e-4)
    assert analysis.band_understated


def test_band_not_flagged_when_the_stated_band_covers_the_measured(seed_with: SeedWith) -> None:
    def steady(d: dict[str, Any]) -> None:
        d["configs"][0]["repeats_detail"] = _repeats(4600.0, 4544.6)  # ±0.61%
        d["configs"][1]["repeats_detail"] = _repeats(5100.0, 5000.0)  # ±0.99%

    analysis = analyse_report(seed_with(steady))
    assert analysis.variance_band_measured_pct == pytest.approx(0.990099, abs=1e-6)
    assert not analysis.band_understated  # stated ±1.0%
    assert analysis.tuned[0].capacity is not None
    assert not analysis.tuned[0].capacity.gain_in_doubt


def test_seed_without_repeats_has_no_interval_and_no_measured_band(seed: ReportV3) -> None:
    analysis = analyse_report(seed)
    assert analysis.variance_band_measured_pct is None and not analysis.band_understated
    assert all(c.goodput_ci is None for c in analysis.configs)
    assert "interval" not in conclusion(analysis, 64)


def test_a_stored_interval_that_the_repeats_do_not_give_is_a_disagreement(
    seed_with: SeedWith,
) -> None:
    def tampered(d: dict[str, Any]) -> None:
        d["configs"][0]["repeats_detail"] = _repeats(4600.0, 4544.6)
        d["configs"][0]["goodput_ci_tok_s"] = {
            "low": 4500.0,
            "high": 4924.3,
            "method": "student-t",
            "repeats": 2,
        }
        d["variance_band_measured_pct"] = 0.2

    shown = [str(x) for x in analyse_report(seed_with(tampered)).disagreements]
    assert "configs[0].goodput_ci_tok_s.low: stored 4500, recomputed 4220.34" in shown
    assert "variance_band_measured_pct: stored 0.2, recomputed 0.605822" in shown
    assert len(shown) == 2
