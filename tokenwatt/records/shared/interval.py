"""Confidence intervals as records keep them (run records' windows and report records).

Two kinds, both computed by :mod:`tokenwatt.analysis.stats.intervals` and explained on the
methods page (statistics):

- :class:`QuantileCI`: a distribution-free interval for a window's p99 latency, two order
  statistics of the window's own values (failed requests count as infinitely slow, as in
  the p99 itself); its upper end is null when the window has too few requests for one
  ("beyond the sample");
- :class:`MeanCI`: a Student or Welch t-interval for a mean over repeats, or for the
  difference of two configurations' means, in the unit its field names.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tokenwatt.records.shared.base import BoundedFloat, NonNegFloat, PosInt, StrictModel

LatencyBound = NonNegFloat | Literal["inf"]
"""An interval end in ms; ``"inf"`` when it is a failed request (infinitely slow)."""


class QuantileCI(StrictModel):
    """A distribution-free confidence interval for a latency percentile of one window (ms).

    The ends are the window's ``low_rank``-th and ``high_rank``-th smallest values (1-based,
    failed requests counted as infinite), with ranks from the binomial distribution so that
    the interval covers the true percentile with at least ``confidence`` probability
    (Hahn & Meeker, *Statistical Intervals*, 1991, §5.2; Conover, *Practical
    Nonparametric Statistics*, 3rd ed., 1999, §3.2).
    """

    confidence: float = Field(
        default=0.95, gt=0, lt=1, description="Coverage of the interval (0.95: a 95% interval)."
    )
    n: PosInt = Field(description="Values the percentile and its interval were taken from.")
    low_rank: PosInt = Field(description="Rank (1-based, ascending) of the lower end.")
    high_rank: PosInt | None = Field(
        default=None,
        description="Rank of the upper end; null when the window has too few values for a "
        "two-sided interval: the upper end lies beyond the sample (unbounded).",
    )
    low_ms: LatencyBound = Field(description="Lower end (ms); 'inf' for a failed request.")
    high_ms: LatencyBound | None = Field(
        default=None,
        description="Upper end (ms); 'inf' for a failed request; null when beyond the sample.",
    )


class MeanCI(StrictModel):
    """A t-interval for a mean over repeats, or for a difference of two means.

    ``student-t``: the mean of one configuration's repeats (Student 1908); ``welch-t``: the
    difference tuned − baseline of two configurations' repeat means, with the
    Welch–Satterthwaite degrees of freedom (Welch 1947). A field holding a percentage gives
    the ends as a share of the baseline's repeat mean.
    """

    low: BoundedFloat = Field(description="Lower end, in the unit the field names.")
    high: BoundedFloat = Field(description="Upper end, in the unit the field names.")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="Coverage of the interval.")
    method: Literal["student-t", "welch-t"] = Field(
        description="student-t: one configuration's mean; welch-t: a difference of means."
    )
    repeats: PosInt = Field(description="Repeats of the configuration (tuned, for a delta).")
    baseline_repeats: PosInt | None = Field(
        default=None, description="Repeats of the baseline, for a delta; null otherwise."
    )


__all__ = ["LatencyBound", "MeanCI", "QuantileCI"]
