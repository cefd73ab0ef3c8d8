"""What went wrong is said, not only counted: the server's own error message, a run where
every request failed (a valid record, exit 1), a client-bound window that met the SLO.

Real `collect` runs against the scripted engine in a child process (``scripted_engine.py``;
``--vocab`` makes it refuse out-of-vocabulary token ids with llama.cpp's 400 body).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.collect import usable_cores
from tokenwatt.records import RunRecord, retried

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_engine import INVALID_TOKENS, MODEL, EngineProcess, start_engine

pytestmark = pytest.mark.e2e  # `collect` child processes (tests/analysis has the same basename)

REPO = Path(__file__).resolve().parents[2]
VOCAB = 2048


@pytest.fixture
def small_vocab_engine() -> Iterator[EngineProcess]:
    proc = start_engine("idle", vocab=VOCAB)
    try:
        yield proc
    finally:
        proc.stop()


def _collect(endpoint: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Two fixed windows (2 and 4 req/s for 2 s: exactly 4 and 8 requests) of 8-token prompts."""
    argv = [
        sys.executable, "-m", "tokenwatt", "collect", "--endpoint", endpoint, "--model", MODEL,
        "--rates", "2,4", "--duration", "2", "--warmup", "0", "--input-tokens", "8",
        "--output-tokens", "4", "--no-progress", "--out", str(out), *extra,
    ]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)


def _show(out: Path, *extra: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tokenwatt", "show", str(out), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_every_request_refused_is_said_with_the_servers_message_and_exits_1(
    small_vocab_engine: EngineProcess, tmp_path: Path
) -> None:
    """The README's llama.cpp slip: token ids drawn below the default 32,000 sent to a
    2,048-token vocabulary. The record is valid and complete; the screen says why every
    request failed; the exit status is 1 so that a script or a session notices."""
    out = tmp_path / "run.json"
    done = _collect(small_vocab_engine.endpoint, out)
    assert done.returncode == 1, done.stderr[-3000:]
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete
    # A window the client's lag may have failed is measured again (a busy machine).
    windows = [r.window for r in record.repeats if not retried(r.window)]
    assert [(w.requests, w.errors, w.error_kinds) for w in windows] == [
        (4, 4, {"http_400": 4}),
        (8, 8, {"http_400": 8}),
    ]
    n, m = sum(r.window.requests for r in record.repeats), len(record.repeats)
    refs = ", ".join(f"#{i + 1}" for i in range(m))
    errors = f"errors in {refs}: http_400 in {n} of {n} requests; the server said: {INVALID_TOKENS}"
    assert errors in done.stderr
    # The fix for a refusal, not the load's advice (a lower rate cannot help an HTTP 400).
    assert "how to fix: the server refused the requests (HTTP 400)" in done.stderr
    assert "relax the SLO" not in done.stderr and "lower sweep.start_rps" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"every request failed: http_400 — {INVALID_TOKENS} (first sample; {n} of {n} "
        f"requests in {m} windows)"
    )
    assert done.stdout.strip().splitlines()[-1] == f"wrote {out}"
    shown = _show(out)
    assert errors in shown and last in shown
    data = json.loads(_show(out, "--json"))
    assert data["every_request_failed"] == last
    assert data["windows"][0]["top_error"] == {
        "kind": "http_400",
        "count": 4,
        "server_said": INVALID_TOKENS,
    }


