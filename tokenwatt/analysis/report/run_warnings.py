"""What went wrong in a run's windows, in words for the terminal and ``--json`` (pure).

A table of counts says *that* requests failed (``http_400 24``) or that the client ran
late; these sentences say *why*, from what the record already keeps:

- :func:`server_said`: the server's own message in an error sample (the ``message`` of a
  JSON error body, as vLLM, llama.cpp and OpenAI-style servers send it; else the body's
  first line; else the client's message), one line, capped. The sample was scrubbed of
  credentials when it was recorded (:func:`tokenwatt.redact.scrub_capped`); the terminal
  escapes its control characters when it prints it (:func:`tokenwatt.text.terminal_safe`);
- :func:`error_notes`: per window with errors, its most common error kind with that
  message, windows that say the same thing on one line;
- :func:`every_request_failed`: one line when not a single request of the run succeeded;
- :func:`client_bound_warning`: the warning a client-bound window carries (the load
  generator sent late, so the server did not receive the arrivals the spec asked for);
- :func:`client_bound_advice`: what to change when windows were client-bound: more
  worker processes, or, when the machine has no core to spare, fewer or lower rates or
  another host.
- the fix for what failed the windows when it was not the load (HTTP 4xx, 5xx, a
  protocol or connection error): :mod:`tokenwatt.analysis.window.failure_advice`.
"""

from __future__ import annotations

import json
import re

from tokenwatt.analysis.window.failure_advice import cause_notes
from tokenwatt.analysis.window.latency import CLIENT_BOUND_SEND_LAG_MS
from tokenwatt.analysis.window.window_labels import run_labels
from tokenwatt.records import RETRIED_PREFIX, ErrorSample, RunRecord, WindowSummary

