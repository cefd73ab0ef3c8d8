"""A run record's windows as table rows, for the terminal and for ``--json`` (pure).

One row per measured window, in the order measured: the search probes, then the repeats.
The figures are the window summary's own (:class:`~tokenwatt.records.run.window.WindowSummary`):
p50/p90/p99 of TTFT, TPOT, ITL and E2E in ms (``"inf"`` where failed requests reach the
percentile, None without samples), and output tokens per second = output tokens /
window duration (the summary's ``goodput_tok_s``, methods/goodput.md). The per-request
distributions of ``show --requests`` come from the per-request file instead
(:func:`request_percentiles`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tokenwatt.analysis.report.report_setup import trace_text
from tokenwatt.analysis.report.run_warnings import (
    client_bound_advice,
    error_notes,
    every_request_failed,
    top_error,
    warnings_of,
)
from tokenwatt.analysis.stats.number_text import fixed
from tokenwatt.analysis.window.latency import PERCENTILES, percentile
from tokenwatt.analysis.window.search_story import explain_run
from tokenwatt.analysis.window.window_labels import WindowLabel, request_label, run_labels
from tokenwatt.records import (
    UNCLEAN_PREFIX,
    LatencyMs,
    Percentiles,
    RunRecord,
    WindowSummary,
    retried,
)

LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
"""The latency fields shown, each as p50/p90/p99 (ms)."""


def verdict(w: WindowSummary) -> str:
    """The window's verdict in words: meets, misses (why), invalid (why) or retried."""
    if retried(w) and (w.failure_reason or "").startswith(UNCLEAN_PREFIX):
        return f"retried: not measured cleanly ({w.invalid_reason}); the next window counts"
    if retried(w) and w.valid:
        return "retried: the client lagged; the next window's verdict counts"
    if not w.valid:
        return f"invalid: {w.invalid_reason or 'see warnings'}"
    if w.slo_pass:
        return "meets the SLO"
    early = " (stopped early)" if w.stopped_early else ""
    return f"misses{early}: {w.failure_reason or 'SLO attainment too low'}"


def _percentiles(p: Percentiles) -> dict[str, LatencyMs]:
    return {"p50": p.p50, "p90": p.p90, "p99": p.p99}


def window_row(label: WindowLabel, w: WindowSummary) -> dict[str, Any]:
    """One window as a JSON-ready row (numbers as stored; latencies in ms): ``number``
    (its place in the run) and ``window`` (its whole label,
    :func:`~tokenwatt.analysis.window.window_labels.window_labels`) first.

    Beside the table's figures, those vLLM's ``bench serve`` prints, for comparison:
    ``achieved_rps`` (completed requests / window, its request throughput),
    ``ttft_from_send_ms`` (TTFT from the actual send, as it measures), ``send_lag_p99_ms``,
    ``input_tok_s`` (prompt tokens of the window's requests the client did not cancel /
    window) and ``total_tok_s`` (input + output tokens / window). Unlike ``bench serve``,
    which divides by the time the whole benchmark took, every rate here is over the
    measured window's length. ``top_error``: the most common error kind, its count and
    what the server said in its first sample (None without errors); ``warnings``: the
    window's own (:func:`~tokenwatt.analysis.report.run_warnings.warnings_of`).
    """
    row: dict[str, Any] = {
        "number": label.number,
        "window": label.label,
        "rate_rps": w.rate_rps,
        "duration_s": w.duration_s,
        "requests": w.requests,
        "completed": w.completed,
        "errors": w.errors,
        "error_kinds": dict(sorted(w.error_kinds.items())),
        "cancelled_by_client": w.cancelled_by_client,
    }
    for key in LATENCIES:
        row[key] = _percentiles(getattr(w, key))
    row["ttft_from_send_ms"] = _percentiles(w.ttft_from_send_ms)
    row["send_lag_p99_ms"] = w.send_lag_p99_ms
    row["slo_attainment_pct"] = w.slo_attainment_pct
    row["achieved_rps"] = w.achieved_rps
    row["output_tok_s"] = w.goodput_tok_s
    row["input_tok_s"] = w.input_tokens / w.duration_s
    row["total_tok_s"] = (w.input_tokens + w.output_tokens) / w.duration_s
    row["client_bound"] = w.client_bound
    row["slo_pass"] = w.slo_pass
    row["valid"] = w.valid
    row["verdict"] = verdict(w)
    top = top_error(w)
    row["top_error"] = (
        None if top is None else {"kind": top[0], "count": top[1], "server_said": top[2]}
    )
    row["warnings"] = warnings_of(w)
    return row


