"""`tokenwatt session`: configurations measured one after another with the simulated engine
that each `collect` starts itself, then the report; a failing configuration does not stop
the others; a bad session file stops everything before the first run."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_launch_helpers import (
    FAKE_SECRET,
    WAIT_S,
    assert_gone,
    env_with_secrets,
    finish,
    sim_cmd,
    sim_spec,
    start,
    wait_for_file,
)

SIM = f"{shlex.quote(sys.executable)} -m tokenwatt sim --port {{port}} --time-scale 2"


def _session(tmp_path: Path, configs: list[dict[str, Any]], **top: Any) -> Path:
    sim_spec(tmp_path)
    data = {
        "title": "Session test",
        "spec": "spec.yaml",
        "mode": "smoke",
        "runs_dir": str(tmp_path / "runs"),
        "report": {"demo": True},
        "configurations": configs,
        **top,
    }
    path = tmp_path / "session.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(session: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tokenwatt", "session", str(session), "--no-progress"]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=session.parent,
        env=env_with_secrets(),
        timeout=WAIT_S * 2,
        check=False,
    )


def test_a_session_of_two_configurations_writes_two_runs_and_a_report(tmp_path: Path) -> None:
    session = _session(
        tmp_path,
        [
            {"label": "a", "role": "baseline", "engine_cmd": SIM, "accuracy": False},
            {
                "label": "b",
                "role": "tuned",
                "engine_cmd": SIM,
                "engine_args": ["--profile", "fp8-kv"],
                "kv_dtype": "fp8",
                "accuracy": False,
            },
        ],
    )
    done = _run(session)
    assert done.returncode == 0, done.stderr
    runs = tmp_path / "runs"
    a, b = (json.loads((runs / f"{x}.json").read_text()) for x in "ab")
    assert (runs / "a.engine.log.gz").is_file() and (runs / "b.engine.log.gz").is_file()
    assert not list(runs.glob("*.engine.log"))  # the plain logs were replaced
    assert a["complete"] and b["complete"]
    assert a["spec"]["model"]["kv_dtype"] == "bf16" and b["spec"]["model"]["kv_dtype"] == "fp8"
    assert b["engine_process"]["argv"][-2:] == ["--profile", "fp8-kv"]
    assert "--engine-cmd" in b["command"] and "--kv-dtype fp8" in b["command"]
    report = json.loads((tmp_path / "reports" / "session-test.json").read_text())
    assert [c["label"] for c in report["configs"]] == ["a", "b"]
    assert "session [1/2] a: smoke run" in done.stderr  # the session's mode: smoke
    assert "session [2/2] b: smoke run" in done.stderr


def test_a_failing_configuration_leaves_the_others_running_and_the_session_fails(
    tmp_path: Path,
) -> None:
    broken = shlex.join(["bash", "-c", "echo cannot load the model; exit 3"])
    session = _session(
        tmp_path,
        [
            {"label": "a", "role": "baseline", "engine_cmd": broken, "accuracy": False},
            {"label": "b", "role": "tuned", "engine_cmd": SIM, "accuracy": False},
        ],
    )
    done = _run(session)
    assert done.returncode == 1, done.stderr
    assert "the engine exited with status 3" in done.stderr
    assert "cannot load the model" in done.stderr
    assert "failed: a: smoke run failed (collect exited with status 1)" in done.stderr
    assert "no report written" in done.stderr
    assert (tmp_path / "runs" / "b.json").is_file()
    assert not (tmp_path / "runs" / "a.json").exists()
    assert not (tmp_path / "reports").exists()


def test_smoke_first_skips_the_run_of_a_configuration_whose_smoke_run_failed(
    tmp_path: Path,
) -> None:
    session = _session(
        tmp_path,
        [
            {"label": "a", "role": "baseline", "engine_cmd": "false", "accuracy": False},
            {"label": "b", "role": "tuned", "engine_cmd": "false", "accuracy": False},
        ],
        mode="quick",
        smoke_first=True,
    )
    done = _run(session)
    assert done.returncode == 1
    assert "session [1/4] a: smoke run" in done.stderr
    assert "session [3/4] a: skipped (its smoke run failed)" in done.stderr
    assert "session [4/4] b: skipped (its smoke run failed)" in done.stderr
    assert "failed: a: smoke run failed" in done.stderr and "failed: b:" in done.stderr


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"title": None}, "session.yaml: title: "),
        ({"extra": 1}, "session.yaml: extra: "),
        ({"spec": "nope.yaml"}, "session.yaml: spec: no such file"),
        ({"mode": "smoke", "report": {"demo": False}}, "session.yaml: report.demo: must be true"),
        (
            {"configurations": [{"label": "a", "role": "tuned"}]},
            "session.yaml: configurations: exactly one configuration must have role baseline",
        ),
        (
            {
                "configurations": [
                    {"label": "a", "role": "baseline"},
                    {"label": "a", "role": "tuned"},
                ]
            },
            "session.yaml: configurations[1].label: 'a' is used twice",
        ),
        (
            {
                "configurations": [
                    {
                        "label": "a",
                        "role": "baseline",
                        "engine_cmd": "vllm serve m",
                        "engine_args": ["--api-key", FAKE_SECRET],
                    }
                ]
            },
            "session.yaml: configurations[0].engine_args[0]: --api-key passes a secret",
        ),
        (
            {"configurations": [{"label": "../../evil", "role": "baseline"}]},
            "session.yaml: configurations[0].label: must be a plain file name (it names "
            "RUNS_DIR/LABEL.json): no '/' or '\\'\n",
        ),
        (
            {"configurations": [{"label": "..", "role": "baseline"}]},
            "session.yaml: configurations[0].label: must be a plain file name (it names "
            "RUNS_DIR/LABEL.json): no leading '.', no leading or trailing spaces\n",
        ),
        (
            {"configurations": [{"label": "x" * 121, "role": "baseline"}]},
            "session.yaml: configurations[0].label: must have at most 120 characters, got ",
        ),
    ],
)
def test_a_bad_session_file_names_the_field_and_runs_nothing(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    session = _session(tmp_path, [{"label": "a", "role": "baseline", "engine_cmd": "false"}])
    data = yaml.safe_load(session.read_text())
    data.update(change)
    data = {k: v for k, v in data.items() if v is not None}
    session.write_text(yaml.safe_dump(data))
    done = _run(session)
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr
    assert FAKE_SECRET not in done.stderr
    assert "session [" not in done.stderr  # nothing ran
    assert not (tmp_path / "runs").exists()
    assert not list(tmp_path.parent.glob("*evil*")) and "Traceback" not in done.stderr


def test_the_example_session_file_is_valid() -> None:
    from tokenwatt.collect.session import check_session, plan_steps
    from tokenwatt.records.reading.session import load_session

    path = Path(__file__).resolve().parents[2] / "specs" / "sim-session.yaml"
    session = load_session(path)
    check_session(session, path)
    steps = plan_steps(session)
    assert [(s.config.label, s.mode) for s in steps] == [
        ("sim-bf16", "smoke"),
        ("sim-fp8", "smoke"),
        ("sim-bf16", "quick"),
        ("sim-fp8", "quick"),
    ]
    assert all("{port}" in (s.config.command() or "") for s in steps)


@pytest.mark.parametrize(
    ("sig", "status", "interrupted"),
    [(signal.SIGTERM, 143, "sigterm"), (signal.SIGINT, 130, "ctrl-c")],
)
def test_a_signal_to_the_session_alone_stops_its_collect_and_engine_and_runs_nothing_more(
    tmp_path: Path, sig: signal.Signals, status: int, interrupted: str
) -> None:
    """Sent to the session's pid only (``kill -TERM pid``, ``kill -INT pid``), not to a
    process group: the session passes it on to its running ``collect``."""
    pid = tmp_path / "engine.pid"
    configs = [
        {"label": "a", "role": "baseline", "engine_cmd": sim_cmd(pid), "accuracy": False},
        {"label": "b", "role": "tuned", "engine_cmd": SIM, "accuracy": False},
    ]
    session = _session(tmp_path, configs)
    sim_spec(tmp_path, window_s=4.0, search_window_s=4.0)  # _session wrote the short one
    argv = [sys.executable, "-m", "tokenwatt", "session", str(session), "--no-progress"]
    proc = start(argv)
    wait_for_file(tmp_path / "runs" / "a.json", proc)
    time.sleep(1.0)
    proc.send_signal(sig)
    _, stderr = finish(proc)
    assert proc.returncode == status, stderr
    assert f"session stopped by {sig.name}; no further configuration was run" in stderr
    assert_gone(pid)
    record = json.loads((tmp_path / "runs" / "a.json").read_text())
    assert record["interrupted"] == interrupted, stderr
    assert record["engine_process"]["stop"] == "sigterm"
    assert record["complete"] is False
    assert not (tmp_path / "runs" / "b.json").exists()


def test_a_session_refuses_to_replace_earlier_run_files_unless_forced(tmp_path: Path) -> None:
    session = _session(
        tmp_path,
        [
            {"label": "a", "role": "baseline", "engine_cmd": "false"},
            {"label": "b", "role": "tuned", "engine_cmd": "false"},
        ],
    )
    runs = tmp_path / "runs"
    runs.mkdir()
    from tests.runs_factory import make_run

    earlier = make_run(label="a").model_dump_json()
    (runs / "a.json").write_text(earlier, encoding="utf-8")
    (runs / "b.engine.log.gz").write_text("earlier", encoding="utf-8")
    done = _run(session)
    assert done.returncode == 2, done.stderr
    assert (
        f"session.yaml: configurations[0]: {runs / 'a.json'} exists (an earlier run); "
        "pass --force to replace it"
    ) in done.stderr
    assert f"configurations[1]: {runs / 'b.engine.log.gz'} exists" in done.stderr
    assert "session [" not in done.stderr  # nothing ran
    assert (runs / "a.json").read_text(encoding="utf-8") == earlier
    # With --force the files are no obstacle: the session runs (and its engines fail).
    argv = [sys.executable, "-m", "tokenwatt", "session", str(session), "--no-progress", "--force"]
    forced = subprocess.run(
        argv, capture_output=True, text=True, cwd=tmp_path, timeout=WAIT_S * 2, check=False
    )
    assert "session [1/2] a" in forced.stderr, forced.stderr
    assert "exists (an earlier run)" not in forced.stderr
