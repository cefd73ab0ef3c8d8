"""How sure a window's SLO verdict is, from its p99 intervals (pure).

The verdict itself (:func:`tokenwatt.analysis.window.latency.summarise_window`) compares the p99s
with the limits and is never changed here. Beside it, each p99 has a 95% order-statistic
interval (:func:`tokenwatt.analysis.stats.intervals.quantile_interval`), and the verdict is
**beyond doubt** when the intervals agree with it:

- a pass is beyond doubt when both intervals lie at or below their limits (an interval
  whose upper end is beyond the sample reaches past any limit); otherwise it is "pass, but
  not beyond doubt";
- a miss is beyond doubt when some limit the window missed has its whole interval above
  the limit; when every missed limit's interval reaches down to the limit it is "miss, but
  not beyond doubt".

A window that failed for another reason (invalid, stopped early, no requests) gets no
qualifier (None): its verdict does not rest on the p99s alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from tokenwatt.analysis.stats.intervals import limit_side, quantile_interval
from tokenwatt.analysis.window.window_labels import (
    LabelPlan,
    WindowLabel,
    run_labels,
    window_labels,
)
from tokenwatt.records import LatencyBound, QuantileCI, RunRecord, SearchWindowV3

LATENCY_REASONS = frozenset({"ttft", "tpot", "errors"})
"""Failure reasons the p99 intervals speak to (failed requests are infinite TTFT/TPOT)."""


def _bound(value: float) -> LatencyBound:
    return "inf" if math.isinf(value) else round(value, 4)


def p99_ci(values_ms: Sequence[float]) -> QuantileCI | None:
    """The 95% order-statistic interval of the p99 of ``values_ms`` as a record (ends
    rounded to 0.1 µs, as the percentiles are); None for no values."""
    ci = quantile_interval(values_ms, 99)
    if ci is None:
        return None
    return QuantileCI(
        confidence=ci.confidence,
        n=ci.n,
        low_rank=ci.low_rank,
        high_rank=ci.high_rank,
        low_ms=_bound(ci.low),
        high_ms=None if ci.high is None else _bound(ci.high),
    )


def _number(value: LatencyBound | None) -> float | None:
    if value is None:
        return None
    return math.inf if value == "inf" else float(value)


def ci_side(ci: QuantileCI | None, limit_ms: float) -> str | None:
    """``below``, ``above`` or ``straddles``
    (:func:`~tokenwatt.analysis.stats.intervals.limit_side`) for a recorded interval; None
    without one."""
    if ci is None:
        return None
    return limit_side(_number(ci.low_ms) or 0.0, _number(ci.high_ms), limit_ms)


def _reasons(failure_reason: str | None) -> set[str]:
    """The leading word of each comma-separated reason: ``"ttft_p99,errors"`` → {ttft,
    errors}."""
    words = (
        re.match(r"[a-z]*", part.strip().lower()) for part in (failure_reason or "").split(",")
    )
    return {m.group(0) for m in words if m is not None and m.group(0)}


def beyond_doubt(
    *,
    slo_pass: bool,
    failure_reason: str | None,
    ttft_ci: QuantileCI | None,
    tpot_ci: QuantileCI | None,
    ttft_limit_ms: float,
    tpot_limit_ms: float,
) -> bool | None:
    """Whether the window's verdict holds across its p99 intervals (module text).

    None when the verdict rests on something besides the p99s (a failure reason outside
    ``ttft``, ``tpot``, ``errors``) or there is no TTFT interval (no requests). A missing
    TPOT interval (every output one token) leaves the TPOT limit out.
    """
    if ttft_ci is None:
        return None
    ttft = ci_side(ttft_ci, ttft_limit_ms)
    tpot = ci_side(tpot_ci, tpot_limit_ms)
    sides = [s for s in (ttft, tpot) if s is not None]
    if slo_pass:
        return all(s == "below" for s in sides)
    reasons = _reasons(failure_reason)
    if not reasons or not reasons <= LATENCY_REASONS:
        return None
    return "above" in sides


def verdict_words(slo_pass: bool, doubt_free: bool | None) -> str:
    """ "pass" / "miss", with ", but not beyond doubt" when ``doubt_free`` is False."""
    word = "pass" if slo_pass else "miss"
    return f"{word}, but not beyond doubt" if doubt_free is False else word


def ci_text(ci: QuantileCI | None) -> str | None:
    """An interval in words for terminals and sentences: ``"310–402 ms"``, ``"310 ms to
    beyond the sample"``, ``"310 ms to ∞ (a failed request)"``, ``"∞ (failed requests)"``
    when the lower end is a failed request; None without one. Numbers and the package's
    own words only: safe to put on a page."""
    if ci is None:
        return None
    if ci.low_ms == "inf":
        return "∞ (failed requests)"
    low = _ms(ci.low_ms)
    if ci.high_ms is None:
        return f"{low} ms to beyond the sample"
    if ci.high_ms == "inf":
        return f"{low} ms to ∞ (a failed request)"
    return f"{low}–{_ms(ci.high_ms)} ms"


def _ms(value: float) -> str:
    """ms as the search sentence writes them: ``2,000``, ``52``, ``9.7``."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _final_repeats(
    windows: Sequence[SearchWindowV3], labels: Sequence[WindowLabel]
) -> list[tuple[WindowLabel, SearchWindowV3]]:
    """The repeats whose verdicts were used at the last rate measured (the result's), each
    with its label."""
    repeats = [(lb, w) for lb, w in zip(labels, windows, strict=True) if w.step == "repeat"]
    repeats = [(lb, w) for lb, w in repeats if not w.remeasured]
    if not repeats:
        return []
    last = repeats[-1][1]
    group: list[tuple[WindowLabel, SearchWindowV3]] = []
    for lb, w in reversed(repeats):
        same = (
            w.backoff == last.backoff if last.backoff is not None else w.rate_rps == last.rate_rps
        )
        if not same:
            break
        group.append((lb, w))
    return group[::-1]