def test_the_same_run_with_the_vocabulary_given_succeeds_and_says_nothing_of_errors(
    small_vocab_engine: EngineProcess, tmp_path: Path
) -> None:
    """The control: with ``--vocab-size 2048`` every request is served, exit 0, no note
    (``--workers auto`` here too: it says what it chose)."""
    out = tmp_path / "run.json"
    done = _collect(
        small_vocab_engine.endpoint, out, "--vocab-size", str(VOCAB), "--workers", "auto"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # --workers auto says once what it chose: 2 and 4 req/s of 4-token outputs need one.
    chose = (
        "workers: auto chose 1 load-generator process (from "
        f"{usable_cores()} usable cores and the expected chunk rate)"
    )
    assert done.stderr.count(chose) == 1
    record = RunRecord.model_validate_json(out.read_text())
    assert [(r.window.requests, r.window.errors) for r in record.repeats] == [(4, 0), (8, 0)]
    assert "errors in" not in done.stderr and "every request failed" not in done.stderr


def test_a_search_refused_on_every_probe_gets_the_fix_not_the_rate_advice(
    small_vocab_engine: EngineProcess, tmp_path: Path
) -> None:
    """The issue's case: every request of an SLO search got HTTP 400, and the search's
    warning said to lower the start rate or relax the SLO. The record's result warning
    now gives the refusal's fix."""
    out = tmp_path / "run.json"
    argv = [
        sys.executable, "-m", "tokenwatt", "collect", "--endpoint", small_vocab_engine.endpoint,
        "--model", MODEL, "--sweep", "--duration", "2", "--warmup", "0", "--input-tokens", "8",
        "--output-tokens", "4", "--no-progress", "--no-accuracy", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-3000:]
    record = RunRecord.model_validate_json(out.read_text())
    assert record.result is not None and record.result.rate_rps == 0
    assert record.result.status == "inconclusive"
    assert "the server refused the requests (HTTP 400)" in (record.result.status_reason or "")
    (missed,) = [w for w in record.result.warnings if w.startswith("every probe missed")]
    assert "; the server refused the requests (HTTP 400)" in missed
    assert "relax the SLO" not in done.stderr and "relax the SLO" not in missed
    # The terminal's result line says what the record says, never "0 req/s, goodput 0.0".
    said = f"{record.label}: inconclusive (the server refused the requests (HTTP 400)"
    assert said in done.stdout and "goodput 0.0" not in done.stdout


class _SlowEveryFourth:
    """The run's workload, but every fourth request takes ``block_s`` to build, on the load
    generator's event loop — as a slow tokenizer or body builder would: the request after it
    is sent late, the server is not disturbed."""

    def __init__(self, stream: Any, block_s: float) -> None:
        self.stream, self.block_s, self.n = stream, block_s, 0

    def __iter__(self) -> _SlowEveryFourth:
        return self

    def __next__(self) -> Any:
        self.n += 1
        if self.n % 4 == 0:
            time.sleep(self.block_s)
        return next(self.stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def test_a_client_bound_window_that_met_the_slo_carries_a_warning(
    engine: EngineProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evenly spaced arrivals 100 ms apart; a quarter of the requests is built in 130 ms
    on the event loop, which holds up that request and the one queued before it (up to
    about 130 ms late): send-lag p99 above the 10 ms mark, TTFT below the 450 ms limit.
    The window passes, and says it was client-bound — in the record, on screen, in ``show``
    and ``show --json`` — with the advice at the end."""
    import tokenwatt.collect.run as run_module

    real = run_module.workload_for
    monkeypatch.setattr(
        run_module, "workload_for", lambda *a, **k: _SlowEveryFourth(real(*a, **k), 0.13)
    )
    out = tmp_path / "run.json"
    argv = [
        "collect", "--endpoint", engine.endpoint, "--model", MODEL, "--rates", "10",
        "--profile", "constant", "--duration", "3", "--warmup", "0.3", "--input-tokens", "8",
        "--output-tokens", "4", "--no-progress", "--out", str(out),
    ]  # fmt: skip
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 0, done.output
    (repeat,) = RunRecord.model_validate_json(out.read_text()).repeats
    w = repeat.window
    assert w.slo_pass and w.client_bound and w.send_lag_p99_ms is not None
    assert 10 < w.send_lag_p99_ms < 450
    bound = [x for x in w.warnings if x.startswith("client-bound")]
    assert bound == [
        f"client-bound: send-lag p99 {w.send_lag_p99_ms:.1f} ms, above the 10 ms mark: the "
        "load generator sent late, so the server did not receive the arrivals as scheduled; "
        "TTFT and E2E count from the scheduled times, so the lag is inside them, but the "
        "arrival process the server saw was not the one asked for"
    ]
    line = f"warning: #1 load 1 of 1: 10 req/s: {bound[0]}"
    advice = (
        f"note: 1 of 1 windows were client-bound (send-lag p99 up to {w.send_lag_p99_ms:.1f} "
        "ms, 1 load-generator process): "
    )
    assert line in done.output and advice in done.output
    shown = _show(out)
    assert line in shown and advice in shown
    row = json.loads(_show(out, "--json"))["windows"][0]
    assert row["client_bound"] is True and bound[0] in row["warnings"]
