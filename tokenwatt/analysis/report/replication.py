"""Does a published figure still hold? The headline figures of a configuration as
published and as measured again, judged by whether their 95% intervals overlap.

Pure. The rule (methods/replication.md): two measurements of one figure agree when their
intervals overlap and disagree when they do not; a figure without a value or an interval
on either side is unknown, never "agree". Goodput decides: a replication agrees when its
goodput agrees and no figure disagrees, disagrees when any figure does, and is otherwise
inconclusive. A configuration published as measured whose replication met the SLO at no
load disagrees on goodput; a replication whose result is inconclusive is inconclusive.
Latencies and tokens per joule depend on the load: when the replication's search stopped
at another rate than the published one, they are unknown (not comparable), and only goodput
and accuracy are judged.

Goodput also disagrees when the two searches contradict each other: one missed the SLO beyond
doubt at a rate at or below the one where the other met it with all its repeats
(:func:`_crossed`).

Intervals: goodput and tokens per joule, Student's t over the repeats
(:func:`~tokenwatt.analysis.stats.intervals.t_interval`), goodput's upper end raised to the
goodput scaled to the lowest rate above the found one that missed the SLO, or unbounded when
none did (the search located capacity only within that bracket: :func:`_bracket_top`);
p99 TTFT and TPOT, the order-statistic interval a report keeps (``ttft_p99_ci_ms``, an
unbounded upper end counting as infinite);
accuracy, the Clopper–Pearson interval of the score over the items scored (Clopper &
Pearson 1934, via :func:`scipy.stats.binomtest`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tokenwatt.analysis.report.config_settings import differing_settings
from tokenwatt.analysis.stats.intervals import t_interval
from tokenwatt.analysis.stats.repeat_stats import (
    config_tokens_per_joule,
    goodput_interval,
    repeat_tpjs,
)
from tokenwatt.records import (
    MAX_QUANTITY,
    NOT_SUSTAINED_PREFIX,
    ConfigV3,
    Figure,
    FigureCheck,
    FigureVerdict,
    QuantileCI,
    ReplicationVerdict,
    SearchWindowV3,
)

Span = tuple[float | None, float | None, float | None]
"""(value, low, high); high None: unbounded above."""


def _finite(value: float | str | None) -> float | None:
    return float(value) if isinstance(value, float | int) and math.isfinite(value) else None


def _goodput(cfg: ConfigV3) -> Span:
    if cfg.result_status != "measured":
        return None, None, None
    ci = goodput_interval(cfg.repeats_detail)
    if ci is None and cfg.goodput_ci_tok_s is not None:
        low, high = cfg.goodput_ci_tok_s.low, cfg.goodput_ci_tok_s.high
    elif ci is not None:
        low, high = ci.low, ci.high
    else:
        return cfg.goodput_tok_s, None, None
    if not cfg.search:  # a migrated record keeps no search: the repeats' interval only
        return cfg.goodput_tok_s, low, high
    top = _bracket_top(cfg)
    return cfg.goodput_tok_s, low, None if top is None else max(high, top)


def _bracket_top(cfg: ConfigV3) -> float | None:
    """The goodput at the lowest rate above the found one where a window (probe or repeat)
    showed the engine past its capacity (:func:`_missed`), scaled from the found rate
    (tok/s): the search located the capacity only within that bracket, so a measurement
    anywhere in it is the same result.
    None when none did (the sweep's top was met, or what lay above was invalid for the
    client's sake): the capacity may lie anywhere above."""
    found = cfg.repeats_detail[0].rate_rps if cfg.repeats_detail else None
    if not found:
        return None
    above = [w.rate_rps for w in cfg.search if _missed(w) and w.rate_rps > found]
    top = cfg.goodput_tok_s * min(above) / found if above else None
    return None if top is None or top > MAX_QUANTITY else top  # past any record: unbounded


def _lowest_miss(cfg: ConfigV3) -> float | None:
    """The lowest rate (req/s) at which a window showed the engine past its capacity beyond
    doubt: a miss whose p99 intervals both allow a pass ("miss, but not beyond doubt", one
    slow request among a few dozen) contradicts nothing. A window that kept no such judgement
    (``slo_beyond_doubt`` null) counts."""
    rates = [w.rate_rps for w in cfg.search if _missed(w) and w.slo_beyond_doubt is not False]
    return min(rates) if rates else None


def _crossed(old: ConfigV3, new: ConfigV3) -> str | None:
    """Why the two searches contradict each other, or None: one missed the SLO at a rate
    (or below one) that the other met it at, with its repeats there."""
    old_rate, new_rate = _rate(old), _rate(new)
    new_miss, old_miss = _lowest_miss(new), _lowest_miss(old)
    if old_rate is not None and new_miss is not None and new_miss <= old_rate:
        return (
            f"the replication missed the SLO at {new_miss:g} req/s; the published "
            f"configuration met it at {old_rate:g} req/s"
        )
    if new_rate is not None and old_miss is not None and old_miss <= new_rate:
        return (
            f"the replication met the SLO at {new_rate:g} req/s; the published "
            f"configuration missed it at {old_miss:g} req/s"
        )
    return None


def _missed(w: SearchWindowV3) -> bool:
    """The window showed the engine past its capacity: a valid window that missed the SLO,
    or one invalid because the server did not keep up with the rate (not sustained). A
    window invalid for the client's sake (it lagged, a worker died) shows nothing."""
    if w.valid:
        return not w.slo_pass
    return (w.invalid_reason or "").startswith(NOT_SUSTAINED_PREFIX)


def _p99(value: float | str | None, ci: QuantileCI | None) -> Span:
    v = _finite(value)
    if v is None or ci is None:
        return v, None, None
    return v, _finite(ci.low_ms), _finite(ci.high_ms)


def _tpj(cfg: ConfigV3) -> Span:
    value = config_tokens_per_joule(cfg)
    values = repeat_tpjs(cfg.repeats_detail)
    ci = t_interval(values) if values else None
    return value, *((ci.low, ci.high) if ci is not None else (None, None))


def _accuracy(cfg: ConfigV3) -> Span:
    acc = cfg.accuracy
    if acc is None:
        return None, None, None
    if not acc.items:
        return acc.score, None, None
    from scipy.stats import binomtest

    n = acc.items * max(acc.seeds or 1, 1)
    k = round(acc.score / 100.0 * n)
    try:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    except (TypeError, ValueError, OverflowError):  # counts past what a suite holds
        return acc.score, None, None
    return acc.score, 100.0 * ci.low, 100.0 * ci.high


def _spans(cfg: ConfigV3) -> dict[Figure, Span]:
    if cfg.result_status != "measured":  # no operating point: no latency, no energy
        nothing: Span = (None, None, None)
        return {
            "goodput_tok_s": nothing,
            "ttft_p99_ms": nothing,
            "tpot_p99_ms": nothing,
            "tokens_per_joule": nothing,
            "accuracy": _accuracy(cfg),
        }
    return {
        "goodput_tok_s": _goodput(cfg),
        "ttft_p99_ms": _p99(cfg.ttft_p99_ms, cfg.ttft_p99_ci_ms),
        "tpot_p99_ms": _p99(cfg.tpot_p99_ms, cfg.tpot_p99_ci_ms),
        "tokens_per_joule": _tpj(cfg),
        "accuracy": _accuracy(cfg),
    }


def _judge(
    figure: Figure, old: Span, new: Span, old_cfg: ConfigV3, new_cfg: ConfigV3
) -> FigureCheck:
    verdict: FigureVerdict = "unknown"
    reason: str | None = None
    if figure == "goodput_tok_s" and old_cfg.result_status == "measured":
        if new_cfg.result_status == "none_met":
            verdict, reason = "disagree", "the replication met the SLO at no load"
        elif new_cfg.result_status == "inconclusive":
            reason = "the replication's result is inconclusive"
    if figure == "goodput_tok_s" and reason is None and new_cfg.result_status == "measured":
        crossed = _crossed(old_cfg, new_cfg)
        if crossed is not None:
            verdict, reason = "disagree", crossed
    if figure == "goodput_tok_s" and old_cfg.result_status != "measured":
        reason = f"the published result is {old_cfg.result_status.replace('_', ' ')}"
    if figure in _AT_THE_LOAD and reason is None:
        reason = _other_load(old_cfg, new_cfg)
    if verdict == "unknown" and reason is None:
        verdict, reason = _overlap(old, new)
    return FigureCheck(
        figure=figure,
        old=old[0],
        old_low=old[1],
        old_high=old[2],
        new=new[0],
        new_low=new[1],
        new_high=new[2],
        verdict=verdict,
        reason=reason,
    )


_AT_THE_LOAD = frozenset({"ttft_p99_ms", "tpot_p99_ms", "tokens_per_joule"})
"""Figures that depend on the load they were measured at: compared only at the same rate."""


def _rate(cfg: ConfigV3) -> float | None:
    return cfg.repeats_detail[0].rate_rps if cfg.repeats_detail else None


def _other_load(old: ConfigV3, new: ConfigV3) -> str | None:
    """Why two operating points cannot be compared, or None when they can: latency and
    energy per token depend on the load, so two searches that stopped at different rates
    measured different things there."""
    a, b = _rate(old), _rate(new)
    if a is None or b is None or math.isclose(a, b, rel_tol=1e-6):
        return None
    return f"measured at another load ({a:g} req/s published, {b:g} req/s now): not comparable"


def _overlap(old: Span, new: Span) -> tuple[FigureVerdict, str | None]:
    (ov, ol, oh), (nv, nl, nh) = old, new
    if ov is None and nv is None:
        return "unknown", "measured on neither side"
    if ov is None or nv is None:
        return "unknown", "published without it" if ov is None else "not measured again"
    if ol is None or nl is None:
        return "unknown", "no interval (fewer than two passing repeats, or too few values)"
    old_high = math.inf if oh is None else oh
    new_high = math.inf if nh is None else nh
    if ol <= new_high and nl <= old_high:
        return "agree", None
    side = "higher" if nl > old_high else "lower"
    return "disagree", "the new interval lies wholly " + side + " than the published one"


def replication_checks(old: ConfigV3, new: ConfigV3) -> list[FigureCheck]:
    """Each headline figure of ``old`` (as published) against ``new`` (measured again).
    A replication whose run did not complete judges nothing: every figure is unknown."""
    olds, news = _spans(old), _spans(new)
    if not new.complete:
        why = f"the replication's run is incomplete ({new.incomplete_reason or 'stopped early'})"
        return [
            FigureCheck(
                figure=f,
                old=olds[f][0],
                old_low=olds[f][1],
                old_high=olds[f][2],
                new=None,
                new_low=None,
                new_high=None,
                verdict="unknown",
                reason=why,
            )
            for f in olds
        ]
    return [_judge(f, olds[f], news[f], old, new) for f in olds]


def replication_verdict(checks: Sequence[FigureCheck]) -> ReplicationVerdict:
    """agrees, disagrees or inconclusive, by the rule of this module's docstring."""
    if any(c.verdict == "disagree" for c in checks):
        return "disagrees"
    goodput = next((c for c in checks if c.figure == "goodput_tok_s"), None)
    return "agrees" if goodput is not None and goodput.verdict == "agree" else "inconclusive"


def changed_settings(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Names of the settings whose values differ between the two configurations."""
    return [name for name, differs in differing_settings([old, new]) if differs]


FIGURE_NAMES: dict[Figure, str] = {
    "goodput_tok_s": "SLO goodput (tok/s)",
    "ttft_p99_ms": "p99 TTFT (ms)",
    "tpot_p99_ms": "p99 TPOT (ms)",
    "tokens_per_joule": "tokens per joule (tok/J)",
    "accuracy": "accuracy (%)",
}
"""How each figure is named on pages and in the terminal."""


def disagreeing_names(checks: Sequence[FigureCheck]) -> list[str]:
    """The names (:data:`FIGURE_NAMES`) of the figures that disagree."""
    return [FIGURE_NAMES[c.figure] for c in checks if c.verdict == "disagree"]
