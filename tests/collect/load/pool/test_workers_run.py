"""``--workers`` from the command line and the spec: parsing, the ``auto`` rule, the
fingerprint, and a real ``collect --workers 2`` stopped by SIGTERM in a window."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.collect.load.pool.workers import auto_workers
from tokenwatt.collect.plan.runfile import load_run_spec
from tokenwatt.records import RunRecord, load_spec
from tokenwatt.records.spec.spec import fingerprint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from collect_process import finish, probes, wait_for, write_spec
from scripted_engine import EngineProcess, start_engine

REPO = Path(__file__).resolve().parents[4]
SPEC = REPO / "specs" / "sim-demo.spec.yaml"


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_workers_value_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    shutil.copy(SPEC, tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["collect", "--spec", SPEC.name, "--role", "baseline", "--label", "x"]
    result = CliRunner().invoke(cli, [*args, "--out", "run.json", "--workers", value])
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"error: --workers: must be a whole number from 1 to 256 (the largest accepted), or auto; "
        f"got {value!r}\n"
    )
    assert not (tmp_path / "run.json").exists()


def test_workers_override_the_spec_and_stay_outside_the_fingerprint() -> None:
    plain = load_run_spec(SPEC, "quick", None)
    three = load_run_spec(SPEC, "quick", None, workers="3")
    auto = load_run_spec(SPEC, "quick", None, workers="auto")
    assert (plain.measurement.workers, three.measurement.workers) == (1, 3)
    assert auto.measurement.workers == "auto"
    assert fingerprint(plain) == fingerprint(three) == fingerprint(auto)


def test_the_auto_rule() -> None:
    base = load_spec(SPEC)
    # 32-token outputs (median = p90: a lognormal of zero spread, mean 32), peak 1,000 req/s:
    # max(1000 × 33 / 25,000, 1000 / 250) = max(1.32, 4) -> 4 workers.
    data = base.model_dump()
    data["workload"]["output_tokens"] = {"median": 32, "p90": 32}
    data["sweep"].update(rates=None, start_rps=10.0, max_rps=1000.0)
    spec = type(base).model_validate(data)
    assert auto_workers(spec, cores=8) == 4
    assert auto_workers(spec, cores=2) == 1  # the cores less one for the parent
    # 1,000-token outputs at 1,000 req/s: 1000 × 1001 / 25,000 = 40.04 -> 41.
    data["workload"]["output_tokens"] = {"median": 1000, "p90": 1000}
    assert auto_workers(type(base).model_validate(data), cores=64) == 41
    data["sweep"].update(start_rps=1.0, max_rps=20.0)  # 20 × 1001 / 25,000 = 0.8 -> 1
    assert auto_workers(type(base).model_validate(data), cores=64) == 1


@pytest.fixture
def engine() -> EngineProcess:
    return start_engine("idle")


def _children(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


def _collect_with_two_workers(
    engine: EngineProcess, tmp_path: Path, out: Path, *, window_s: float
) -> subprocess.Popen[str]:
    """``collect --workers 2`` on a spec pointed at ``engine`` (0.2 s warm-ups, windows of
    ``window_s``), writing ``out``, as a process of its own."""
    spec = write_spec(tmp_path, engine.endpoint, warmup_s=0.2, window_s=window_s)
    cmd = [
        sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec), "--label", "w",
        "--role", "baseline", "--out", str(out), "--no-accuracy", "--no-progress",
        "--workers", "2",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env
    )


def test_sigterm_with_two_workers_keeps_the_window_and_ends_the_workers(
    engine: EngineProcess, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    proc = _collect_with_two_workers(engine, tmp_path, out, window_s=4.0)
    try:
        wait_for(lambda: probes(out) >= 1, proc)
        workers = _children(proc.pid)
        time.sleep(1.5)  # inside the second probe's 4 s window
        proc.send_signal(signal.SIGTERM)
        stderr = finish(proc)
    finally:
        engine.stop()
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.interrupted == "sigterm" and record.spec.measurement.workers == 2
    first, last = record.probes[0].window, record.probes[-1].window
    assert first.workers == last.workers == 2 and len(first.worker_lag) == 2
    assert sum(w.requests for w in first.worker_lag) == first.requests - first.cancelled_by_client
    assert len(record.probes) == 2 and last.stopped_early and last.requests > 0
    assert len(workers) >= 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in workers):
        time.sleep(0.05)
    assert not any(Path(f"/proc/{p}/status").exists() for p in workers), "a worker outlived it"


def _workers(pid: int) -> list[int]:
    """The load-generator worker processes among ``pid``'s children (spawned by
    multiprocessing: ``spawn_main`` on their command line, not the resource tracker)."""
    found = []
    for child in sorted(_children(pid)):
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        if b"spawn_main" in cmdline:
            found.append(child)
    return found


def test_a_window_whose_worker_died_is_measured_again_and_the_run_goes_on(
    engine: EngineProcess, tmp_path: Path
) -> None:
    """A dead worker is a fault of the instrument, not a verdict on the server: the window
    it cut is kept (invalid, its verdict not used) and measured again at the same load."""

    from tokenwatt.records import WORKER_DIED_PREFIX, retried

    out = tmp_path / "run.json"
    proc = _collect_with_two_workers(engine, tmp_path, out, window_s=3.0)
    try:
        wait_for(lambda: probes(out) >= 1, proc)
        workers = _workers(proc.pid)
        assert len(workers) == 2
        time.sleep(1.5)  # inside the second probe's window
        os.kill(workers[1], signal.SIGKILL)
        stderr = finish(proc)
    finally:
        engine.stop()
    assert proc.returncode == 0, stderr
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete
    cut = next(i for i, p in enumerate(record.probes) if any(w.died for w in p.window.worker_lag))
    cut_window, again = record.probes[cut].window, record.probes[cut + 1].window
    assert (cut_window.failure_reason or "").startswith(f"{WORKER_DIED_PREFIX} (worker ")
    assert retried(cut_window) and not cut_window.valid
    assert again.rate_rps == cut_window.rate_rps and again.valid
    assert not any(w.died for w in again.worker_lag) and not retried(again)