def _straddled(w: SearchWindowV3, ttft_limit_ms: float, tpot_limit_ms: float) -> list[str]:
    """How each limit the window's verdict is in doubt about relates to its interval."""
    parts = []
    for name, ci, limit in (
        ("TTFT", w.ttft_p99_ci_ms, ttft_limit_ms),
        ("TPOT", w.tpot_p99_ci_ms, tpot_limit_ms),
    ):
        side = ci_side(ci, limit)
        doubtful = side == "straddles" or (w.slo_pass and side == "above")
        if doubtful:
            verb = "reaches past" if w.slo_pass else "reaches down to"
            parts.append(
                f"its p99 {name}'s 95% interval ({ci_text(ci)}) {verb} the {_ms(limit)} ms limit"
            )
    return parts


def doubt_sentence(
    windows: Sequence[SearchWindowV3],
    ttft_limit_ms: float,
    tpot_limit_ms: float,
    *,
    fixed: bool = False,
    labels: Sequence[WindowLabel] | None = None,
    short_once: bool = False,
) -> str | None:
    """One sentence naming the result's repeats whose verdict is not beyond doubt, with the
    interval and limit that make it so; None when every one is beyond doubt (or unjudged).

    With ``short_once`` (the terminal's words), passes in doubt only because a p99 interval
    has no upper end (too few requests: the same words for every short window) are said
    once, with their count and numbers, instead of one clause each.

    Each window is named by its label (:mod:`tokenwatt.analysis.window.window_labels`; ``labels``,
    one per window, else made from the windows with ``fixed`` and nothing planned known).
    E.g. "Not beyond doubt: #9 repeat 2 of 2 at 9 req/s met the SLO, but its p99 TTFT's 95%
    interval (1,650 ms to beyond the sample) reaches past the 2,000 ms limit." With
    ``fixed`` (a fixed-load run, ``sweep.fixed``: one window per listed load, no repeats)
    each window is a load: "#2 load 2 of 3: 8 clients met the SLO, ...".
    """
    if labels is None:
        labels = window_labels(windows, LabelPlan(fixed=fixed))
    parts = []
    short: list[str] = []
    final = _final_repeats(windows, labels)
    for label, w in final:
        # An invalid window's verdict is its invalidity (the story sentence names it),
        # not an SLO miss in doubt; records from before this rule still carry a value.
        if w.slo_beyond_doubt is not False or not w.valid:
            continue
        if short_once and _short_only(w, ttft_limit_ms, tpot_limit_ms):
            short.append(f"#{label.number}")
            continue
        how = _straddled(w, ttft_limit_ms, tpot_limit_ms)
        verdict = "met the SLO" if w.slo_pass else "missed the SLO"
        parts.append(f"{label.label} {verdict}" + (", but " + " and ".join(how) if how else ""))
    if short:
        parts.append(_short_clause(short, len(final)))
    if not parts:
        return None
    return "Not beyond doubt: " + "; ".join(parts) + "."


def _short_only(w: SearchWindowV3, ttft_limit_ms: float, tpot_limit_ms: float) -> bool:
    """Whether a pass is in doubt only because its p99 intervals have no upper end (too few
    requests): a matter of window length, not of how near the p99 is to its limit."""
    if not w.slo_pass:
        return False
    doubtful = [
        ci
        for ci, limit in ((w.ttft_p99_ci_ms, ttft_limit_ms), (w.tpot_p99_ci_ms, tpot_limit_ms))
        if ci_side(ci, limit) in ("straddles", "above")
    ]
    return bool(doubtful) and all(ci is not None and ci.high_ms is None for ci in doubtful)


def _short_clause(names: list[str], of: int) -> str:
    """One clause for every result window in doubt only by its length (:func:`_short_only`)."""
    which = ", ".join(names)
    return (
        f"{len(names)} of {of} result {'window' if of == 1 else 'windows'} ({which}) met the "
        "SLO, but had too few requests for their p99s' 95% intervals to have an upper end, so "
        "those reach past the limits; longer windows make these verdicts beyond doubt"
    )


def run_doubt(run: RunRecord) -> str | None:
    """:func:`doubt_sentence` for a run record's result repeats (the terminal's words)."""
    from tokenwatt.analysis.window.search_windows import search_windows

    slo = run.spec.slo
    return doubt_sentence(
        search_windows(run),
        slo.ttft_p99_ms,
        slo.tpot_p99_ms,
        fixed=run.spec.sweep.fixed,
        labels=run_labels(run),
        short_once=True,
    )
