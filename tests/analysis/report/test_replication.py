"""The replication verdicts: figures judged by the overlap of their 95% intervals."""

from __future__ import annotations

import pytest

from tests import archive_factory as factory
from tokenwatt import analysis
from tokenwatt.records import ConfigV3


def _config(goodput: float = 1000.0, tpot: float = 50.0, *, spread: float = 10.0) -> ConfigV3:
    note = factory.Note(
        "r",
        "model-r",
        "SIM H100",
        1,
        "tokenwatt-sim",
        "0.1",
        (factory.Cfg("r-base", goodput, tpot),),
    )
    cfg = factory.report(note).configs[0]
    for i, rep in enumerate(cfg.repeats_detail):
        rep.goodput_tok_s = goodput + (spread if i == 0 else -spread)
    return cfg


def _verdicts(old: ConfigV3, new: ConfigV3) -> dict[str, str]:
    return {c.figure: c.verdict for c in analysis.replication_checks(old, new)}


def test_the_same_measurement_agrees() -> None:
    checks = analysis.replication_checks(_config(), _config())
    verdicts = {c.figure: c.verdict for c in checks}
    assert verdicts["goodput_tok_s"] == "agree"
    assert verdicts["tokens_per_joule"] == "agree"
    assert analysis.replication_verdict(checks) == "agrees"


def test_a_goodput_outside_the_interval_disagrees_and_is_named() -> None:
    # Intervals: 1000 ± 12.7·10 ≈ [873, 1127] (its top raised to 1000·16/9 ≈ 1778, the
    # bracket up to the failing probe at 16 req/s) and 300 ± 127 ≈ [173, 533]: no overlap.
    checks = analysis.replication_checks(_config(1000.0), _config(300.0))
    goodput = next(c for c in checks if c.figure == "goodput_tok_s")
    assert goodput.verdict == "disagree"
    assert goodput.reason == "the new interval lies wholly lower than the published one"
    assert analysis.replication_verdict(checks) == "disagrees"
    assert "SLO goodput (tok/s)" in analysis.disagreeing_names(checks)


def test_a_goodput_inside_the_search_bracket_agrees() -> None:
    # 1500 ± 127 lies above the t-interval [873, 1127] but inside the bracket to 1778: the
    # search (9 req/s passed, 16 failed) cannot tell the two apart.
    old, new = _config(1000.0), _config(1500.0)
    check = next(c for c in analysis.replication_checks(old, new) if c.figure == "goodput_tok_s")
    assert check.old_high == pytest.approx(1000.0 * 16 / 9)
    assert check.verdict == "agree"
    # Without the failing probe, the published goodput is a lower bound: unbounded above.
    old.search = [w for w in old.search if w.rate_rps != 16.0]
    check = next(c for c in analysis.replication_checks(old, new) if c.figure == "goodput_tok_s")
    assert (check.verdict, check.old_high) == ("agree", None)
    # A migrated record keeps no search: the repeats' t-interval alone.
    old.search = []
    check = next(c for c in analysis.replication_checks(old, new) if c.figure == "goodput_tok_s")
    assert check.verdict == "disagree" and check.old_high == pytest.approx(1000.0 + 127.06, 0.01)


def test_a_smaller_change_inside_the_intervals_agrees() -> None:
    # [873, 1127] and 900 ± 127 ≈ [773, 1027] overlap.
    assert _verdicts(_config(1000.0), _config(900.0))["goodput_tok_s"] == "agree"


def test_without_intervals_the_figure_is_unknown_and_the_replication_inconclusive() -> None:
    old, new = _config(), _config()
    new.repeats_detail = new.repeats_detail[:1]  # one repeat: no t-interval
    new.goodput_ci_tok_s = None
    checks = analysis.replication_checks(old, new)
    goodput = next(c for c in checks if c.figure == "goodput_tok_s")
    assert goodput.verdict == "unknown" and goodput.new is not None and goodput.new_low is None
    assert analysis.replication_verdict(checks) == "inconclusive"


