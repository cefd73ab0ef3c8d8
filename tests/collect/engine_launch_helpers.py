"""Helpers for the tests of an engine that ``collect`` starts itself (``--engine-cmd``):
a short spec for the simulated engine, wrapper commands that leave their pid behind, and
a check that no process of the engine is left."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tokenwatt.engine_log import group_alive
from tokenwatt.records import load_spec

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 90.0
"""Upper bound on any wait here (s): about the machine, not the tool."""
FAKE_TOKEN = "hf_FakeCredentialForTokenwattTests0123"
"""A credential-shaped value the engine prints; it must reach no file and no terminal."""
FAKE_SECRET = "plain-secret-value-4711"
"""A value with no known shape, in a variable whose name says secret."""


def sim_spec(tmp_path: Path, *, launch: dict[str, Any] | None = None, **measure: Any) -> Path:
    """The sim fixture spec, short: fixed rates 4 and 6 req/s, 1 s windows, no power."""
    data = load_spec(REPO / "tests" / "fixtures" / "sim.spec.yaml").model_dump(mode="json")
    data["hardware"]["adapter"] = "sim"
    data["power"] = {"source": "none"}
    data["measurement"].update(
        {"warmup_s": 0.2, "window_s": 1.0, "search_window_s": 1.0, **measure}
    )
    data["sweep"].update(rates=[4.0, 6.0], start_rps=4.0, max_rps=6.0, bisect_steps=0)
    data["accuracy"]["suite"] = None
    data["engine"]["endpoint"] = "http://127.0.0.1:9/v1"  # the launch fills in the port
    if launch is not None:
        data["engine"]["launch"] = launch
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def sim_cmd(pid_file: Path, *, ignore_term: bool = False, child_pid: Path | None = None) -> str:
    """A shell wrapper that writes its pid (which the simulator then keeps: ``exec``) and
    prints the fake credentials, optionally ignoring SIGTERM and leaving a child behind."""
    sim = f"{shlex.quote(sys.executable)} -m tokenwatt sim --port {{port}} --time-scale 2"
    script = f"echo $$ > {shlex.quote(str(pid_file))}; "
    if child_pid is not None:
        script += f"sleep 300 & echo $! > {shlex.quote(str(child_pid))}; "
    if ignore_term:
        script += "trap '' TERM; "
    script += f'echo "credential $FAKE_TOKEN_VAR and $MY_SECRET"; exec {sim}'
    return shlex.join(["bash", "-c", script])


def collect_argv(spec: Path, out: Path, *extra: str) -> list[str]:
    """``python -m tokenwatt collect`` in smoke mode without accuracy or progress."""
    return [
        sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec), "--label", "eng",
        "--role", "baseline", "--out", str(out), "--mode", "smoke", "--no-accuracy",
        "--no-progress", *extra,
    ]  # fmt: skip


def env_with_secrets() -> dict[str, str]:
    """The test's environment with the fake credentials set (the engine inherits them)."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FAKE_TOKEN_VAR": FAKE_TOKEN,
        "MY_SECRET": FAKE_SECRET,
    }


def start(argv: list[str]) -> subprocess.Popen[str]:
    """Start ``argv`` with the fake credentials in its environment."""
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env_with_secrets(),
    )


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Wait for ``proc`` (killed after :data:`WAIT_S`); its stdout and stderr."""
    try:
        return proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def assert_gone(pid_file: Path, *others: Path) -> None:
    """The engine (pid in ``pid_file``, also its process group) and the processes whose
    pids are in ``others`` have all ended (allowing a second for the last to go)."""
    pid = int(pid_file.read_text())
    pids = [pid, *(int(p.read_text()) for p in others)]
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and (any(map(running, pids)) or group_alive(pid)):
        time.sleep(0.05)
    assert not [p for p in pids if running(p)], "an engine process is still running"
    assert not group_alive(pid), "a process of the engine's group is still running"


def wait_for_file(path: Path, proc: subprocess.Popen[str]) -> None:
    """Poll until ``path`` exists, at most :data:`WAIT_S`; fail if ``proc`` ends first."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.stat().st_size:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not appear (process ended: {proc.poll()})")
