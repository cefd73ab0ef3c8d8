"""The seed record's derived numbers, recomputed from its raw ones (methods/energy.md,
methods/mbu.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tokenwatt.analysis import NoCredit, analyse_report, conclusion
from tokenwatt.records import ReportV3

SeedWith = Callable[[Callable[[dict[str, Any]], object]], ReportV3]


def test_tokens_per_joule_are_7_18_and_8_21(seed: ReportV3) -> None:
    analysis = analyse_report(seed)
    base, tuned = analysis.configs
    assert base.tokens_per_joule is not None and tuned.tokens_per_joule is not None
    assert round(base.tokens_per_joule, 2) == 7.18
    assert round(tuned.tokens_per_joule, 2) == 8.21
    assert base.mean_power_w == pytest.approx(637.0)
    assert tuned.tokens_per_joule_delta_pct == pytest.approx(14.37, abs=0.01)  # "14%"


def test_goodput_delta_is_10_6_percent(seed: ReportV3) -> None:
    tuned = analyse_report(seed).tuned[0]
    assert round(tuned.goodput_delta_pct, 1) == 10.6
    assert analyse_report(seed).baseline.goodput_delta_pct == 0.0


def test_gate_fails_the_tuned_configuration_by_8_points(seed: ReportV3) -> None:
    analysis = analyse_report(seed)
    assert analysis.baseline.gate is not None and analysis.baseline.gate.passed
    gate = analysis.tuned[0].gate
    assert gate is not None
    assert gate.delta_pts == pytest.approx(-8.0)
    assert gate.threshold_pts == 1.0
    assert not gate.passed
    assert gate.margin_pts == pytest.approx(7.0)


def test_seed_earns_no_capacity_saving_because_of_the_gate(seed: ReportV3) -> None:
    analysis = analyse_report(seed)
    cap = analysis.tuned[0].capacity
    assert cap is not None
    assert cap.saved == 0 and not cap.credited
    assert cap.reasons == (NoCredit.GATE_FAILED,)
    assert cap.cards_needed == 58  # shown, but not credited
    sentence = conclusion(analysis, seed.fleet.cards)
    assert sentence == (
        "vllm-fp8kv (+10.6% goodput) earns no capacity saving because it failed the "
        "accuracy gate by 8.0 points against a 1.0-point threshold."
    )
    assert analysis.disagreements == []


def test_tuned_score_95_5_saves_6_of_64_cards(seed_with: SeedWith) -> None:
    def passing(d: dict[str, Any]) -> None:
        d["configs"][1]["accuracy"]["score"] = 95.5
        d["configs"][1]["accuracy"]["delta_pts"] = -0.5

    report = seed_with(passing)
    analysis = analyse_report(report)
    cap = analysis.tuned[0].capacity
    assert cap is not None and cap.credited
    assert cap.cards_needed == 58  # ceil(64 × 4572.3 / 5056.9) = ceil(57.87)
    assert cap.saved == 6
    assert conclusion(analysis, 64) == (
        "vllm-fp8kv (+10.6% goodput) serves the baseline load of 64 cards on 58, saving 6 cards."
    )


def test_a_miss_in_one_repeat_earns_no_credit(seed_with: SeedWith) -> None:
    def one_miss(d: dict[str, Any]) -> None:
        d["configs"][1]["accuracy"]["score"] = 95.5
        d["configs"][1]["accuracy"]["delta_pts"] = -0.5
        d["configs"][1]["slo_pass_count"] = 1

    analysis = analyse_report(seed_with(one_miss))
    cap = analysis.tuned[0].capacity
    assert cap is not None and cap.saved == 0
    assert cap.reasons == (NoCredit.SLO_MISSED,)
    assert "because it missed the SLO in at least one repeat." in conclusion(analysis, 64)


def test_a_gain_inside_the_variance_band_earns_no_credit(seed_with: SeedWith) -> None:
    def wide_band(d: dict[str, Any]) -> None:
        d["configs"][1]["accuracy"]["score"] = 95.5
        d["configs"][1]["accuracy"]["delta_pts"] = -0.5
        d["variance_band_pct"] = 12.0

    analysis = analyse_report(seed_with(wide_band))
    cap = analysis.tuned[0].capacity
    assert cap is not None and cap.saved == 0
    assert cap.reasons == (NoCredit.INSIDE_VARIANCE,)
    assert "because its gain lies inside the variance band." in conclusion(analysis, 64)


def test_every_reason_is_named_when_several_apply(seed_with: SeedWith) -> None:
    def everything(d: dict[str, Any]) -> None:
        d["configs"][1]["slo_pass_count"] = 0
        d["variance_band_pct"] = 12.0

    analysis = analyse_report(seed_with(everything))
    cap = analysis.tuned[0].capacity
    assert cap is not None
    assert cap.reasons == (
        NoCredit.GATE_FAILED,
        NoCredit.SLO_MISSED,
        NoCredit.INSIDE_VARIANCE,
    )
    text = conclusion(analysis, 64)
    assert "failed the accuracy gate by 8.0 points" in text
    assert "missed the SLO" in text and "inside the variance band" in text


def test_stored_delta_that_disagrees_is_reported(seed_with: SeedWith) -> None:
    report = seed_with(lambda d: d["configs"][1]["accuracy"].__setitem__("delta_pts", -6.0))
    (d,) = analyse_report(report).disagreements
    assert d.field == "configs[1].accuracy.delta_pts"
    assert (d.stored, d.computed) == (-6.0, -8.0)
    assert str(d) == "configs[1].accuracy.delta_pts: stored -6, recomputed -8"


def test_stored_baseline_delta_must_be_zero(seed_with: SeedWith) -> None:
    report = seed_with(lambda d: d["configs"][0]["accuracy"].__setitem__("delta_pts", 1.0))
    fields = [d.field for d in analyse_report(report).disagreements]
    assert fields == ["configs[0].accuracy.delta_pts"]


def test_a_rounded_delta_is_not_a_disagreement(seed_with: SeedWith) -> None:
    def rounded(d: dict[str, Any]) -> None:
        d["configs"][1]["accuracy"]["score"] = 88.04
        d["configs"][1]["accuracy"]["delta_pts"] = -8.0

    assert analyse_report(seed_with(rounded)).disagreements == []


def test_spread_with_one_seed_is_a_disagreement_only_when_seeds_are_known(
    seed_with: SeedWith,
) -> None:
    unknown = seed_with(lambda d: d["configs"][1]["accuracy"].__setitem__("spread_pts", 1.5))
    assert analyse_report(unknown).disagreements == []

    def one_seed(d: dict[str, Any]) -> None:
        d["configs"][1]["accuracy"]["spread_pts"] = 1.5
        d["configs"][1]["accuracy"]["seeds"] = 1

    fields = [x.field for x in analyse_report(seed_with(one_seed)).disagreements]
    assert fields == ["configs[1].accuracy.spread_pts"]


def test_pass_count_and_power_are_checked_against_repeats_detail(seed_with: SeedWith) -> None:
    def detail(d: dict[str, Any]) -> None:
        d["configs"][0]["repeats_detail"] = [
            {"rate_rps": 9.0, "goodput_tok_s": 4600.0, "slo_pass": True, "mean_power_w": 640.0},
            {"rate_rps": 9.0, "goodput_tok_s": 4544.0, "slo_pass": False, "mean_power_w": 650.0},
        ]

    fields = {x.field: x for x in analyse_report(seed_with(detail)).disagreements}
    assert set(fields) == {"configs[0].slo_pass_count", "configs[0].node_power_kw"}
    assert fields["configs[0].slo_pass_count"].computed == 1
    assert fields["configs[0].node_power_kw"].computed == pytest.approx(0.645)


def test_power_matching_repeats_detail_within_rounding_is_fine(seed_with: SeedWith) -> None:
    def detail(d: dict[str, Any]) -> None:
        d["configs"][0]["repeats_detail"] = [
            {"rate_rps": 9.0, "goodput_tok_s": 4600.0, "slo_pass": True, "mean_power_w": 636.8},
            {"rate_rps": 9.0, "goodput_tok_s": 4544.0, "slo_pass": True, "mean_power_w": 637.4},
        ]

    assert analyse_report(seed_with(detail)).disagreements == []


def test_no_accuracy_means_no_gate_and_no_credit(seed_with: SeedWith) -> None:
    report = seed_with(lambda d: d["configs"][1].__setitem__("accuracy", None))
    tuned = analyse_report(report).tuned[0]
    assert tuned.gate is None
    assert tuned.capacity is not None and tuned.capacity.reasons == (NoCredit.NO_ACCURACY,)


def test_no_power_means_no_tokens_per_joule(seed_with: SeedWith) -> None:
    report = seed_with(lambda d: d["configs"][1].__setitem__("node_power_kw", None))
    tuned = analyse_report(report).tuned[0]
    assert tuned.tokens_per_joule is None and tuned.tokens_per_joule_delta_pct is None
