"""A runner without SSH for the cloud session's tests (``--runner fake_runner:FakeRunner``).

It plays the box: ``arm_watchdog`` notes its deadline, ``run`` writes one run record per
configuration of the session file into the runs folder (the seed's runs from
tests/runs_factory.py: the baseline 25 min long, a tuned one 15 min), streams a line per
configuration, and returns. ``FAKE_RUNNER`` picks a behaviour: ``ok`` (default), ``hang``
(touch ``FAKE_RUNNER_READY`` and wait up to 60 s for a signal), ``partial`` (write the
first configuration's record, then behave as ``hang``), ``fail`` (the last configuration
fails), ``bug`` (raise RuntimeError). ``FAKE_RUNNER_LOG`` gets one line per
call.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.runs_factory import make_run, tuned_run
from tokenwatt.cloud.runner import Host, RunnerResult


def _log(text: str) -> None:
    path = os.environ.get("FAKE_RUNNER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")


class FakeRunner:
    """See the module docstring."""

    def __init__(self, behaviour: str | None = None) -> None:
        self.behaviour = behaviour or os.environ.get("FAKE_RUNNER", "ok")
        self.hosts: list[Host] = []

    def arm_watchdog(self, host: Host, deadline_s: float) -> None:
        self.hosts.append(host)
        _log(f"watchdog {host.ip} {deadline_s:.0f}")

    def run(
        self,
        host: Host,
        session_file: Path,
        runs_dir: Path,
        *,
        deadline_s: float,
        on_line: Callable[[str, str], None],
    ) -> RunnerResult:
        _log(f"run {host.ip} {session_file}")
        if self.behaviour == "bug":
            raise RuntimeError("a bug in our own code")
        configs = yaml.safe_load(session_file.read_text())["configurations"]
        runs_dir.mkdir(parents=True, exist_ok=True)
        result = RunnerResult(log=None)
        if self.behaviour == "partial":
            _write(configs[0], runs_dir)
        if self.behaviour in ("hang", "partial"):
            Path(os.environ["FAKE_RUNNER_READY"]).write_text("ready")
            time.sleep(60)
        for n, c in enumerate(configs):
            if self.behaviour == "fail" and n == len(configs) - 1:
                result.failed.append(c["label"])
                result.exit_status = 1
                on_line(c["label"], "collect exited with status 1")
                continue
            out = _write(c, runs_dir)
            on_line(c["label"], f"run record {out}")
            result.runs.append(out)
        return result


def _write(c: dict[str, str], runs_dir: Path) -> Path:
    """Configuration ``c``'s run record in ``runs_dir`` (baseline 25 min, tuned 15 min)."""
    if c["role"] == "baseline":
        record = make_run(label=c["label"])
    else:
        record = tuned_run(label=c["label"])
        record = record.model_copy(update={"finished": record.started + dt.timedelta(minutes=15)})
    out = runs_dir / f"{c['label']}.json"
    out.write_text(record.model_dump_json(indent=2) + "\n")
    return out
