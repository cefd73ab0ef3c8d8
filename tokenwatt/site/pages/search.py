"""The whole SLO search on a report page: every probe and every repeat, in order.

Per configuration: the sentence that says why the result rate is where it is
(:func:`~tokenwatt.analysis.window.search_story.explain_config`), a table of every window (its
label, :func:`~tokenwatt.analysis.window.window_labels.config_labels`, the same as the terminal's;
rate, verdict with failure reason, p99s, goodput, errors by kind) with missed repeats and
back-offs marked, then the error samples and the windows' warnings, each under its window's
label. Everything comes from
the record's ``configs[].search``. Record text (failure reasons, error kinds, messages, bodies,
warnings) is data: it goes through :func:`~tokenwatt.site.format.escape.md_text`; only the
package's own words and numbers are marked trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from tokenwatt.analysis import (
    WindowLabel,
    config_labels,
    doubt_sentence,
    explain_config,
    rate_text,
)
from tokenwatt.records import ConfigV3, ErrorSampleV3, LatencyMsV3, ReportV3, SearchWindowV3
from tokenwatt.site.format.escape import md_text, trusted
from tokenwatt.site.format.fmt import DASH, num
from tokenwatt.site.format.intervals import doubt_suffix, window_p99
from tokenwatt.site.format.windows import window_goodput

INF = trusted("∞")


def result_stories(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    """Per configuration with search windows: its name and the one-sentence explanation."""
    return [
        {
            "name": name,
            "story": explain_config(cfg, report),
            "doubt": _doubt(cfg, report),
        }
        for name, cfg in zip(names, report.configs, strict=True)
        if cfg.search
    ]


def _doubt(cfg: ConfigV3, report: ReportV3) -> str | None:
    slo = report.slo
    return doubt_sentence(
        cfg.search,
        slo.ttft_p99_ms,
        slo.tpot_p99_ms,
        fixed=fixed_loads(report),
        labels=config_labels(cfg, report),
    )


def fixed_loads(report: ReportV3) -> bool:
    """Whether the report's runs measured fixed loads (``sweep.fixed``: ``collect --rate``,
    ``--rates`` or ``--concurrency``), one window each with no SLO search."""
    return report.spec is not None and report.spec.sweep.fixed


def search_sections(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    """Per configuration with search windows: name, sentence, table rows, error samples,
    window warnings, the search's warnings, and whether the record keeps the whole search."""
    out = []
    for name, cfg in zip(names, report.configs, strict=True):
        if not cfg.search:
            continue
        labels = config_labels(cfg, report)
        out.append(
            {
                "name": name,
                "story": explain_config(cfg, report),
                "doubt": _doubt(cfg, report),
                "ci": any(w.ttft_p99_ci_ms is not None for w in cfg.search),
                "rows": search_rows(cfg, labels),
                "samples": sample_lines(labels, cfg.search),
                "window_warnings": warning_lines(labels, cfg.search),
                "warnings": list(cfg.search_warnings),
                "whole": cfg.whole_search,
                "fixed": fixed_loads(report),
                "cache": any(w.prefix_cache_hit_pct is not None for w in cfg.search),
                "prompts": prompts_line(cfg),
            }
        )
    return out


def prompts_line(cfg: ConfigV3) -> Markup | None:
    """How many prompts the run sent and how many were distinct; None when unknown."""
    drawn, distinct = cfg.prompts_drawn, cfg.prompts_distinct
    if drawn is None or distinct is None:
        return None
    if distinct == drawn:
        return trusted(f"Prompts: {drawn:,} sent in the run, every one different.")
    return trusted(
        f"Prompts: {drawn:,} sent in the run, {distinct:,} different: "
        f"{drawn - distinct:,} repeated an earlier prompt (see the run record's notes)."
    )


def _p99(value: LatencyMsV3) -> Markup:
    if value == "inf":
        return INF
    return num(value if isinstance(value, int | float) else None, 1)


def _verdict(w: SearchWindowV3) -> Markup:
    if w.remeasured:
        return trusted("↻ not used")
    if not w.valid:
        return trusted("**✗ invalid**")
    if w.slo_pass:
        return trusted("✓ met")
    if w.step == "repeat":
        return trusted("**✗ missed**")
    return trusted("✗ missed")


def _outcome(w: SearchWindowV3) -> Markup:
    """The verdict, then the failure reason (record text) and what made a window invalid."""
    parts: list[Markup] = []
    if w.failure_reason and not w.slo_pass:
        parts.append(md_text(w.failure_reason))
    if w.stopped_early and "stopped" not in (w.failure_reason or ""):
        parts.append(trusted("stopped early"))
    if not w.valid:
        parts.append(trusted("invalid: ") + md_text(w.invalid_reason or "no reason recorded"))
    verdict = _verdict(w)
    if w.valid and not w.remeasured:
        verdict += doubt_suffix(w.slo_beyond_doubt)
    if not parts:
        return verdict
    return verdict + trusted(": ") + trusted("; ").join(parts)


