"""Recompute every derived number of a report record from its raw numbers.

The build never trusts derived numbers stored in a record (methods/capacity.md):
this module recomputes them and lists each stored value that disagrees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tokenwatt.analysis.accuracy.gate import GateVerdict, gate_drop_text, gate_verdict
from tokenwatt.analysis.power.cost import kwh_per_million_tokens, usd_per_million_tokens
from tokenwatt.analysis.power.efficiency import delta_pct
from tokenwatt.analysis.report.capacity import Capacity, NoCredit, capacity
from tokenwatt.analysis.report.report_setup import status_words
from tokenwatt.analysis.stats.intervals import Interval
from tokenwatt.analysis.stats.number_text import change_pct, fixed, signed, trimmed
from tokenwatt.analysis.stats.repeat_stats import (
    config_tokens_per_joule,
    config_tokens_per_joule_above_idle,
    delta_interval_pct,
    goodput_interval,
    measured_band_pct,
    repeat_goodputs,
    repeat_tpjs,
)
from tokenwatt.records import ConfigV3, MeanCI, ReportV3

# Stored deltas and spreads carry one decimal; a difference below this is rounding.
_TOLERANCE_PTS = 0.05
# node_power_kw is stored with three decimals (W resolution); allow that rounding.
_POWER_TOLERANCE_KW = 0.0005 + 1e-9
# Stored interval ends: goodput with one decimal (tok/s), percentages with two.
_CI_TOLERANCE_TOK_S = 0.05 + 1e-9
_CI_TOLERANCE_PCT = 0.005 + 1e-9
BAND_TOLERANCE_PCT = 0.05
"""A stated variance band is flagged as narrower than the measured one only beyond this
(percentage points): the page shows bands with one decimal, and the stated band of a
report made by ``tokenwatt report`` comes from unrounded goodputs, the measured one from
the record's goodputs rounded to 0.1 tok/s."""


@dataclass(frozen=True)
class Disagreement:
    """A stored derived value that is not what the raw numbers give."""

    field: str
    stored: float
    computed: float

    def __str__(self) -> str:
        return f"{self.field}: stored {self.stored:g}, recomputed {self.computed:g}"


@dataclass(frozen=True)
class ConfigAnalysis:
    """Recomputed figures for one configuration.

    ``tokens_per_joule`` in tok/J, goodput tokens ÷ energy over the measured windows
    (:func:`~tokenwatt.analysis.stats.repeat_stats.config_tokens_per_joule`; None without power),
    ``tokens_per_joule_above_idle`` the same over the energy above the measured idle floor
    (None without it), ``mean_power_w`` the mean board power (W, for display only),
    ``goodput_delta_pct`` in % against the baseline, ``gate`` None without accuracy,
    ``capacity`` None for the baseline. ``usd_per_million_tokens``: dollars per million
    output tokens at the found goodput (None without a cloud cost); ``kwh_per_million_tokens``
    likewise in kWh (None without power); see :mod:`tokenwatt.analysis.power.cost`.
    ``measured``: the configuration's result is measured (``result_status``); when it or the
    baseline's is not (none met, inconclusive), there is no goodput change
    (``goodput_delta_pct`` None) and no capacity figure: not measured is never −100%.
    """

    config: ConfigV3
    is_baseline: bool
    mean_power_w: float | None
    tokens_per_joule: float | None
    tokens_per_joule_above_idle: float | None
    goodput_delta_pct: float | None
    tokens_per_joule_delta_pct: float | None
    gate: GateVerdict | None
    slo_met_every_repeat: bool
    capacity: Capacity | None
    goodput_ci: Interval | None = None
    goodput_delta_ci_pct: Interval | None = None
    tokens_per_joule_delta_ci_pct: Interval | None = None
    usd_per_million_tokens: float | None = None
    kwh_per_million_tokens: float | None = None
    measured: bool = True

    @property
    def status_text(self) -> str | None:
        """The configuration's result in words when it is not measured (``inconclusive
        (REASON): …`` or ``no load met the SLO (REASON)``), else None."""
        if self.measured:
            return None
        cfg = self.config
        return status_words(cfg.result_status, cfg.result_reason)