def run_rows(record: RunRecord) -> list[dict[str, Any]]:
    """Every window of the run as :func:`window_row`, probes first, then repeats, each
    named by its label (:func:`~tokenwatt.analysis.window.window_labels.run_labels`: "#4 probe 4
    at 16 req/s (grow)", "#7 repeat 2 of 3 at 38.25 req/s (back-off 1)", "#2 load 2 of 3:
    8 clients")."""
    windows = [p.window for p in record.probes] + [r.window for r in record.repeats]
    labels = run_labels(record)
    return [window_row(label, w) for label, w in zip(labels, windows, strict=True)]


def workload_text(record: RunRecord) -> str:
    """What the run's requests were drawn from, in words: the trace's name, or a replayed
    dataset's kind and short hash (:func:`~tokenwatt.analysis.report.report_setup.trace_text`)."""
    return trace_text(record.spec)


METER_NOT_OPENED = "Power: the meter could not be opened"
"""Start of the ``not_covered`` note of a power meter the spec asks for that did not open
(``collect`` says it on screen before the first window)."""


def power_warnings(record: RunRecord, *, said_at_start: bool = False) -> list[str]:
    """What the run lacks in power, in words, for the terminal: its ``not_covered`` notes
    about power (no source, a meter that could not be opened; with ``said_at_start`` the
    latter is left out: ``collect`` said it before the first window) and, when some
    repeats' power readings are invalid (the search probes keep none), how many and the
    first reasons (distinct, in order)."""
    notes = [
        n
        for n in record.not_covered
        if n.startswith("Power:") and not (said_at_start and n.startswith(METER_NOT_OPENED))
    ]
    powered = [r.power for r in record.repeats if r.power is not None]
    invalid = [p for p in powered if not p.valid]
    if invalid:
        reasons = list(dict.fromkeys(r for p in invalid for r in p.invalid_reasons))
        shown = "; ".join(reasons[:3]) or "no reason recorded"
        notes.append(
            f"Power: invalid in {len(invalid)} of {len(powered)} repeats ({shown}); "
            "their energy figures are not used"
        )
    return notes


def run_json(record: RunRecord) -> dict[str, Any]:
    """What ``tokenwatt show --json`` prints: the run's identity, result, the sentence on
    why the result rate is where it is (``explanation``), what the run does not cover
    (``not_covered``, as the record keeps it), what went wrong in words (``error_notes``,
    ``client_bound_advice``, ``every_request_failed``:
    :mod:`~tokenwatt.analysis.report.run_warnings`) and the window rows."""
    result = record.result
    return {
        "label": record.label,
        "role": record.role,
        "mode": record.mode,
        "simulated": record.simulated,
        "complete": record.complete,
        "workload": workload_text(record),
        "slo": {
            "ttft_p99_ms": record.spec.slo.ttft_p99_ms,
            "tpot_p99_ms": record.spec.slo.tpot_p99_ms,
        },
        "result": None if result is None else result.model_dump(mode="json"),
        "explanation": explain_run(record),
        "not_covered": list(record.not_covered),
        "error_notes": error_notes(record),
        "client_bound_advice": client_bound_advice(record),
        "every_request_failed": every_request_failed(record),
        "windows": run_rows(record),
    }


def ms_cell(value: LatencyMs) -> str:
    """A latency (ms) for a table cell: ``"-"`` without samples, ``"inf"``, one decimal
    below 100 ms, else whole ms (e.g. ``"12.3"``, ``"1234"``), rounded once from the value
    as the pages round it (:func:`~tokenwatt.analysis.stats.number_text.fixed`)."""
    if value is None:
        return "-"
    if value == "inf":
        return "inf"
    return fixed(value, 1) if value < 100 else fixed(value, 0)


def triple_cell(p: dict[str, LatencyMs]) -> str:
    """p50 / p90 / p99 in one cell."""
    return " / ".join(ms_cell(p[k]) for k in ("p50", "p90", "p99"))


