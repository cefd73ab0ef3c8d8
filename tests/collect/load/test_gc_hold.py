"""The garbage collector held around a window (:func:`~tokenwatt.collect.load.event_loop.
held_collections`): no full collection while it runs, young ones as usual, and the collector
as it was afterwards, however the window ended and however windows overlapped."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest
from loadgen_helpers import config, same, script
from streaming_server import ScriptedServer, tokens_stream

from tokenwatt.collect.load.event_loop import FULL_COLLECTIONS_HELD, held_collections
from tokenwatt.collect.load.loadgen import run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec


@pytest.fixture
def collections_seen() -> Iterator[list[int]]:
    """The generation of every collection that starts while the test runs."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()  # a fresh start: the old generation's growth counts from here
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def _survivors(n: int = 300_000) -> list[list[int]]:
    """``n`` small containers kept alive: the young collections move them to the old
    generation, whose growth by a quarter brings a full collection."""
    return [[i] for i in range(n)]


def test_without_the_hold_the_same_work_brings_a_full_collection(
    collections_seen: list[int],
) -> None:
    # What the hold's test below would see if the hold did nothing.
    kept = _survivors()
    assert 2 in collections_seen
    del kept  # alive until here, so the young collections had survivors to promote


def test_the_hold_keeps_full_collections_off_and_young_ones_on(
    collections_seen: list[int],
) -> None:
    before = gc.get_threshold()
    with held_collections():
        assert gc.get_threshold() == (before[0], before[1], FULL_COLLECTIONS_HELD)
        assert gc.get_freeze_count() > 0  # what was alive before it is frozen
        kept = _survivors()
        during = list(collections_seen)
        del kept  # alive through the hold
    assert 2 not in during
    assert during.count(0) > 10 and 1 in during  # the young ones went on
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_off_it_leaves_the_collector_alone() -> None:
    before = gc.get_threshold()
    with held_collections(enabled=False):
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0


def test_a_window_that_fails_leaves_the_collector_as_it_was() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="the window's fault"), held_collections():
        raise RuntimeError("the window's fault")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_overlapping_windows_restore_it_only_when_the_last_ends() -> None:
    before = gc.get_threshold()
    first_in, second_out = threading.Event(), threading.Event()
    seen: dict[str, tuple[int, int, int] | int] = {}

    def second() -> None:
        first_in.wait(5)
        with held_collections():
            pass
        seen["after second"] = gc.get_threshold()
        second_out.set()

    thread = threading.Thread(target=second)
    thread.start()
    with held_collections():
        first_in.set()
        assert second_out.wait(5)
        seen["frozen while the first runs"] = gc.get_freeze_count()
    thread.join(5)
    assert seen["after second"] == (before[0], before[1], FULL_COLLECTIONS_HELD)
    assert seen["frozen while the first runs"] > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_a_window_runs_with_full_collections_held_and_leaves_them_restored(
    server: ScriptedServer,
) -> None:
    script(server, tokens_stream(3))
    before = gc.get_threshold()
    thresholds: list[tuple[int, int, int]] = []

    def watched() -> Iterator[RequestSpec]:
        for spec in same():
            thresholds.append(gc.get_threshold())  # as each request is drawn, in the window
            yield spec

    plan = WindowPlan(rate_rps=100, duration_s=0.2, warmup_s=0.0, seed=3)
    result = await run_window(config(server.base), plan, watched())
    assert result.summary.completed > 0
    assert thresholds and all(t[2] == FULL_COLLECTIONS_HELD for t in thresholds)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
