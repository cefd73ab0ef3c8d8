"""Advice that fits the cause of a failed window (pure).

A window can fail because the engine was too slow for the load (latency, or requests that
timed out under it), or because the requests never had a chance: the server refused them
(HTTP 4xx), failed them (5xx), answered with something that is not an OpenAI stream, or
could not be reached. Only the first two are helped by a lower rate or a looser SLO; for
the others that advice wastes a run, so each cause gets its own fix, beside the server's
own message (:func:`~tokenwatt.analysis.report.run_warnings.server_said`).

The cause of a window is its most common error kind (our own cancellations left out) when
its errors alone could have failed it — more than the 1% of requests a p99 may miss —
else ``latency``. Error kinds are the load generator's (``collect/load/http.py``,
``collect/load/stream.py``): ``http_NNN``, ``timeout``, ``connect``, ``disconnect``,
``protocol``, ``stream_error``, ``empty``, ``cancelled``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from tokenwatt.records import WindowSummary, retried

Cause = Literal[
    "refused",
    "auth",
    "rate_limited",
    "server_error",
    "protocol",
    "connection",
    "timeout",
    "latency",
]
"""Why a window failed: ``refused`` (HTTP 4xx but the three below), ``auth`` (401, 403),
``rate_limited`` (429), ``server_error`` (5xx), ``protocol`` (not an OpenAI event stream,
an error object instead of one, or no text), ``connection`` (no connection, or dropped),
``timeout`` (no answer within the request timeout), ``latency`` (the SLO's limits)."""

LOAD_CAUSES: frozenset[Cause] = frozenset({"latency", "timeout", "rate_limited"})
"""Causes that a lower rate or a looser SLO can help."""

RATE_ADVICE = re.compile(r"; relax the SLO or measure another configuration$")
"""The search's own advice at the end of its "every probe missed the SLO" warning
(``measure/search.py``, ``measure/load_search.py``), replaced by :func:`fit_search_warning`
when the cause is not the load."""

NO_LOAD_CLAIM = re.compile(r": no load meets it; relax the SLO or measure another configuration$")
"""The claim and advice at the end of the search's "every probe missed" warning."""

NOTHING_SENT = (
    ": no probe sent a request, so this is no finding on the load; make each window long "
    "enough for arrivals at its rate"
)
"""What :func:`fit_search_warning` puts in its place when no probe sent a request."""

_HTTP = re.compile(r"^http_(\d{3})$")


def kind_cause(kind: str) -> Cause:
    """The cause an error kind stands for (module docstring)."""
    found = _HTTP.match(kind)
    if found:
        status = int(found.group(1))
        if status in (401, 403):
            return "auth"
        if status == 429:
            return "rate_limited"
        return "server_error" if status >= 500 else "refused"
    if kind in ("connect", "disconnect"):
        return "connection"
    if kind in ("protocol", "stream_error", "empty"):
        return "protocol"
    return "timeout" if kind == "timeout" else "latency"


def top_kind(w: WindowSummary) -> str | None:
    """The window's most common error kind apart from the client's own cancellations
    (ties: the first by name); None without one."""
    kinds = {k: n for k, n in w.error_kinds.items() if k != "cancelled" and n > 0}
    if not kinds:
        return None
    return max(sorted(kinds.items()), key=lambda kv: kv[1])[0]


def window_cause(w: WindowSummary) -> Cause | None:
    """Why a window failed (module docstring); None for one that met the SLO or whose
    verdict was replaced by a retry."""
    if w.slo_pass or retried(w):
        return None
    kind = top_kind(w)
    if kind is None or w.error_kinds[kind] <= max(w.requests, 1) // 100:
        return "latency"
    return kind_cause(kind)


def advice(cause: Cause, kind: str, endpoint: str) -> str:
    """The fix for ``cause`` (``kind``: the error kind seen, e.g. ``http_400``;
    ``endpoint``: the engine's URL, named when it cannot be reached)."""
    if cause == "refused":
        return (
            f"the server refused the requests ({kind.replace('_', ' ').upper()}): a lower "
            "rate will not help; check what they ask for — engine.model (--model) a name "
            "/v1/models lists, token ids below the model's vocabulary (model.vocab_size, "
            "--vocab-size), prompt plus output within the engine's context, engine.api "
            "(completions or chat) — and the server's message above"
        )
    if cause == "auth":
        return (
            f"the server refused the credentials ({kind.replace('_', ' ').upper()}): set "
            "engine.api_key_env to the variable that holds the engine's API key, and check "
            "the key"
        )
    if cause == "rate_limited":
        return (
            "the server or a gateway in front of it limits the request rate (HTTP 429): "
            "lift the limit for the benchmark, or lower sweep.start_rps"
        )
    if cause == "server_error":
        return (
            f"the server failed the requests ({kind.replace('_', ' ').upper()}): read its "
            "message above and the engine's log (--engine-log); an out-of-memory error or a "
            "crash is the engine's configuration, not the load"
        )
    if cause == "protocol":
        return (
            "the answers are not an OpenAI completion stream: check that engine.endpoint "
            "is the server's OpenAI-compatible base URL ending in /v1, engine.api, and that "
            "no proxy in between buffers, compresses or rewrites the event stream"
        )
    if cause == "connection":
        return (
            f"the engine could not be reached or dropped the connections ({kind}) at "
            f"{endpoint}: check that it is running and that the address and port "
            "(engine.endpoint, --endpoint) are its; its log says whether it crashed"
        )
    if cause == "timeout":
        return (
            "requests got no answer within measurement.request_timeout_s under load: relax "
            "the SLO or measure another configuration (the search already went down to its "
            "floor; a server that answers none at any rate is stuck: check its log)"
        )
    return "relax the SLO or measure another configuration"


def run_cause(windows: Sequence[WindowSummary]) -> tuple[Cause, str] | None:
    """The most common cause among the failed windows, with the error kind most often
    behind it (``""`` for latency); None when no window failed."""
    causes = [(c, top_kind(w) or "") for w in windows if (c := window_cause(w)) is not None]
    if not causes:
        return None
    cause = Counter(c for c, _ in causes).most_common(1)[0][0]
    kind = Counter(k for c, k in causes if c == cause).most_common(1)[0][0]
    return cause, kind


def cause_notes(windows: Sequence[WindowSummary], endpoint: str) -> list[str]:
    """One line of advice per cause, other than the load's, among the failed windows
    (``how to fix: …``); empty when every failure was latency or time-outs (the search's
    own warning says what to change then)."""
    seen: dict[Cause, str] = {}
    for w in windows:
        cause = window_cause(w)
        if cause is not None and cause not in LOAD_CAUSES and cause not in seen:
            seen[cause] = top_kind(w) or ""
    return [f"how to fix: {advice(c, k, endpoint)}" for c, k in seen.items()]


def fit_search_warning(warning: str, windows: Sequence[WindowSummary], endpoint: str) -> str:
    """The search's warning with its closing "relax the SLO or measure another configuration"
    (:data:`RATE_ADVICE`) replaced by the fix of the run's most common cause when that is
    not the load's, and its "no load meets it" by :data:`NOTHING_SENT` when no probe sent a
    request (the result is then inconclusive); unchanged otherwise."""
    if windows and not any(w.requests for w in windows):
        # No request sent (a window too short for its rate): the result is inconclusive,
        # so the warning must not claim that no load meets the SLO.
        return NO_LOAD_CLAIM.sub(NOTHING_SENT, warning)
    found = run_cause(windows)
    if found is None or found[0] in LOAD_CAUSES or not RATE_ADVICE.search(warning):
        return warning
    fix = "; " + advice(found[0], found[1], endpoint)
    return RATE_ADVICE.sub(lambda _m: fix, warning)


def not_load_reason(
    windows: Sequence[WindowSummary], endpoint: str, *, listed: bool = False
) -> str | None:
    """Why a search whose every probe (``windows``) missed did not measure the engine's
    capacity, for an ``inconclusive`` result: every probe failed on something a lower rate
    cannot help (HTTP 4xx or 5xx, no connection, a broken stream: not the load's causes,
    :data:`LOAD_CAUSES`), or no probe sent a request. None when any probe missed for the
    load, a probe stopped early as hopeless included (then "no load met the SLO" is the
    verdict). ``listed``: the windows are a fixed-load run's listed loads (the words say so).
    """
    where, none = "at every rate probed", "no probe"
    if listed:
        where, none = "at every listed load", "no listed load"
    # A window that sent nothing (a floor of 0.1 req/s over a short window) tells nothing.
    sent = [w for w in windows if w.requests]
    causes = [(c, top_kind(w) or "") for w in sent if (c := window_cause(w)) is not None]
    if any(c in LOAD_CAUSES for c, _ in causes):
        return None  # a probe missed for the load (slow, or stopped early as hopeless)
    if causes:
        cause, kind = Counter(causes).most_common(1)[0][0]
        # The advice's first clause names the cause ("the server refused the requests
        # (HTTP 400)"); its fix goes in the search's warning, not in the reason.
        what = advice(cause, kind, endpoint).split(": ", 1)[0]
        return (
            f"{what} {where}: the misses came from that, not from the load, "
            "so no capacity was measured"
        )
    if windows and not any(w.completed for w in windows):
        return f"{none} completed a request: no load was measured"  # none sent any
    return None


__all__ = [
    "LOAD_CAUSES",
    "Cause",
    "advice",
    "cause_notes",
    "fit_search_warning",
    "kind_cause",
    "not_load_reason",
    "run_cause",
    "window_cause",
]
