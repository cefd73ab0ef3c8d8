"""The summary's accuracy-gate verdict carries the caveat the page's statistics carry."""

from __future__ import annotations

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis import summarise
from tokenwatt.analysis.report.report_setup import summary_text
from tokenwatt.records.run.run_input import RunInput


def _parts():  # type: ignore[no-untyped-def]
    inputs = [
        RunInput("runs/a.json", "a" * 64, make_run()),
        RunInput("runs/b.json", "b" * 64, tuned_run()),
    ]
    return inputs, summarise(inputs, title="t").configs


def test_a_fail_whose_interval_holds_a_pass_says_so() -> None:
    inputs, configs = _parts()
    base, tuned = configs
    assert tuned.accuracy is not None
    acc = tuned.accuracy.model_copy(update={"items": 20, "ci_low_pts": -25.0, "ci_high_pts": 0.0})
    text = summary_text(inputs, [base, tuned.model_copy(update={"accuracy": acc})])
    assert text.endswith(
        "accuracy \N{MINUS SIGN}8.0 points, failing the 1-point gate, so no capacity credit "
        "(not beyond doubt on 20 items: the difference's 95% interval, \N{MINUS SIGN}25.0 to "
        "0.0 points, holds both a pass and a fail; the full suite decides)."
    )


def test_a_fail_beyond_doubt_has_no_caveat() -> None:
    inputs, configs = _parts()
    # the seed-like runs: 95% interval −16.0 to −2.0 points, all below −1
    assert summary_text(inputs, configs).endswith("so no capacity credit.")
