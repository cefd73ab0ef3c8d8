"""The run's one-line result when there is none: a search that did not finish, or a
fixed-load run that stopped before its loads were measured."""

from __future__ import annotations

from tests.runs_factory import make_run
from tokenwatt.cli.terminal import result_line


def test_no_result_says_why_for_a_search_and_for_fixed_loads() -> None:
    searched = make_run().model_copy(update={"result": None})
    assert not searched.spec.sweep.fixed
    assert result_line(searched) == "result: none (the search did not finish)"
    sweep = searched.spec.sweep.model_copy(update={"fixed": True, "rates": [2.0, 4.0]})
    fixed = searched.model_copy(update={"spec": searched.spec.model_copy(update={"sweep": sweep})})
    assert result_line(fixed) == "result: none (the run stopped before its loads were measured)"
