"""The whole SLO search on the page: every probe and repeat, back-offs, errors, the sentence."""

from __future__ import annotations

import html

import pytest
from sitecase import HOSTILE, MARKDOWN_TRAP, REPO

from tests.runs_factory import make_run, tuned_run, window
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.analysis.window.search_windows import error_samples
from tokenwatt.records.report.report_v3 import ErrorSampleV3, ReportV3
from tokenwatt.records.run.run import Repeat, RunRecord
from tokenwatt.records.run.run_input import RunInput
from tokenwatt.records.run.window import ErrorSample
from tokenwatt.site.build import build_site

SENTENCE = (
    "The search found 9 req/s, but the first repeat there (#6) missed p99 TTFT "
    "(2,350 ms > 2,000 ms) and had errors in 3 of 1,080 requests (connect 2, timeout 1); "
    "backed off to 7.65 req/s, which met the SLO in 2 of 2 repeats."
)


def backed_off_run() -> RunRecord:
    """The seed's baseline, except that the first repeat at 9 req/s missed (TTFT and
    connection errors), a client-lag window was measured again, and the rate backed off to
    7.65 req/s, where both repeats met the SLO."""
    run = make_run()
    missed = Repeat(
        window=window(9.0, 4400.0, ttft_p99=2350.0, tpot_p99=44.0, slo_pass=False), backoff=0
    )
    missed.window.failure_reason = "queueing/KV-bound (ttft,errors)"
    missed.window.errors = 3
    missed.window.error_kinds = {"connect": 2, "timeout": 1}
    lagged = Repeat(
        window=window(7.65, 3800.0, ttft_p99=2100.0, tpot_p99=43.0, slo_pass=False), backoff=1
    )
    lagged.window.failure_reason = (
        "client-bound (send-lag p99 80 ms), measured again: queueing/KV-bound (ttft)"
    )
    for r in run.repeats:
        r.backoff = 1
        r.window.rate_rps = 7.65
    run.repeats = [missed, lagged, *run.repeats]
    run.result = run.result.model_copy(update={"rate_rps": 7.65, "backoffs": 1})  # type: ignore[union-attr]
    return run


def report_with_samples() -> ReportV3:
    """The report of :func:`backed_off_run` and the seed's tuned run, with error samples and
    a window warning written in (the collector's fields for them), some of it hostile."""
    runs = [backed_off_run(), tuned_run()]
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    report = summarise(inputs, title="Back-off on the page")
    missed = report.configs[0].search[5]
    assert missed.step == "repeat" and not missed.slo_pass
    missed.error_samples = [
        ErrorSampleV3(
            kind="connect",
            exception="ClientOSError",
            message=f"Can not write request body {HOSTILE}",
        ),
        ErrorSampleV3(kind="timeout", exception="TimeoutError", status=None, body=MARKDOWN_TRAP),
    ]
    missed.warnings = ["1 request served fewer output tokens than asked | 511 of 512"]
    report.configs[0].prompts_drawn, report.configs[0].prompts_distinct = 300, 290
    tuned = report.configs[1]
    tuned.prompts_drawn = tuned.prompts_distinct = 500
    tuned.search[0].prefix_cache_hit_pct = 12.5
    tuned.search[0].transport_retries = 2
    report.configs[0].idle_power_w = tuned.idle_power_w = 70.0
    return report


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("search-page")
    reports = root / "reports"
    reports.mkdir()
    report = report_with_samples()
    (reports / f"{report.id}.json").write_text(report.model_dump_json(indent=2), "utf-8")
    build_site(reports, root / "docs", cache_dir=root / "cache")
    return (root / "docs" / "reports" / f"{report.id}.md").read_text(encoding="utf-8")


def test_the_sentence_is_next_to_the_result_and_above_the_table(page: str) -> None:
    text = html.unescape(page)
    assert f"- **vllm-default**: {SENTENCE}" in text
    assert text.count(SENTENCE) == 2  # at the result, and above the configuration's table
    assert text.index("- **vllm-default**:") < text.index("## SLO search, window by window")


