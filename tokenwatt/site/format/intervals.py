"""Confidence intervals beside the numbers a report page headlines.

Goodput, its delta and the tokens-per-joule delta come with the 95% t-intervals the build
recomputes from the record's repeats (:mod:`tokenwatt.analysis.stats.repeat_stats`); a p99 comes
with the order-statistic interval the collector kept for its window
(:mod:`tokenwatt.analysis.window.doubt`), and the verdict says "not beyond doubt" when that
interval straddles the limit. Without an interval a cell is what it was before. Everything
here is numbers and the package's own words (trusted); record text never reaches it.
"""

from __future__ import annotations

from markupsafe import Markup

from tokenwatt.analysis import (
    ConfigAnalysis,
    Interval,
    ReportAnalysis,
    band_warning,
    ci_side,
    ci_text,
    no_interval_reason,
    value_text,
    verdict_words,
)
from tokenwatt.records import LatencyMsV3, QuantileCI
from tokenwatt.site.format.escape import trusted
from tokenwatt.site.format.fmt import DASH, num, signed_pct, signed_pct_span, span

NOT_BEYOND_DOUBT = "not beyond doubt"


def _ci(text: Markup) -> Markup:
    return trusted(" (95% CI ") + text + trusted(")")


def p99_cell(value: float, limit: float, ci: QuantileCI | None) -> Markup:
    """A headline p99 (ms) with its mark, its 95% interval, and "pass, but not beyond
    doubt" (or "miss, …") when the interval straddles the limit."""
    mark = "✓" if value <= limit else "✗ over"
    # Decimals enough that a miss never reads as level with the limit (number_text).
    cell = trusted(f"{value_text(value, limit, 1) or num(value, 6)} {mark}")
    text = ci_text(ci)
    if text is None:
        return cell
    cell += _ci(trusted(text))
    if ci_side(ci, limit) == "straddles":
        cell += trusted(f": {verdict_words(value <= limit, False)}")
    return cell


def goodput_cell(c: ConfigAnalysis) -> Markup:
    """Goodput (tok/s) with the 95% interval of the repeats' mean; for a result that is not
    measured, what it is instead (inconclusive, or no load met the SLO), no number."""
    if not c.measured:
        if c.config.result_status == "none_met":
            return trusted("no load met the SLO")
        return trusted("**inconclusive**")
    cell = num(c.config.goodput_tok_s)
    ci = c.goodput_ci
    if ci is not None:
        return cell + _ci(span(ci.low, ci.high))
    why = no_interval_reason(c.config.repeats, c.config.slo_pass_count)
    return cell + trusted(f" ({why})") if why else cell


def _delta_ci(ci: Interval | None) -> Markup:
    if ci is None:
        return trusted("")
    words = trusted("; includes zero") if ci.includes_zero() else trusted("")
    return trusted(" (95% CI ") + signed_pct_span(ci.low, ci.high) + words + trusted(")")


def goodput_delta_cell(c: ConfigAnalysis) -> Markup:
    """Δ goodput against the baseline (%) with its 95% Welch interval."""
    if c.is_baseline:
        return trusted("baseline")
    if c.goodput_delta_pct is None:
        return trusted("not compared") if c.measured else DASH
    return signed_pct(c.goodput_delta_pct) + _delta_ci(c.goodput_delta_ci_pct)


def tokens_per_joule_cell(c: ConfigAnalysis) -> Markup:
    """Tokens per joule; for a tuned configuration with an interval, its Δ and the Δ's 95%
    interval beside it."""
    cell = num(c.tokens_per_joule, 2)
    ci = c.tokens_per_joule_delta_ci_pct
    if c.is_baseline or ci is None or c.tokens_per_joule_delta_pct is None:
        return cell
    return cell + trusted(" · Δ ") + signed_pct(c.tokens_per_joule_delta_pct) + _delta_ci(ci)


def window_p99(value: LatencyMsV3, ci: QuantileCI | None, shown: Markup) -> Markup:
    """A search window's p99 cell (``shown``) with its interval in brackets."""
    text = ci_text(ci)
    if text is None or value is None:
        return shown
    return shown + trusted(f" ({text})")


def doubt_suffix(beyond_doubt: bool | None) -> Markup:
    """ ", but not beyond doubt" after a window's verdict when its intervals say so."""
    return trusted(f", but {NOT_BEYOND_DOUBT}") if beyond_doubt is False else trusted("")


def band_rows(analysis: ReportAnalysis, *, one_repeat: bool = False) -> list[tuple[str, Markup]]:
    """The setup table's band rows: the stated band, and the measured one when known.

    With ``one_repeat`` (no configuration has two repeats) there is no spread to measure a
    band from, and the row says so instead of showing a ±0.0% band."""
    if one_repeat:
        return [("Variance band", trusted("one repeat: no band"))]
    stated = analysis.variance_band_pct
    rows = [("Variance band", trusted(f"±{num(stated)}%"))]
    measured = analysis.variance_band_measured_pct
    if measured is None:
        return rows
    flag = " ⚠ wider than the stated band" if analysis.band_understated else ""
    rows.append(("Variance band measured from the repeats", trusted(f"±{num(measured)}%{flag}")))
    return rows


__all__ = [
    "band_rows",
    "band_warning",
    "doubt_suffix",
    "goodput_cell",
    "goodput_delta_cell",
    "p99_cell",
    "tokens_per_joule_cell",
    "window_p99",
]
