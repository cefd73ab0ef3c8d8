"""Variance across repeats."""

from __future__ import annotations

from collections.abc import Sequence


def variance_band_pct(values: Sequence[float]) -> float:
    """Half the range of repeated values as a share of their mean (±%).

    ``100 × (max − min) / 2 / mean``; 0 for a single value. The seed's bands (±0.6%, ±1.0%)
    are of this kind: the spread of goodput across the two quick-mode repeats.

    Raises:
        ValueError: no values, or a mean of zero.
    """
    if not values:
        raise ValueError("no values")
    mean = sum(values) / len(values)
    if mean == 0:
        raise ValueError("mean is zero; a relative band is undefined")
    return 100.0 * (max(values) - min(values)) / 2.0 / mean
