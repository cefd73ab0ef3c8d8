"""How sure a report's per-configuration numbers are, from its repeats (pure).

From a report record's ``configs[].repeats_detail`` (the windows at the found rate):

- the 95% Student t-interval of the mean goodput (tok/s);
- the 95% Welch t-intervals of the goodput and tokens-per-joule differences from the
  baseline, as a percentage of the baseline's repeat mean (the interval of the difference,
  which carries both configurations' spread, scaled by 100 / baseline mean for display;
  whether it holds 0 does not depend on that scaling);
- the variance band measured from the repeats
  (:func:`tokenwatt.analysis.variance.variance_band_pct`, the widest configuration's).

Why t-intervals and not a bootstrap: :mod:`tokenwatt.analysis.intervals`. A configuration
with one repeat, or a repeat that missed the SLO (its goodput is then 0, not a mean), gets
no interval. ``tokenwatt report`` stores these figures; the build recomputes them with the
same functions and flags a stored value that disagrees.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenwatt.analysis.intervals import Interval, t_interval, welch_interval
from tokenwatt.analysis.variance import variance_band_pct
from tokenwatt.records import ConfigDetail, MeanCI, RepeatV2


def _all_passed(repeats: Sequence[RepeatV2]) -> bool:
    return bool(repeats) and all(r.slo_pass for r in repeats)


def repeat_goodputs(repeats: Sequence[RepeatV2]) -> list[float] | None:
    """Goodput (tok/s) of each repeat at the found rate (a configuration's
    ``repeats_detail``); None when there are none or a repeat missed the SLO."""
    if not _all_passed(repeats):
        return None
    return [r.goodput_tok_s for r in repeats]


def repeat_tokens_per_joule(repeat: RepeatV2) -> float | None:
    """Goodput tokens in the window ÷ the window's energy (tok/J); None without both."""
    if repeat.energy_j is None or repeat.window_s is None or repeat.energy_j <= 0:
        return None
    return repeat.goodput_tok_s * repeat.window_s / repeat.energy_j


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


def mean_ci(interval: Interval | None, decimals: int) -> MeanCI | None:
    """An interval as a record, its ends rounded to ``decimals``."""
    if interval is None:
        return None
    return MeanCI(
        low=round(interval.low, decimals),
        high=round(interval.high, decimals),
        confidence=interval.confidence,
        method=interval.method,
        repeats=interval.repeats,
        baseline_repeats=interval.baseline_repeats,
    )