@dataclass(frozen=True)
class ReportAnalysis:
    """The recomputed report: per-configuration analyses, disagreements, conclusion.

    ``variance_band_pct`` is the band the report states (it decides credit);
    ``variance_band_measured_pct`` the band recomputed from the repeats (None when the
    record keeps fewer than two repeats of every configuration).
    """

    configs: list[ConfigAnalysis]
    disagreements: list[Disagreement] = field(default_factory=list)
    variance_band_pct: float = 0.0
    variance_band_measured_pct: float | None = None

    @property
    def band_understated(self) -> bool:
        """True when the stated band is narrower than the measured spread (beyond
        :data:`BAND_TOLERANCE_PCT`)."""
        measured = self.variance_band_measured_pct
        return measured is not None and measured > self.variance_band_pct + BAND_TOLERANCE_PCT

    @property
    def baseline(self) -> ConfigAnalysis:
        """The baseline configuration's analysis."""
        return next(c for c in self.configs if c.is_baseline)

    @property
    def tuned(self) -> list[ConfigAnalysis]:
        """Every configuration but the baseline, in record order."""
        return [c for c in self.configs if not c.is_baseline]


def analyse_report(report: ReportV3) -> ReportAnalysis:
    """Recompute tokens/J, deltas, gate verdicts, capacity, the repeats' 95% intervals and
    the measured variance band for every configuration; list stored values that disagree."""
    base = report.baseline()
    base_tpj = config_tokens_per_joule(base)
    analyses: list[ConfigAnalysis] = []
    disagreements: list[Disagreement] = []
    for index, cfg in enumerate(report.configs):
        analysis = _config_analysis(report, cfg, base_tpj)
        analyses.append(analysis)
        disagreements += _check_stored(index, cfg, base, analysis.gate)
        disagreements += _check_intervals(index, analysis)
    measured = measured_band_pct(report.configs)
    stored = report.variance_band_measured_pct
    if stored is not None and measured is not None and abs(stored - measured) > _CI_TOLERANCE_PCT:
        disagreements.append(Disagreement("variance_band_measured_pct", stored, measured))
    return ReportAnalysis(analyses, disagreements, report.variance_band_pct, measured)


def _config_analysis(report: ReportV3, cfg: ConfigV3, base_tpj: float | None) -> ConfigAnalysis:
    base = report.baseline()
    is_base = cfg is base
    measured = cfg.result_status == "measured"
    # Only two measured results compare: an inconclusive one is no 0 to set against.
    compared = measured and base.result_status == "measured" and base.goodput_tok_s > 0
    power_w = cfg.node_power_kw * 1000.0 if cfg.node_power_kw and measured else None
    tpj = config_tokens_per_joule(cfg) if measured else None
    gate = _gate(cfg, base, report.accuracy.threshold_pts)
    slo_ok = cfg.slo_pass_count == cfg.repeats
    goodput_delta = None if is_base or not compared else _delta(cfg, base, repeat_goodputs)
    cap = None
    if not is_base and compared:
        cap = capacity(
            cards=report.fleet.cards,
            baseline_goodput_tok_s=base.goodput_tok_s,
            tuned_goodput_tok_s=cfg.goodput_tok_s,
            gate_passed=None if gate is None else gate.passed,
            slo_met_every_repeat=slo_ok,
            variance_band_pct=report.variance_band_pct,
            gain_ci_pct=None if goodput_delta is None else (goodput_delta.low, goodput_delta.high),
        )
    return ConfigAnalysis(
        usd_per_million_tokens=(
            usd_per_million_tokens(cfg.cost.price_usd_per_hour, cfg.goodput_tok_s)
            if cfg.cost is not None
            else None
        ),
        kwh_per_million_tokens=kwh_per_million_tokens(tpj),
        config=cfg,
        is_baseline=is_base,
        mean_power_w=power_w,
        tokens_per_joule=tpj,
        tokens_per_joule_above_idle=(
            config_tokens_per_joule_above_idle(cfg, cfg.idle_power_w)
            if tpj is not None and cfg.idle_power_w
            else None
        ),
        goodput_delta_pct=(
            delta_pct(cfg.goodput_tok_s, base.goodput_tok_s)
            if compared
            else (0.0 if is_base and measured else None)
        ),
        tokens_per_joule_delta_pct=(
            delta_pct(tpj, base_tpj) if tpj is not None and base_tpj and compared else None
        ),
        gate=gate,
        slo_met_every_repeat=slo_ok,
        capacity=cap,
        goodput_ci=goodput_interval(cfg.repeats_detail),
        goodput_delta_ci_pct=goodput_delta,
        tokens_per_joule_delta_ci_pct=(
            None if is_base or not compared else _delta(cfg, base, repeat_tpjs)
        ),
        measured=measured,
    )