def window_errors(w: SearchWindowV3) -> Markup:
    """A window's errors cell: the engine's errors by kind (a dash without), then the
    requests retried after a transport error and those the client cancelled (an early
    stop: not errors, but counted as misses in the window's figures, methods/goodput.md),
    e.g. ``"timeout 2 (+1 retried) (47 cancelled by the client)"``."""
    retries = (
        trusted(f" (+{w.transport_retries:,} retried)") if w.transport_retries else trusted("")
    )
    if w.cancelled_by_client:
        retries += trusted(f" ({w.cancelled_by_client:,} cancelled by the client)")
    if not w.error_kinds:
        return (num(w.errors, 0) if w.errors else DASH) + retries
    kinds = sorted(w.error_kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    return trusted(", ").join(md_text(k) + trusted(f" {v:,}") for k, v in kinds) + retries


def search_rows(cfg: ConfigV3, labels: Sequence[WindowLabel]) -> list[dict[str, Any]]:
    """The table rows of one configuration's search, in order.

    Each window is named by its label
    (:func:`~tokenwatt.analysis.window.window_labels.config_labels`:
    its number in the run, as the error samples and warnings cite it, and what it was:
    "#7 repeat 2 of 3 at 38.25 req/s (back-off 1)"). Before the first repeat after a
    back-off comes a marker row ("⤵ back-off N", old → new rate). The outcome is the verdict
    (a missed repeat in bold) with the failure reason.
    """
    rows: list[dict[str, Any]] = []
    previous: SearchWindowV3 | None = None
    for label, w in zip(labels, cfg.search, strict=True):
        if (
            label.kind == "repeat"
            and previous is not None
            and previous.step == "repeat"
            and _new_rate(previous, w)
        ):
            rows.append(_backoff_row(previous, w))
        rows.append(
            {
                "window": md_text(label.label),
                "rate": load_cell(w),
                "outcome": _outcome(w),
                "ttft": window_p99(w.ttft_p99_ms, w.ttft_p99_ci_ms, _p99(w.ttft_p99_ms)),
                "tpot": window_p99(w.tpot_p99_ms, w.tpot_p99_ci_ms, _p99(w.tpot_p99_ms)),
                "goodput": window_goodput(w.goodput_tok_s, w.slo_pass),
                "errors": window_errors(w),
                "cache": num(w.prefix_cache_hit_pct, 1),
            }
        )
        previous = w
    return rows


def load_cell(w: SearchWindowV3) -> Markup:
    """The window's load: its rate (req/s); "(constant)" after a constant-rate one; for a
    closed loop, its clients and the rate they measured ("8 clients · 3.91")."""
    if w.concurrency is not None:
        return trusted(f"{w.concurrency} clients · ") + num(w.rate_rps, 2)
    if w.profile == "constant":
        return num(w.rate_rps, 2) + trusted(" (constant)")
    return num(w.rate_rps, 2)


def _new_rate(previous: SearchWindowV3, w: SearchWindowV3) -> bool:
    if w.backoff is not None and previous.backoff is not None:
        return w.backoff != previous.backoff
    return w.rate_rps != previous.rate_rps


def _backoff_row(previous: SearchWindowV3, w: SearchWindowV3) -> dict[str, Any]:
    label = f"⤵ back-off {w.backoff}" if w.backoff else "⤵ back-off"
    return {
        "window": trusted(f"**{label}**"),
        "rate": trusted(f"{num(previous.rate_rps, 2)} → {num(w.rate_rps, 2)}"),
        "outcome": trusted(
            f"a repeat at {rate_text(previous.rate_rps)} req/s missed: "
            f"rate × {w.rate_rps / previous.rate_rps:.2f}, repeats start again"
        ),
        "ttft": trusted(""),
        "tpot": trusted(""),
        "goodput": trusted(""),
        "errors": trusted(""),
        "cache": trusted(""),
    }


def _where(label: WindowLabel) -> Markup:
    return md_text(label.label)


def warning_lines(labels: Sequence[WindowLabel], windows: Sequence[SearchWindowV3]) -> list[Markup]:
    """One line per window warning: the window's label and the warning (record text)."""
    return [
        _where(label) + trusted(": ") + md_text(x)
        for label, w in zip(labels, windows, strict=True)
        for x in w.warnings
    ]


def _sample_line(label: WindowLabel, s: ErrorSampleV3) -> Markup:
    where = _where(label) + trusted(", ")
    parts = [md_text(s.kind)]
    if s.exception:
        parts.append(md_text(s.exception))
    if s.status is not None:
        parts.append(trusted(f"HTTP {s.status}"))
    if s.message:
        parts.append(trusted("message: “") + md_text(s.message) + trusted("”"))
    if s.body:
        parts.append(trusted("body: “") + md_text(s.body) + trusted("”"))
    return where + trusted(" · ").join(parts)


def sample_lines(labels: Sequence[WindowLabel], windows: Sequence[SearchWindowV3]) -> list[Markup]:
    """One line per error sample: the window's label, kind, exception class, HTTP status,
    message and body (record text, escaped)."""
    return [
        _sample_line(label, s)
        for label, w in zip(labels, windows, strict=True)
        for s in w.error_samples
    ]
