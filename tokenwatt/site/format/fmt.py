"""Number formatting for pages. Every function returns page-safe :class:`Markup`.

Numbers are formatted here from floats the build computed; they contain only digits, signs,
separators and unit words, so they need no escaping. Text from records goes through
:func:`tokenwatt.site.format.escape.md_text` instead.
"""

from __future__ import annotations

from markupsafe import Markup

from tokenwatt.analysis import fixed, signed
from tokenwatt.site.format.escape import DASH as DASH
from tokenwatt.site.format.escape import trusted


def num(value: float | int | None, decimals: int = 1) -> Markup:
    """``4572.3`` → ``4,572.3``, rounded half away from zero as the sentences round
    (:func:`tokenwatt.analysis.fixed`: 50.55 → ``50.6``); None → an em dash."""
    if value is None:
        return DASH
    return trusted(fixed(value, decimals, commas=True))


def signed_pct(value: float | None, decimals: int = 1) -> Markup:
    """A relative change: ``+10.6%`` / ``−3.0%`` (true minus sign,
    :func:`tokenwatt.analysis.signed`); None → dash."""
    if value is None:
        return DASH
    return trusted(signed(value, decimals, "%"))


def signed_pts(value: float | None, decimals: int = 1) -> Markup:
    """A change in points: ``−8.0 pts``; None → dash. ``-0.0`` is shown as ``0.0``."""
    if value is None:
        return DASH
    return trusted(signed(value, decimals, " pts"))


def pct(value: float | None, decimals: int = 1) -> Markup:
    """A share in per cent: ``56.6%``; None → dash."""
    if value is None:
        return DASH
    return trusted(f"{fixed(value, decimals)}%")


def seconds(value: float | None) -> Markup:
    """A duration in s without false rounding: ``0.3 s``, ``45 s``, ``1,200 s``; None → dash.

    Up to three decimals, trailing zeros dropped (a 0.3 s warm-up must not read "0 s").
    """
    if value is None:
        return DASH
    text = f"{value:,.3f}".rstrip("0").rstrip(".")
    return trusted(f"{text} s")


def span(low: float | None, high: float | None, decimals: int = 1) -> Markup:
    """An interval of plain numbers: ``4,220.3–4,924.3``; either end None → a dash."""
    if low is None or high is None:
        return DASH
    return trusted(f"{fixed(low, decimals, commas=True)}–{fixed(high, decimals, commas=True)}")


def signed_pct_span(low: float | None, high: float | None, decimals: int = 1) -> Markup:
    """An interval of relative changes: ``−1.2% to +22.4%``; either end None → a dash."""
    if low is None or high is None:
        return DASH
    return signed_pct(low, decimals) + trusted(" to ") + signed_pct(high, decimals)