def test_a_replication_that_met_no_load_disagrees() -> None:
    old, new = _config(), _config()
    new.result_status = "none_met"
    checks = analysis.replication_checks(old, new)
    goodput = next(c for c in checks if c.figure == "goodput_tok_s")
    assert (goodput.verdict, goodput.reason) == (
        "disagree",
        "the replication met the SLO at no load",
    )


def test_an_inconclusive_replication_is_inconclusive() -> None:
    old, new = _config(), _config()
    new.result_status = "inconclusive"
    checks = analysis.replication_checks(old, new)
    assert analysis.replication_verdict(checks) == "inconclusive"


def test_accuracy_interval_is_clopper_pearson() -> None:
    from scipy.stats import binomtest

    old, new = _config(), _config()
    assert old.accuracy is not None and new.accuracy is not None
    old.accuracy.items, new.accuracy.items = 50, 50
    new.accuracy.score = 70.0
    check = next(c for c in analysis.replication_checks(old, new) if c.figure == "accuracy")
    expected = binomtest(48, 50).proportion_ci(confidence_level=0.95, method="exact")
    assert check.old_low == pytest.approx(100 * expected.low)
    assert check.old_high == pytest.approx(100 * expected.high)
    # 96% of 50 = [86.3, 99.5] and 70% of 50 = [55.4, 82.1]: no overlap.
    assert check.verdict == "disagree"


def test_changed_settings_are_named() -> None:
    assert analysis.changed_settings(
        {"engine_version": "0.1", "kv_dtype": "fp8"}, {"engine_version": "0.2", "kv_dtype": "fp8"}
    ) == ["engine_version"]


def test_latency_and_energy_at_another_load_are_not_compared() -> None:
    old, new = _config(1000.0, 40.0), _config(1000.0, 80.0)
    for rep in new.repeats_detail:
        rep.rate_rps = 12.0  # the published repeats ran at 9 req/s
    checks = {c.figure: c for c in analysis.replication_checks(old, new)}
    for figure in ("ttft_p99_ms", "tpot_p99_ms", "tokens_per_joule"):
        assert checks[figure].verdict == "unknown"
        assert checks[figure].reason == (
            "measured at another load (9 req/s published, 12 req/s now): not comparable"
        )
    assert checks["goodput_tok_s"].verdict == "agree"
    assert analysis.replication_verdict(list(checks.values())) == "agrees"


def test_a_search_that_missed_where_the_published_one_met_disagrees() -> None:
    old, new = _config(1000.0), _config(1000.0)
    # The replication's probe at 9 req/s (the published repeats' rate) missed the SLO.
    probe = next(w for w in new.search if w.step == "probe" and w.rate_rps == 9.0)
    probe.slo_pass = False
    check = next(c for c in analysis.replication_checks(old, new) if c.figure == "goodput_tok_s")
    assert check.verdict == "disagree"
    assert check.reason == (
        "the replication missed the SLO at 9 req/s; the published configuration met it at 9 req/s"
    )
    check = next(c for c in analysis.replication_checks(new, old) if c.figure == "goodput_tok_s")
    assert check.reason == (
        "the replication met the SLO at 9 req/s; the published configuration missed it at 9 req/s"
    )


def test_a_miss_not_beyond_doubt_contradicts_nothing() -> None:
    old, new = _config(1000.0), _config(1000.0)
    probe = next(w for w in new.search if w.step == "probe" and w.rate_rps == 9.0)
    probe.slo_pass, probe.slo_beyond_doubt = False, False  # one slow request among a few
    check = next(c for c in analysis.replication_checks(old, new) if c.figure == "goodput_tok_s")
    assert check.verdict == "agree", check.reason
    probe.slo_beyond_doubt = True
    check = next(c for c in analysis.replication_checks(old, new) if c.figure == "goodput_tok_s")
    assert check.verdict == "disagree"
    assert check.reason is not None and "missed the SLO at 9 req/s" in check.reason