def test_every_probe_and_repeat_is_a_row_in_order(page: str) -> None:
    text = html.unescape(page)
    section = text[text.index("### vllm-default", text.index("## SLO search")) :]
    section = section[: section.index("### vllm-fp8kv")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [
        "| #1 probe 1 at 2 req/s (grow) | 2.00 | ✓ met | 300.0 | 40.0 | 1,000.0 | — |",
        "| #2 probe 2 at 4 req/s (grow) | 4.00 | ✓ met | 300.0 | 40.0 | 2,000.0 | — |",
        "| #3 probe 3 at 8 req/s (grow) | 8.00 | ✓ met | 300.0 | 40.0 | 4,000.0 | — |",
        "| #4 probe 4 at 16 req/s (grow) | 16.00 | ✗ missed: ttft_p99 | 32,000.0 | 48.0 | — | — |",
        "| #5 probe 5 at 9 req/s (bisect) | 9.00 | ✓ met | 350.0 | 45.0 | 4,500.0 | — |",
        "| #6 repeat 1 of 2 at 9 req/s | 9.00 | **✗ missed**: queueing/KV-bound (ttft,errors) "
        "| 2,350.0 | 44.0 | — | connect 2, timeout 1 |",
        "| **⤵ back-off 1** | 9.00 → 7.65 | a repeat at 9 req/s missed: rate × 0.85, "
        "repeats start again |  |  |  |  |",
        "| #7 repeat 1 of 2 at 7.65 req/s (back-off 1; client lagged; measured again as #8) "
        "| 7.65 | ↻ not used: client-bound (send-lag p99 80 ms), measured again: "
        "queueing/KV-bound (ttft) | 2,100.0 | 43.0 | — | — |",
        "| #8 repeat 1 of 2 at 7.65 req/s (back-off 1; retry of #7) | 7.65 | ✓ met | 320.0 "
        "| 44.6 | 4,600.0 | — |",
        "| #9 repeat 2 of 2 at 7.65 req/s (back-off 1) | 7.65 | ✓ met | 340.0 | 43.9 "
        "| 4,544.6 | — |",
    ]
    assert (
        "- #6 repeat 1 of 2 at 9 req/s: 1 request served fewer output tokens than asked | 511 "
        "of 512"
    ) in section


def test_prompt_counts_prefix_cache_hits_and_retries_are_shown(page: str) -> None:
    text = html.unescape(page)
    search = text[text.index("## SLO search") :]
    default = search[search.index("### vllm-default") : search.index("### vllm-fp8kv")]
    tuned = search[search.index("### vllm-fp8kv") :]
    tuned = tuned[: tuned.index("\n## ")]
    assert "Prompts: 300 sent in the run, 290 different: 10 repeated an earlier prompt" in default
    assert "Prefix-cache hits" not in default  # no window of it has the figure
    assert "Prompts: 500 sent in the run, every one different." in tuned
    header = next(line for line in tuned.splitlines() if line.startswith("| Window |"))
    assert header.endswith("| Errors | Prefix-cache hits (%) |")
    first = next(line for line in tuned.splitlines() if line.startswith("| #1 "))
    assert first.endswith("| — (+2 retried) | 12.5 |")


def test_tokens_per_joule_above_idle_is_shown_beside_the_plain_figure(page: str) -> None:
    from tokenwatt.analysis import analyse_report

    analysis = analyse_report(report_with_samples())
    text = html.unescape(page)
    header = next(line for line in text.splitlines() if line.startswith("| Configuration | Engine"))
    assert "| Tokens/J | [Tokens/J above idle](../methods/energy.md) |" in header
    for c in analysis.configs:
        idle, reps = c.config.idle_power_w, c.config.repeats_detail
        assert idle is not None and c.tokens_per_joule_above_idle
        # goodput tokens ÷ (energy − idle power × duration), over the same windows
        tokens = sum(r.goodput_tok_s * (r.window_s or 0) for r in reps)
        above = sum((r.energy_j or 0) - idle * (r.window_s or 0) for r in reps)
        assert all(r.slo_pass and r.energy_j for r in reps)
        assert c.tokens_per_joule_above_idle == pytest.approx(tokens / above)
        row = next(line for line in text.splitlines() if line.startswith(f"| {c.config.label} |"))
        assert f"| {c.tokens_per_joule_above_idle:.2f} |" in row


def test_error_samples_are_listed_as_inert_text(page: str) -> None:
    assert HOSTILE not in page and "<img" not in page
    assert "**x**" not in page and "[a](b)" not in page
    text = html.unescape(page)
    assert (
        "- #6 repeat 1 of 2 at 9 req/s, connect · ClientOSError · message: “Can not write "
        f"request body {HOSTILE}”"
    ) in text
    assert f"- #6 repeat 1 of 2 at 9 req/s, timeout · TimeoutError · body: “{MARKDOWN_TRAP}”" in (
        text
    )


def test_the_untouched_configuration_tells_its_plain_story(page: str) -> None:
    text = html.unescape(page)
    assert (
        "- **vllm-fp8kv**: The search found 9 req/s, below a probe at 16 req/s (#4) that missed "
        "p99 TTFT (32,000 ms > 2,000 ms), and both repeats there met the SLO."
    ) in text


def test_error_samples_keep_three_per_kind_with_capped_text() -> None:
    samples = {
        "timeout": [ErrorSample(kind="timeout", exception="TimeoutError", message="x" * 400)],
        "http_500": [
            ErrorSample(
                kind="http_500", exception="HTTPError", message="boom", status=500, body="{}"
            )
        ]
        * 5,
    }
    out = error_samples(samples)
    assert [(s.kind, s.exception, s.status) for s in out] == [
        ("http_500", "HTTPError", 500),
        ("http_500", "HTTPError", 500),
        ("http_500", "HTTPError", 500),
        ("timeout", "TimeoutError", None),
    ]
    assert out[3].message == "x" * 300 and out[0].body == "{}"
    assert error_samples({}) == []


def test_report_records_keep_the_missed_repeat_and_the_back_off() -> None:
    report = report_with_samples()
    base = report.configs[0]
    repeats = [w for w in base.search if w.step == "repeat"]
    assert [(w.backoff, w.rate_rps, w.slo_pass, w.remeasured) for w in repeats] == [
        (0, 9.0, False, False),
        (1, 7.65, False, True),
        (1, 7.65, True, False),
        (1, 7.65, True, False),
    ]
    assert repeats[0].error_kinds == {"connect": 2, "timeout": 1} and repeats[0].errors == 3
    # the result still counts only the final repeats
    assert (base.slo_pass_count, base.repeats) == (2, 2)
    assert {r.rate_rps for r in base.repeats_detail} == {7.65}


def test_pages_module_stays_small() -> None:
    lines = (REPO / "tokenwatt" / "site" / "pages" / "pages.py").read_text("utf-8").count("\n")
    assert lines < 500, lines


def test_the_errors_cell_shows_requests_the_client_cancelled() -> None:
    from tokenwatt.records import SearchWindowV3
    from tokenwatt.site.pages.search import window_errors

    stopped = SearchWindowV3(
        step="probe",
        phase="grow",
        rate_rps=16,
        slo_pass=False,
        stopped_early=True,
        requests=49,
        errors=0,
        cancelled_by_client=47,
    )
    assert str(window_errors(stopped)) == "— (47 cancelled by the client)"
    failed = stopped.model_copy(update={"errors": 2, "error_kinds": {"timeout": 2}})
    assert str(window_errors(failed)) == "timeout 2 (47 cancelled by the client)"
    assert str(window_errors(stopped.model_copy(update={"cancelled_by_client": 0}))) == "—"