def _delta(
    cfg: ConfigV3, base: ConfigV3, values: Callable[..., list[float] | None]
) -> Interval | None:
    return delta_interval_pct(values(cfg.repeats_detail), values(base.repeats_detail))


def _check_intervals(index: int, c: ConfigAnalysis) -> list[Disagreement]:
    """Stored intervals against the recomputed ones, end by end."""
    cfg = c.config
    pairs: list[tuple[str, MeanCI | None, Interval | None, float]] = [
        ("goodput_ci_tok_s", cfg.goodput_ci_tok_s, c.goodput_ci, _CI_TOLERANCE_TOK_S),
        (
            "goodput_delta_ci_pct",
            cfg.goodput_delta_ci_pct,
            c.goodput_delta_ci_pct,
            _CI_TOLERANCE_PCT,
        ),
        (
            "tokens_per_joule_delta_ci_pct",
            cfg.tokens_per_joule_delta_ci_pct,
            c.tokens_per_joule_delta_ci_pct,
            _CI_TOLERANCE_PCT,
        ),
    ]
    out: list[Disagreement] = []
    for name, stored, computed, tolerance in pairs:
        if stored is None:
            continue
        where = f"configs[{index}].{name}"
        if computed is None:
            continue  # the page shows only recomputed intervals, and there is none
        for end in ("low", "high"):
            if abs(getattr(stored, end) - getattr(computed, end)) > tolerance:
                out.append(
                    Disagreement(f"{where}.{end}", getattr(stored, end), getattr(computed, end))
                )
    return out


def _gate(cfg: ConfigV3, base: ConfigV3, threshold: float) -> GateVerdict | None:
    if cfg.accuracy is None or base.accuracy is None:
        return None
    return gate_verdict(cfg.accuracy.score, base.accuracy.score, threshold)


def _check_stored(
    index: int, cfg: ConfigV3, base: ConfigV3, gate: GateVerdict | None
) -> list[Disagreement]:
    out: list[Disagreement] = []
    if cfg.accuracy is not None and gate is not None:
        stored = cfg.accuracy.delta_pts
        if abs(stored - gate.delta_pts) > _TOLERANCE_PTS:
            out.append(Disagreement(f"configs[{index}].accuracy.delta_pts", stored, gate.delta_pts))
    if cfg.repeats_detail:
        passes = sum(1 for r in cfg.repeats_detail if r.slo_pass)
        if passes != cfg.slo_pass_count:
            out.append(Disagreement(f"configs[{index}].slo_pass_count", cfg.slo_pass_count, passes))
    # One seed has no spread; an unknown seed count (v1 records) cannot be checked.
    if cfg.accuracy is not None and cfg.accuracy.spread_pts > 0 and cfg.accuracy.seeds == 1:
        out.append(
            Disagreement(f"configs[{index}].accuracy.spread_pts", cfg.accuracy.spread_pts, 0)
        )
    powers = [r.mean_power_w for r in cfg.repeats_detail]
    if cfg.node_power_kw is not None and powers and all(w is not None for w in powers):
        mean_kw = sum(w for w in powers if w is not None) / len(powers) / 1000.0
        if abs(mean_kw - cfg.node_power_kw) > _POWER_TOLERANCE_KW:
            out.append(Disagreement(f"configs[{index}].node_power_kw", cfg.node_power_kw, mean_kw))
    del base
    return out


