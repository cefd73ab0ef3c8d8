"""Numbers as the terminal and the pages print them, where a rounding could mislead (pure).

Three conventions, one place each:

- **Rounding.** Every printed number is rounded half away from zero on its shortest decimal
  form (:func:`fixed`), as a reader rounds: a p99 kept as 50.55 ms prints "50.6", as the
  50.5536 ms it came from does, never "50.5" (Python's ``f"{50.55:.1f}"`` rounds the
  binary value just below 50.55 down), so the table and the sentence quote one number.

- **Signs.** A signed number (a change, a delta) is written with a plus sign or the true
  minus sign U+2212 ("+10.6%", "−3.0%", "−2.04 pts"), in the terminal and on the pages
  alike; a value that rounds to zero is written without a sign ("0.0%"), never "−0.0%".
- **Comparisons printed with their operands** ("812 ms > 500 ms", "−2.04 pts < −2") show
  the value with as many decimals as it takes for the printed value to lie on the same side
  of the printed limit as the value itself: 100.04 ms against a 100 ms limit reads
  "100.04 ms > 100 ms", never "100 ms > 100 ms"; 99.996 reads "99.996 ≤ 100", never
  "100 ≤ 100". The limit is printed as given (up to :data:`MAX_DECIMALS` decimals,
  trailing zeros dropped). A value that stays level with the limit at
  :data:`MAX_DECIMALS` decimals while differing from it is said in words ("just over
  100 ms").
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

MINUS = "\N{MINUS SIGN}"
"""The minus sign of printed negative numbers (U+2212), never the ASCII hyphen."""

MAX_DECIMALS = 6
"""The most decimals a value is given to keep it off its limit's printed value."""


def fixed(value: float, decimals: int, *, commas: bool = False) -> str:
    """``value`` with exactly ``decimals`` decimals, rounded half away from zero on its
    shortest decimal form (``repr``): ``fixed(50.55, 1)`` is ``50.6``, ``fixed(-0.25, 1)``
    ``-0.3``. ``commas``: thousands separators. Not finite: as Python formats it."""
    if not math.isfinite(value):
        return f"{value:.{decimals}f}"
    quantum = Decimal(1).scaleb(-decimals)
    exact = Decimal(repr(float(value))).quantize(quantum, rounding=ROUND_HALF_UP)
    return f"{exact:,.{decimals}f}" if commas else f"{exact:.{decimals}f}"


def trimmed(value: float, decimals: int = MAX_DECIMALS) -> str:
    """``value`` with thousands separators and at most ``decimals`` decimals, trailing
    zeros dropped, the true minus sign for a negative: ``1,234.5``, ``100``, ``−2``."""
    text = fixed(value, decimals, commas=True)
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", "0"):
        return "0"
    return text.replace("-", MINUS)


def signed(value: float, decimals: int = 1, unit: str = "") -> str:
    """A change with its sign: ``+10.6%``, ``−3.0%`` (U+2212), ``0.0%`` for one that rounds
    to zero; ``unit`` is appended as given (``"%"``, ``" pts"``)."""
    text = fixed(value, decimals)
    if float(text) == 0:
        text = text.lstrip("-")
    elif not text.startswith("-"):
        text = "+" + text
    return text.replace("-", MINUS) + unit


def change_pct(value: float) -> str:
    """A percentage change for a sentence: :func:`signed` with one decimal, and ``±0.0%``
    where that rounds to zero, so that "0.0% goodput" is not read as zero goodput."""
    text = signed(value, 1, "%")
    return "±" + text if text == "0.0%" else text


def _side(a: float, b: float) -> int:
    return (a > b) - (a < b)


def decimals_for(value: float, limit: float, decimals: int) -> int | None:
    """The fewest decimals (at least ``decimals``) at which ``value`` rounds to a number on
    the same side of ``limit`` as ``value`` itself (level with it only when equal); None
    when even :data:`MAX_DECIMALS` do not separate them."""
    side = _side(value, limit)
    for d in range(decimals, max(decimals, MAX_DECIMALS) + 1):
        if _side(float(fixed(value, d)), limit) == side:
            return d
    return None


def value_text(
    value: float, limit: float, decimals: int, *, sign: bool = False, strip: bool = False
) -> str | None:
    """``value`` printed to compare truly with ``limit`` (:func:`decimals_for`): at least
    ``decimals`` decimals, more when rounding would bring it level with (or past) the limit;
    trailing zeros past ``decimals`` dropped (all of them with ``strip``). ``sign``: written
    as :func:`signed`. None when
    no precision up to :data:`MAX_DECIMALS` separates them."""
    d = decimals_for(value, limit, decimals)
    if d is None:
        return None
    text = signed(value, d) if sign else fixed(value, d, commas=True).replace("-", MINUS)
    if (strip or d > decimals) and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def comparison(
    value: float,
    limit: float,
    *,
    decimals: int,
    unit: str = "",
    sign: bool = False,
    strip: bool = False,
    ops: tuple[str, str, str] = (">", "≤", "≤"),
) -> str:
    """``value`` against ``limit`` with the operator that holds between them: ``"812 ms >
    500 ms"``, ``"100.04 ms > 100 ms"``, ``"99.996 ms ≤ 100 ms"``, the limit as given
    (:func:`trimmed`). When no printed precision separates them, in words: ``"just over
    100 ms"`` / ``"just under 100 ms"``.

    Args:
        value: the measured number.
        limit: what it is held against.
        decimals: the value's usual decimals (more are added only when needed).
        unit: appended to both operands as given (``" ms"``, ``" pts"``).
        sign: write both with their sign (:func:`signed`), as for deltas.
        strip: drop the value's trailing zeros even at its usual decimals ("40 ms").
        ops: the operator printed when the value is above, level with and below the limit
            (a latency limit: ``(">", "≤", "≤")``; the accuracy gate: ``("≥", "≥", "<")``).
    """
    limit_text = trimmed(limit)
    if sign and not limit_text.startswith((MINUS, "0")):
        limit_text = "+" + limit_text
    shown = value_text(value, limit, decimals, sign=sign, strip=strip)
    if shown is None:
        word = "just over" if value > limit else "just under"
        return f"{word} {limit_text}{unit}"
    op = ops[0] if value > limit else (ops[1] if value == limit else ops[2])
    return f"{shown}{unit} {op} {limit_text}{unit}"


__all__ = [
    "MAX_DECIMALS",
    "MINUS",
    "comparison",
    "decimals_for",
    "fixed",
    "signed",
    "trimmed",
    "value_text",
]
