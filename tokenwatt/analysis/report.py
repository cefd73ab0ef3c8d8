"""Recompute every derived number of a report record from its raw numbers.

The build never trusts derived numbers stored in a record (methods/capacity.md):
this module recomputes them and lists each stored value that disagrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenwatt.analysis.capacity import Capacity, NoCredit, capacity
from tokenwatt.analysis.efficiency import delta_pct, tokens_per_joule, tokens_per_joule_above_idle
from tokenwatt.analysis.gate import GateVerdict, gate_verdict
from tokenwatt.records.report_v3 import ConfigV3, ReportV3

# Stored deltas and spreads carry one decimal; a difference below this is rounding.
_TOLERANCE_PTS = 0.05
# node_power_kw is stored with three decimals (W resolution); allow that rounding.
_POWER_TOLERANCE_KW = 0.0005 + 1e-9


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

    ``tokens_per_joule`` in tok/J (None without power), ``tokens_per_joule_above_idle`` the
    same over the power above the measured idle floor (None without it),
    ``goodput_delta_pct`` in % against the baseline, ``gate`` None without accuracy,
    ``capacity`` None for the baseline.
    """

    config: ConfigV3
    is_baseline: bool
    mean_power_w: float | None
    tokens_per_joule: float | None
    tokens_per_joule_above_idle: float | None
    goodput_delta_pct: float
    tokens_per_joule_delta_pct: float | None
    gate: GateVerdict | None
    slo_met_every_repeat: bool
    capacity: Capacity | None


@dataclass(frozen=True)
class ReportAnalysis:
    """The recomputed report: per-configuration analyses, disagreements, conclusion."""

    configs: list[ConfigAnalysis]
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def baseline(self) -> ConfigAnalysis:
        """The baseline configuration's analysis."""
        return next(c for c in self.configs if c.is_baseline)

    @property
    def tuned(self) -> list[ConfigAnalysis]:
        """Every configuration but the baseline, in record order."""
        return [c for c in self.configs if not c.is_baseline]


def analyse_report(report: ReportV3) -> ReportAnalysis:
    """Recompute tokens/J, deltas, gate verdicts and capacity for every configuration."""
    base = report.baseline()
    threshold = report.accuracy.threshold_pts
    base_power = base.node_power_kw * 1000.0 if base.node_power_kw else None
    base_tpj = tokens_per_joule(base.goodput_tok_s, base_power) if base_power else None
    analyses: list[ConfigAnalysis] = []
    disagreements: list[Disagreement] = []
    for index, cfg in enumerate(report.configs):
        is_base = cfg is base
        power_w = cfg.node_power_kw * 1000.0 if cfg.node_power_kw else None
        tpj = tokens_per_joule(cfg.goodput_tok_s, power_w) if power_w else None
        gate = _gate(cfg, base, threshold)
        disagreements += _check_stored(index, cfg, base, gate)
        slo_ok = cfg.slo_pass_count == cfg.repeats
        cap = None
        if not is_base and base.goodput_tok_s > 0:
            cap = capacity(
                cards=report.fleet.cards,
                baseline_goodput_tok_s=base.goodput_tok_s,
                tuned_goodput_tok_s=cfg.goodput_tok_s,
                gate_passed=None if gate is None else gate.passed,
                slo_met_every_repeat=slo_ok,
                variance_band_pct=report.variance_band_pct,
            )
        analyses.append(
            ConfigAnalysis(
                config=cfg,
                is_baseline=is_base,
                mean_power_w=power_w,
                tokens_per_joule=tpj,
                tokens_per_joule_above_idle=(
                    tokens_per_joule_above_idle(cfg.goodput_tok_s, power_w, cfg.idle_power_w)
                    if power_w and cfg.idle_power_w
                    else None
                ),
                goodput_delta_pct=(
                    delta_pct(cfg.goodput_tok_s, base.goodput_tok_s) if base.goodput_tok_s else 0.0
                ),
                tokens_per_joule_delta_pct=(
                    delta_pct(tpj, base_tpj) if tpj is not None and base_tpj else None
                ),
                gate=gate,
                slo_met_every_repeat=slo_ok,
                capacity=cap,
            )
        )
    return ReportAnalysis(analyses, disagreements)


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


def conclusion(analysis: ReportAnalysis, cards: int) -> str:
    """The capacity conclusion as one plain sentence per tuned configuration (joined)."""
    sentences = [_sentence(c, cards) for c in analysis.tuned]
    return " ".join(sentences)


def _sentence(c: ConfigAnalysis, cards: int) -> str:
    cap = c.capacity
    label = c.config.label
    if cap is None:
        return f"{label} has no baseline goodput to compare with, so no capacity figure."
    gain = f"{cap.gain_pct:+.1f}% goodput"
    if cap.credited:
        return (
            f"{label} ({gain}) serves the baseline load of {cards} cards on "
            f"{cap.cards_needed}, saving {cap.saved} cards."
        )
    why = []
    for reason in cap.reasons:
        if reason is NoCredit.GATE_FAILED and c.gate is not None:
            why.append(
                f"it failed the accuracy gate by {-c.gate.delta_pts:.1f} points "
                f"against a {c.gate.threshold_pts:.1f}-point threshold"
            )
        else:
            why.append(f"it {reason.value}" if not reason.value.startswith("its") else reason.value)
    return f"{label} ({gain}) earns no capacity saving because " + "; and ".join(why) + "."