def errors_cell(row: dict[str, Any]) -> str:
    """Error count with its kinds, e.g. ``"3 (http_503 2, timeout 1)"``; ``"0"`` without."""
    kinds: dict[str, int] = row["error_kinds"]
    if not row["errors"]:
        return "0"
    return f"{row['errors']} (" + ", ".join(f"{k} {n}" for k, n in kinds.items()) + ")"


def _p(values: list[float]) -> dict[str, LatencyMs]:
    out: dict[str, LatencyMs] = {}
    for q in PERCENTILES:
        v = percentile(values, q)
        out[f"p{q}"] = None if v is None else ("inf" if math.isinf(v) else v)
    return out


def _request_latencies(row: dict[str, Any]) -> tuple[float, float | None, float]:
    """TTFT, TPOT and E2E (ms) of one request row, as ``analysis.latency`` defines them
    (a failed request infinite; a timeout's E2E until the client gave up)."""
    inf = math.inf
    first, last, end = row["first_token_s"], row["last_token_s"], row["end_s"]
    sched = row["scheduled_s"]
    ok = row["error"] is None and first is not None
    ttft = (first - sched) * 1e3 if ok else inf
    tpot: float | None = inf
    if ok and last is not None:
        out = row["output_tokens"]
        tpot = None if out <= 1 else (last - first) / (out - 1) * 1e3
    if row["error"] == "timeout" and end is not None:
        e2e = (end - sched) * 1e3
    else:
        e2e = (end - sched) * 1e3 if ok and end is not None else inf
    return ttft, tpot, e2e


def request_percentiles(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-window p50/p90/p99 of TTFT, TPOT and E2E (ms) from per-request rows.

    Every in-window request counts, as in the window summary (methods/goodput.md):
    failures and requests the client cancelled (an early stop) are infinite. Rows of one
    window are consecutive in the file, so only one window's values are held at a time.

    Returns:
        One dict per window: ``kind``, ``index``, ``rate_rps``, ``requests`` (lines of the
        window), ``counted`` (in the window), ``errors`` (the engine's), ``cancelled`` (by
        the client), ``ttft_ms``/``tpot_ms``/``e2e_ms`` and
        ``prompt_text_tokens``: p50/p90/p99 of the counted requests' text prompt lengths as
        the model's tokenizer measured them (a dataset run), None when no line has one.
    """
    out: list[dict[str, Any]] = []
    key: tuple[str, int] | None = None
    acc: dict[str, Any] = {}

    def flush() -> None:
        if key is None:
            return
        out.append(
            {
                "kind": key[0],
                "index": key[1],
                "rate_rps": acc["rate_rps"],
                "requests": acc["requests"],
                "counted": len(acc["ttft"]),
                "errors": acc["errors"],
                "cancelled": acc["cancelled"],
                "ttft_ms": _p(acc["ttft"]),
                "tpot_ms": _p(acc["tpot"]),
                "e2e_ms": _p(acc["e2e"]),
                "prompt_text_tokens": _p(acc["text"]) if acc["text"] else None,
            }
        )

    for row in rows:
        this = (row["kind"], row["index"])
        if this != key:
            flush()
            key = this
            acc = {"rate_rps": row["rate_rps"], "requests": 0, "errors": 0, "cancelled": 0}
            acc.update(ttft=[], tpot=[], e2e=[], text=[])
        acc["requests"] += 1
        if not row["in_window"]:
            continue
        ttft, tpot, e2e = _request_latencies(row)
        acc["cancelled"] += row["error"] == "cancelled"
        acc["errors"] += row["error"] not in (None, "cancelled")
        acc["ttft"].append(ttft)
        acc["e2e"].append(e2e)
        if row.get("prompt_text_tokens") is not None:  # files before it lack the key
            acc["text"].append(row["prompt_text_tokens"])
        if tpot is not None:
            acc["tpot"].append(tpot)
    flush()
    return out


def labelled_request_windows(
    record: RunRecord, rows: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """:func:`request_percentiles` of a run's per-request rows, each window first named by
    the label the run's table gives it (``window``: "#7 repeat 2 of 3 at 38.25 req/s
    (back-off 1)"), mapped from the file's ``kind`` and ``index``
    (:func:`~tokenwatt.analysis.window.window_labels.request_label`). The file's format is
    unchanged, so files written before labels existed read the same."""
    labels = run_labels(record)
    probes = len(record.probes)
    return [
        {"window": request_label(labels, probes, w["kind"], w["index"]), **w}
        for w in request_percentiles(rows)
    ]
