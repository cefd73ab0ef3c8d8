"""A Poisson window's record carries the K-S test of its actual sends and warns when they bunch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.load.loadgen import window_summary
from tokenwatt.records import RequestResult
from tokenwatt.records.spec.spec import SloSpec

RATE = 500.0


def _cfg(profile: str) -> LoadConfig:
    return LoadConfig(
        endpoint="http://127.0.0.1:9/v1", model="m", slo=SloSpec(ttft_p99_ms=1e4, tpot_p99_ms=1e4),
        profile=profile,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize("profile", ["poisson", "constant"])
def test_window_summary_records_the_test_for_poisson_windows_only(profile: str) -> None:
    times = np.sort(np.random.default_rng(11).uniform(0.0, 2.0, 1000))
    # Every send on the next 1 ms tick, as a plain asyncio.sleep sends.
    ticked = np.ceil(times * 1e3) / 1e3
    results = [
        RequestResult(
            scheduled_s=float(t), sent_s=float(s), first_token_s=float(s) + 0.01,
            last_token_s=float(s) + 0.01, finished_s=float(s) + 0.01, output_tokens=1,
        )
        for t, s in zip(times, ticked, strict=True)
    ]  # fmt: skip
    summary = window_summary(
        _cfg(profile), results, rate_rps=RATE, duration_s=2.0, stopped=False, measured_s=2.0
    )
    bunched = [w for w in summary.warnings if w.startswith("sends not Poisson")]
    if profile == "constant":
        assert summary.send_gaps_ks_p is None and bunched == []
        return
    assert summary.send_gaps_ks_p is not None and summary.send_gaps_ks_p < 1e-6
    assert len(bunched) == 1
    assert not math.isnan(summary.send_gaps_ks_p)
