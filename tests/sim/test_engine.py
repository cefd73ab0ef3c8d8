"""The simulated engine's model in virtual time: KV capacity, batching, step and prefill times."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tokenwatt.sim.engine import PROFILES, Engine, Profile, SimRequest, simulate

FLAT = Profile(
    name="flat",
    kv_capacity_tokens=64,
    step_base_ms=10.0,
    step_per_seq_ms=1.0,
    prefill_ms_per_token=0.5,
    block_size=16,
)


def test_a_lone_request_gets_exactly_max_tokens_one_per_step() -> None:
    (req,) = simulate(FLAT, [(0.0, 4, 5)])
    # First iteration: prefill of 4 tokens with a batch of 1: 10 + 1 + 0.5 × 4 = 13 ms.
    assert req.first_token_ms == pytest.approx(13.0)
    # Four more decode steps of 10 + 1 = 11 ms.
    assert req.last_token_ms == pytest.approx(13.0 + 4 * 11.0)
    assert req.generated == 5


def test_prefill_time_grows_with_prompt_length() -> None:
    (short,) = simulate(FLAT, [(0.0, 2, 2)])
    (long,) = simulate(FLAT, [(0.0, 30, 2)])
    assert long.first_token_ms is not None and short.first_token_ms is not None
    assert long.first_token_ms - short.first_token_ms == pytest.approx(0.5 * 28)


def test_a_full_kv_cache_makes_requests_wait() -> None:
    # Each request reserves 16 + 16 = 32 tokens = 2 blocks; 64 tokens hold two of them.
    reqs = simulate(FLAT, [(0.0, 16, 16), (0.0, 16, 16), (0.0, 16, 16)])
    first, second, third = reqs
    assert first.first_token_ms == second.first_token_ms
    assert third.first_token_ms is not None and first.last_token_ms is not None
    # The third is admitted only when the first two have finished and freed their blocks.
    assert third.first_token_ms > first.last_token_ms


def test_decode_steps_slow_as_the_batch_grows() -> None:
    big = dataclasses.replace(FLAT, kv_capacity_tokens=10_000)
    (alone,) = simulate(big, [(0.0, 1, 10)])
    crowd = simulate(big, [(0.0, 1, 10)] * 20)
    tpot_alone = (alone.last_token_ms - alone.first_token_ms) / 9  # type: ignore[operator]
    tpot_crowd = (crowd[0].last_token_ms - crowd[0].first_token_ms) / 9  # type: ignore[operator]
    assert tpot_alone == pytest.approx(11.0)
    assert tpot_crowd == pytest.approx(10.0 + 20 * 1.0)


def test_abort_frees_the_blocks_of_a_running_request() -> None:
    engine = Engine(FLAT)
    a, b, c = (SimRequest(16, 16, 0.0) for _ in range(3))
    for r in (a, b, c):
        engine.add(r)
    it = engine.begin(0.0)
    assert it is not None and len(it.batch) == 2 and engine.queued == 1
    assert engine.kv_usage == 1.0
    engine.abort(a)
    assert engine.blocks_used == 2
    engine.complete(it)
    it2 = engine.begin(it.end_ms)
    assert it2 is not None and c in it2.batch and a not in it2.batch


def test_aborting_the_waiting_requests_clears_the_waiting_gauge() -> None:
    """Clients that leave while queued take their place in vLLM's waiting gauge with them:
    an idle engine must not read as busy to the collector's idle check."""
    engine = Engine(FLAT)
    a, b, c = (SimRequest(16, 16, 0.0) for _ in range(3))
    for r in (a, b, c):
        engine.add(r)
    it = engine.begin(0.0)
    assert it is not None and engine.queued == 1
    engine.abort(c)
    assert engine.queued == 0
    for r in it.batch:
        engine.abort(r)
    assert engine.idle and engine.queued == 0


def test_too_long_a_sequence_never_fits() -> None:
    engine = Engine(FLAT)
    assert engine.fits_ever(32, 32)
    assert not engine.fits_ever(48, 17)


def _p99(profile: Profile, rate: float, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate, size=int(rate * 4)))
    reqs = simulate(profile, [(x * 1e3, 16, 16) for x in t if x < 3.0])
    inside = [r for r in reqs if r.arrival_ms >= 1000.0]
    ttft = [r.first_token_ms - r.arrival_ms for r in inside]  # type: ignore[operator]
    tpot = [(r.last_token_ms - r.first_token_ms) / 15 for r in inside]  # type: ignore[operator]
    return float(np.percentile(ttft, 99)), float(np.percentile(tpot, 99))


def test_bf16_profile_fails_by_queueing_and_fp8_by_per_token_latency() -> None:
    """The seed lab note's story: at the same overload BF16 KV queues (TTFT explodes),
    while FP8 KV, with twice the cache, admits a bigger batch and every token slows."""
    bf16 = PROFILES["bf16-kv"]
    fp8 = PROFILES["fp8-kv"]
    assert fp8.kv_capacity_tokens == 2 * bf16.kv_capacity_tokens
    assert fp8.step_ms(1) > bf16.step_ms(1)
    ttft_b, tpot_b = _p99(bf16, 60.0)
    ttft_f, tpot_f = _p99(fp8, 60.0)
    assert ttft_b > 1000.0 and tpot_b < 100.0
    assert ttft_f < 400.0 and tpot_f > 100.0


def test_power_grows_with_the_batch_and_is_capped() -> None:
    p = PROFILES["bf16-kv"]
    assert p.power_w(0) == p.idle_power_w
    assert p.power_w(10) > p.power_w(1) > p.power_w(0)
    assert p.power_w(10_000) == p.max_power_w


def test_a_slowed_profile_is_the_same_story_at_a_scaled_clock() -> None:
    """``--time-scale k``: arrivals k times further apart give every time k times larger."""
    base = PROFILES["bf16-kv"]
    slow = base.slowed(2.0)
    assert slow.step_ms(7, 30) == pytest.approx(2 * base.step_ms(7, 30))
    assert slow.kv_capacity_tokens == base.kv_capacity_tokens
    t = np.cumsum(np.random.default_rng(5).exponential(1 / 60.0, 200))  # 60 req/s, s
    fast = simulate(base, [(x * 1e3, 16, 16) for x in t])
    slowed = simulate(slow, [(x * 2e3, 16, 16) for x in t])
    for a, b in zip(fast, slowed, strict=True):
        assert a.first_token_ms is not None and b.first_token_ms is not None
        assert b.first_token_ms == pytest.approx(2 * a.first_token_ms)
        assert b.last_token_ms == pytest.approx(2 * a.last_token_ms)  # type: ignore[operator]
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="time scale"):
            base.slowed(bad)


def test_sim_time_scale_option_is_checked() -> None:
    from tokenwatt.errors import InputError
    from tokenwatt.sim.serve import make_server

    assert make_server("fp8-kv", time_scale=3.0).profile.step_base_ms == pytest.approx(126.0)
    with pytest.raises(InputError, match="--time-scale"):
        make_server("fp8-kv", time_scale=float("nan"))
