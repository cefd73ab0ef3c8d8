"""Off-scale values on a chart's log axis: where the axis ends and where a value is drawn.

A p99 can be infinite (failed requests reached the 99th percentile, or the window was
stopped early without a finite one: stored as ``"inf"``, or as null with a failure reason)
or so far above the SLO limit that drawing it on scale would squash every other point into
the bottom of the chart. Such a value is never left out and never drawn at a made-up
height that reads like a measurement: it is clamped to the top of the axis, drawn with its
own marker (a triangle pointing up) and labelled with what it really was ("∞", or
"off scale: 250 s").

Pure: numbers in, numbers and words out; the chart modules put them into the rows.
The axis runs from the smallest shown value to the largest, the SLO limit always inside,
with :data:`HEADROOM` (a factor, on a log axis) at both ends; finite values above
:data:`SPAN_ABOVE_LIMIT` × the limit are off scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tokenwatt.analysis import fixed

HEADROOM = 2.0
"""Factor between the largest (smallest) value shown and the top (bottom) of a log axis:
room for the off-scale markers and their labels above everything on scale."""

SPAN_ABOVE_LIMIT = 100.0
"""A finite value above this many times the SLO limit is drawn off scale (two decades above
the limit on a log axis: far enough that no on-scale point is a near miss)."""

OFF_SCALE_LEGEND = "off scale (value labelled)"
"""The legend entry of the off-scale marker, the same words on every chart."""

OFF_SCALE_SHAPE = "triangle-up"
"""The off-scale marker's shape (Vega's symbol name)."""


@dataclass(frozen=True)
class LogAxis:
    """A log axis's domain and the value above which a finite value is off scale.

    Attributes:
        lo: the bottom of the domain (the axis's unit, e.g. ms), > 0.
        hi: the top of the domain; every off-scale value is drawn here.
        cap: finite values above it are drawn off scale (at ``hi``).
    """

    lo: float
    hi: float
    cap: float


@dataclass(frozen=True)
class Placed:
    """Where one value is drawn and what it says.

    Attributes:
        y: the height it is drawn at (the axis's unit): the value itself, or ``hi``.
        off_scale: whether it is drawn off scale (clamped to the top).
        label: the text drawn beside an off-scale marker ("" on scale).
        value_text: the true value in words, for the tooltip ("∞", "12.3 s", "812 ms").
    """

    y: float
    off_scale: bool
    label: str
    value_text: str


def log_axis(
    values: Iterable[float | None],
    limit: float,
    *,
    headroom: float = HEADROOM,
    span: float = SPAN_ABOVE_LIMIT,
) -> LogAxis:
    """The domain of a log axis that shows ``values`` (None, ∞, 0 and negatives are not on
    scale) and the SLO ``limit`` (> 0, same unit): from the smallest shown value ÷
    ``headroom`` to the largest × ``headroom``; values above ``span`` × ``limit`` do not
    count, they are off scale. With no finite value the axis is the limit's ± headroom, so
    off-scale markers still sit above the limit.

    Raises:
        ValueError: ``limit`` not finite and > 0, or ``headroom`` / ``span`` not > 1.
    """
    if not (math.isfinite(limit) and limit > 0):
        raise ValueError(f"the limit must be finite and > 0, got {limit}")
    if not (headroom > 1 and span > 1):
        raise ValueError(f"headroom and span must be > 1, got {headroom} and {span}")
    cap = limit * span
    shown = [v for v in values if v is not None and 0 < v <= cap]
    return LogAxis(lo=min([limit, *shown]) / headroom, hi=max([limit, *shown]) * headroom, cap=cap)


def place(value: float | None, axis: LogAxis, text: Callable[[float], str]) -> Placed | None:
    """Where ``value`` is drawn on ``axis``: on scale at itself, or off scale at the top with
    the label "∞" (an infinite value) or "off scale: <text(value)>" (a finite value above
    ``axis.cap``). ``text`` writes a finite value in words with its unit. None (no value)
    and values ≤ 0 (no place on a log axis) are not drawn: None."""
    if value is None or value <= 0:
        return None
    if math.isinf(value):
        return Placed(y=axis.hi, off_scale=True, label="∞", value_text="∞")
    words = text(value)
    if value > axis.cap:
        return Placed(y=axis.hi, off_scale=True, label=f"off scale: {words}", value_text=words)
    return Placed(y=value, off_scale=False, label="", value_text=words)


def ms_text(ms: float) -> str:
    """A latency in words: ``"0.85 ms"``, ``"44.6 ms"``, ``"812 ms"``, ``"12.3 s"``,
    ``"1,250 s"`` (seconds from 1,000 ms on)."""
    if ms >= 1000:
        s = ms / 1000
        return f"{fixed(s, 1 if s < 100 else 0, commas=True)} s"
    if ms >= 100:
        return f"{fixed(ms, 0)} ms"
    return f"{fixed(ms, 1 if ms >= 1 else 2)} ms"


def ratio_text(ratio: float) -> str:
    """A p99 as a multiple of its limit: ``"×0.42"``, ``"×16"``, ``"×1,250"``."""
    return f"×{fixed(ratio, 2)}" if ratio < 10 else f"×{fixed(ratio, 0, commas=True)}"


def log_axis_params(prefix: str, axis: LogAxis) -> list[dict[str, object]]:
    """The Vega-Lite top-level parameters ``<prefix>_lo`` and ``<prefix>_hi`` that a cached
    chart template's scale reads its domain from (``domainMin``/``domainMax`` expressions),
    so each page's spec carries its own domain without building the chart again."""
    return [
        {"name": f"{prefix}_lo", "value": axis.lo},
        {"name": f"{prefix}_hi", "value": axis.hi},
    ]