def band_warning(analysis: ReportAnalysis) -> str | None:
    """One sentence when the stated band is narrower than the measured spread, else None."""
    measured = analysis.variance_band_measured_pct
    if not analysis.band_understated or measured is None:
        return None
    return (
        f"The stated variance band (±{fixed(analysis.variance_band_pct, 1)}%) is narrower than "
        f"the spread measured from the repeats (±{fixed(measured, 1)}%). Capacity credit follows "
        "the stated band, so a gain between the two is credited on a band the data do not bear out."
    )


def conclusion(analysis: ReportAnalysis, cards: int) -> str:
    """The capacity conclusion as one plain sentence per tuned configuration (joined), each
    followed, when the repeats give one, by the gain's 95% interval beside the variance
    band (:func:`gain_interval_sentence`)."""
    sentences = []
    for c in analysis.tuned:
        sentences.append(_sentence(c, cards, analysis.baseline))
        extra = gain_interval_sentence(c, analysis.variance_band_pct)
        if extra:
            sentences.append(extra)
    return " ".join(sentences)


def _points(value: float) -> str:
    """A threshold in points, as given: at least one decimal (``1.0``, ``0.25``)."""
    return fixed(value, 1) if round(value, 1) == value else trimmed(value)


def _signed(value: float) -> str:
    return signed(value, 1, "%")


def gain_interval_sentence(c: ConfigAnalysis, band_pct: float) -> str | None:
    """The goodput gain's 95% interval in words, saying when it includes zero; None without
    an interval. The variance band, not the interval, decides credit, and the sentence says
    so when they disagree."""
    cap = c.capacity
    if cap is None or cap.gain_ci_pct is None:
        return None
    low, high = cap.gain_ci_pct
    span = f"{_signed(low)} to {_signed(high)}"
    band = f"±{fixed(band_pct, 1)}%"
    if cap.gain_in_doubt:
        text = (
            f"Its goodput gain's 95% interval over the repeats ({span}) includes zero: the "
            "repeats cannot tell it from no gain"
        )
        if cap.credited:
            return text + f"; credit follows the stated variance band ({band}) alone."
        return text + "."
    if NoCredit.INSIDE_VARIANCE in cap.reasons:
        return (
            f"Its goodput gain's 95% interval over the repeats ({span}) excludes zero, but "
            f"the gain lies inside the stated variance band ({band}), which decides credit."
        )
    return f"Its goodput gain's 95% interval over the repeats is {span}."


def _sentence(c: ConfigAnalysis, cards: int, base: ConfigAnalysis | None = None) -> str:
    cap = c.capacity
    label = c.config.label
    if c.status_text is not None:
        return f"{label} is {c.status_text}; no capacity figure and no saving claimed."
    if cap is None and base is not None and base.status_text is not None:
        return (
            f"{label} cannot be compared: the baseline {base.config.label} is "
            f"{base.status_text}; no capacity figure and no saving claimed."
        )
    if cap is None:
        return f"{label} has no baseline goodput to compare with, so no capacity figure."
    gain = f"{change_pct(cap.gain_pct)} goodput"
    if cap.credited:
        return (
            f"{label} ({gain}) serves the baseline load of {cards} cards on "
            f"{cap.cards_needed}, saving {cap.saved} cards."
        )
    why = []
    for reason in cap.reasons:
        if reason is NoCredit.GATE_FAILED and c.gate is not None:
            why.append(
                f"it failed the accuracy gate by {gate_drop_text(c.gate)} points "
                f"against a {_points(c.gate.threshold_pts)}-point threshold"
            )
        else:
            why.append(f"it {reason.value}" if not reason.value.startswith("its") else reason.value)
    return f"{label} ({gain}) earns no capacity saving because " + "; and ".join(why) + "."
