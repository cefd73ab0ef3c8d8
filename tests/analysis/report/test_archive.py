"""The archive's rows and the Pareto frontier, against a 30-note archive whose frontier was
worked out by hand (tests/archive_factory.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import archive_factory as factory
from tokenwatt import analysis
from tokenwatt.records import QuantileCI


@pytest.fixture(scope="module")
def rows() -> list[analysis.ArchiveRow]:
    return analysis.archive_rows(factory.report(n, i) for i, n in enumerate(factory.notes()))


def test_the_archive_has_thirty_notes_and_a_row_per_configuration(
    rows: list[analysis.ArchiveRow],
) -> None:
    notes = factory.notes()
    assert len(notes) == 30
    assert len(rows) == sum(len(n.configs) for n in notes)
    assert len({r.note for r in rows}) == 30


@pytest.mark.parametrize("group", sorted(factory.EXPECTED_FRONTIER))
def test_frontier_is_the_hand_computed_one(
    rows: list[analysis.ArchiveRow], group: tuple[str, str]
) -> None:
    on = {r.config for r in rows if (r.model, r.hardware) == group and r.frontier_goodput}
    assert on == factory.EXPECTED_FRONTIER[group]


def test_gate_failures_and_inconclusive_results_are_rows_but_never_on_a_frontier(
    rows: list[analysis.ArchiveRow],
) -> None:
    by = {r.config: r for r in rows}
    # a-gatefail would beat every model-a point on both axes; a-inconc too.
    assert by["a-gatefail"].gate == "fail" and by["a-gatefail"].goodput_per_card == 3000
    assert by["a-inconc"].result_status == "inconclusive"
    for name in ("a-gatefail", "a-inconc"):
        row = by[name]
        assert not (row.frontier_goodput or row.frontier_tokens_per_joule or row.frontier_cost)
    inconc = by["a-inconc"]  # not measured: no figure is a number
    assert inconc.goodput_tok_s is None and inconc.goodput_per_card is None
    assert inconc.tpot_p99_ms is None and inconc.tokens_per_joule is None


def test_goodput_per_card_divides_by_the_cards(rows: list[analysis.ArchiveRow]) -> None:
    by = {r.config: r for r in rows}
    b = by["b-base"]
    assert (b.cards, b.goodput_tok_s, b.goodput_per_card) == (2, 600.0, 300.0)
    assert b.goodput_low is not None and b.goodput_per_card_low == pytest.approx(b.goodput_low / 2)
    assert b.interactivity_tok_s_user == pytest.approx(1000 / 40)


def test_each_filler_group_keeps_its_baseline_alone(rows: list[analysis.ArchiveRow]) -> None:
    fill = [r for r in rows if r.note.startswith("fill-")]
    assert {r.config for r in fill if r.frontier_goodput} == {
        r.config for r in fill if r.role == "baseline"
    }


def test_frontier_dominance_and_ties() -> None:
    assert analysis.frontier([(1, 5), (2, 4), (1.5, 3), (3, 1)]) == [True, True, False, True]
    assert analysis.frontier([(2, 2), (2, 2)]) == [True, True]  # equal points: both kept
    assert analysis.frontier([(2, 2), (2, 3)]) == [False, True]  # better on one, equal on one
    assert analysis.frontier([]) == []


def test_cost_view_prefers_fewer_dollars() -> None:
    base = factory.report(factory.notes()[0])
    rows = analysis.report_rows(base)
    # Same interactivity, cheaper wins: give a-base and a-fast costs by hand.
    cheap = [
        {**r.as_dict(), "usd_per_million_tokens": c}
        for r, c in zip(rows, (2.0, 1.0, 3.0), strict=True)
    ]
    marked = {d["config"]: d["frontier_cost"] for d in analysis.frontier_rows(cheap)}
    # (20, $2), (25, $1), (22.2, $3): a-fast is more interactive and cheaper than both.
    assert marked == {"a-base": False, "a-fast": True, "a-mid": False}


def test_interactivity_interval_from_the_p99_interval() -> None:
    rec = factory.report(factory.notes()[3])
    cfg = rec.configs[0]
    cfg.tpot_p99_ci_ms = QuantileCI(n=200, low_rank=190, high_rank=None, low_ms=32.0, high_ms=None)
    row = analysis.report_rows(rec)[0]
    assert row.interactivity_tok_s_user == pytest.approx(1000 / 40)
    assert row.interactivity_high == pytest.approx(1000 / 32)
    assert row.interactivity_low == 0.0  # an unbounded p99 leaves interactivity unbounded below


def test_precision_of_a_configuration_whose_kv_dtype_the_record_does_not_keep() -> None:
    from tests.runs_factory import SPEC_PATH
    from tokenwatt.records import load_report

    seed = load_report(SPEC_PATH.parents[1] / "reports" / "lab-h100-qwen3-30b-a3b-kv-cache.json")
    base, tuned = analysis.report_rows(seed)
    assert base.precision == "weights fp8 · KV bf16"
    # The v2 seed keeps no settings: the tuned (FP8 KV) configuration's dtype is not the spec's.
    assert tuned.precision == "weights fp8 · KV not stated"


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=14))
def test_frontier_is_the_set_no_point_dominates(points: list[tuple[int, int]]) -> None:
    # The definition, point by point (quadratic), against the one-pass computation.
    expected = [
        not any(
            ox >= x and oy >= y and (ox > x or oy > y)
            for j, (ox, oy) in enumerate(points)
            if j != i
        )
        for i, (x, y) in enumerate(points)
    ]
    assert analysis.frontier([(float(x), float(y)) for x, y in points]) == expected
