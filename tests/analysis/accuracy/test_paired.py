"""Paired accuracy statistics: McNemar exact test, bootstrap interval, verdict, summary."""

from __future__ import annotations

import pytest

from tokenwatt.analysis.accuracy.paired import (
    NEEDS_FULL_SUITE,
    accuracy_summary,
    bootstrap_delta_ci_pts,
    discordance,
    item_shares,
    mcnemar_exact_p,
    paired_verdict,
    straddles_threshold,
)
from tokenwatt.records.report.report_v2 import ConfigAccuracyV2
from tokenwatt.records.run.accuracy import AccuracyResult, ItemResult, SeedResult


def paired_lists(
    both_right: int, base_only: int, tuned_only: int, both_wrong: int
) -> tuple[list[bool], list[bool]]:
    """Per-item correctness with the given 2×2 table, items in a fixed order."""
    base = [True] * both_right + [True] * base_only + [False] * tuned_only + [False] * both_wrong
    tuned = [True] * both_right + [False] * base_only + [True] * tuned_only + [False] * both_wrong
    return base, tuned


def result(correct: list[bool], *, name: str = "gsm8k-5shot") -> AccuracyResult:
    items = [
        ItemResult(id=f"gsm8k-test-{i:04d}", correct=c, gold="1", answer="1" if c else "2")
        for i, c in enumerate(correct)
    ]
    score = 100.0 * sum(correct) / len(correct)
    return AccuracyResult(
        suite="suites/x.jsonl",
        name=name,
        seeds=[SeedResult(seed=0, score_pct=score, items=items)],
        score_pct=score,
        spread_pts=0.0,
    )


def test_discordance_counts_the_two_by_two_table() -> None:
    base, tuned = paired_lists(43, 5, 1, 1)
    table = discordance(base, tuned)
    assert (table.both_right, table.baseline_only, table.tuned_only, table.both_wrong) == (
        43,
        5,
        1,
        1,
    )
    assert table.items == 50
    assert sum(base) == 48 and sum(tuned) == 44


def test_mcnemar_exact_p_matches_hand_computation() -> None:
    # 50 items, baseline 48 right, tuned 44 right, discordant split b = 5, c = 1.
    # Under H0 the 6 discordant items are Binomial(6, 1/2); two-sided exact p is
    # 2 * P(X <= 1) = 2 * (C(6,0) + C(6,1)) / 2^6 = 2 * 7 / 64 = 0.21875.
    assert mcnemar_exact_p(5, 1) == pytest.approx(0.21875, abs=1e-12)
    # The seed's case if all 4 extra wrong answers are one-way: b = 4, c = 0:
    # 2 * P(X = 0) = 2 * 1/16 = 0.125.
    assert mcnemar_exact_p(4, 0) == pytest.approx(0.125, abs=1e-12)
    # b = 10, c = 0: 2 / 2^10 = 0.001953125.
    assert mcnemar_exact_p(10, 0) == pytest.approx(0.001953125, abs=1e-12)
    # b = c: the most likely split under H0, p = 1; symmetric in b and c.
    assert mcnemar_exact_p(3, 3) == pytest.approx(1.0)
    assert mcnemar_exact_p(1, 5) == mcnemar_exact_p(5, 1)
    assert mcnemar_exact_p(0, 0) == 1.0


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="≥ 0"):
        mcnemar_exact_p(-1, 2)


def test_bootstrap_interval_matches_the_exact_bootstrap_distribution() -> None:
    # b = 4, c = 0 on 50 items: each item differs by -1 (prob 4/50) or 0, so a resampled
    # Δ is -2 * K points with K ~ Binomial(50, 0.08). Its 2.5% and 97.5% quantiles are
    # K = 1 (P(K <= 0) = 0.92^50 = 0.0155 < 0.025 <= P(K <= 1) = 0.0827) and K = 8
    # (P(K <= 7) = 0.9562 < 0.975 <= P(K <= 8) = 0.9833): the interval is [-16, -2].
    base, tuned = paired_lists(44, 4, 0, 2)
    low, high = bootstrap_delta_ci_pts(base, tuned)
    assert (low, high) == (-16.0, -2.0)


def test_bootstrap_is_seeded_and_degenerate_cases_are_exact() -> None:
    base, tuned = paired_lists(43, 5, 1, 1)
    assert bootstrap_delta_ci_pts(base, tuned, seed=7) == bootstrap_delta_ci_pts(
        base, tuned, seed=7
    )
    same = [True] * 30 + [False] * 20
    assert bootstrap_delta_ci_pts(same, same) == (0.0, 0.0)
    assert bootstrap_delta_ci_pts([1.0] * 10, [0.0] * 10) == (-100.0, -100.0)