SAID_LIMIT = 200
"""Characters of a server's message quoted in a note (the record keeps up to 512)."""
CLIENT_BOUND_WARNING = "client-bound"
"""Start of the warning a client-bound window carries (:func:`client_bound_warning`)."""
# The string may run to the end of a body cut short by the record's cap (``…``).
_MESSAGE_KEY = re.compile(r'"(?:message|detail|msg)"\s*:\s*"((?:[^"\\]|\\.)*)')
# A body that is JSON by its look (an object, an array of values): not quoted as text; a
# plain-text body may start with "[" too ("[ERROR] model not loaded").
_JSON_LOOK = re.compile(r'[{]|\[\s*(?:[\[{"\]\d-]|true|false|null)')
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "0.0.0.0")  # noqa: S104 (a host compared, not bound)
_HOST = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/]*@)?(\[[^\]]*\]|[^/:?#]*)")
"""The host of a URL (an IPv6 address with its brackets); urllib is I/O to the purity test."""


def _json_message(value: object) -> str | None:
    """The message of a decoded JSON error body: ``{"error": {"message": …}}`` (OpenAI,
    llama.cpp, newer vLLM), ``{"message": …}`` (older vLLM), ``{"detail": …}`` (FastAPI),
    ``{"error": "…"}``, FastAPI's validation errors ``{"detail": [{"msg": …}]}`` (the
    first)."""
    if isinstance(value, list):
        return _json_message(value[0]) if value else None
    if not isinstance(value, dict):
        return None
    for key in ("error", "message", "detail", "msg"):
        inner = value.get(key)
        if isinstance(inner, str) and inner.strip():
            return inner
        if isinstance(inner, (dict, list)):
            found = _json_message(inner)
            if found:
                return found
    return None


def server_said(sample: ErrorSample) -> str:
    """What the server said about one failed request, as one line of at most
    :data:`SAID_LIMIT` characters (every run of white space, line breaks included, one
    space; cut with ``…``). Record text: the caller escapes it for its terminal or page.

    The ``message`` (or ``detail``) of a JSON error body first; a body cut short by the
    record's cap is searched for that key; else the body's first non-blank line; else the
    client's message (``HTTP 400 Bad Request``, a timeout's words); else the kind.
    """
    body = (sample.body or "").strip()
    said: str | None = None
    if body:
        try:
            said = _json_message(json.loads(body))
        except ValueError:
            found = _MESSAGE_KEY.search(body)
            if found:
                text = found.group(1)
                try:
                    said = json.loads(f'"{text}"')
                except ValueError:
                    said = text
        if said is None and not _JSON_LOOK.match(body):
            said = next((line for line in body.splitlines() if line.strip()), None)
    if not said:
        said = sample.message or sample.kind
    said = " ".join(said.split())
    return said if len(said) <= SAID_LIMIT else said[: SAID_LIMIT - 1] + "…"


def _windows(record: RunRecord) -> list[WindowSummary]:
    return [p.window for p in record.probes] + [r.window for r in record.repeats]


def top_error(w: WindowSummary) -> tuple[str, int, str | None] | None:
    """The window's most common error kind (ties: the first by name), its count and what
    the server said in its first sample (None without a sample); None without errors."""
    if not w.errors or not w.error_kinds:
        return None
    kind, count = max(sorted(w.error_kinds.items()), key=lambda kv: kv[1])
    samples = w.error_samples.get(kind) or []
    return kind, count, server_said(samples[0]) if samples else None


def error_notes(record: RunRecord) -> list[str]:
    """One line per distinct (kind, message) among the windows' most common errors:
    ``errors in #1, #2: http_400 in 48 of 48 requests; the server said: Prompt contains
    invalid tokens`` ("the client saw" when no body came: a timeout's or a connection's
    words are the client's). Empty when no window had an error."""
    groups: dict[tuple[str, str | None, bool], tuple[list[str], int, int]] = {}
    for label, w in zip(run_labels(record), _windows(record), strict=True):
        top = top_error(w)
        if top is None:
            continue
        kind, count, said = top
        key = (kind, said, _from_server(w.error_samples.get(kind) or []))
        refs, errors, requests = groups.get(key, ([], 0, 0))
        groups[key] = ([*refs, label.ref], errors + count, requests + w.requests)
    lines = []
    for (kind, said, server), (refs, errors, requests) in groups.items():
        where = ", ".join(refs)
        what = f"{kind} in {errors} of {requests} requests"
        who = "the server said" if server else "the client saw"
        tail = f"; {who}: {said}" if said else "; no sample kept"
        lines.append(f"errors in {where}: {what}{tail}")
    return lines


def _from_server(samples: list[ErrorSample]) -> bool:
    """Whether the first sample's words are the server's (a body came), not the client's
    own (a timeout, a refused connection: :func:`server_said` falls back to them)."""
    return bool(samples and (samples[0].body or "").strip())


def every_request_failed(record: RunRecord) -> str | None:
    """One line when the run sent requests and not one succeeded: the most common error
    kind over all windows and what the server said in its first sample, e.g. ``every
    request failed: http_400 — Prompt contains invalid tokens (first sample; 48 of 48
    requests in 2 windows)``. None when some request succeeded or none was sent."""
    windows = _windows(record)
    completed = sum(w.completed for w in windows)
    errors = sum(w.errors for w in windows)
    if completed > 0 or errors == 0:
        return None
    totals: dict[str, int] = {}
    for w in windows:
        for kind, n in w.error_kinds.items():
            totals[kind] = totals.get(kind, 0) + n
    kind, count = max(sorted(totals.items()), key=lambda kv: kv[1])
    sample = next((s for w in windows for s in w.error_samples.get(kind, [])[:1]), None)
    said = f" — {server_said(sample)} (first sample;" if sample else " (no sample kept;"
    requests = sum(w.requests for w in windows)
    return (
        f"every request failed: {kind}{said} {count} of {requests} requests in "
        f"{len(windows)} window{'s' if len(windows) != 1 else ''})"
    )


def client_bound_warning(w: WindowSummary) -> str | None:
    """The warning of a client-bound window (send-lag p99 above the 10 ms mark, methods
    page "Goodput and the SLO search"); None when it is not client-bound, or when it is
    already labelled so: a miss measured again because the client lagged
    (:data:`~tokenwatt.records.RETRIED_PREFIX`)."""
    lag = w.send_lag_p99_ms
    if not w.client_bound or lag is None or (w.failure_reason or "").startswith(RETRIED_PREFIX):
        return None
    late = [str(x.worker) for x in w.worker_lag if x.client_bound]
    workers = ""
    if w.workers > 1 and late:
        workers = f" (worker{'s' if len(late) > 1 else ''} {', '.join(late)} over the mark)"
    return (
        f"{CLIENT_BOUND_WARNING}: send-lag p99 {lag:.1f} ms, above the "
        f"{CLIENT_BOUND_SEND_LAG_MS:.0f} ms mark{workers}: the load generator sent late, so the "
        "server did not receive the arrivals as scheduled; TTFT and E2E count from the "
        "scheduled times, so the lag is inside them, but the arrival process the server saw "
        "was not the one asked for"
    )


def window_warnings(record: RunRecord) -> list[tuple[str, str]]:
    """(window label, warning) for every warning of every window, in the order measured.

    A client-bound window of a record written before windows carried their client-bound
    warning gets it here, so every client-bound window says so."""
    out = []
    for label, w in zip(run_labels(record), _windows(record), strict=True):
        out += [(label.label, x) for x in warnings_of(w)]
    return out


def warnings_of(w: WindowSummary) -> list[str]:
    """The window's warnings, with its client-bound warning (:func:`client_bound_warning`)
    added when the record lacks it (records written before windows carried it)."""
    warnings = list(w.warnings)
    bound = client_bound_warning(w)
    if bound is not None and not any(x.startswith(CLIENT_BOUND_WARNING) for x in warnings):
        warnings.append(bound)
    return warnings


def engine_is_local(record: RunRecord) -> bool:
    """True when the engine ran on the collector's machine: ``collect`` started it, or its
    endpoint is a loopback address."""
    found = _HOST.match(record.spec.engine.endpoint)
    host = found.group(1).lower() if found else ""
    return record.engine_process is not None or host in _LOOPBACK


def client_bound_advice(record: RunRecord, cores: int | None = None) -> str | None:
    """What to change when some window was client-bound; None when none was.

    ``cores``: CPU cores usable on the collector's machine (None: not known, e.g. ``show``
    on another machine). With ``cores`` the load generator's processes are counted — the
    workers, the parent that feeds them (with two or more), and one core for an engine on
    the same machine (:func:`engine_is_local`): more than ``cores`` is an oversubscribed
    machine, where more workers cannot help; otherwise the workers that fit are suggested.
    """
    windows = _windows(record)
    bound = [w for w in windows if w.client_bound and w.send_lag_p99_ms is not None]
    if not bound:
        return None
    lag = max(w.send_lag_p99_ms or 0.0 for w in bound)
    workers = max(w.workers for w in windows)
    head = (
        f"{len(bound)} of {len(windows)} windows were client-bound (send-lag p99 up to "
        f"{lag:.1f} ms, {workers} load-generator process{'es' if workers > 1 else ''})"
    )
    lower = "measure fewer or lower rates"
    if record.spec.measurement.ray_address is not None or cores is None:
        return f"{head}: give the load generator more processes (--workers N) or {lower}"
    local = engine_is_local(record)
    engine = 1 if local else 0
    used = workers + (1 if workers > 1 else 0) + engine
    beside = " beside the engine" if local else ""
    fit = cores - 1 - engine  # the parent takes a core once there are workers
    if used > cores:
        # Fewer workers is advice only while there are more than the machine can hold.
        fewer = f"use --workers {max(fit, 1)} or fewer, " if workers > max(fit, 1) else ""
        return (
            f"{head}: this machine is oversubscribed: {workers} "
            f"worker{'s' if workers > 1 else ''}, the collector"
            f"{' and the engine' if local else ''} share {cores} "
            f"core{'s' if cores > 1 else ''}, so more workers cannot help; {fewer}{lower}, "
            "or send from another host (--ray-address)"
        )
    if fit > workers and fit >= 2:
        more = f"--workers {fit}: the cores free{beside}"
        return f"{head}: give it more processes ({more}) or {lower}"
    return (
        f"{head}: no core is free{beside} for another worker ({cores} cores); {lower}, "
        "or send from another host (--ray-address)"
    )


def run_notes(
    record: RunRecord, cores: int | None = None, *, failed_line: bool = True
) -> list[str]:
    """The lines ``collect`` and ``show`` print below the table: each window's warnings
    (``warning: #3 …: …``), the error notes, the fix for each cause that was not the
    load (``how to fix: …``), the client-bound advice (``cores``: see
    :func:`client_bound_advice`), the requests complete without ``[DONE]`` and, last, the
    line saying every request failed (left out with ``failed_line=False``: ``collect``
    prints it after the file it wrote)."""
    lines = [f"warning: {label}: {text}" for label, text in window_warnings(record)]
    lines += error_notes(record)
    lines += cause_notes(_windows(record), record.spec.engine.endpoint)
    advice = client_bound_advice(record, cores)
    if advice is not None:
        lines.append(f"note: {advice}")
    without_done = sum(w.without_done for w in _windows(record))
    if without_done:
        lines.append(
            f"note: {without_done:,} request(s) ended without data: [DONE] after a chunk "
            "with finish_reason; counted as complete (as vLLM's bench serve does)"
        )
    failed = every_request_failed(record) if failed_line else None
    if failed is not None:
        lines.append(failed)
    return lines
