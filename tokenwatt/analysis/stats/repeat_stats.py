"""How sure a report's per-configuration numbers are, from its repeats (pure).

From a report record's ``configs[].repeats_detail`` (the windows at the found rate):

- the 95% Student t-interval of the mean goodput (tok/s);
- the 95% Welch t-intervals of the goodput and tokens-per-joule differences from the
  baseline, as a percentage of the baseline's repeat mean (the interval of the difference,
  which carries both configurations' spread, scaled by 100 / baseline mean for display;
  whether it holds 0 does not depend on that scaling);
- the variance band measured from the repeats
  (:func:`tokenwatt.analysis.stats.variance.variance_band_pct`, the widest configuration's).

Why t-intervals and not a bootstrap: :mod:`tokenwatt.analysis.stats.intervals`. A configuration
with one repeat, or a repeat that missed the SLO (its goodput is then 0, not a mean), gets
no interval. ``tokenwatt report`` stores these figures; the build recomputes them with the
same functions and flags a stored value that disagrees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tokenwatt.analysis.power.efficiency import (
    tokens_per_joule,
    tokens_per_joule_above_idle,
    tokens_per_joule_from_energy,
)
from tokenwatt.analysis.stats.intervals import Interval, t_interval, welch_interval
from tokenwatt.analysis.stats.variance import variance_band_pct
from tokenwatt.records import ConfigDetail, MeanCI, Repeat, RepeatV2, goodput_mismatch


def _all_passed(repeats: Sequence[RepeatV2]) -> bool:
    return bool(repeats) and all(r.slo_pass for r in repeats)


def repeat_goodputs(repeats: Sequence[RepeatV2]) -> list[float] | None:
    """Goodput (tok/s) of each repeat at the found rate (a configuration's
    ``repeats_detail``); None when there are none or a repeat missed the SLO."""
    if not _all_passed(repeats):
        return None
    return [r.goodput_tok_s for r in repeats]


def windows_tokens_per_joule(repeats: Sequence[RepeatV2]) -> float | None:
    """Tokens per joule over measured windows: goodput tokens ÷ energy (J), both summed over
    the same windows (methods/energy.md). The one definition every figure uses: a window's
    row, a configuration's headline, its change from the baseline, the terminal, ``--json``
    and the charts.

    A ratio of sums, not a mean of per-window ratios: Σ goodput_tok_s × window_s ÷ Σ energy_j,
    so a longer window weighs in proportion to its tokens and energy. A window that missed the
    SLO delivered no goodput tokens (0) but its energy counts. A window without valid energy
    (an invalid power window, whose ``energy_j`` the report leaves null) is left out of both
    sums. None when no window has energy.
    """
    kept = [r for r in repeats if r.energy_j is not None and r.energy_j > 0 and r.window_s]
    if not kept:
        return None
    tokens = sum(r.goodput_tok_s * (r.window_s or 0.0) for r in kept if r.slo_pass)
    return tokens_per_joule_from_energy(tokens, sum(r.energy_j or 0.0 for r in kept))


def repeat_tokens_per_joule(repeat: RepeatV2) -> float | None:
    """One window's tokens per joule (:func:`windows_tokens_per_joule` of that window)."""
    return windows_tokens_per_joule([repeat])


def config_tokens_per_joule(cfg: ConfigDetail) -> float | None:
    """A configuration's tokens per joule (tok/J): :func:`windows_tokens_per_joule` over its
    windows at the found load (``repeats_detail``); 0 when it found no goodput.

    A record that keeps no per-window energy (v1 records and the seed, which keep only the
    configuration's mean goodput and mean power) gives goodput (tok/s) ÷ mean power (W): the
    same quantity when the windows are equally long, as the seed's two 120 s windows are
    (4572.3 / 637 ≈ 7.18). None without power.
    """
    per_window = windows_tokens_per_joule(cfg.repeats_detail)
    if per_window is not None:
        return per_window if cfg.goodput_tok_s > 0 else 0.0
    if cfg.node_power_kw is None or cfg.node_power_kw <= 0:
        return None
    return tokens_per_joule(cfg.goodput_tok_s, cfg.node_power_kw * 1000.0)


