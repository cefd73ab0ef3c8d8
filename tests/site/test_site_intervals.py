"""Confidence intervals on the page: beside each headline number, verdicts in doubt, bands."""

from __future__ import annotations

import html

import pytest
from sitecase import HOSTILE

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.records.run.run import RunRecord
from tokenwatt.records.run.run_input import RunInput
from tokenwatt.records.shared.interval import QuantileCI
from tokenwatt.site.build import build_site


def _with_cis(run: RunRecord, doubt_free: tuple[bool, ...]) -> RunRecord:
    """Give each repeat window a p99 TTFT interval: from 10 ms below its p99 to beyond the
    sample (a window of 300 requests) where the verdict is in doubt, else to 5 ms above."""
    for r, free in zip(run.repeats, doubt_free, strict=True):
        p99 = r.window.ttft_ms.p99
        assert isinstance(p99, float)
        high = None if not free else p99 + 5.0
        r.window.ttft_p99_ci_ms = QuantileCI(
            n=300 if not free else 1080,
            low_rank=292 if not free else 1060,
            high_rank=None if not free else 1075,
            low_ms=p99 - 10.0,
            high_ms=high,
        )
        r.window.slo_beyond_doubt = free
    return run


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = _with_cis(make_run(), (True, False))
    tuned = _with_cis(tuned_run(label=HOSTILE, repeat_goodputs=(4500.0, 5613.8)), (True, True))
    inputs = [RunInput(f"runs/{i}.json", f"{i}" * 64, r) for i, r in enumerate((base, tuned))]
    report = summarise(inputs, title="Intervals on the page")
    report.variance_band_pct = 1.0  # stated by hand, narrower than the measured ±11.0%
    root = tmp_path_factory.mktemp("intervals-page")
    (root / "reports").mkdir()
    (root / "reports" / f"{report.id}.json").write_text(report.model_dump_json(), "utf-8")
    build_site(root / "reports", root / "docs", cache_dir=root / "cache")
    return (root / "docs" / "reports" / f"{report.id}.md").read_text(encoding="utf-8")


def _row(text: str, header: str, name: str) -> str:
    table = text[text.index(header) :]
    return next(line for line in table.splitlines() if line.startswith(f"| {name} |"))


def test_intervals_stand_beside_the_headline_numbers(page: str) -> None:
    text = html.unescape(page)
    base = _row(text, "| Configuration | Engine", "vllm-default")
    assert "| 4,572.3 (95% CI 4,220.3–4,924.3) | baseline |" in base
    tuned = _row(text, "| Configuration | Engine", HOSTILE)
    # Welch on (4500, 5613.8) vs (4600, 4544.6) holds zero; the measured band is ±11.0%.
    assert "| +10.6% (95% CI −" in tuned and "; includes zero) |" in tuned
    latency = _row(text, "| Configuration | p99 TTFT", "vllm-default")
    assert "| 340.0 ✓ (95% CI 330 ms to beyond the sample): pass, but not beyond doubt |" in latency
    latency = _row(text, "| Configuration | p99 TTFT", HOSTILE)
    assert "| 352.0 ✓ (95% CI 342–357 ms) |" in latency
    assert "[how the intervals are made](../methods/uncertainty.md)" in text


def test_verdicts_in_doubt_are_said_in_the_search_and_the_story(page: str) -> None:
    text = html.unescape(page)
    sentence = (
        "Not beyond doubt: #7 repeat 2 of 2 at 9 req/s met the SLO, but its p99 TTFT's 95% "
        "interval (330 ms to beyond the sample) reaches past the 2,000 ms limit."
    )
    assert text.count(sentence) == 2  # at the result and above the search table
    search = text[text.index("## SLO search") :]
    assert "| #6 repeat 1 of 2 at 9 req/s | 9.00 | ✓ met | 320.0 (310–325 ms) | 44.6 |" in search
    assert (
        "| #7 repeat 2 of 2 at 9 req/s | 9.00 | ✓ met, but not beyond doubt | 340.0 (330 ms to "
        "beyond the "
        "sample) |"
    ) in search


def test_a_stated_band_narrower_than_the_measured_one_is_flagged(page: str) -> None:
    text = html.unescape(page)
    assert '!!! warning "Stated variance band narrower than measured"' in text
    assert "The stated variance band (±1.0%) is narrower than the spread measured from the " in text
    assert "| Variance band | ±1.0% |" in text
    assert (
        "| Variance band measured from the repeats | ±11.0% ⚠ wider than the stated band |" in text
    )
    capacity = text[text.index("## Capacity") : text.index("## Charts")]
    assert "includes zero: the repeats cannot tell it from no gain" in capacity


def test_record_text_beside_the_intervals_stays_inert(page: str) -> None:
    # Outside the reproduce block (a code fence, shown verbatim) no record text is markup.
    prose = page[: page.index("## Reproduce")]
    assert HOSTILE not in prose and "<img" not in prose
    assert "| &#60;img src&#61;x onerror&#61;alert&#40;1&#41;&#62; | " in prose