def test_bootstrap_rejects_unpaired_input() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_delta_ci_pts([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="no paired items"):
        bootstrap_delta_ci_pts([], [])


def test_straddling_means_the_interval_holds_both_a_pass_and_a_fail() -> None:
    assert straddles_threshold(-18.0, 0.0, 1.0)
    assert straddles_threshold(-3.0, -1.0, 1.0)  # -1 itself passes (Δ < -1 fails)
    assert not straddles_threshold(-16.0, -2.0, 1.0)
    assert not straddles_threshold(-0.5, 3.0, 1.0)


def test_paired_verdict_keeps_the_rule_and_adds_the_note() -> None:
    # Seed-like: Δ = -8 fails the rule; interval [-18, 0] straddles -1.
    v = paired_verdict(-8.0, 1.0, -18.0, 0.0, 0.21875)
    assert not v.rule.passed
    assert v.rule.margin_pts == pytest.approx(7.0)
    assert v.note == NEEDS_FULL_SUITE
    # [-16, -2] lies wholly below -1: a fail the sample supports, no note.
    v = paired_verdict(-8.0, 1.0, -16.0, -2.0, 0.125)
    assert not v.rule.passed and v.note is None
    # A pass whose interval straddles gets the note too; the rule still passes it.
    v = paired_verdict(0.0, 1.0, -4.0, 4.0, 1.0)
    assert v.rule.passed and v.note == NEEDS_FULL_SUITE


def test_accuracy_summary_fills_the_report_fields() -> None:
    base, tuned = paired_lists(43, 5, 1, 1)
    summary = accuracy_summary(result(base), result(tuned), 1.0)
    assert isinstance(summary.record, ConfigAccuracyV2)
    rec = summary.record
    assert rec.score == pytest.approx(88.0)
    assert rec.delta_pts == pytest.approx(-8.0)
    assert rec.spread_pts == 0.0
    assert (rec.items, rec.seeds) == (50, 1)
    assert rec.mcnemar_p == pytest.approx(0.21875)
    assert rec.ci_low_pts is not None and rec.ci_high_pts is not None
    assert rec.ci_low_pts < -8.0 < rec.ci_high_pts
    assert not summary.verdict.passed
    assert summary.needs_full_suite
    assert summary.note == NEEDS_FULL_SUITE
    assert summary.table is not None and summary.table.baseline_only == 5


def test_accuracy_summary_of_the_baseline_against_itself() -> None:
    base, _ = paired_lists(43, 5, 1, 1)
    summary = accuracy_summary(result(base), result(base), 1.0)
    assert summary.record.delta_pts == 0.0
    assert (summary.record.ci_low_pts, summary.record.ci_high_pts) == (0.0, 0.0)
    assert summary.record.mcnemar_p == 1.0
    assert summary.verdict.passed and not summary.needs_full_suite


def test_accuracy_summary_refuses_to_pair_different_items() -> None:
    base = result([True] * 10)
    tuned = result([True] * 9)  # ids 0..8: one item fewer
    summary = accuracy_summary(base, tuned, 1.0)
    assert summary.record.mcnemar_p is None
    assert summary.record.ci_low_pts is None
    assert summary.table is None
    assert summary.note is not None and "1 only in the baseline" in summary.note
    # The rule still runs on the scores: 100 vs 100.
    assert summary.verdict.passed


def test_several_seeds_pair_by_share_and_majority() -> None:
    def item(i: int, ok: bool) -> ItemResult:
        return ItemResult(id=f"q{i}", correct=ok, gold="1")

    # Item q0 right in 2 of 3 seeds, q1 in 1 of 3.
    seeds = [
        SeedResult(seed=s, score_pct=50.0, items=[item(0, s != 2), item(1, s == 0)])
        for s in range(3)
    ]
    res = AccuracyResult(suite="s", name="n", seeds=seeds, score_pct=50.0, spread_pts=0.0)
    assert item_shares(res) == pytest.approx({"q0": 2 / 3, "q1": 1 / 3})
    summary = accuracy_summary(res, res, 1.0)
    assert summary.record.seeds == 3 and summary.record.items == 2
    # Majority: q0 right, q1 wrong, for both: no discordant items.
    assert summary.table is not None
    assert (summary.table.both_right, summary.table.both_wrong) == (1, 1)
