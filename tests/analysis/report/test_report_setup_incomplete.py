"""The words a report gives for a run without a result (a run a signal stopped)."""

from __future__ import annotations

from tests.runs_factory import make_run


def test_a_stopped_run_is_named_incomplete_not_one_where_no_load_met_the_slo() -> None:
    """A fixed-load run SIGTERMed in its second window: the first window met the SLO, the
    record has no result. The report used to say "no listed load met the SLO"."""
    from tokenwatt.analysis.report.report_setup import no_result_reason

    run = make_run(repeat_passes=(True, False))
    spec = run.spec.model_copy(update={"sweep": run.spec.sweep.model_copy(update={"fixed": True})})
    reason = "stopped by SIGTERM; everything measured so far is kept"
    run = run.model_copy(
        update={"spec": spec, "result": None, "complete": False, "incomplete_reason": reason}
    )
    assert no_result_reason(run) == (
        "the run is incomplete (stopped by SIGTERM; everything measured so far is kept), so "
        "it has no result to report; 1 of its windows met the SLO before it stopped"
    )
