"""Paired accuracy statistics beside the gate's rule (pure: numbers in, numbers out).

The gate's rule (:func:`tokenwatt.analysis.accuracy.gate.gate_verdict`: fail when Δ < −threshold)
decides capacity credit. This module says how sure that Δ is, on the same items:

- **McNemar's exact test**: only the discordant items carry information about a difference
  (right under one configuration, wrong under the other). Under "no difference" each
  discordant item is equally likely to go either way, so the count of one kind is
  Binomial(b + c, 1/2); the p-value is the two-sided binomial test (McNemar 1947; exact
  form as in Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91), computed with
  :func:`scipy.stats.binomtest`.
- **Paired bootstrap interval for Δ** (points): resample items with replacement, keeping
  each item's pair together, and take the 2.5th and 97.5th percentiles of the resampled Δ
  (percentile bootstrap, Efron & Tibshirani 1993, ch. 13). Seeded, so the same inputs give
  the same interval.

With several seeds, an item's correctness for the bootstrap is its share of seeds answered
right (so the interval reflects the seeds' disagreement), and for McNemar it is "right in
more than half of the seeds" (ties count as wrong, the same rule for both configurations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenwatt.analysis.accuracy.gate import GateVerdict, gate_verdict, spread_pts
from tokenwatt.records import AccuracyResult, ConfigAccuracyV2

BOOTSTRAP_RESAMPLES = 10_000
"""Resamples for the bootstrap interval: enough for a stable 95% percentile interval."""
BOOTSTRAP_SEED = 0
"""Default seed of the bootstrap's random generator (numpy PCG64)."""
CONFIDENCE = 0.95
"""Coverage of the bootstrap interval."""

NEEDS_FULL_SUITE = "needs the full suite"


@dataclass(frozen=True)
class Discordance:
    """The 2×2 table of paired outcomes (counts of items).

    Attributes:
        both_right: right under both configurations.
        baseline_only: right under the baseline, wrong under the tuned one (b).
        tuned_only: wrong under the baseline, right under the tuned one (c).
        both_wrong: wrong under both.
    """

    both_right: int
    baseline_only: int
    tuned_only: int
    both_wrong: int

    @property
    def items(self) -> int:
        """Number of paired items."""
        return self.both_right + self.baseline_only + self.tuned_only + self.both_wrong


def discordance(baseline: Sequence[bool], tuned: Sequence[bool]) -> Discordance:
    """Count the paired outcomes of two equally long per-item correctness lists.

    Raises:
        ValueError: the lists differ in length or are empty.
    """
    if len(baseline) != len(tuned):
        raise ValueError(f"paired lists differ in length: {len(baseline)} vs {len(tuned)}")
    if not baseline:
        raise ValueError("no paired items")
    pairs = list(zip(baseline, tuned, strict=True))
    return Discordance(
        both_right=sum(1 for b, t in pairs if b and t),
        baseline_only=sum(1 for b, t in pairs if b and not t),
        tuned_only=sum(1 for b, t in pairs if t and not b),
        both_wrong=sum(1 for b, t in pairs if not b and not t),
    )