def config_tokens_per_joule_above_idle(cfg: ConfigDetail, idle_power_w: float) -> float | None:
    """Tokens per joule of the energy above the boards' idle floor (tok/J): goodput tokens ÷
    (energy − idle power × duration) over the same windows as
    :func:`config_tokens_per_joule`; goodput ÷ (mean power − idle power) for a record without
    per-window energy. None when nothing is above idle or there is no power.

    Raises:
        ValueError: idle power negative or not finite.
    """
    kept = [r for r in cfg.repeats_detail if r.energy_j and r.energy_j > 0 and r.window_s]
    if kept:
        if idle_power_w < 0 or not math.isfinite(idle_power_w):
            raise ValueError(f"idle power must be finite and not negative, got {idle_power_w} W")
        above = sum((r.energy_j or 0.0) - idle_power_w * (r.window_s or 0.0) for r in kept)
        tokens = sum(r.goodput_tok_s * (r.window_s or 0.0) for r in kept if r.slo_pass)
        if cfg.goodput_tok_s <= 0:
            tokens = 0.0
        return tokens / above if above > 0 else None
    if cfg.node_power_kw is None or cfg.node_power_kw <= 0:
        return None
    return tokens_per_joule_above_idle(cfg.goodput_tok_s, cfg.node_power_kw * 1000.0, idle_power_w)


def repeat_tpjs(repeats: Sequence[RepeatV2]) -> list[float] | None:
    """Tokens per joule of each repeat; None unless every repeat passed and has energy."""
    if not _all_passed(repeats):
        return None
    values = [repeat_tokens_per_joule(r) for r in repeats]
    if any(v is None for v in values):
        return None
    return [v for v in values if v is not None]


def goodput_interval(repeats: Sequence[RepeatV2]) -> Interval | None:
    """95% t-interval of the mean repeat goodput (tok/s); None with fewer than two repeats
    or a missed one."""
    values = repeat_goodputs(repeats)
    return None if values is None else t_interval(values)


def delta_interval_pct(
    tuned: Sequence[float] | None, baseline: Sequence[float] | None
) -> Interval | None:
    """95% Welch interval of mean(tuned) − mean(baseline) as % of mean(baseline); None when
    either side is missing, has one value, or the baseline's mean is not positive."""
    if tuned is None or baseline is None or len(baseline) == 0:
        return None
    base_mean = sum(baseline) / len(baseline)
    diff = welch_interval(tuned, baseline)
    if diff is None or base_mean <= 0:
        return None
    return diff.scaled(100.0 / base_mean)


def measured_band_pct(configs: Sequence[ConfigDetail]) -> float | None:
    """The widest configuration's variance band (±%) over its repeat goodputs, from
    ``repeats_detail`` (missed repeats included: the band is about the windows' spread);
    None when no configuration keeps two repeats with goodput."""
    bands = [
        variance_band_pct([r.goodput_tok_s for r in cfg.repeats_detail])
        for cfg in configs
        if len(cfg.repeats_detail) >= 2 and sum(r.goodput_tok_s for r in cfg.repeats_detail) > 0
    ]
    return max(bands) if bands else None


def mean_ci(interval: Interval | None) -> MeanCI | None:
    """An interval as a record, its ends as computed: a page or the terminal rounds them
    once, where it prints them (:func:`tokenwatt.analysis.stats.number_text.fixed`)."""
    if interval is None:
        return None
    return MeanCI(
        low=interval.low,
        high=interval.high,
        confidence=interval.confidence,
        method=interval.method,
        repeats=interval.repeats,
        baseline_repeats=interval.baseline_repeats,
    )


def goodput_disagreement(goodput_tok_s: float, repeats: Sequence[Repeat]) -> str | None:
    """Why a measured result's goodput (tok/s) cannot be reported, None when it can
    (:func:`tokenwatt.records.goodput_mismatch` over the passing ``repeats`` at the found
    load, as the collector computes it)."""
    return goodput_mismatch(
        goodput_tok_s, [r.window.goodput_tok_s for r in repeats if r.window.slo_pass]
    )
