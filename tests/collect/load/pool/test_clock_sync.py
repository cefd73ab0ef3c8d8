"""Cristian's algorithm (tokenwatt.collect.load.pool.clock_sync) on hand-computed round trips."""

from __future__ import annotations

import itertools

import pytest

from tokenwatt.collect.load.pool.clock_sync import ClockOffset, cristian_offset, measure_offset
from tokenwatt.collect.load.pool.ray_pool import to_driver_clock
from tokenwatt.records import RequestResult


def test_the_least_rtt_round_trip_is_kept_and_its_midpoint_used() -> None:
    samples = [
        (10.0, 15.30, 10.4),  # RTT 0.4
        (11.0, 16.05, 11.1),  # RTT 0.1: kept; midpoint 11.05, offset 16.05 - 11.05 = 5.0
        (12.0, 17.00, 12.3),  # RTT 0.3
    ]
    got = cristian_offset(samples)
    assert got.offset_s == pytest.approx(5.0, abs=1e-12)
    assert got.rtt_s == pytest.approx(0.1, abs=1e-12)
    assert got.uncertainty_s == pytest.approx(0.05, abs=1e-12)
    assert got.to_remote(1.0) == pytest.approx(6.0) and got.to_local(6.0) == pytest.approx(1.0)


def test_an_asymmetric_delay_stays_within_the_bound() -> None:
    # True offset +2 s; the request takes 90 ms, the answer 10 ms: the estimate is off by
    # 40 ms, inside the ±50 ms bound.
    send = 100.0
    remote = send + 0.090 + 2.0
    got = cristian_offset([(send, remote, send + 0.100)])
    assert got.offset_s == pytest.approx(2.04, abs=1e-12)
    assert abs(got.offset_s - 2.0) <= got.uncertainty_s


def test_measure_offset_reads_the_clocks_in_order() -> None:
    local = itertools.count(0.0, 1.0)  # 0, 1 | 2, 3 | ...: RTT 1 s each
    remote = iter([50.5, 51.5, 52.4])  # midpoints 0.5, 2.5, 4.5
    got = measure_offset(lambda: next(remote), rounds=3, clock=lambda: next(local))
    # All RTTs are equal: the first is kept (min keeps the first of equals).
    assert (got.offset_s, got.uncertainty_s) == (50.0, 0.5)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no round trips"):
        cristian_offset([])
    with pytest.raises(ValueError, match="ended before it began"):
        cristian_offset([(2.0, 0.0, 1.0)])
    with pytest.raises(ValueError, match="rounds"):
        measure_offset(lambda: 0.0, rounds=0)


def test_every_time_of_a_request_moves_to_the_drivers_clock() -> None:
    res = RequestResult(
        scheduled_s=105.0, dispatched_s=105.001, sent_s=105.002, first_token_s=105.1,
        chunk_s=[105.1, 105.2], last_token_s=105.2, finished_s=105.3, first_content_s=105.1,
    )  # fmt: skip
    to_driver_clock(res, ClockOffset(offset_s=5.0, uncertainty_s=0.001, rtt_s=0.002))
    assert res.scheduled_s == pytest.approx(100.0)
    assert res.dispatched_s == pytest.approx(100.001) and res.sent_s == pytest.approx(100.002)
    assert res.first_token_s == pytest.approx(100.1)
    assert res.chunk_s == pytest.approx([100.1, 100.2])
    assert res.last_token_s == pytest.approx(100.2) and res.finished_s == pytest.approx(100.3)
    assert res.first_content_s == pytest.approx(100.1)
    never_sent = RequestResult(scheduled_s=105.0)  # sent_s 0.0: never got a slot
    to_driver_clock(never_sent, ClockOffset(offset_s=5.0, uncertainty_s=0.0, rtt_s=0.0))
    assert (never_sent.scheduled_s, never_sent.sent_s, never_sent.first_token_s) == (
        100.0,
        0.0,
        None,
    )