def mcnemar_exact_p(baseline_only: int, tuned_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c.

    p = binomtest(b, b + c, 1/2), two-sided; 1.0 when there are no discordant items.

    Raises:
        ValueError: a negative count.
    """
    from scipy.stats import binomtest  # heavy: imported only when a p-value is wanted

    if baseline_only < 0 or tuned_only < 0:
        raise ValueError("discordant counts must be ≥ 0")
    n = baseline_only + tuned_only
    if n == 0:
        return 1.0
    return float(binomtest(baseline_only, n, 0.5, alternative="two-sided").pvalue)


def bootstrap_delta_ci_pts(
    baseline: Sequence[float],
    tuned: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Paired percentile-bootstrap interval for Δ = tuned − baseline accuracy (points).

    Args:
        baseline: per-item correctness of the baseline, each in [0, 1] (1 = right; a share
            of seeds with several seeds).
        tuned: the same for the tuned configuration, item for item.
        resamples: bootstrap resamples.
        seed: seed of numpy's default generator, so the interval is reproducible.
        confidence: coverage, e.g. 0.95.

    Returns:
        (low, high) in points (percentage points of accuracy).

    Raises:
        ValueError: lists of different length, empty, or confidence outside (0, 1).
    """
    if len(baseline) != len(tuned):
        raise ValueError(f"paired lists differ in length: {len(baseline)} vs {len(tuned)}")
    if not baseline:
        raise ValueError("no paired items")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    import numpy as np

    diff = np.asarray(tuned, dtype=float) - np.asarray(baseline, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, diff.size, size=(resamples, diff.size))
    deltas = diff[idx].mean(axis=1) * 100.0
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(deltas, [alpha, 1.0 - alpha])
    return float(low), float(high)


def straddles_threshold(ci_low_pts: float, ci_high_pts: float, threshold_pts: float) -> bool:
    """Whether the interval holds both failing (< −threshold) and passing (≥ −threshold) Δ."""
    return ci_low_pts < -threshold_pts <= ci_high_pts


@dataclass(frozen=True)
class PairedVerdict:
    """The rule's verdict with the paired statistics beside it.

    ``rule`` decides capacity credit; ``note`` is ``"needs the full suite"`` when the
    interval straddles −threshold (the sample cannot tell pass from fail), else None.
    """

    rule: GateVerdict
    ci_low_pts: float
    ci_high_pts: float
    mcnemar_p: float
    note: str | None


def paired_verdict(
    delta_pts: float,
    threshold_pts: float,
    ci_low_pts: float,
    ci_high_pts: float,
    mcnemar_p: float,
) -> PairedVerdict:
    """Combine the rule verdict on ``delta_pts`` with the interval's note.

    Raises:
        ValueError: negative threshold (from the gate).
    """
    rule = gate_verdict(delta_pts, 0.0, threshold_pts)
    note = NEEDS_FULL_SUITE if straddles_threshold(ci_low_pts, ci_high_pts, threshold_pts) else None
    return PairedVerdict(rule, ci_low_pts, ci_high_pts, mcnemar_p, note)


def item_shares(result: AccuracyResult) -> dict[str, float]:
    """Per item id: the share of seeds in which the item was answered right (0..1)."""
    counts: dict[str, int] = {}
    for seed in result.seeds:
        for item in seed.items:
            counts[item.id] = counts.get(item.id, 0) + int(item.correct)
    return {item_id: n / len(result.seeds) for item_id, n in counts.items()}


@dataclass(frozen=True)
class AccuracySummary:
    """One configuration's accuracy against the baseline, ready for a report record.

    ``record`` is the report's ``ConfigAccuracyV2``; the paired fields in it are None when
    the two results do not cover the same items (``note`` then says so). ``verdict`` is the
    gate's rule verdict, which decides capacity credit; ``needs_full_suite`` is the
    interval's note; ``table`` the paired 2×2 counts (None without pairing).
    """

    record: ConfigAccuracyV2
    verdict: GateVerdict
    needs_full_suite: bool
    table: Discordance | None
    note: str | None


def accuracy_summary(
    baseline: AccuracyResult,
    tuned: AccuracyResult,
    threshold_pts: float,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> AccuracySummary:
    """Score, Δ, spread, paired interval and McNemar p for ``tuned`` against ``baseline``.

    Δ = tuned.score_pct − baseline.score_pct (points, the gate's rule,
    methods/accuracy-gate.md); spread is max − min of the tuned per-seed scores. Pass the
    baseline as ``tuned`` too for the baseline's own row (Δ 0, interval [0, 0], p 1).

    Raises:
        ValueError: negative threshold.
    """
    delta = tuned.score_pct - baseline.score_pct
    verdict = gate_verdict(tuned.score_pct, baseline.score_pct, threshold_pts)
    spread = spread_pts([s.score_pct for s in tuned.seeds])
    base_shares, tuned_shares = item_shares(baseline), item_shares(tuned)
    items = len(tuned_shares)
    low: float | None = None
    high: float | None = None
    p: float | None = None
    table: Discordance | None = None
    note: str | None = None
    needs_full = False
    if base_shares.keys() == tuned_shares.keys() and base_shares:
        ids = sorted(base_shares)
        b = [base_shares[i] for i in ids]
        t = [tuned_shares[i] for i in ids]
        low, high = bootstrap_delta_ci_pts(b, t, resamples=resamples, seed=seed)
        table = discordance([x > 0.5 for x in b], [x > 0.5 for x in t])
        p = mcnemar_exact_p(table.baseline_only, table.tuned_only)
        needs_full = straddles_threshold(low, high, threshold_pts)
        note = NEEDS_FULL_SUITE if needs_full else None
    else:
        only_base = len(base_shares.keys() - tuned_shares.keys())
        only_tuned = len(tuned_shares.keys() - base_shares.keys())
        note = (
            f"items differ ({only_base} only in the baseline, {only_tuned} only in this "
            "configuration): paired statistics not computed"
        )
    record = ConfigAccuracyV2(
        score=tuned.score_pct,
        delta_pts=delta,
        spread_pts=spread,
        items=items,
        seeds=len(tuned.seeds),
        ci_low_pts=low,
        ci_high_pts=high,
        mcnemar_p=p,
    )
    return AccuracySummary(record, verdict, needs_full, table, note)
