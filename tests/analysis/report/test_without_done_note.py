"""The requests that ended without ``[DONE]`` (complete, counted apart) are said once below
the window table, summed over the run's windows."""

from __future__ import annotations

from tests.runs_factory import make_run
from tokenwatt.analysis import run_notes

NOTE = "request(s) ended without data: [DONE] after a chunk with finish_reason"


def test_the_requests_without_done_are_summed_into_one_note() -> None:
    run = make_run()
    assert NOTE not in " ".join(run_notes(run))
    run.repeats[0].window.without_done = 3
    run.repeats[1].window.without_done = 4
    (note,) = [line for line in run_notes(run) if NOTE in line]
    assert note.startswith("note: 7 request(s) ended without data: [DONE]")
    assert note.endswith("counted as complete (as vLLM's bench serve does)")
