"""A report's configurations and capacity conclusion as rows, for ``tokenwatt report``'s
table and its ``--json`` (pure).

Every figure is the report analysis's own (:func:`tokenwatt.analysis.report.report.analyse_report`):
goodput (tok/s) with the 95% Student t-interval of its repeats where the report keeps one
(``goodput_ci_tok_s``), tokens per joule = goodput tokens ÷ energy over the measured windows
(:func:`tokenwatt.analysis.stats.repeat_stats.config_tokens_per_joule`, methods/energy.md),
the accuracy gate's verdict (methods/accuracy.md) and the capacity credit
(methods/capacity.md).
"""

from __future__ import annotations

from typing import Any

from tokenwatt.analysis.accuracy.gate import gate_delta_text
from tokenwatt.analysis.report.report import ConfigAnalysis, ReportAnalysis, conclusion
from tokenwatt.analysis.stats.number_text import fixed
from tokenwatt.records import ReportV3


def accuracy_verdict(c: ConfigAnalysis) -> str:
    """The accuracy column in words: the score, and the gate's verdict against the baseline."""
    acc = c.config.accuracy
    if acc is None:
        return "no accuracy result"
    if c.is_baseline:
        return f"{fixed(acc.score, 1)}% (baseline)"
    if c.gate is None:
        return f"{fixed(acc.score, 1)}% (no baseline score to gate on)"
    shown = gate_delta_text(c.gate)
    word = "passes" if c.gate.passed else "fails"
    return (
        f"{fixed(acc.score, 1)}%: {word} the {c.gate.threshold_pts:g}-point gate ({shown} points)"
    )


def capacity_credit(c: ConfigAnalysis) -> str:
    """The capacity column in words: baseline, the cards saved, or why there is no credit."""
    if c.is_baseline:
        return "baseline"
    cap = c.capacity
    if c.status_text is not None:
        return f"none: {c.status_text}"
    if cap is None:
        return "none: no baseline goodput to compare with"
    if cap.credited:
        return f"saves {cap.saved} of {cap.cards} cards ({cap.cards_needed} needed)"
    return "none: " + "; ".join(reason.value for reason in cap.reasons)


def config_row(c: ConfigAnalysis) -> dict[str, Any]:
    """One configuration as a JSON-ready row (goodput in tok/s, its interval's ends in
    tok/s, tokens per joule and its change from the baseline in %, the goodput change from
    the baseline in %)."""
    cfg = c.config
    ci = cfg.goodput_ci_tok_s
    cap = c.capacity
    return {
        "label": cfg.label,
        "role": cfg.effective_role,
        "goodput_tok_s": cfg.goodput_tok_s,
        "result_status": cfg.result_status,
        "result_reason": cfg.result_reason,
        "goodput_ci_tok_s": None if ci is None else {"low": ci.low, "high": ci.high},
        "goodput_delta_pct": None if c.is_baseline else c.goodput_delta_pct,
        "tokens_per_joule": c.tokens_per_joule,
        "tokens_per_joule_delta_pct": (None if c.is_baseline else c.tokens_per_joule_delta_pct),
        "slo_pass_count": cfg.slo_pass_count,
        "repeats": cfg.repeats,
        "accuracy_score_pct": None if cfg.accuracy is None else cfg.accuracy.score,
        "accuracy_gate_passed": None if c.gate is None or c.is_baseline else c.gate.passed,
        "accuracy": accuracy_verdict(c),
        "cards_saved": None if cap is None else cap.saved,
        "capacity_credited": None if cap is None else cap.credited,
        "capacity": capacity_credit(c),
    }


def report_summary(report: ReportV3, analysis: ReportAnalysis) -> dict[str, Any]:
    """What ``tokenwatt report`` prints, as JSON: the report's identity, one row per
    configuration (:func:`config_row`), the capacity conclusion and the variance bands
    (stated and measured, ± %)."""
    return {
        "id": report.id,
        "title": report.title,
        "cards": report.fleet.cards,
        "configs": [config_row(c) for c in analysis.configs],
        "conclusion": conclusion(analysis, report.fleet.cards),
        "variance_band_pct": analysis.variance_band_pct,
        "variance_band_measured_pct": analysis.variance_band_measured_pct,
    }


def no_interval_reason(repeats: int, slo_pass_count: int) -> str | None:
    """Why a goodput has no 95% interval, in the words the terminal and the page both show
    (methods/uncertainty.md): ``"no interval: 1 repeat"`` (no spread to estimate),
    ``"no interval: a repeat missed the SLO"`` (goodput is then 0, not a mean); None when
    the repeats give one."""
    if repeats <= 1:
        return "no interval: 1 repeat" if repeats == 1 else "no interval: no repeat"
    if slo_pass_count < repeats:
        return "no interval: a repeat missed the SLO"
    return None


def goodput_cell(row: dict[str, Any]) -> str:
    """``goodput [low–high]`` (tok/s) for the table, or ``goodput [no interval: why]``
    (:func:`no_interval_reason`); ``inconclusive`` or ``none met the SLO`` for a result that
    is not measured (no figure)."""
    status = row.get("result_status", "measured")
    if status == "inconclusive":
        return "inconclusive"
    if status == "none_met":
        return "no load met the SLO"
    text = fixed(row["goodput_tok_s"], 1, commas=True)
    ci = row["goodput_ci_tok_s"]
    if ci is not None:
        low, high = fixed(ci["low"], 1, commas=True), fixed(ci["high"], 1, commas=True)
        return text + f" [{low}–{high}]"
    why = no_interval_reason(row["repeats"], row["slo_pass_count"])
    return text + (f" [{why}]" if why else "")
