"""The session's cost estimate, hand-computed for the seed spec."""

from __future__ import annotations

import pytest

from tests.runs_factory import seed_spec
from tokenwatt.cloud.estimate import (
    RunPlan,
    billed_seconds,
    cost_usd,
    estimate,
    run_seconds,
    search_windows,
)
from tokenwatt.collect import apply_mode


def test_quick_run_of_the_seed_spec():
    spec = apply_mode(seed_spec(), "quick")
    # grow 2 → 2000 req/s by ×2: ceil(log2(1000)) = 10 steps, the start, 3 bisections.
    assert search_windows(spec) == 14
    # engine 180 + 14 × (45 + 60) + 2 × (45 + 120) + 50 accuracy items × 1 s = 2,030 s.
    assert run_seconds(RunPlan("a", spec, smoke=False)) == 2030.0
    assert run_seconds(RunPlan("a", spec, smoke=False, accuracy=False)) == 1980.0


def test_smoke_run_of_the_seed_spec():
    spec = apply_mode(seed_spec(), "smoke")
    # engine 180 + 14 × (5 + 10) + 1 × (5 + 20) + 5 items = 420 s.
    assert run_seconds(RunPlan("a", spec, smoke=True)) == 420.0


def test_listed_and_fixed_sweeps():
    listed = seed_spec(sweep={"rates": [1.0, 2.0, 4.0]})
    assert search_windows(listed) == 3 + 3
    fixed = seed_spec(sweep={"rates": [1.0, 2.0], "fixed": True, "bisect_steps": 0})
    assert search_windows(fixed) == 2


def test_session_estimate_and_billing_by_the_minute():
    quick = apply_mode(seed_spec(), "quick")
    est = estimate([RunPlan("a", quick, False), RunPlan("b", quick, False)], 3.29)
    # boot 300 + install 300 + 2 × 2,030 = 4,660 s, billed as 78 min = 4,680 s.
    assert est.total_s == 4660.0
    assert billed_seconds(est.total_s) == 4680.0
    assert est.cost_usd == pytest.approx(3.29 * 78 / 60)
    assert billed_seconds(0.0) == 0.0
    assert billed_seconds(60.0) == 60.0
    assert billed_seconds(60.001) == 120.0
    assert cost_usd(2.0, 30.0) == pytest.approx(2.0 / 60)
