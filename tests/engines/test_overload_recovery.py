"""The SLO search comes back from the overload it looks for, on a real llama.cpp server.

Two searches, each on a freshly started server (``collect --engine-cmd``): one started at
512 req/s, over ten times what the tiny model serves with four slots on two cores, so that
its first windows queue and every later window follows an overloaded one; one started at
2 req/s that grows to the boundary. The windows after the overload are independent of it
(bounded tails, every one whose verdict counts started on an engine proven idle by the
client's count and ``/metrics``; one that could not be proven idle within its wait has no
verdict and is measured again), and the overloaded search's result is a rate near the clean one's or
``inconclusive`` with its reason, never "no load met the SLO" nor a rate far off.
``benchmarks/overload_search.py`` prints the spread of both over several pairs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from overload_search import CLEAN_START_RPS, OVERLOAD_RPS, run_search
from tiny_model import TinyModel

from tests.overload_checks import assert_agrees, assert_independent_windows, assert_went_down


@pytest.mark.engine
def test_a_search_started_far_past_capacity_finds_what_a_clean_search_finds(
    tiny_model: TinyModel, tmp_path: Path
) -> None:
    pytest.importorskip("xllamacpp", reason="xllamacpp (the test extra) is not installed")
    (tmp_path / "over").mkdir()
    (tmp_path / "clean").mkdir()
    over, _ = run_search(tiny_model, tmp_path / "over", OVERLOAD_RPS)
    clean, _ = run_search(tiny_model, tmp_path / "clean", CLEAN_START_RPS)

    assert_went_down(over, OVERLOAD_RPS)
    assert_independent_windows(over)
    assert_independent_windows(clean)
    # Two searches of the same engine agree within the search's resolution: one growth
    # step (2×) before the bisection, and one back-off (0.5×) of a repeat that missed at a
    # noisy boundary.
    assert_agrees(over, clean, factor=4)
