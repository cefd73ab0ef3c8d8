"""SIGTERM and SIGHUP end `tokenwatt collect` like Ctrl-C: real processes, real signals.

The collector runs as `python -m tokenwatt collect` against the scripted engine in a
child process (tests/collect/scripted_engine.py); the test sends the signal at a known
moment, read from the checkpointed record or the progress the collector prints."""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenwatt.records import RunRecord

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collect_process import finish, probes, start_collect, wait_for, write_spec
from scripted_engine import EngineProcess


@contextlib.contextmanager
def silent_endpoint() -> Iterator[str]:
    """An endpoint on 127.0.0.1 that accepts connections and never answers: a run asking it
    anything is still starting when the test signals it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        listener.close()


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_in_a_window_keeps_the_window_and_marks_it_partial(
    engine: EngineProcess, tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    spec = write_spec(tmp_path, engine.endpoint, warmup_s=0.2, window_s=4.0)
    out = tmp_path / "run.json"
    proc = start_collect(spec, out)
    wait_for(lambda: probes(out) >= 1, proc)  # the first probe is written: the second is on
    time.sleep(1.5)  # inside the second probe's 4 s window
    proc.send_signal(sig)
    stderr = finish(proc)
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete is False and record.interrupted == sig.name.lower()
    assert record.incomplete_reason is not None and sig.name in record.incomplete_reason
    last = record.probes[-1].window
    assert len(record.probes) == 2 and last.stopped_early and last.requests > 0
    cut = f"interrupted by {sig.name}: the window stopped early and is partial"
    assert cut in last.warnings
    # Cut by the signal, not by the SLO: invalid, its verdict no measured miss.
    assert last.valid is False and last.invalid_reason == cut
    assert last.failure_reason == "interrupted" and last.slo_beyond_doubt is None
    assert not list(tmp_path.glob(".run.json*")), "a temporary or lock file was left behind"


def test_sigterm_in_a_warm_up_stops_at_once_and_keeps_no_empty_window(
    engine: EngineProcess, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, engine.endpoint, warmup_s=30.0, window_s=2.0)
    out = tmp_path / "run.json"
    proc = start_collect(spec, out)
    wait_for(out.exists, proc)  # the first checkpoint: the first warm-up has begun
    time.sleep(1.0)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    stderr = finish(proc)
    waited = time.monotonic() - signalled
    assert proc.returncode == 143, stderr
    assert waited < 10.0  # not the 29 s left of the warm-up
    record = RunRecord.model_validate_json(out.read_text())
    assert record.interrupted == "sigterm" and record.probes == []


def test_sighup_before_the_first_window_writes_nothing_and_leaves_no_lock(
    tmp_path: Path,
) -> None:
    """The engine probe waits on a server that accepts and never answers: the signal lands
    before any window, so there is no record, and the lock beside --out is released."""
    with silent_endpoint() as endpoint:
        spec = write_spec(tmp_path, endpoint, warmup_s=0.2, window_s=2.0)
        out = tmp_path / "run.json"
        proc = start_collect(spec, out)
        wait_for(lambda: (tmp_path / ".run.json.lock").exists(), proc)
        time.sleep(0.5)
        proc.send_signal(signal.SIGHUP)
        stderr = finish(proc)
    assert proc.returncode == 129, stderr
    assert "stopped by SIGHUP before the first window; no record written" in stderr
    assert not out.exists() and not (tmp_path / ".run.json.lock").exists()


@pytest.mark.parametrize("after_s", [0.8, 1.6])
def test_ctrl_c_while_collect_is_starting_exits_130_with_one_line(
    tmp_path: Path, after_s: float
) -> None:
    """SIGINT while Python still loads what collect needs (seconds on two cores) or while
    it asks an engine that never answers: status 130 and one line, never click's "Aborted!"
    and status 1, never a traceback."""
    with silent_endpoint() as endpoint:
        spec = write_spec(tmp_path, endpoint, warmup_s=0.2, window_s=2.0)
        out = tmp_path / "run.json"
        proc = start_collect(spec, out)
        time.sleep(after_s)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        stderr = finish(proc)
    assert proc.returncode == 130, stderr
    # What the run had said before (its mode line) may precede it: one line says it ended.
    lines = [line for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if "interrupted (Ctrl-C)" in line]
    assert len(said) == 1 and lines[-1] == said[0], stderr
    assert "Traceback" not in stderr and "Aborted!" not in stderr
    assert not out.exists() and not (tmp_path / ".run.json.lock").exists()


def test_an_engine_that_dies_mid_window_ends_the_run_as_engine_died(
    engine: EngineProcess, tmp_path: Path
) -> None:
    """Killed 1.5 s into a 4 s window, the engine had answered the window's first requests:
    the connection errors that follow must still make the collector ask whether it is there
    (it used to ask only when nothing at all was answered, and recorded a complete run)."""
    spec = write_spec(tmp_path, engine.endpoint, warmup_s=0.2, window_s=4.0)
    out = tmp_path / "run.json"
    proc = start_collect(spec, out)
    wait_for(lambda: probes(out) >= 1, proc)
    time.sleep(1.5)
    engine.proc.kill()
    stderr = finish(proc)
    assert proc.returncode == 1, stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete is False and record.interrupted == "engine-died"
    last = record.probes[-1].window
    assert last.completed > 0 and "connect" in last.error_kinds
    # The window was cut by the engine's death, not an SLO miss.
    assert last.valid is False and last.failure_reason == "engine_died"
    assert last.invalid_reason is not None
    assert last.invalid_reason.startswith("the engine died during the window (the engine stopped")


def test_an_unexpected_error_leaves_the_record_incomplete_with_its_reason(
    engine: EngineProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure nobody planned for (injected into the search) is raised on, and the record
    written on the way out says why instead of "in progress"; no secret in it."""
    import tokenwatt.collect.run as run_module
    from tokenwatt.collect.plan.options import CollectOptions

    def broken(self: object) -> None:
        raise RuntimeError("injected failure\nat password=hunter2-SECRET")

    monkeypatch.setattr(run_module.Measurement, "run", broken)
    spec = write_spec(tmp_path, engine.endpoint, warmup_s=0.2, window_s=1.0)
    out = tmp_path / "run.json"
    opts = CollectOptions(
        spec_path=spec, label="err", role="baseline", out=out, accuracy=False, progress=False
    )
    with pytest.raises(RuntimeError, match="injected failure"):
        run_module.measure_configuration(opts)
    text = out.read_text()
    record = RunRecord.model_validate_json(text)
    assert record.complete is False and record.interrupted is None
    assert record.incomplete_reason == (
        "stopped by an unexpected error (RuntimeError: injected failure at "
        "password=[redacted]); everything measured so far is kept"
    )
    assert record.finished is not None and "hunter2" not in text
    assert not list(tmp_path.glob(".run.json*")), "a temporary or lock file was left behind"
